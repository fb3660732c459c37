//! Routing and the handlers of every verb.

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use base64::Engine;
use bytes::Bytes;
use cairn_api::registry::ResourceInfo;
use cairn_api::status::Status;
use cairn_store::cache::CachedObject;
use http_body_util::BodyExt;
use serde_json::{json, Value};
use tracing::{debug, info_span, Instrument};

use crate::discovery;
use crate::podlog;
use crate::render::{self, ListMeta};
use crate::request::{self, Query, Representation, ResourcePath, MAX_BODY_BYTES};
use crate::selectors::Selectors;
use crate::state::{store_status, ApiState, DeleteOptions, FieldValidation, WriteOptions, Written};
use crate::watch::{self, WatchRequest};

mod patch;
mod scale;

use patch::*;
use scale::*;

pub type AppState = Arc<ApiState>;

pub fn status_response(s: &Status) -> Response {
    let code = StatusCode::from_u16(s.code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let mut body = serde_json::to_vec(&s.to_json()).unwrap_or_default();
    // kube-apiserver's JSON encoder ends every body with a newline; some clients compare
    // error texts byte for byte.
    body.push(b'\n');
    let mut resp = (code, body).into_response();
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    if let Some(secs) = s.details.retry_after_seconds {
        if let Ok(v) = HeaderValue::from_str(&secs.to_string()) {
            resp.headers_mut().insert(header::RETRY_AFTER, v);
        }
    }
    resp
}

fn json_response(
    code: StatusCode,
    body: Bytes,
    content_type: &str,
    warnings: &[String],
) -> Response {
    let mut resp = (code, body).into_response();
    if let Ok(v) = HeaderValue::from_str(content_type) {
        resp.headers_mut().insert(header::CONTENT_TYPE, v);
    }
    for w in warnings {
        let text = format!("299 - {}", serde_json::Value::String(w.clone()));
        if let Ok(v) = HeaderValue::from_str(&text) {
            resp.headers_mut().append(header::WARNING, v);
        }
    }
    resp
}

fn json_value_response(v: &Value) -> Response {
    match render::to_bytes(v) {
        Ok(b) => json_response(StatusCode::OK, b, "application/json", &[]),
        Err(s) => status_response(&s),
    }
}

fn header_str(headers: &HeaderMap, name: header::HeaderName) -> Option<&str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

/// The single entry point: every request lands here.
pub async fn handle(State(state): State<AppState>, req: Request) -> Response {
    let method = req.method().clone();
    let path = req.uri().path().to_string();
    let span = info_span!("request", %method, %path);
    async move {
        let resp = route(state, req).await;
        debug!(code = resp.status().as_u16(), "answered");
        resp
    }
    .instrument(span)
    .await
}

async fn route(state: AppState, req: Request) -> Response {
    let (parts, body) = req.into_parts();
    let is_get = parts.method == Method::GET || parts.method == Method::HEAD;
    // Bodies are read before anything can fail: an answer sent over an unread body makes
    // the connection unusable for the client's next request.
    let body = if is_get {
        Ok(Bytes::new())
    } else {
        read_body(body).await
    };
    let path = parts.uri.path().trim_end_matches('/').to_string();
    if let Some(resp) = fixed_path(&state, &path, is_get, &parts.headers) {
        return resp;
    }
    if is_get {
        if let Some(resp) = discovery_path(&state, &path) {
            return resp;
        }
    }
    let parts = match stream_path(&state, &path, is_get, parts, body).await {
        Ok(resp) => return resp,
        Err(unmatched) => unmatched,
    };
    let (parts, body) = parts;
    match request::parse_resource_path(&path, |g, v, p| state.find_resource(g, v, p)) {
        Ok(Some(rp)) => match resource(state, rp, parts, body).await {
            Ok(resp) => resp,
            Err(s) => status_response(&s),
        },
        Ok(None) => not_found(),
        Err(s) => status_response(&s),
    }
}

/// Upstream's answer for a path nothing serves.
fn not_found() -> Response {
    status_response(&Status::new(
        404,
        "NotFound",
        "the server could not find the requested resource",
    ))
}

/// The fixed paths: health, version, the discovery roots and the OpenAPI index.
fn fixed_path(state: &AppState, path: &str, is_get: bool, headers: &HeaderMap) -> Option<Response> {
    let accept = header_str(headers, header::ACCEPT);
    Some(match path {
        "/healthz" | "/livez" | "/readyz" | "/healthz/ping" | "/livez/ping" | "/readyz/ping" => (
            StatusCode::OK,
            [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
            "ok",
        )
            .into_response(),
        "/version" if is_get => json_value_response(&discovery::version()),
        "/api" if is_get => match request::aggregated_discovery_version(accept) {
            Some(v) => aggregated_response(state, true, v),
            None => json_value_response(&discovery::api_versions(
                &state.settings.advertise_address.to_string(),
            )),
        },
        "/apis" if is_get => match request::aggregated_discovery_version(accept) {
            Some(v) => aggregated_response(state, false, v),
            None => json_value_response(&discovery::api_group_list(&state.resources())),
        },
        "/openapi/v3" if is_get => json_value_response(&crate::openapi::index(&state.custom.all())),
        // An empty protobuf document: enough for kubectl apply, which then validates nothing.
        "/openapi/v2" if is_get => (
            StatusCode::OK,
            [(
                header::CONTENT_TYPE,
                "application/com.github.proto-openapi.spec.v2.v1.0+protobuf",
            )],
            Bytes::new(),
        )
            .into_response(),
        _ => return None,
    })
}

/// Discovery and OpenAPI documents per group and version (GET only).
fn discovery_path(state: &AppState, path: &str) -> Option<Response> {
    let parts: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    let doc = match parts.as_slice() {
        ["openapi", "v3", "apis", group, version] => {
            crate::openapi::group_version(&state.custom.all(), group, version)
        }
        ["openapi", "v3", "api", version] => {
            crate::openapi::group_version(&state.custom.all(), "", version)
        }
        ["api", version] => discovery::api_resource_list(&state.resources(), "", version),
        ["apis", group] => discovery::api_group_doc(&state.resources(), group),
        ["apis", group, version] => {
            discovery::api_resource_list(&state.resources(), group, version)
        }
        _ => return None,
    };
    Some(doc.map_or_else(not_found, |d| json_value_response(&d)))
}

type Unmatched = (axum::http::request::Parts, Result<Bytes, Status>);

/// The streaming subresources (exec/attach/port-forward, the node and pod proxies, pod
/// logs); the request back when the path is none of them.
async fn stream_path(
    state: &AppState,
    path: &str,
    is_get: bool,
    parts: axum::http::request::Parts,
    body: Result<Bytes, Status>,
) -> Result<Response, Unmatched> {
    if let Some((ns, name, kind)) = crate::podstream::match_path(path) {
        return Ok(crate::podstream::pod_stream(state, ns, name, kind, parts)
            .await
            .unwrap_or_else(|s| status_response(&s)));
    }
    if let Some(target) = crate::proxy::match_path(path) {
        let body = match body {
            Ok(b) => b,
            Err(s) => return Ok(status_response(&s)),
        };
        return Ok(crate::proxy::proxy(state, target, &parts, body)
            .await
            .unwrap_or_else(|s| status_response(&s)));
    }
    if is_get {
        if let Some((ns, name)) = podlog::match_path(path) {
            return Ok(podlog::pod_log(state, ns, name, parts.uri.query())
                .await
                .unwrap_or_else(|s| status_response(&s)));
        }
    }
    Err((parts, body))
}

fn aggregated_response(state: &AppState, core: bool, version: &str) -> Response {
    match render::to_bytes(&discovery::aggregated(&state.resources(), core, version)) {
        Ok(b) => json_response(
            StatusCode::OK,
            b,
            &discovery::aggregated_content_type(version),
            &[],
        ),
        Err(s) => status_response(&s),
    }
}

/// Oversize bodies up to this size are read and discarded before answering 413, so the
/// client sees the Status instead of a connection reset mid-upload.
const MAX_DRAINED_BYTES: usize = 64 * 1024 * 1024;

async fn read_body(mut body: Body) -> Result<Bytes, Status> {
    let mut collected = bytes::BytesMut::new();
    let mut seen = 0usize;
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|e| Status::bad_request(format!("reading request body: {e}")))?;
        if let Ok(data) = frame.into_data() {
            seen = seen.saturating_add(data.len());
            if seen > MAX_DRAINED_BYTES {
                break;
            }
            if seen <= MAX_BODY_BYTES {
                collected.extend_from_slice(&data);
            }
        }
    }
    if seen > MAX_BODY_BYTES {
        return Err(Status::too_large(MAX_BODY_BYTES));
    }
    Ok(collected.freeze())
}

