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

/// Where a resource keeps what its Scale shows, as JSON pointers: `spec.replicas`,
/// `status.replicas` and `spec.selector` (a label selector) for the built-in workloads; the
/// CRD's `subresources.scale` paths (the selector a string) for custom resources.
pub(super) struct ScalePaths {
    spec_replicas: String,
    status_replicas: String,
    /// `(pointer, holds a string)`.
    selector: Option<(String, bool)>,
}

impl ScalePaths {
    pub(super) fn of(state: &AppState, r: &'static ResourceInfo) -> ScalePaths {
        let custom = state.custom.of(r).and_then(|c| c.scale.clone());
        match custom {
            Some(scale) => {
                let pointer = |key: &str| {
                    scale[key]
                        .as_str()
                        .map(|p| p.replace('.', "/"))
                        .unwrap_or_default()
                };
                let selector = Some(pointer("labelSelectorPath")).filter(|p| !p.is_empty());
                ScalePaths {
                    spec_replicas: pointer("specReplicasPath"),
                    status_replicas: pointer("statusReplicasPath"),
                    selector: selector.map(|p| (p, true)),
                }
            }
            None => ScalePaths {
                spec_replicas: "/spec/replicas".into(),
                status_replicas: "/status/replicas".into(),
                selector: Some(("/spec/selector".into(), false)),
            },
        }
    }
}

/// The autoscaling/v1 Scale view of a workload or a custom resource.
pub(super) fn scale_of(obj: &Value, paths: &ScalePaths) -> Value {
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
    let int_at = |p: &str| obj.pointer(p).and_then(Value::as_i64).unwrap_or(0);
    let selector = match &paths.selector {
        Some((p, true)) => obj
            .pointer(p)
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string(),
        Some((p, false)) => obj.pointer(p).map(scale_selector).unwrap_or_default(),
        None => String::new(),
    };
    json!({
        "kind": "Scale",
        "apiVersion": "autoscaling/v1",
        "metadata": scale_meta,
        "spec": {"replicas": int_at(&paths.spec_replicas)},
        "status": {"replicas": int_at(&paths.status_replicas), "selector": selector},
    })
}

/// Sets the value at a JSON pointer, making the objects on the way.
fn set_pointer(obj: &mut Value, pointer: &str, value: Value) {
    let mut cur = obj;
    let keys: Vec<&str> = pointer.trim_start_matches('/').split('/').collect();
    for (i, key) in keys.iter().enumerate() {
        if !cur.is_object() {
            *cur = json!({});
        }
        if i + 1 == keys.len() {
            cur[*key] = value;
            return;
        }
        cur = &mut cur[*key];
    }
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
    let paths = ScalePaths::of(state, r);
    let written = state
        .guaranteed_update(r, ns, name, None, opts, |cur| {
            let current_scale = scale_of(cur, &paths);
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
            set_pointer(&mut next, &paths.spec_replicas, json!(replicas));
            Ok(next)
        })
        .await?;
    let written = render::served_bytes(&state.view(r), &written.bytes)?;
    let written: Value =
        serde_json::from_slice(&written).map_err(|e| Status::internal(e.to_string()))?;
    Ok(json_value_response(&scale_of(&written, &paths)))
}
