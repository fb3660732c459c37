//! Auditing each request (upstream's `WithAudit` and `WithFailedAuthenticationAudit`
//! filters): the policy picks a level from the authenticated user and the request's
//! attributes; the stages it does not omit are written to the sink — `RequestReceived`
//! before authorization, `ResponseStarted` when a long-running response (watch, exec,
//! logs, proxy) sends its headers, `ResponseComplete` when the response is done.
//! Events carry the authorization decision, the impersonated user, and at `Request`
//! and `RequestResponse` the request and response objects.

use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};

use axum::body::{Body, Bytes, HttpBody};
use axum::extract::Request;
use axum::response::Response;
use cairn_audit::event::without_managed_fields;
use cairn_audit::{
    Event, Level, ObjectRef, Policy, RequestAttributes, ResponseStatus, RuleOutcome, Sink, Stage,
};
use cairn_auth::UserInfo;
use serde_json::Value;

use crate::authz::RequestInfo;
use crate::state::WrittenName;

/// The header carrying a request's audit ID, both ways.
pub const AUDIT_ID_HEADER: &str = "audit-id";
const DECISION: &str = "authorization.k8s.io/decision";
const REASON: &str = "authorization.k8s.io/reason";

/// The configured policy and where its events go.
pub struct Auditor {
    pub policy: Policy,
    pub sink: Arc<dyn Sink>,
}

/// One request's audit record in progress.
pub struct AuditContext {
    sink: Arc<dyn Sink>,
    outcome: RuleOutcome,
    event: Event,
    long_running: bool,
    authenticated: bool,
    /// Whether the request's last stage was written (else dropping the context, as when
    /// the client goes away mid-request, writes it).
    ended: AtomicBool,
}

/// Upstream's long-running requests: their response outlives the handler.
fn long_running(info: &RequestInfo) -> bool {
    matches!(info.verb.as_str(), "watch" | "proxy")
        || matches!(
            info.subresource.as_str(),
            "attach" | "exec" | "proxy" | "log" | "portforward"
        )
}

/// Upstream's cap on a recorded user agent.
const MAX_USER_AGENT: usize = 1024;

/// The client's addresses (upstream's `SourceIPs`): the `X-Forwarded-For` entries that
/// are addresses, else `X-Real-Ip`, then the peer's.
fn source_ips(headers: &http::HeaderMap, remote: SocketAddr) -> Vec<String> {
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    let parsed = |s: &str| s.trim().parse::<std::net::IpAddr>().ok();
    let mut ips: Vec<std::net::IpAddr> = header("x-forwarded-for")
        .into_iter()
        .flat_map(|v| v.split(','))
        .filter_map(parsed)
        .collect();
    if ips.is_empty() {
        ips.extend(header("x-real-ip").and_then(parsed));
    }
    if ips.last() != Some(&remote.ip()) {
        ips.push(remote.ip());
    }
    ips.iter().map(ToString::to_string).collect()
}

fn user_agent(headers: &http::HeaderMap) -> String {
    let agent = headers
        .get(http::header::USER_AGENT)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    if agent.len() <= MAX_USER_AGENT {
        return agent.to_string();
    }
    let mut end = MAX_USER_AGENT;
    while !agent.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}...TRUNCATED", &agent[..end])
}

fn object_ref(info: &RequestInfo) -> Option<ObjectRef> {
    info.resource_request.then(|| ObjectRef {
        resource: info.resource.clone(),
        namespace: info.namespace.clone(),
        name: info.name.clone(),
        api_group: info.api_group.clone(),
        api_version: info.api_version.clone(),
        subresource: info.subresource.clone(),
        ..ObjectRef::default()
    })
}

impl Auditor {
    /// The audit ID a request is known by: the client's, else a new one.
    pub fn audit_id(headers: &http::HeaderMap) -> String {
        headers
            .get(AUDIT_ID_HEADER)
            .and_then(|v| v.to_str().ok())
            .filter(|v| !v.is_empty() && v.len() <= 64)
            .map(str::to_string)
            .unwrap_or_else(|| uuid::Uuid::new_v4().to_string())
    }

