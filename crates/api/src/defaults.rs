//! Kubernetes defaulting: what `SetDefaults_*` (pkg/apis/core/v1, apps/v1, discovery/v1), the
//! v1 conversions and the pod admission plugins (ServiceAccount, DefaultTolerationSeconds,
//! Priority) add to an object before it is stored, so `kubectl get -o yaml` matches.
//!
//! Fields are only set when unset, where "unset" is what Go's defaulting tests: absent or
//! `null` for pointers, and also `""`/`0` for plain strings and integers. Values of the wrong
//! JSON type are left alone (validation reports them). Cluster IP allocation, the pod QoS class
//! and the service account token volume are the server's business.

use serde_json::{json, Map, Value};

use crate::registry::ResourceInfo;

/// Default `obj`, an object of `resource`, in place.
pub(crate) mod admission;
pub(crate) mod pod;

use pod::default_pod_spec;
pub use pod::{add_default_tolerations, default_image_pull_policy, DEFAULT_TOLERATION_SECONDS};

pub fn apply_defaults(resource: &ResourceInfo, obj: &mut Value) {
    default_status_counters(resource, obj);
    let Some(o) = obj.as_object_mut() else {
        return;
    };
    if let Some(default) = resource.strategy.default {
        default(o);
    }
}

pub(crate) fn is_unset(v: Option<&Value>) -> bool {
    matches!(v, None | Some(Value::Null))
}

pub(crate) fn is_unset_str(v: Option<&Value>) -> bool {
    match v {
        None | Some(Value::Null) => true,
        Some(Value::String(s)) => s.is_empty(),
        _ => false,
    }
}

pub(crate) fn is_unset_int(v: Option<&Value>) -> bool {
    match v {
        None | Some(Value::Null) => true,
        Some(Value::Number(n)) => n.as_f64() == Some(0.0),
        _ => false,
    }
}

/// Set `key` when absent or null (Go: nil pointer).
pub(crate) fn set_default(o: &mut Map<String, Value>, key: &str, value: Value) {
    if is_unset(o.get(key)) {
        o.insert(key.to_string(), value);
    }
}

/// Set `key` when absent, null or `""` (Go: empty string).
pub(crate) fn set_default_str(o: &mut Map<String, Value>, key: &str, value: &str) {
    if is_unset_str(o.get(key)) {
        o.insert(key.to_string(), Value::from(value));
    }
}

/// Set `key` when absent, null or `0` (Go: zero int).
pub(crate) fn set_default_int(o: &mut Map<String, Value>, key: &str, value: i64) {
    if is_unset_int(o.get(key)) {
        o.insert(key.to_string(), Value::from(value));
    }
}

/// The object at `key`, created when absent or null; `None` when it is something else.
pub(crate) fn child_obj<'a>(
    o: &'a mut Map<String, Value>,
    key: &str,
) -> Option<&'a mut Map<String, Value>> {
    if is_unset(o.get(key)) {
        o.insert(key.to_string(), Value::Object(Map::new()));
    }
    o.get_mut(key).and_then(Value::as_object_mut)
}

/// The object at `key` if there is one.
pub(crate) fn existing_obj<'a>(
    o: &'a mut Map<String, Value>,
    key: &str,
) -> Option<&'a mut Map<String, Value>> {
    o.get_mut(key).and_then(Value::as_object_mut)
}

/// The objects in the list at `key`.
pub(crate) fn list_objs<'a>(
    o: &'a mut Map<String, Value>,
    key: &str,
) -> impl Iterator<Item = &'a mut Map<String, Value>> {
    o.get_mut(key)
        .and_then(Value::as_array_mut)
        .into_iter()
        .flat_map(|a| a.iter_mut().filter_map(Value::as_object_mut))
}

pub(crate) fn str_of<'a>(o: &'a Map<String, Value>, key: &str) -> &'a str {
    o.get(key).and_then(Value::as_str).unwrap_or("")
}

// ---------------------------------------------------------------------------------------------
// Pods and pod templates

pub(crate) fn default_template(spec: &mut Map<String, Value>) {
    if let Some(template) = existing_obj(spec, "template") {
        if let Some(pod_spec) = child_obj(template, "spec") {
            default_pod_spec(pod_spec);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Status counters and claims (the workloads' own defaults are their kinds')

/// Status fields Go serializes even when zero (not `omitempty`): kube-apiserver's answers
/// always carry them, and clients (the Python client) refuse objects without them.
pub fn default_status_counters(resource: &ResourceInfo, obj: &mut Value) {
    zero_status_counters(obj, resource.strategy.status_counters);
}

fn zero_status_counters(obj: &mut Value, fields: &[&str]) {
    if fields.is_empty() {
        return;
    }
    let Some(status) = obj.as_object_mut().and_then(|o| child_obj(o, "status")) else {
        return;
    };
    for f in fields {
        set_default(status, f, json!(0));
    }
}

/// A new object's status as its strategy resets it: what the client sent is dropped, and the
/// counters Go always prints are zero.
pub fn fresh_status(obj: &mut Value, counters: &[&str]) {
    obj["status"] = json!({});
    zero_status_counters(obj, counters);
}

/// `SetDefaults_PersistentVolumeClaim` (also for a StatefulSet's claim templates).
pub(crate) fn default_claim(pvc: &mut Map<String, Value>) {
    if let Some(spec) = child_obj(pvc, "spec") {
        set_default_str(spec, "volumeMode", "Filesystem");
    }
    if let Some(status) = child_obj(pvc, "status") {
        set_default_str(status, "phase", "Pending");
    }
}

/// Template labels, as a map, when the object's own `field` (labels or selector) is empty.
pub(crate) fn template_labels(spec: &Map<String, Value>) -> Option<Value> {
    spec.get("template")?
        .get("metadata")?
        .get("labels")
        .filter(|l| l.as_object().is_some_and(|m| !m.is_empty()))
        .cloned()
}

pub(crate) fn is_empty_map(v: Option<&Value>) -> bool {
    match v {
        None | Some(Value::Null) => true,
        Some(Value::Object(m)) => m.is_empty(),
        _ => false,
    }
}

#[cfg(test)]
mod tests;
