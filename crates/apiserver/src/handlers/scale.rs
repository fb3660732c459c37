//! The `/scale` subresource: reading a workload's Scale and writing its replicas.

use super::*;

/// `metav1.LabelSelector` as the string form Scale's `status.selector` carries.
pub(super) fn selector_string(sel: &Value) -> String {
    let mut parts = Vec::new();
    if let Some(Value::Object(m)) = sel.get("matchLabels") {
        for (k, v) in m {
            parts.push(format!("{k}={}", v.as_str().unwrap_or("")));
        }
    }
    if let Some(Value::Array(exprs)) = sel.get("matchExpressions") {
        for e in exprs {
            let key = e.get("key").and_then(Value::as_str).unwrap_or("");
            let values: Vec<&str> = e
                .get("values")
                .and_then(Value::as_array)
                .map(|a| a.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            match e.get("operator").and_then(Value::as_str).unwrap_or("") {
                "In" => parts.push(format!("{key} in ({})", values.join(","))),
                "NotIn" => parts.push(format!("{key} notin ({})", values.join(","))),
                "Exists" => parts.push(key.to_string()),
                "DoesNotExist" => parts.push(format!("!{key}")),
                _ => {}
            }
        }
    }
    parts.sort();
    parts.join(",")
}

/// The autoscaling/v1 Scale view of a Deployment, ReplicaSet, StatefulSet or
/// ReplicationController.
pub(super) fn scale_of(obj: &Value) -> Value {
    let meta = obj.get("metadata").cloned().unwrap_or_else(|| json!({}));
    let mut scale_meta = json!({});
    for f in [
        "name",
        "namespace",
        "uid",
        "resourceVersion",
        "creationTimestamp",
    ] {
        if let Some(v) = meta.get(f) {
            scale_meta[f] = v.clone();
        }
    }
    json!({
        "kind": "Scale",
        "apiVersion": "autoscaling/v1",
        "metadata": scale_meta,
        "spec": {"replicas": obj.pointer("/spec/replicas").and_then(Value::as_i64).unwrap_or(0)},
        "status": {
            "replicas": obj.pointer("/status/replicas").and_then(Value::as_i64).unwrap_or(0),
            "selector": obj.pointer("/spec/selector").map(scale_selector).unwrap_or_default(),
        },
    })
}

/// A Scale's `status.selector`: a label selector, or a ReplicationController's equality
/// selector (a plain map of labels).
pub(super) fn scale_selector(selector: &Value) -> String {
    let is_label_selector = selector.get("matchLabels").is_some_and(Value::is_object)
        || selector
            .get("matchExpressions")
            .is_some_and(Value::is_array);
    if is_label_selector || selector.as_object().is_none_or(|m| m.is_empty()) {
        return selector_string(selector);
    }
    selector_string(&json!({ "matchLabels": selector }))
}

/// Updates `spec.replicas` through the scale subresource; `desired` maps the current
/// Scale to the wanted one.
pub(super) async fn scale_update<F>(
    state: &AppState,
    r: &'static ResourceInfo,
    ns: Option<&str>,
    name: &str,
    opts: &WriteOptions,
    mut desired: F,
) -> Result<Response, Status>
where
    F: FnMut(&Value) -> Result<Value, Status>,
{
    let written = state
        .guaranteed_update(r, ns, name, None, opts, |cur| {
            let current_scale = scale_of(cur);
            let wanted = desired(&current_scale)?;
            if let Some(rv) = wanted.pointer("/metadata/resourceVersion").and_then(Value::as_str) {
                if Some(rv) != cur.pointer("/metadata/resourceVersion").and_then(Value::as_str) {
                    return Err(Status::conflict(
                        &r.group_resource(),
                        name,
                        "the object has been modified; please apply your changes to the latest version and try again",
                    ));
                }
            }
            let replicas = wanted
                .pointer("/spec/replicas")
                .and_then(Value::as_i64)
                .ok_or_else(|| Status::invalid("Scale", "autoscaling", name, vec![cairn_api::status::Cause::required("spec.replicas")]))?;
            if replicas < 0 {
                return Err(Status::invalid(
                    "Scale",
                    "autoscaling",
                    name,
                    vec![cairn_api::status::Cause::invalid("spec.replicas", &replicas.to_string(), "must be greater than or equal to 0")],
                ));
            }
            let mut next = cur.clone();
            next["spec"]["replicas"] = json!(replicas);
            Ok(next)
        })
        .await?;
    Ok(json_value_response(&scale_of(&written.value()?)))
}