fn write_options(q: &Query, headers: &HeaderMap) -> Result<WriteOptions, Status> {
    let field_validation = match q.get("fieldValidation").unwrap_or("") {
        "" | "Warn" => FieldValidation::Warn,
        "Strict" => FieldValidation::Strict,
        "Ignore" => FieldValidation::Ignore,
        other => {
            return Err(Status::bad_request(format!(
                "fieldValidation must be one of Ignore, Warn, Strict (got {other:?})"
            )))
        }
    };
    let dry_run = match q.get("dryRun") {
        None | Some("") => false,
        Some("All") => true,
        Some(other) => {
            return Err(Status::bad_request(format!(
                "unsupported dryRun value {other:?}: only All"
            )))
        }
    };
    let field_manager = q.get("fieldManager").map(str::to_string).or_else(|| {
        header_str(headers, header::USER_AGENT)
            .map(|ua| ua.split('/').next().unwrap_or(ua).to_string())
    });
    if let Some(m) = &field_manager {
        if m.len() > 128 {
            return Err(Status::bad_request(
                "fieldManager must be at most 128 characters",
            ));
        }
    }
    Ok(WriteOptions {
        field_manager,
        dry_run,
        field_validation,
        apply: false,
    })
}

/// A subresource answers only the verbs it lists (e.g. `pods/log` only `get`,
/// `pods/binding` only `create`), as kube-apiserver registers them.
fn check_subresource_verb(
    r: &ResourceInfo,
    sub: Option<&str>,
    method: &Method,
) -> Result<(), Status> {
    let Some(sub) = sub.and_then(|s| r.subresource(s)) else {
        return Ok(());
    };
    let verb = match *method {
        Method::GET => "get",
        Method::PUT => "update",
        Method::PATCH => "patch",
        Method::POST => "create",
        Method::DELETE => "delete",
        _ => "",
    };
    if sub.verbs.contains(&verb) {
        return Ok(());
    }
    Err(Status::method_not_allowed(format!(
        "the server does not allow this method on the requested resource ({}/{})",
        r.plural, sub.name
    )))
}

