//! DELETE options and DELETE of a collection.

use super::*;

pub(super) fn delete_options(
    q: &Query,
    headers: &HeaderMap,
    body: &Bytes,
) -> Result<DeleteOptions, Status> {
    let mut opts = DeleteOptions::default();
    if !body.is_empty() {
        let v = request::decode_body(header_str(headers, header::CONTENT_TYPE), body)?;
        opts.grace_period_seconds = v.get("gracePeriodSeconds").and_then(Value::as_i64);
        opts.propagation_policy = v
            .get("propagationPolicy")
            .and_then(Value::as_str)
            .map(str::to_string);
        if v.get("orphanDependents").and_then(Value::as_bool) == Some(true)
            && opts.propagation_policy.is_none()
        {
            opts.propagation_policy = Some("Orphan".into());
        }
        opts.precondition_uid = v
            .pointer("/preconditions/uid")
            .and_then(Value::as_str)
            .map(str::to_string);
        opts.precondition_resource_version = v
            .pointer("/preconditions/resourceVersion")
            .and_then(Value::as_str)
            .map(str::to_string);
        if let Some(Value::Array(d)) = v.get("dryRun") {
            opts.dry_run = d.iter().any(|x| x == "All");
        }
    }
    if let Some(g) = q.int("gracePeriodSeconds")? {
        opts.grace_period_seconds = Some(g);
    }
    if let Some(p) = q.get("propagationPolicy").filter(|p| !p.is_empty()) {
        opts.propagation_policy = Some(p.to_string());
    }
    if q.get("orphanDependents") == Some("true") && opts.propagation_policy.is_none() {
        opts.propagation_policy = Some("Orphan".into());
    }
    if q.get("dryRun") == Some("All") {
        opts.dry_run = true;
    }
    Ok(opts)
}

pub(super) async fn delete_collection(
    state: &AppState,
    r: &'static ResourceInfo,
    ns: Option<&str>,
    q: &Query,
    opts: &DeleteOptions,
) -> Result<Response, Status> {
    let selectors = Selectors::from_query(r, q)?;
    let (objects, _) = state.cache.list(&r.list_prefix(ns));
    let mut deleted = Vec::new();
    for o in objects.iter().filter(|o| selectors.matches(o)) {
        let name = o.fields.get("metadata.name").cloned().unwrap_or_default();
        let object_ns = o.fields.get("metadata.namespace").cloned();
        match state.delete(r, object_ns.as_deref(), &name, opts).await {
            Ok((w, _)) => deleted.push(w),
            Err(s) if s.code == 404 => {}
            Err(s) => return Err(s),
        }
    }
    let items: Vec<Value> = deleted.iter().filter_map(|w| w.value().ok()).collect();
    let rev = state.cache.revision();
    Ok(json_value_response(&json!({
        "kind": r.list_kind(),
        "apiVersion": r.api_version(),
        "metadata": {"resourceVersion": rev.to_string()},
        "items": items,
    })))
}
