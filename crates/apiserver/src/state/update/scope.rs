//! What a write through the main resource or a subresource may change of the stored
//! object, and the `pods/ephemeralcontainers` rules.

use serde_json::{json, Value};

use cairn_api::kinds::Admission;
use cairn_api::registry::ResourceInfo;

use crate::state::has_status_subresource;

/// What a write through `subresource` may change of `old`: `/finalize` only a
/// namespace's spec.finalizers, `/status` only status; the main resource everything but
/// status (for kinds with a status subresource) and a namespace's spec.
pub(super) fn scoped_update(
    r: &ResourceInfo,
    old: &Value,
    new: Value,
    subresource: Option<&str>,
) -> Value {
    if subresource == Some("finalize") {
        // `namespaces/finalize` changes only spec.finalizers (the namespace controller
        // removes `kubernetes` once the namespace is empty).
        let mut merged = old.clone();
        let finalizers = new
            .pointer("/spec/finalizers")
            .cloned()
            .unwrap_or(json!([]));
        if !merged.get("spec").is_some_and(Value::is_object) {
            merged["spec"] = json!({});
        }
        merged["spec"]["finalizers"] = finalizers;
        merged
    } else if subresource == Some("ephemeralcontainers") {
        // `pods/ephemeralcontainers` changes only spec.ephemeralContainers.
        let mut merged = old.clone();
        let list = new
            .pointer("/spec/ephemeralContainers")
            .cloned()
            .unwrap_or(json!([]));
        if !merged.get("spec").is_some_and(Value::is_object) {
            merged["spec"] = json!({});
        }
        merged["spec"]["ephemeralContainers"] = list;
        merged
    } else if subresource == Some("approval") {
        // `certificatesigningrequests/approval` changes only status.conditions.
        let mut merged = old.clone();
        let conditions = new
            .pointer("/status/conditions")
            .cloned()
            .unwrap_or(Value::Null);
        if !merged.get("status").is_some_and(Value::is_object) {
            merged["status"] = json!({});
        }
        merged["status"]["conditions"] = conditions;
        merged
    } else if subresource == Some("status") {
        // Status writes change only status (and nothing of spec or metadata).
        let mut merged = old.clone();
        merged["status"] = new.get("status").cloned().unwrap_or(Value::Null);
        if merged["status"].is_null() {
            if let Some(m) = merged.as_object_mut() {
                m.remove("status");
            }
        }
        merged
    } else {
        let mut n = new;
        if r.strategy.admits(Admission::NamespaceLifecycle) {
            // Only `namespaces/finalize` changes a namespace's spec, as upstream.
            n["spec"] = old.get("spec").cloned().unwrap_or(json!({}));
        }
        if has_status_subresource(r) {
            match old.get("status") {
                Some(s) => n["status"] = s.clone(),
                None => {
                    if let Some(m) = n.as_object_mut() {
                        m.remove("status");
                    }
                }
            }
        }
        n
    }
}

/// `pods/ephemeralcontainers`, as upstream: existing ephemeral containers may not change
/// or go, names stay unique across all containers, and the rest of the pod is validated
/// as an ordinary update with the new list taken as given.
pub(super) fn ephemeral_update_causes(
    r: &ResourceInfo,
    old: &Value,
    new: &Value,
) -> Vec<cairn_api::status::Cause> {
    use cairn_api::status::Cause;
    let list = |v: &Value, key: &str| -> Vec<Value> {
        v.pointer(&format!("/spec/{key}"))
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default()
    };
    let (before, after) = (
        list(old, "ephemeralContainers"),
        list(new, "ephemeralContainers"),
    );
    let mut causes = Vec::new();
    for o in &before {
        let name = o.get("name").and_then(Value::as_str).unwrap_or("");
        if !after.iter().any(|n| n == o) {
            causes.push(Cause::forbidden(
                "spec.ephemeralContainers",
                &format!("existing ephemeral containers \"{name}\" may not be changed"),
            ));
        }
    }
    let mut seen = std::collections::BTreeSet::new();
    for c in ["containers", "initContainers", "ephemeralContainers"]
        .iter()
        .flat_map(|k| list(new, k))
    {
        let name = c
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        if !seen.insert(name.clone()) {
            causes.push(Cause::duplicate("spec.ephemeralContainers[*].name", &name));
        }
    }
    let mut old_with_list = old.clone();
    old_with_list["spec"]["ephemeralContainers"] = json!(after);
    causes.extend(cairn_api::validation::validate_update(
        r,
        &old_with_list,
        new,
    ));
    causes
}
