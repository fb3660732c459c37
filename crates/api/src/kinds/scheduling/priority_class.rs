//! PriorityClass (scheduling.k8s.io): what cairn does that is specific to it.

use crate::kinds::prelude::*;

pub const STRATEGY: Strategy = Strategy {
    default: Some(default),
    validate: Some(validate),
    validate_update: Some(validate_update),
    columns: Some(columns),
    row: Some(row),
    normalize: roundtrip::<k8s_openapi::api::scheduling::v1::PriorityClass>,
    admission: &[Admission::PriorityClass],
    ..Strategy::NONE
};

fn validate(o: &Map<String, Value>, errs: &mut Vec<Cause>) {
    crate::scheduling_validation::validate_priority_class(o, errs)
}

fn validate_update(o: &Map<String, Value>, n: &Map<String, Value>, errs: &mut Vec<Cause>) {
    crate::scheduling_validation::validate_priority_class_update(o, n, errs)
}

fn default(o: &mut Map<String, Value>) {
    set_default(o, "preemptionPolicy", json!("PreemptLowerPriority"));
}

fn columns() -> Vec<Col> {
    vec![
        NAME,
        col("Value", "integer", "value represents the integer value of this priority class. This is the actual priority that pods receive when they have the name of this class in their pod spec."),
        col("Global-Default", "boolean", "globalDefault specifies whether this PriorityClass should be considered as the default priority for pods that do not have any priority class. Only one PriorityClass can be marked as `globalDefault`. However, if more than one PriorityClasses exists with their `globalDefault` field set to true, the smallest value of such global default PriorityClasses will be used as the default priority."),
        AGE,
        col("PreemptionPolicy", "string", "preemptionPolicy is the Policy for preempting pods with lower priority. One of Never, PreemptLowerPriority. Defaults to PreemptLowerPriority if unset."),
    ]
}

fn row(obj: &Value, name: Value, created: &str, _now: DateTime<Utc>) -> Vec<Value> {
    vec![
        name,
        get(obj, &["value"]).cloned().unwrap_or(json!(0)),
        json!(get(obj, &["globalDefault"])
            .and_then(Value::as_bool)
            .unwrap_or(false)),
        json!(created),
        json!(get_str(obj, &["preemptionPolicy"])),
    ]
}
