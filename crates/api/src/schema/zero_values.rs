//! What Go's JSON encoding prints that serde's does not: empty non-pointer structs and
//! zero non-`omitempty` fields, per kind, so objects read back as kube-apiserver writes them.

use serde_json::{Map, Value};

use crate::kinds::strategy::ZeroValuesFn;

/// Values Go's JSON encoding prints for empty non-pointer structs and non-`omitempty` fields,
/// added when absent so `kubectl get -o yaml` shows what Kubernetes shows: the kind's
/// `Strategy::zero_values` (only fields Kubernetes always prints for it).
pub fn go_zero_values(zero_values: Option<ZeroValuesFn>, obj: &mut Value) {
    if let (Some(add), Some(o)) = (zero_values, obj.as_object_mut()) {
        add(o);
    }
}

/// A workload's: empty spec and status, null condition times, the pod template's (and
/// claim templates') creation timestamps, and its status counters.
pub(crate) fn workload_zero_values(
    o: &mut Map<String, Value>,
    condition_time_keys: &[&str],
    counters: &[&str],
) {
    ensure_obj(o, "spec");
    ensure_obj(o, "status");
    condition_times(o, condition_time_keys);
    if let Some(spec) = o.get_mut("spec").and_then(Value::as_object_mut) {
        template_zero_values(spec);
        claim_template_zero_values(spec);
    }
    if let Some(status) = o.get_mut("status").and_then(Value::as_object_mut) {
        for key in counters {
            ensure(status, key, Value::from(0));
        }
    }
}

/// An autoscaling/v1 Scale (a subresource body).
pub(crate) fn scale_zero_values(o: &mut Map<String, Value>) {
    ensure_obj(o, "spec");
    ensure_obj(o, "status");
    if let Some(status) = o.get_mut("status").and_then(Value::as_object_mut) {
        ensure(status, "replicas", Value::from(0));
    }
}

/// `metadata.creationTimestamp: null` of an embedded object (a zero `metav1.Time`).
pub(crate) fn meta_creation_timestamp(o: &mut Map<String, Value>) {
    ensure_obj(o, "metadata");
    if let Some(meta) = o.get_mut("metadata").and_then(Value::as_object_mut) {
        ensure(meta, "creationTimestamp", Value::Null);
    }
}

/// The pod template's zero values under a workload's `spec.template`.
pub(crate) fn template_zero_values(spec: &mut Map<String, Value>) {
    if let Some(template) = spec.get_mut("template").and_then(Value::as_object_mut) {
        meta_creation_timestamp(template);
    }
}

/// A StatefulSet's `volumeClaimTemplates`: embedded PVCs print metadata and status.
pub(crate) fn claim_template_zero_values(spec: &mut Map<String, Value>) {
    if let Some(list) = spec
        .get_mut("volumeClaimTemplates")
        .and_then(Value::as_array_mut)
    {
        for pvc in list.iter_mut().filter_map(Value::as_object_mut) {
            meta_creation_timestamp(pvc);
            ensure_obj(pvc, "spec");
            ensure_obj(pvc, "status");
        }
    }
}

/// `metav1.Time` fields of `status.conditions[*]`: Go prints a zero time as `null`.
pub(crate) fn condition_times(o: &mut Map<String, Value>, keys: &[&str]) {
    let Some(conditions) = o
        .get_mut("status")
        .and_then(Value::as_object_mut)
        .and_then(|s| s.get_mut("conditions"))
        .and_then(Value::as_array_mut)
    else {
        return;
    };
    for c in conditions.iter_mut().filter_map(Value::as_object_mut) {
        for key in keys {
            ensure(c, key, Value::Null);
        }
    }
}

pub(crate) fn ensure(o: &mut Map<String, Value>, key: &str, value: Value) {
    if !o.contains_key(key) {
        o.insert(key.to_string(), value);
    }
}

pub(crate) fn ensure_obj(o: &mut Map<String, Value>, key: &str) {
    match o.get(key) {
        Some(Value::Object(_)) => {}
        Some(Value::Null) | None => {
            o.insert(key.to_string(), Value::Object(Map::new()));
        }
        Some(_) => {}
    }
}
