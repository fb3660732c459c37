//! Namespace (core): what cairn does that is specific to it.

use crate::kinds::prelude::*;

pub const STRATEGY: Strategy = Strategy {
    default: Some(crate::defaults::default_namespace),
    validate: Some(crate::validation::validate_namespace),
    columns: Some(columns),
    row: Some(row),
    normalize: roundtrip::<k8s_openapi::api::core::v1::Namespace>,
    prepare_for_create: Some(prepare_for_create),
    prepare_for_update: Some(prepare_for_update),
    name_rule: NameRule::Label,
    admission: &[Admission::NamespaceLifecycle],
    zero_values: Some(zero_values),
    ..Strategy::NONE
};

fn columns() -> Vec<Col> {
    vec![
        NAME,
        col("Status", "string", "The status of the namespace"),
        AGE,
    ]
}

fn row(obj: &Value, name: Value, created: &str, _now: DateTime<Utc>) -> Vec<Value> {
    vec![
        name,
        json!(get_str(obj, &["status", "phase"])),
        json!(created),
    ]
}

fn prepare_for_create(obj: &mut Value) {
    obj["status"] = json!({"phase": "Active"});
    name_label(obj);
}

fn prepare_for_update(obj: &mut Value, _old: &Value) {
    name_label(obj);
}

/// The namespace's name is also a label, as Kubernetes does since 1.21.
fn name_label(obj: &mut Value) {
    let name = obj
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    if let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
        let labels = meta.entry("labels").or_insert_with(|| json!({}));
        if labels.is_object() {
            labels["kubernetes.io/metadata.name"] = json!(name);
        }
    }
}

/// Go's zero values of the kind (see `Strategy::zero_values`).
fn zero_values(o: &mut Map<String, Value>) {
    ensure_obj(o, "spec");
    ensure_obj(o, "status");
    condition_times(o, &["lastTransitionTime"]);
}