/// One request on a resource path: what every verb's handler reads.
struct Call {
    state: AppState,
    r: &'static ResourceInfo,
    ns: Option<String>,
    q: Query,
    headers: HeaderMap,
    body: Result<Bytes, Status>,
}

impl Call {
    fn ns(&self) -> Option<&str> {
        self.ns.as_deref()
    }

    /// The response's representation, from `Accept`.
    fn repr(&self) -> Result<Representation, Status> {
        request::negotiate(header_str(&self.headers, header::ACCEPT))
    }

    fn body(&self) -> Result<&Bytes, Status> {
        self.body.as_ref().map_err(Clone::clone)
    }

    /// The body as an object, decoded once by its `Content-Type`.
    fn object(&self) -> Result<Value, Status> {
        request::decode_body(
            header_str(&self.headers, header::CONTENT_TYPE),
            self.body()?,
        )
    }

    fn write_options(&self) -> Result<WriteOptions, Status> {
        write_options(&self.q, &self.headers)
    }

    fn delete_options(&self) -> Result<DeleteOptions, Status> {
        delete_options(&self.q, &self.headers, self.body()?)
    }
}

async fn resource(
    state: AppState,
    rp: ResourcePath,
    parts: axum::http::request::Parts,
    body: Result<Bytes, Status>,
) -> Result<Response, Status> {
    let r = rp.resource;
    let span = info_span!(
        "object",
        resource = r.plural,
        ns = rp.namespace.as_deref().unwrap_or(""),
        name = rp.name.as_deref().unwrap_or("")
    );
    let call = Call {
        state,
        r,
        ns: rp.namespace.clone(),
        q: Query::parse(parts.uri.query()),
        headers: parts.headers,
        body,
    };
    let method = parts.method;
    async move {
        check_subresource_verb(r, rp.subresource.as_deref(), &method)?;
        match (method, rp.name.as_deref(), rp.subresource.as_deref()) {
            (Method::GET, None, None) => {
                let repr = call.repr()?;
                if call.q.flag("watch") {
                    watch(call.state.clone(), r, call.ns(), &call.q, repr).await
                } else {
                    list(call.state.clone(), r, call.ns(), &call.q, repr).await
                }
            }
            (Method::GET, Some(name), sub) => {
                get(call.state.clone(), r, call.ns(), name, sub, call.repr()?)
            }
            (Method::POST, None, None) => create(&call).await,
            (Method::POST, Some(name), Some("binding")) => bind(&call, name).await,
            (Method::POST, Some(name), Some("eviction")) => evict(&call, name).await,
            (Method::PUT, Some(name), sub) => replace(&call, name, sub).await,
            (Method::PATCH, Some(name), sub) => patch_object(&call, name, sub).await,
            (Method::DELETE, Some(name), None) => delete_object(&call, name).await,
            (Method::DELETE, None, None) => {
                let opts = call.delete_options()?;
                delete_collection(&call.state, r, call.ns(), &call.q, &opts).await
            }
            (method, _, _) => Err(Status::method_not_allowed(format!(
                "{method} is not supported on {}{}",
                r.plural,
                rp.subresource
                    .as_deref()
                    .map(|s| format!("/{s}"))
                    .unwrap_or_default()
            ))),
        }
    }
    .instrument(span)
    .await
}

/// `201 Created` with a `Success` Status: what binding and eviction answer.
fn created_status() -> Result<Response, Status> {
    let body = json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201});
    Ok(json_response(
        StatusCode::CREATED,
        render::to_bytes(&body)?,
        "application/json",
        &[],
    ))
}