    /// Starts the record of a request by `user` (`None`: it failed authentication),
    /// writing `RequestReceived`; `None` when the policy does not audit it.
    pub fn begin(
        &self,
        req: &Request,
        info: &RequestInfo,
        user: Option<&UserInfo>,
        remote: SocketAddr,
        audit_id: &str,
    ) -> Option<AuditContext> {
        let attrs = RequestAttributes {
            user,
            verb: &info.verb,
            resource_request: info.resource_request,
            path: &info.path,
            api_group: &info.api_group,
            namespace: &info.namespace,
            resource: &info.resource,
            subresource: &info.subresource,
            name: &info.name,
        };
        let outcome = self.policy.evaluate(&attrs);
        if outcome.level == Level::None {
            return None;
        }
        let uri = req
            .uri()
            .path_and_query()
            .map_or_else(|| req.uri().path().to_string(), |p| p.to_string());
        let mut event = Event::received(outcome.level, audit_id.to_string(), &info.verb, &uri);
        event.user = user.cloned().unwrap_or_default();
        event.source_ips = source_ips(req.headers(), remote);
        event.user_agent = user_agent(req.headers());
        event.object_ref = object_ref(info);
        let mut cx = AuditContext {
            sink: Arc::clone(&self.sink),
            outcome,
            event,
            long_running: long_running(info),
            authenticated: user.is_some(),
            ended: AtomicBool::new(false),
        };
        if user.is_some() {
            cx.emit(Stage::RequestReceived);
        }
        Some(cx)
    }
}

impl AuditContext {
    fn emit(&mut self, stage: Stage) {
        let last = stage == Stage::ResponseComplete
            || (stage == Stage::ResponseStarted && !self.authenticated);
        if last {
            self.ended.store(true, Ordering::Relaxed);
        }
        if self.outcome.records(stage) {
            self.event.move_to(stage);
            self.sink.emit(&self.event);
        }
    }

    /// The user the request acts as, when it impersonates another.
    pub fn impersonating(&mut self, as_user: &UserInfo) {
        if as_user != &self.event.user {
            self.event.impersonated_user = Some(as_user.clone());
        }
    }

    /// The authorizer's answer, as upstream's annotations.
    pub fn authorized(&mut self, allowed: bool, reason: &str) {
        let decision = if allowed { "allow" } else { "forbid" };
        self.event
            .annotations
            .insert(DECISION.into(), decision.into());
        self.event.annotations.insert(REASON.into(), reason.into());
    }

    /// At `Request` and above, reads the body to record it and hands back the request
    /// with the same bytes (a body past the limit is the handlers' 413).
    pub async fn record_request_body(&mut self, req: Request) -> Result<Request, Response> {
        if self.outcome.level < Level::Request || self.long_running {
            return Ok(req);
        }
        let (parts, body) = req.into_parts();
        let bytes = crate::handlers::read_body(body)
            .await
            .map_err(|s| self.complete_now(crate::handlers::status_response(&s)))?;
        // kubectl 1.32 and later send protobuf: recorded as JSON, as upstream does.
        let content_type = parts
            .headers
            .get(http::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok());
        if let Ok(object) = crate::request::decode_body(content_type, &bytes) {
            self.event.request_object = Some(self.trimmed(object));
        }
        Ok(Request::from_parts(parts, Body::from(bytes)))
    }

    fn trimmed(&self, object: Value) -> Value {
        if self.outcome.omit_managed_fields {
            without_managed_fields(object)
        } else {
            object
        }
    }

    /// Records a response that ends the request here (401, 403, 413, 429).
    pub fn complete_now(&mut self, response: Response) -> Response {
        self.event.response_status = Some(ResponseStatus::code(response.status().as_u16()));
        let stage = if self.authenticated {
            Stage::ResponseComplete
        } else {
            // Upstream records a failed authentication at ResponseStarted.
            Stage::ResponseStarted
        };
        self.emit(stage);
        response
    }

    /// Records the handler's response: at once when nothing of its body is wanted,
    /// else (long-running responses, and those whose body the record keeps) when the
    /// body ends, so a streamed list still streams.
    pub async fn finish(mut self, response: Response) -> Response {
        let code = response.status().as_u16();
        self.event.response_status = Some(ResponseStatus::code(code));
        if self.long_running {
            self.emit(Stage::ResponseStarted);
            return response.map(|inner| Body::new(CompletesOnEnd::new(inner, self, None)));
        }
        if let Some(written) = response.extensions().get::<WrittenName>() {
            self.name_created(Some(written.0.clone()));
        }
        let wants_body = code >= 400
            || self.outcome.level == Level::RequestResponse
            || (self.event.verb == "create" && self.unnamed());
        if !wants_body {
            self.emit(Stage::ResponseComplete);
            return response;
        }
        let recording = Recording {
            code,
            kept: Vec::new(),
            truncated: false,
        };
        response.map(|inner| Body::new(CompletesOnEnd::new(inner, self, Some(recording))))
    }

