//! Namespace (core): what cairn does that is specific to it.

use crate::kinds::prelude::*;

pub const STRATEGY: Strategy = Strategy {
    default: Some(default_namespace),
    validate: Some(validate_namespace),
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

fn default_namespace(o: &mut Map<String, Value>) {
    let name = o
        .get("metadata")
        .and_then(|m| m.get("name"))
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    if !name.is_empty() {
        if let Some(labels) = child_obj(o, "metadata").and_then(|m| child_obj(m, "labels")) {
            labels.insert("kubernetes.io/metadata.name".into(), Value::from(name));
        }
    }
    if let Some(spec) = child_obj(o, "spec") {
        set_default(spec, "finalizers", json!(["kubernetes"]));
    }
    if let Some(status) = child_obj(o, "status") {
        set_default_str(status, "phase", "Active");
    }
}

fn validate_namespace(o: &Map<String, Value>, errs: &mut Vec<Cause>) {
    for (i, f) in arr(
        path(o, &["spec"])
            .and_then(Value::as_object)
            .unwrap_or(&Map::new()),
        "finalizers",
    )
    .iter()
    .enumerate()
    {
        let f = f.as_str().unwrap_or("");
        for msg in is_qualified_name(f) {
            errs.push(Cause::invalid(format!("spec.finalizers[{i}]"), f, &msg));
        }
    }
}

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