async fn create(call: &Call) -> Result<Response, Status> {
    let repr = call.repr()?;
    call.body()?;
    let opts = call.write_options()?;
    let written = call
        .state
        .create(call.r, call.ns(), call.object()?, &opts)
        .await?;
    respond_written(
        &call.state.view(call.r),
        StatusCode::CREATED,
        &written,
        repr,
    )
}

async fn bind(call: &Call, name: &str) -> Result<Response, Status> {
    let obj = call.object()?;
    let node = obj
        .pointer("/target/name")
        .and_then(Value::as_str)
        .filter(|n| !n.is_empty())
        .ok_or_else(|| {
            Status::invalid(
                "Binding",
                "",
                name,
                vec![cairn_api::status::Cause::required("target.name")],
            )
        })?;
    call.state.bind_pod(call.ns(), name, node).await?;
    created_status()
}

async fn evict(call: &Call, name: &str) -> Result<Response, Status> {
    let obj = call.object()?;
    call.state.evict_pod(call.ns(), name, &obj).await?;
    created_status()
}

async fn replace(call: &Call, name: &str, sub: Option<&str>) -> Result<Response, Status> {
    let (state, r, ns) = (&call.state, call.r, call.ns());
    let repr = call.repr()?;
    call.body()?;
    let opts = call.write_options()?;
    let obj = call.object()?;
    if sub == Some("scale") {
        return scale_update(state, r, ns, name, &opts, |_| Ok(obj.clone())).await;
    }
    let (written, created) = state.update(r, ns, name, sub, obj, &opts).await?;
    let code = if created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    respond_written(&state.view(r), code, &written, repr)
}

async fn patch_object(call: &Call, name: &str, sub: Option<&str>) -> Result<Response, Status> {
    let repr = call.repr()?;
    let body = call.body()?;
    let content_type = request::media_type(header_str(&call.headers, header::CONTENT_TYPE));
    let mut opts = call.write_options()?;
    let (state, r, ns, q) = (&call.state, call.r, call.ns(), &call.q);
    patch(
        state,
        r,
        ns,
        name,
        sub,
        &content_type,
        body,
        q,
        &mut opts,
        repr,
    )
    .await
}

async fn delete_object(call: &Call, name: &str) -> Result<Response, Status> {
    let opts = call.delete_options()?;
    let (written, gone) = call.state.delete(call.r, call.ns(), name, &opts).await?;
    let code = if gone {
        StatusCode::OK
    } else {
        StatusCode::ACCEPTED
    };
    let body = render::served_bytes(&call.state.view(call.r), &written.bytes)?;
    Ok(json_response(
        code,
        body,
        "application/json",
        &written.warnings,
    ))
}

fn respond_written(
    view: &render::View,
    code: StatusCode,
    w: &Written,
    repr: Representation,
) -> Result<Response, Status> {
    let body = render::object(view, &w.bytes, repr)?;
    Ok(json_response(code, body, "application/json", &w.warnings))
}

fn get(
    state: AppState,
    r: &'static ResourceInfo,
    ns: Option<&str>,
    name: &str,
    sub: Option<&str>,
    repr: Representation,
) -> Result<Response, Status> {
    let o = state.get(r, ns, name)?;
    match sub {
        None | Some("status" | "ephemeralcontainers" | "approval") => Ok(json_response(
            StatusCode::OK,
            render::object(&state.view(r), &o.bytes, repr)?,
            "application/json",
            &[],
        )),
        Some("scale") => {
            let v: Value =
                serde_json::from_slice(&o.bytes).map_err(|e| Status::internal(e.to_string()))?;
            Ok(json_value_response(&scale_of(
                &v,
                &scale::ScalePaths::of(&state, r),
            )))
        }
        Some(other) => Err(Status::method_not_allowed(format!(
            "GET is not supported on {}/{other}",
            r.plural
        ))),
    }
}

/// Continue tokens: the revision of the first page and the last key returned.
fn encode_continue(rev: i64, last_key: &str) -> String {
    let raw = json!({"rv": rev, "start": last_key}).to_string();
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(raw)
}

fn decode_continue(token: &str) -> Result<(i64, String), Status> {
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

fn parse_rv(raw: &str) -> Result<i64, Status> {
    raw.parse::<i64>().ok().filter(|v| *v >= 0).ok_or_else(|| {
        Status::bad_request(format!(
            "invalid resourceVersion {raw:?}: must be a non-negative integer"
        ))
    })
}

async fn list(
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

async fn watch(
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

fn delete_options(q: &Query, headers: &HeaderMap, body: &Bytes) -> Result<DeleteOptions, Status> {
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

async fn delete_collection(
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
