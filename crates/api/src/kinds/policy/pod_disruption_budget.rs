//! PodDisruptionBudget (policy): what cairn does that is specific to it.

use crate::kinds::prelude::*;

pub const STRATEGY: Strategy = Strategy {
    validate: Some(crate::validation::policy::validate_pod_disruption_budget),
    columns: Some(columns),
    row: Some(row),
    normalize: roundtrip::<k8s_openapi::api::policy::v1::PodDisruptionBudget>,
    ..Strategy::NONE
};

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
