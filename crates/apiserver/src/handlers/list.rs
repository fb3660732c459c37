//! LIST (pages, continue tokens, waiting for a resourceVersion) and WATCH.

use super::*;

/// Continue tokens: the revision of the first page and the last key returned.
pub(super) fn encode_continue(rev: i64, last_key: &str) -> String {
    let raw = json!({"rv": rev, "start": last_key}).to_string();
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(raw)
}

pub(super) fn decode_continue(token: &str) -> Result<(i64, String), Status> {
    let bad = || Status::bad_request(format!("invalid continue token {token:?}"));
    let raw = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(token)
        .map_err(|_| bad())?;
    let v: Value = serde_json::from_slice(&raw).map_err(|_| bad())?;
    let rev = v.get("rv").and_then(Value::as_i64).ok_or_else(bad)?;
    let start = v
        .get("start")
        .and_then(Value::as_str)
        .ok_or_else(bad)?
        .to_string();
    Ok((rev, start))
}

pub(super) fn parse_rv(raw: &str) -> Result<i64, Status> {
    raw.parse::<i64>().ok().filter(|v| *v >= 0).ok_or_else(|| {
        Status::bad_request(format!(
            "invalid resourceVersion {raw:?}: must be a non-negative integer"
        ))
    })
}

pub(super) async fn list(
    state: AppState,
    r: &'static ResourceInfo,
    ns: Option<&str>,
    q: &Query,
    repr: Representation,
) -> Result<Response, Status> {
    let selectors = Selectors::from_query(r, q)?;
    let limit = q
        .int("limit")?
        .filter(|l| *l > 0)
        .map(|l| usize::try_from(l).unwrap_or(usize::MAX));
    let rv = q.get("resourceVersion").unwrap_or("");
    let rv_match = q.get("resourceVersionMatch").unwrap_or("");
    let start_after = continue_after(&state, q, rv).await?;
    wait_for_list_revision(&state, r, rv, rv_match).await?;
    let prefix = r.list_prefix(ns);
    let (objects, revision) = state.cache.list(&prefix);
    let all: Vec<_> = objects
        .into_iter()
        .filter(|o| {
            start_after
                .as_deref()
                .is_none_or(|start| o.key.as_str() > start)
        })
        .filter(|o| selectors.matches(o))
        .collect();
    let (page, continue_token, remaining) = match limit {
        Some(l) if all.len() > l => {
            let page = all[..l].to_vec();
            let last = page.last().map(|o| o.key.clone()).unwrap_or_default();
            let token = encode_continue(revision, &last);
            (page, Some(token), Some(all.len() - l))
        }
        _ => (all, None, None),
    };
    let meta = ListMeta {
        resource_version: revision.to_string(),
        continue_token,
        remaining: remaining.filter(|_| selectors.is_empty()),
    };
    list_response(state.view(r), page, &meta, repr)
}

/// The key a `continue` token resumes after; `410 Gone` once its revision is compacted.
async fn continue_after(state: &AppState, q: &Query, rv: &str) -> Result<Option<String>, Status> {
    let Some(token) = q.get("continue").filter(|t| !t.is_empty()) else {
        return Ok(None);
    };
    if !rv.is_empty() {
        return Err(Status::bad_request(
            "specifying resource version is not allowed when using continue",
        ));
    }
    let (token_rev, start) = decode_continue(token)?;
    let compacted = state
        .cache
        .backend()
        .compacted_revision()
        .await
        .unwrap_or(0);
    if token_rev < compacted {
        return Err(Status::gone(
            "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter.",
        ));
    }
    Ok(Some(start))
}

