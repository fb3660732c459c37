//! PodDisruptionBudget (policy): what cairn does that is specific to it.

use crate::kinds::prelude::*;

pub const STRATEGY: Strategy = Strategy {
    validate: Some(validate_pod_disruption_budget),
    columns: Some(columns),
    row: Some(row),
    normalize: roundtrip::<k8s_openapi::api::policy::v1::PodDisruptionBudget>,
    ..Strategy::NONE
};

fn validate_pod_disruption_budget(o: &Map<String, Value>, errs: &mut Vec<Cause>) {
    let empty = Map::new();
    let spec = obj(o, "spec").unwrap_or(&empty);
    if field(spec, "minAvailable").is_some() && field(spec, "maxUnavailable").is_some() {
        errs.push(Cause::invalid_value(
            "spec",
            &Value::Object(spec.clone()),
            "minAvailable and maxUnavailable cannot be both set",
        ));
    }
    for key in ["minAvailable", "maxUnavailable"] {
        if let Some(v) = field(spec, key) {
            int_or_percent(v, &format!("spec.{key}"), true, errs);
        }
    }
    if let Some(sel) = obj(spec, "selector") {
        validate_label_selector(sel, "spec.selector", errs);
    }
    if let Some(policy) = field(spec, "unhealthyPodEvictionPolicy") {
        let valid = ["AlwaysAllow", "IfHealthyBudget"];
        let value = policy.as_str().unwrap_or_default();
        if !valid.contains(&value) {
            errs.push(Cause::not_supported(
                "spec.unhealthyPodEvictionPolicy",
                value,
                &valid,
            ));
        }
    }
}

fn columns() -> Vec<Col> {
    vec![
        NAME,
        col("Min Available", "string", "The minimum number of pods that must be available simultaneously.  This can be either an integer or a string specifying a percentage, e.g. \"28%\"."),
        col("Max Unavailable", "string", "The maximum number of pods that may be unavailable simultaneously.  This can be either an integer or a string specifying a percentage, e.g. \"28%\"."),
        col("Allowed Disruptions", "integer", "Calculated number of pods that may be disrupted at this time."),
        AGE,
    ]
}

fn row(obj: &Value, name: Value, created: &str, _now: DateTime<Utc>) -> Vec<Value> {
    let int_or_str = |key: &str| match get(obj, &["spec", key]) {
        Some(Value::String(s)) => json!(s),
        Some(v @ Value::Number(_)) => json!(v.to_string()),
        _ => json!("N/A"),
    };
    vec![
        name,
        int_or_str("minAvailable"),
        int_or_str("maxUnavailable"),
        json!(get_int(obj, &["status", "disruptionsAllowed"])),
        json!(created),
    ]
}
