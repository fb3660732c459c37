//! Defaults of the RBAC, networking and autoscaling kinds (rbac/v1, networking/v1 and
//! autoscaling/v2 `SetDefaults_*`).

use serde_json::{json, Map, Value};

use super::{is_unset, set_default, set_default_str};

/// `subjects[].apiGroup`: `rbac.authorization.k8s.io` for users and groups. A service
/// account's is `""`, which Go omits (`omitempty`), so it is left unset.
pub(crate) fn default_binding_subjects(o: &mut Map<String, Value>) {
    let Some(subjects) = o.get_mut("subjects").and_then(Value::as_array_mut) else {
        return;
    };
    for s in subjects.iter_mut().filter_map(Value::as_object_mut) {
        let is_user_or_group = matches!(
            s.get("kind").and_then(Value::as_str),
            Some("User" | "Group")
        );
        if is_user_or_group && is_unset(s.get("apiGroup")) {
            s.insert("apiGroup".into(), json!("rbac.authorization.k8s.io"));
        }
    }
}

/// `policyTypes` from the rules present, and TCP for ports without a protocol.
pub(crate) fn default_network_policy(o: &mut Map<String, Value>) {
    let Some(spec) = o.get_mut("spec").and_then(Value::as_object_mut) else {
        return;
    };
    for direction in ["ingress", "egress"] {
        let rules = spec.get_mut(direction).and_then(Value::as_array_mut);
        for rule in rules.into_iter().flatten().filter_map(Value::as_object_mut) {
            let ports = rule.get_mut("ports").and_then(Value::as_array_mut);
            for port in ports.into_iter().flatten().filter_map(Value::as_object_mut) {
                set_default_str(port, "protocol", "TCP");
            }
        }
    }
    if is_unset(spec.get("policyTypes")) {
        let mut types = vec![json!("Ingress")];
        if spec.get("egress").is_some_and(|e| !e.is_null()) {
            types.push(json!("Egress"));
        }
        spec.insert("policyTypes".into(), Value::Array(types));
    }
}

/// `minReplicas: 1`; in v2 a CPU target of 80% when no metric is given and, when a
/// `behavior` is given, its missing scale-up and scale-down rules as upstream fills them.
pub(crate) fn default_hpa(version: &str, o: &mut Map<String, Value>) {
    let Some(spec) = o.get_mut("spec").and_then(Value::as_object_mut) else {
        return;
    };
    set_default(spec, "minReplicas", json!(1));
    if version != "v2" {
        return;
    }
    if spec
        .get("metrics")
        .and_then(Value::as_array)
        .is_none_or(Vec::is_empty)
    {
        spec.insert(
            "metrics".into(),
            json!([{"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 80}}}]),
        );
    }
    if let Some(behavior) = spec.get_mut("behavior").and_then(Value::as_object_mut) {
        default_scaling_rules(behavior, "scaleUp", 0, &[("Percent", 100), ("Pods", 4)]);
        default_scaling_rules(behavior, "scaleDown", 300, &[("Percent", 100)]);
    }
}

pub(crate) fn default_scaling_rules(
    behavior: &mut Map<String, Value>,
    direction: &str,
    window: i64,
    policies: &[(&str, i64)],
) {
    set_default(behavior, direction, json!({}));
    let Some(rules) = behavior.get_mut(direction).and_then(Value::as_object_mut) else {
        return;
    };
    if is_unset(rules.get("stabilizationWindowSeconds")) {
        rules.insert("stabilizationWindowSeconds".into(), json!(window));
    }
    set_default_str(rules, "selectPolicy", "Max");
    if is_unset(rules.get("policies")) {
        let list: Vec<Value> = policies
            .iter()
            .map(|(kind, value)| json!({"type": kind, "value": value, "periodSeconds": 15}))
            .collect();
        rules.insert("policies".into(), Value::Array(list));
    }
}

/// `names.singular` (the kind, lowercased), `names.listKind` (`<kind>List`) and
/// `conversion.strategy: None` (apiextensions/v1 `SetDefaults_*`).
pub(crate) fn default_crd(o: &mut Map<String, Value>) {
    let Some(spec) = o.get_mut("spec").and_then(Value::as_object_mut) else {
        return;
    };
    if let Some(names) = spec.get_mut("names").and_then(Value::as_object_mut) {
        let kind = names
            .get("kind")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        if !kind.is_empty() {
            set_default_str(names, "singular", &kind.to_lowercase());
            set_default_str(names, "listKind", &format!("{kind}List"));
        }
    }
    set_default(spec, "conversion", json!({"strategy": "None"}));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hpa_v2_defaults() {
        let mut o =
            json!({"spec": {"maxReplicas": 3, "behavior": {"scaleDown": {"selectPolicy": "Min"}}}});
        default_hpa("v2", o.as_object_mut().unwrap());
        let spec = &o["spec"];
        assert_eq!(spec["minReplicas"], 1);
        assert_eq!(
            spec["metrics"][0]["resource"]["target"]["averageUtilization"],
            80
        );
        assert_eq!(spec["behavior"]["scaleDown"]["selectPolicy"], "Min");
        assert_eq!(
            spec["behavior"]["scaleDown"]["stabilizationWindowSeconds"],
            300
        );
        assert_eq!(
            spec["behavior"]["scaleUp"]["policies"][1],
            json!({"type": "Pods", "value": 4, "periodSeconds": 15})
        );
        let mut no_behavior = json!({"spec": {"maxReplicas": 3}});
        default_hpa("v2", no_behavior.as_object_mut().unwrap());
        assert!(no_behavior["spec"].get("behavior").is_none());
    }

    #[test]
    fn network_policy_and_binding_defaults() {
        let mut np = json!({"spec": {"podSelector": {}, "egress": [{"ports": [{"port": 53}]}]}});
        default_network_policy(np.as_object_mut().unwrap());
        assert_eq!(np["spec"]["policyTypes"], json!(["Ingress", "Egress"]));
        assert_eq!(np["spec"]["egress"][0]["ports"][0]["protocol"], "TCP");
        let mut rb = json!({"subjects": [{"kind": "User", "name": "a"}, {"kind": "ServiceAccount", "name": "b"}]});
        default_binding_subjects(rb.as_object_mut().unwrap());
        assert_eq!(rb["subjects"][0]["apiGroup"], "rbac.authorization.k8s.io");
        assert!(rb["subjects"][1].get("apiGroup").is_none());
    }
}
