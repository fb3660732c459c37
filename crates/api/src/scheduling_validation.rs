//! Validation of a pod's scheduling directives (node affinity, pod (anti-)affinity,
//! topology spread constraints, scheduling gates) as kube-apiserver's
//! `ValidateAffinity` / `validateTopologySpreadConstraints` report them.

use serde_json::{Map, Value};

use crate::status::Cause;

fn list(v: Option<&Value>) -> impl Iterator<Item = (usize, &Map<String, Value>)> {
    v.and_then(Value::as_array)
        .into_iter()
        .flatten()
        .enumerate()
        .filter_map(|(i, x)| x.as_object().map(|o| (i, o)))
}

fn text<'a>(o: &'a Map<String, Value>, key: &str) -> &'a str {
    o.get(key).and_then(Value::as_str).unwrap_or("")
}

fn values(o: &Map<String, Value>) -> Vec<&str> {
    o.get("values")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default()
}

/// A node selector requirement (`In`, `NotIn`, `Exists`, `DoesNotExist`, `Gt`, `Lt`).
fn node_requirement(r: &Map<String, Value>, p: &str, errs: &mut Vec<Cause>) {
    let vals = values(r);
    let op = text(r, "operator");
    match op {
        "In" | "NotIn" if vals.is_empty() => errs.push(Cause::required_detail(
            format!("{p}.values"),
            "must be specified when `operator` is 'In' or 'NotIn'",
        )),
        "Exists" | "DoesNotExist" if !vals.is_empty() => errs.push(Cause::forbidden(
            format!("{p}.values"),
            "may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
        )),
        "Gt" | "Lt" if vals.len() != 1 || vals[0].parse::<i64>().is_err() => {
            errs.push(Cause::required_detail(
                format!("{p}.values"),
                "must be specified single value when `operator` is 'Lt' or 'Gt'",
            ))
        }
        "In" | "NotIn" | "Exists" | "DoesNotExist" | "Gt" | "Lt" => {}
        other => errs.push(Cause::invalid(
            format!("{p}.operator"),
            other,
            "not a valid selector operator",
        )),
    }
}

fn node_term(t: &Map<String, Value>, p: &str, errs: &mut Vec<Cause>) {
    for (j, r) in list(t.get("matchExpressions")) {
        node_requirement(r, &format!("{p}.matchExpressions[{j}]"), errs);
    }
    for (j, r) in list(t.get("matchFields")) {
        let rp = format!("{p}.matchFields[{j}]");
        if text(r, "key") != "metadata.name" {
            errs.push(Cause::invalid(
                format!("{rp}.key"),
                text(r, "key"),
                "not a valid field selector key",
            ));
        }
        node_requirement(r, &rp, errs);
    }
}

fn weight(o: &Map<String, Value>, p: &str, errs: &mut Vec<Cause>) {
    let w = o.get("weight").and_then(Value::as_i64).unwrap_or(0);
    if !(1..=100).contains(&w) {
        errs.push(Cause::invalid_value(
            format!("{p}.weight"),
            &Value::from(w),
            "must be in the range 1-100",
        ));
    }
}

fn pod_term(t: &Map<String, Value>, p: &str, errs: &mut Vec<Cause>) {
    if let Some(sel) = t.get("labelSelector").and_then(Value::as_object) {
        crate::validation::validate_label_selector(sel, &format!("{p}.labelSelector"), errs);
    }
    if let Some(sel) = t.get("namespaceSelector").and_then(Value::as_object) {
        crate::validation::validate_label_selector(sel, &format!("{p}.namespaceSelector"), errs);
    }
    if text(t, "topologyKey").is_empty() {
        errs.push(Cause::required_detail(
            format!("{p}.topologyKey"),
            "can not be empty",
        ));
    }
}

fn pod_affinity(a: &Map<String, Value>, p: &str, errs: &mut Vec<Cause>) {
    let req = "requiredDuringSchedulingIgnoredDuringExecution";
    let pref = "preferredDuringSchedulingIgnoredDuringExecution";
    for (i, t) in list(a.get(req)) {
        pod_term(t, &format!("{p}.{req}[{i}]"), errs);
    }
    for (i, w) in list(a.get(pref)) {
        let wp = format!("{p}.{pref}[{i}]");
        weight(w, &wp, errs);
        if let Some(t) = w.get("podAffinityTerm").and_then(Value::as_object) {
            pod_term(t, &format!("{wp}.podAffinityTerm"), errs);
        }
    }
}

