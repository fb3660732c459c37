//! The handlers of every verb: the request context (`Call`), create, get, replace, patch,
//! delete and the subresources; routing (`router.rs`), list and watch (`list.rs`) and
//! collection deletes (`delete.rs`) beside them.

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

mod access_reviews;
mod delete;
mod health;
mod list;
mod patch;
mod reviews;
mod router;
mod scale;
mod tokens;

use delete::*;
use list::*;
use patch::*;
pub use router::handle;
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

pub(crate) fn json_value_response(v: &Value) -> Response {
    match render::to_bytes(v) {
        Ok(b) => json_response(StatusCode::OK, b, "application/json", &[]),
        Err(s) => status_response(&s),
    }
}

fn header_str(headers: &HeaderMap, name: header::HeaderName) -> Option<&str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

/// Oversize bodies up to this size are read and discarded before answering 413, so the
/// client sees the Status instead of a connection reset mid-upload.
const MAX_DRAINED_BYTES: usize = 64 * 1024 * 1024;

pub(crate) async fn read_body(mut body: Body) -> Result<Bytes, Status> {
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
        requester: None,
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

/// The authenticated user and the authorizer, as the connection layer left them.
fn requester(extensions: &http::Extensions) -> Option<crate::state::Requester> {
    Some(crate::state::Requester {
        user: extensions.get::<crate::authn::RequestUser>()?.0.clone(),
        authorizer: extensions.get::<Arc<crate::authz::Authorizer>>()?.clone(),
    })
}

/// One request on a resource path: what every verb's handler reads.
struct Call {
    state: AppState,
    r: &'static ResourceInfo,
    ns: Option<String>,
    q: Query,
    headers: HeaderMap,
    body: Result<Bytes, Status>,
    requester: Option<crate::state::Requester>,
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
        let mut opts = write_options(&self.q, &self.headers)?;
        opts.requester = self.requester.clone();
        Ok(opts)
    }

    fn delete_options(&self) -> Result<DeleteOptions, Status> {
        delete_options(&self.q, &self.headers, self.body()?)
    }

    /// NodeRestriction for the writes that do not pass the create and update
    /// pipelines: deletes (checked against the stored object) and evictions.
    fn check_node_write(
        &self,
        name: &str,
        subresource: &str,
        object: Option<&Value>,
    ) -> Result<(), Status> {
        use cairn_auth::node::restriction::Operation;
        let Some(req) = self.requester.as_ref() else {
            return Ok(());
        };
        if cairn_auth::node::node_identity(&req.user).is_none() {
            return Ok(());
        }
        let (operation, stored) = match object {
            Some(_) => (Operation::Create, None),
            None => {
                let stored = self.state.get_value(self.r, self.ns(), name).ok();
                (Operation::Delete, stored.map(|(v, _)| v))
            }
        };
        let write = crate::state::NodeWrite {
            resource: self.r,
            subresource,
            operation,
            namespace: self.ns().unwrap_or(""),
            name,
            object,
            old_object: stored.as_ref(),
        };
        self.state.check_node_restriction(&write, Some(req))
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
        requester: requester(&parts.extensions),
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
    call.check_node_write(name, "eviction", Some(&obj))?;
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
    call.check_node_write(name, "", None)?;
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
    let mut response = json_response(code, body, "application/json", &w.warnings);
    response
        .extensions_mut()
        .insert(crate::state::WrittenName(w.name.clone()));
    Ok(response)
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