    fn note_response_body(&mut self, code: u16, bytes: &Bytes) {
        if self.outcome.level < Level::RequestResponse && code < 400 {
            // A Metadata-level create wants only the name: no tree is built for it.
            if let Ok(named) = serde_json::from_slice::<Named>(bytes) {
                self.name_created(named.metadata.and_then(|m| m.name));
            }
            return;
        }
        let Ok(object) = serde_json::from_slice::<Value>(bytes) else {
            return;
        };
        let text = |v: &Value, k: &str| v[k].as_str().unwrap_or_default().to_string();
        if let Some(status) = self.event.response_status.as_mut().filter(|_| code >= 400) {
            status.status = text(&object, "status");
            status.message = text(&object, "message");
            status.reason = text(&object, "reason");
        }
        // Upstream names a created object from the request; cairn from the answer:
        // the object, or a failure's details (so a generated name is recorded too).
        let at = if code < 300 {
            "/metadata/name"
        } else {
            "/details/name"
        };
        self.name_created(
            object
                .pointer(at)
                .and_then(Value::as_str)
                .map(str::to_string),
        );
        if self.outcome.level == Level::RequestResponse {
            self.event.response_object = Some(self.trimmed(object));
        }
    }

    /// A create whose object is not named yet (the handler did not say).
    fn unnamed(&self) -> bool {
        self.event
            .object_ref
            .as_ref()
            .is_some_and(|r| r.name.is_empty())
    }

    fn name_created(&mut self, name: Option<String>) {
        if self.event.verb != "create" {
            return;
        }
        if let Some(r) = self.event.object_ref.as_mut().filter(|r| r.name.is_empty()) {
            r.name = name.unwrap_or_default();
        }
    }
}

/// Only `metadata.name` of an answer (serde skips the rest without building it).
#[derive(serde::Deserialize)]
struct Named {
    metadata: Option<NameOnly>,
}

#[derive(serde::Deserialize)]
struct NameOnly {
    name: Option<String>,
}

impl Drop for AuditContext {
    fn drop(&mut self) {
        // The client went away before the response was done: the request still ends.
        if !self.ended.load(Ordering::Relaxed) {
            self.emit(Stage::ResponseComplete);
        }
    }
}

/// Upstream's annotation on an event whose objects were left out for their size.
const TRUNCATED: &str = "audit.k8s.io/truncated";
/// The most of a response body a record keeps (the request body limit, 3 MiB): past
/// it the event carries no response object and says `audit.k8s.io/truncated`, as
/// upstream's truncating backend does, rather than hold a whole large list.
const MAX_RECORDED_RESPONSE: usize = crate::request::MAX_BODY_BYTES;

/// A response body's bytes kept for the record as they stream to the client.
struct Recording {
    code: u16,
    kept: Vec<u8>,
    truncated: bool,
}

impl Recording {
    fn keep(&mut self, data: &Bytes) {
        if self.truncated {
            return;
        }
        if self.kept.len() + data.len() > MAX_RECORDED_RESPONSE {
            self.truncated = true;
            self.kept = Vec::new();
            return;
        }
        self.kept.extend_from_slice(data);
    }
}

/// A response body whose `ResponseComplete` is written when it ends (before its end
/// reaches the client) or when the client goes away.
struct CompletesOnEnd {
    inner: Body,
    cx: Option<AuditContext>,
    recording: Option<Recording>,
}

impl CompletesOnEnd {
    fn new(inner: Body, cx: AuditContext, recording: Option<Recording>) -> Self {
        Self {
            inner,
            cx: Some(cx),
            recording,
        }
    }

    /// Writes the last stage; with the whole body seen, from what it kept.
    fn complete(&mut self, body_ended: bool) {
        let Some(mut cx) = self.cx.take() else {
            return;
        };
        match self.recording.take() {
            Some(r) if body_ended && r.truncated => {
                cx.event.annotations.insert(TRUNCATED.into(), "true".into());
            }
            Some(r) if body_ended => cx.note_response_body(r.code, &Bytes::from(r.kept)),
            _ => {}
        }
        cx.emit(Stage::ResponseComplete);
    }
}

impl HttpBody for CompletesOnEnd {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, axum::Error>>> {
        let polled = Pin::new(&mut self.inner).poll_frame(cx);
        match &polled {
            Poll::Ready(Some(Ok(frame))) => {
                if let (Some(r), Some(data)) = (self.recording.as_mut(), frame.data_ref()) {
                    r.keep(data);
                }
                if self.inner.is_end_stream() {
                    self.complete(true);
                }
            }
            Poll::Ready(None) => self.complete(true),
            Poll::Ready(Some(Err(_))) => self.complete(false),
            Poll::Pending => {}
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}

impl Drop for CompletesOnEnd {
    fn drop(&mut self) {
        // An empty body may never be polled; any other is dropped early when the
        // client goes away.
        let ended = self.inner.is_end_stream();
        self.complete(ended);
    }
}

#[cfg(test)]
mod tests;