fn spread_constraints(spec: &Map<String, Value>, p: &str, errs: &mut Vec<Cause>) {
    for (i, c) in list(spec.get("topologySpreadConstraints")) {
        let cp = format!("{p}.topologySpreadConstraints[{i}]");
        let skew = c.get("maxSkew").and_then(Value::as_i64).unwrap_or(0);
        if skew <= 0 {
            errs.push(Cause::invalid_value(
                format!("{cp}.maxSkew"),
                &Value::from(skew),
                "must be greater than zero",
            ));
        }
        if text(c, "topologyKey").is_empty() {
            errs.push(Cause::required_detail(
                format!("{cp}.topologyKey"),
                "can not be empty",
            ));
        }
        let when = text(c, "whenUnsatisfiable");
        if !matches!(when, "DoNotSchedule" | "ScheduleAnyway") {
            errs.push(Cause::not_supported(
                format!("{cp}.whenUnsatisfiable"),
                when,
                &["DoNotSchedule", "ScheduleAnyway"],
            ));
        }
        if let Some(sel) = c.get("labelSelector").and_then(Value::as_object) {
            crate::validation::validate_label_selector(sel, &format!("{cp}.labelSelector"), errs);
        }
        if let Some(min) = c.get("minDomains").and_then(Value::as_i64) {
            if min <= 0 {
                errs.push(Cause::invalid_value(
                    format!("{cp}.minDomains"),
                    &Value::from(min),
                    "must be greater than 0",
                ));
            } else if when != "DoNotSchedule" {
                errs.push(Cause::invalid_value(
                    format!("{cp}.minDomains"),
                    &Value::from(min),
                    "can only use minDomains if whenUnsatisfiable=DoNotSchedule, not ScheduleAnyway",
                ));
            }
        }
    }
}

/// Affinity and topology spread of a pod spec at path `p`.
pub(crate) fn validate_scheduling(spec: &Map<String, Value>, p: &str, errs: &mut Vec<Cause>) {
    spread_constraints(spec, p, errs);
    let Some(aff) = spec.get("affinity").and_then(Value::as_object) else {
        return;
    };
    let ap = format!("{p}.affinity");
    if let Some(na) = aff.get("nodeAffinity").and_then(Value::as_object) {
        let req = "requiredDuringSchedulingIgnoredDuringExecution";
        if let Some(sel) = na.get(req).and_then(Value::as_object) {
            let terms: Vec<_> = list(sel.get("nodeSelectorTerms")).collect();
            if terms.is_empty() {
                errs.push(Cause::required_detail(
                    format!("{ap}.nodeAffinity.{req}.nodeSelectorTerms"),
                    "must have at least one node selector term",
                ));
            }
            for (i, t) in terms {
                node_term(
                    t,
                    &format!("{ap}.nodeAffinity.{req}.nodeSelectorTerms[{i}]"),
                    errs,
                );
            }
        }
        let pref = "preferredDuringSchedulingIgnoredDuringExecution";
        for (i, w) in list(na.get(pref)) {
            let wp = format!("{ap}.nodeAffinity.{pref}[{i}]");
            weight(w, &wp, errs);
            if let Some(t) = w.get("preference").and_then(Value::as_object) {
                node_term(t, &format!("{wp}.preference"), errs);
            }
        }
    }
    for kind in ["podAffinity", "podAntiAffinity"] {
        if let Some(a) = aff.get(kind).and_then(Value::as_object) {
            pod_affinity(a, &format!("{ap}.{kind}"), errs);
        }
    }
}

/// Scheduling gates may only be removed once the pod exists.
pub(crate) fn validate_gates_update(
    old: &Map<String, Value>,
    new: &Map<String, Value>,
    errs: &mut Vec<Cause>,
) {
    let names = |o: &Map<String, Value>| -> Vec<String> {
        list(o.get("schedulingGates"))
            .map(|(_, g)| text(g, "name").to_string())
            .collect()
    };
    let before = names(old);
    for (i, g) in names(new).iter().enumerate() {
        if !before.contains(g) {
            errs.push(Cause::forbidden(
                format!("spec.schedulingGates[{i}]"),
                &format!("only deletion is allowed, but found new scheduling gate '{g}'"),
            ));
        }
    }
}

/// The classes every cluster has (upstream `SystemPriorityClasses`).
pub const SYSTEM_PRIORITY_CLASSES: [(&str, i64, &str); 2] = [
    ("system-node-critical", 2_000_001_000, "Used for system critical pods that must not be moved from their current node."),
    ("system-cluster-critical", 2_000_000_000, "Used for system critical pods that must run in the cluster, but can be moved to another node if necessary."),
];
const HIGHEST_USER_DEFINABLE_PRIORITY: i64 = 1_000_000_000;