/// Waits until the watch cache can answer a list at `resourceVersion` (upstream's
/// semantics: unset is a consistent read, `0` any, else not older than it, or exactly it).
async fn wait_for_list_revision(
    state: &AppState,
    r: &'static ResourceInfo,
    rv: &str,
    rv_match: &str,
) -> Result<(), Status> {
    if !matches!(rv_match, "" | "NotOlderThan" | "Exact") {
        return Err(Status::bad_request(format!(
            "resourceVersionMatch {rv_match:?} is not supported"
        )));
    }
    if rv.is_empty() {
        if !rv_match.is_empty() {
            return Err(Status::bad_request(
                "resourceVersionMatch is forbidden unless resourceVersion is provided",
            ));
        }
        // Consistent read: the cache must have everything the store has committed.
        let current = state
            .cache
            .backend()
            .current_revision()
            .await
            .map_err(|e| store_status(e, r, ""))?;
        return state
            .cache
            .wait_for_revision(current)
            .await
            .map_err(|e| Status::internal(format!("watch cache: {e}")));
    }
    if rv == "0" {
        return Ok(());
    }
    let wanted = parse_rv(rv)?;
    let have = state.cache.revision();
    if rv_match == "Exact" && wanted != have {
        return Err(Status::gone(format!(
            "too old resource version: {wanted} ({have}): only the current revision can be listed exactly"
        )));
    }
    if wanted > have {
        let waited = tokio::time::timeout(
            Duration::from_secs(3),
            state.cache.wait_for_revision(wanted),
        )
        .await;
        if !matches!(waited, Ok(Ok(()))) {
            let mut s = Status::new(
                504,
                "Timeout",
                format!("Too large resource version: {wanted}, current: {have}"),
            );
            s.details.retry_after_seconds = Some(1);
            return Err(s);
        }
    }
    Ok(())
}

fn list_response(
    view: render::View,
    page: Vec<Arc<CachedObject>>,
    meta: &ListMeta,
    repr: Representation,
) -> Result<Response, Status> {
    // A conversion webhook may fail: such lists are built whole, to answer its error.
    if repr == Representation::Object && view.conversion.is_none() {
        let stream = render::list_stream(view, page, meta)?;
        let mut resp = Response::new(Body::from_stream(stream));
        resp.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        return Ok(resp);
    }
    let body = render::list(&view, &page, meta, repr)?;
    Ok(json_response(StatusCode::OK, body, "application/json", &[]))
}

pub(super) async fn watch(
    state: AppState,
    r: &'static ResourceInfo,
    ns: Option<&str>,
    q: &Query,
    repr: Representation,
) -> Result<Response, Status> {
    let selectors = Selectors::from_query(r, q)?;
    let rv = q.get("resourceVersion").unwrap_or("");
    let send_initial = q.get("sendInitialEvents").map(|v| v == "true");
    let (after, initial_events) = match (rv, send_initial) {
        (_, Some(true)) => {
            if q.get("resourceVersionMatch") != Some("NotOlderThan") {
                return Err(Status::invalid(
                    "ListOptions",
                    "meta.k8s.io",
                    "",
                    vec![cairn_api::status::Cause::forbidden(
                        "resourceVersionMatch",
                        "sendInitialEvents requires setting resourceVersionMatch to NotOlderThan",
                    )],
                ));
            }
            (0, true)
        }
        ("" | "0", _) => (0, send_initial != Some(false)),
        (n, _) => (parse_rv(n)?, false),
    };
    let timeout = match q.int("timeoutSeconds")? {
        Some(s) if s > 0 => Duration::from_secs(u64::try_from(s).unwrap_or(u64::MAX)),
        // Kubernetes' default: between 30 and 60 minutes.
        _ => Duration::from_secs(1800 + u64::from(uuid::Uuid::new_v4().as_bytes()[0]) * 7),
    };
    let req = WatchRequest {
        resource: r,
        view: state.view(r),
        prefix: r.list_prefix(ns),
        selectors,
        after,
        initial_events,
        initial_events_bookmark: send_initial == Some(true),
        bookmarks: q.flag("allowWatchBookmarks"),
        timeout,
        representation: repr,
    };
    let stream = watch::start(state, req).await?;
    let mut resp = Response::new(Body::from_stream(stream));
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    resp.headers_mut().insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static("no-cache, private"),
    );
    Ok(resp)
}
