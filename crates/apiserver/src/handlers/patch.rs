//! PATCH: JSON, merge and strategic merge patches, and server-side apply.

use super::*;

pub(super) fn patch_error(e: impl std::fmt::Display) -> Status {
    Status::new(
        422,
        "Invalid",
        format!("the server rejected our request due to an error in our request: {e}"),
    )
}

/// Applies a merge, strategic-merge or JSON patch to `cur`, honouring a resourceVersion
/// in the patch as a precondition.
pub(super) fn apply_patch(
    cur: &Value,
    patch: &Value,
    content_type: &str,
    kind: &str,
    name: &str,
    gr: &str,
) -> Result<Value, Status> {
    let out = match content_type {
        "application/merge-patch+json" => {
            if !patch.is_object() {
                return Err(Status::bad_request("a merge patch must be a JSON object"));
            }
            cairn_apimachinery::patch::merge_patch(cur, patch)
        }
        "application/strategic-merge-patch+json" => {
            if !patch.is_object() {
                return Err(Status::bad_request(
                    "a strategic merge patch must be a JSON object",
                ));
            }
            cairn_apimachinery::patch::strategic_merge_patch(cur, patch, kind)
                .map_err(patch_error)?
        }
        "application/json-patch+json" => {
            cairn_apimachinery::patch::json_patch(cur, patch).map_err(patch_error)?
        }
        other => return Err(Status::unsupported_media_type(other)),
    };
    let before = cur.pointer("/metadata/resourceVersion");
    let after = out.pointer("/metadata/resourceVersion");
    if after.is_some() && after != before {
        return Err(Status::conflict(
            gr,
            name,
            "the object has been modified; please apply your changes to the latest version and try again",
        ));
    }
    Ok(out)
}

#[allow(clippy::too_many_arguments)]
pub(super) async fn patch(
    state: &AppState,
    r: &'static ResourceInfo,
    ns: Option<&str>,
    name: &str,
    sub: Option<&str>,
    content_type: &str,
    body: &Bytes,
    q: &Query,
    opts: &mut WriteOptions,
    repr: Representation,
) -> Result<Response, Status> {
    if content_type == "application/apply-patch+yaml" {
        return apply(state, r, ns, name, sub, body, q, opts, repr).await;
    }
    if !matches!(
        content_type,
        "application/merge-patch+json"
            | "application/strategic-merge-patch+json"
            | "application/json-patch+json"
    ) {
        return Err(Status::unsupported_media_type(content_type));
    }
    if content_type == "application/strategic-merge-patch+json" && state.custom.of(r).is_some() {
        // Custom resources have no patch strategies to merge by, as upstream answers.
        return Err(Status::unsupported_media_type_with(
            "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml",
        ));
    }
    let patch: Value = request::decode_as(request::BodyFormat::Json, body)?;
    let gr = r.group_resource();
    if sub == Some("scale") {
        return scale_update(state, r, ns, name, opts, |scale| {
            apply_patch(scale, &patch, content_type, "Scale", name, &gr)
        })
        .await;
    }
    let written = state
        .guaranteed_update(r, ns, name, sub, opts, |cur| {
            apply_patch(cur, &patch, content_type, r.kind, name, &gr)
        })
        .await?;
    respond_written(&state.view(r), StatusCode::OK, &written, repr)
}

/// Server-side apply, reduced to create-or-merge: the applied configuration is created
/// when the object is new and otherwise strategically merged over it, with the field
/// manager recorded as an `Apply` entry in managedFields. Fields dropped from the applied
/// configuration are not removed (no per-field ownership tracking yet).
#[allow(clippy::too_many_arguments)]
pub(super) async fn apply(
    state: &AppState,
    r: &'static ResourceInfo,
    ns: Option<&str>,
    name: &str,
    sub: Option<&str>,
    body: &Bytes,
    q: &Query,
    opts: &mut WriteOptions,
    repr: Representation,
) -> Result<Response, Status> {
    if q.get("fieldManager").is_none_or(str::is_empty) {
        return Err(Status::bad_request(
            "PATCH requests with apply patch type must include fieldManager query parameter",
        ));
    }
    let mut applied: Value = request::decode_as(request::BodyFormat::Yaml, body)?;
    if !applied.is_object() {
        return Err(Status::bad_request(
            "the applied configuration must be an object",
        ));
    }
    if applied.get("apiVersion").is_none() || applied.get("kind").is_none() {
        return Err(Status::bad_request(
            "apiVersion and kind must be set in an applied configuration",
        ));
    }
    let body_name = applied
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("");
    if !body_name.is_empty() && body_name != name {
        return Err(Status::bad_request(format!(
            "the name of the object ({body_name}) does not match the name on the URL ({name})"
        )));
    }
    opts.apply = true;
    // Apply strict-validates like kubectl's default.
    if opts.field_validation == FieldValidation::Warn && q.get("fieldValidation").is_none() {
        opts.field_validation = FieldValidation::Strict;
    }
    if state.cache.get(&r.key(ns, name)).is_none() {
        if sub.is_some() {
            return Err(Status::not_found(&r.group_resource(), name));
        }
        crate::objects::set_meta(&mut applied, "name", json!(name));
        let written = state.create(r, ns, applied, opts).await?;
        return respond_written(&state.view(r), StatusCode::CREATED, &written, repr);
    }
    if let Some(m) = applied.get_mut("metadata").and_then(Value::as_object_mut) {
        m.remove("resourceVersion");
        m.remove("managedFields");
    }
    let written = state
        .guaranteed_update(r, ns, name, sub, opts, |cur| {
            cairn_apimachinery::patch::strategic_merge_patch(cur, &applied, r.kind)
                .map_err(patch_error)
        })
        .await?;
    respond_written(&state.view(r), StatusCode::OK, &written, repr)
}
