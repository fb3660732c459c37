//! NetworkPolicy (networking.k8s.io): what cairn does that is specific to it.

use crate::kinds::prelude::*;

pub const STRATEGY: Strategy = Strategy {
    default: Some(default_network_policy),
    validate: Some(crate::validation::networking::validate_network_policy),
    columns: Some(columns),
    row: Some(row),
    normalize: roundtrip::<k8s_openapi::api::networking::v1::NetworkPolicy>,
    tracks_generation: true,
    ..Strategy::NONE
};

fn columns() -> Vec<Col> {
    vec![
        NAME,
        col("Pod-Selector", "string", "podSelector selects the pods to which this NetworkPolicy object applies. The array of rules is applied to any pods selected by this field. An empty selector matches all pods in the policy's namespace. Multiple network policies can select the same set of pods. In this case, the ingress rules for each are combined additively. This field is NOT optional and follows standard label selector semantics. An empty podSelector matches all pods in this namespace."),
        AGE,
    ]
}

fn row(obj: &Value, name: Value, created: &str, _now: DateTime<Utc>) -> Vec<Value> {
    vec![
        name,
        json!(format_label_selector(get(obj, &["spec", "podSelector"]))),
        json!(created),
    ]
}

/// `policyTypes` from the rules present, and TCP for ports without a protocol.
fn default_network_policy(o: &mut Map<String, Value>) {
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