pub(crate) fn validate_priority_class(o: &Map<String, Value>, errs: &mut Vec<Cause>) {
    let name = o
        .get("metadata")
        .and_then(|m| m.get("name"))
        .and_then(Value::as_str)
        .unwrap_or("");
    let value = o.get("value").and_then(Value::as_i64).unwrap_or(0);
    let system = SYSTEM_PRIORITY_CLASSES
        .iter()
        .any(|(n, v, _)| *n == name && *v == value);
    if !system && name.starts_with("system-") {
        errs.push(Cause::forbidden(
            "metadata.name",
            "priority class names with 'system-' prefix are reserved for system use only",
        ));
    } else if !system && value > HIGHEST_USER_DEFINABLE_PRIORITY {
        errs.push(Cause::forbidden("value", &format!("maximum allowed value of a user defined priority is {HIGHEST_USER_DEFINABLE_PRIORITY}")));
    }
    let policy = text(o, "preemptionPolicy");
    if !matches!(policy, "" | "PreemptLowerPriority" | "Never") {
        errs.push(Cause::not_supported(
            "preemptionPolicy",
            policy,
            &["Never", "PreemptLowerPriority"],
        ));
    }
}

pub(crate) fn validate_priority_class_update(
    old: &Map<String, Value>,
    new: &Map<String, Value>,
    errs: &mut Vec<Cause>,
) {
    for key in ["value", "preemptionPolicy"] {
        if old.get(key) != new.get(key) {
            errs.push(Cause::forbidden(key, "may not be changed in an update."));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn check(spec: Value) -> Vec<String> {
        let mut errs = Vec::new();
        validate_scheduling(spec.as_object().unwrap(), "spec", &mut errs);
        errs.iter().map(Cause::describe).collect()
    }

    #[test]
    fn invalid_operators_and_fields() {
        let errs = check(
            json!({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": [{"key": "a", "operator": "Near", "values": ["x"]},
                                                         {"key": "n", "operator": "Gt", "values": ["x"]}]}]}}}}),
        );
        assert_eq!(errs, [
            "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[0].operator: Invalid value: \"Near\": not a valid selector operator",
            "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[1].values: Required value: must be specified single value when `operator` is 'Lt' or 'Gt'",
        ]);
        let errs = check(
            json!({"affinity": {"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 0, "podAffinityTerm": {"topologyKey": "", "labelSelector": {"matchExpressions": [{"key": "a", "operator": "Gt"}]}}}]}}}),
        );
        assert_eq!(errs.len(), 3, "{errs:?}");
        assert!(errs[0].ends_with("weight: Invalid value: 0: must be in the range 1-100"));
        // The project's (and upstream's) label selector check: Invalid, not Unsupported.
        assert!(
            errs[1].contains("operator: Invalid value: \"Gt\": not a valid selector operator"),
            "{errs:?}"
        );
        let errs = check(
            json!({"topologySpreadConstraints": [{"maxSkew": 0, "topologyKey": "zone", "whenUnsatisfiable": "Maybe"}]}),
        );
        assert_eq!(errs, [
            "spec.topologySpreadConstraints[0].maxSkew: Invalid value: 0: must be greater than zero",
            "spec.topologySpreadConstraints[0].whenUnsatisfiable: Unsupported value: \"Maybe\": supported values: \"DoNotSchedule\", \"ScheduleAnyway\"",
        ]);
        assert!(check(json!({"affinity": {"nodeAffinity": {}}})).is_empty());
    }

    #[test]
    fn priority_classes() {
        let check = |v: Value| {
            let mut errs = Vec::new();
            validate_priority_class(v.as_object().unwrap(), &mut errs);
            errs.iter().map(Cause::describe).collect::<Vec<_>>()
        };
        assert!(check(json!({"metadata": {"name": "high"}, "value": 1000})).is_empty());
        assert!(check(
            json!({"metadata": {"name": "system-node-critical"}, "value": 2_000_001_000})
        )
        .is_empty());
        assert_eq!(check(json!({"metadata": {"name": "system-mine"}, "value": 1})),
            ["metadata.name: Forbidden: priority class names with 'system-' prefix are reserved for system use only"]);
        assert_eq!(
            check(json!({"metadata": {"name": "huge"}, "value": 1_000_000_001})),
            ["value: Forbidden: maximum allowed value of a user defined priority is 1000000000"]
        );
        let mut errs = Vec::new();
        validate_priority_class_update(
            json!({"value": 1}).as_object().unwrap(),
            json!({"value": 2}).as_object().unwrap(),
            &mut errs,
        );
        assert_eq!(
            errs[0].describe(),
            "value: Forbidden: may not be changed in an update."
        );
    }

    #[test]
    fn gates_may_only_be_removed() {
        let old = json!({"schedulingGates": [{"name": "a"}, {"name": "b"}]});
        let mut errs = Vec::new();
        validate_gates_update(
            old.as_object().unwrap(),
            json!({"schedulingGates": [{"name": "b"}]})
                .as_object()
                .unwrap(),
            &mut errs,
        );
        assert!(errs.is_empty());
        validate_gates_update(
            old.as_object().unwrap(),
            json!({"schedulingGates": [{"name": "c"}]})
                .as_object()
                .unwrap(),
            &mut errs,
        );
        assert_eq!(errs[0].describe(), "spec.schedulingGates[0]: Forbidden: only deletion is allowed, but found new scheduling gate 'c'");
    }
}
