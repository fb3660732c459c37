//! Accepting connections: TLS (with a handshake deadline, so a client that never
//! finishes one holds no more than a socket for a while), the client certificate judged
//! once per connection, HTTP/1.1 with a header read deadline (slowloris), then every
//! request authenticated before the handlers see it.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::State;
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::oneshot;
use tokio_rustls::TlsAcceptor;
use tracing::{debug, warn};

use crate::audit::{AuditContext, Auditor};
use crate::authn::{Authenticator, PeerCert, RequestUser};
use crate::authz::{self, Authorizer, RequestInfo};
use crate::handlers::{self, AppState};
use crate::limits::Limiter;

/// Upstream's TLS handshake timeout for its HTTP server (`net/http`'s 10 s).
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a client may take to send a request's headers.
const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(30);

/// Serves until `shutdown` fires; connections already open finish on their own.
pub async fn serve(
    listener: TcpListener,
    tls: Arc<rustls::ServerConfig>,
    state: AppState,
    guards: Guards,
    mut shutdown: oneshot::Receiver<()>,
) {
    let acceptor = TlsAcceptor::from(tls);
    loop {
        let accepted = tokio::select! {
            _ = &mut shutdown => return,
            a = listener.accept() => a,
        };
        match accepted {
            Ok((tcp, remote)) => {
                tokio::spawn(connection(
                    tcp,
                    remote,
                    acceptor.clone(),
                    Arc::clone(&state),
                    guards.clone(),
                ));
            }
            Err(e) => {
                // Out of descriptors, most likely: back off rather than spin.
                warn!(error = %e, "accepting a connection");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
}

/// What every request passes before the handlers: who it is, and whether it may.
#[derive(Clone)]
pub struct Guards {
    pub authn: Arc<Authenticator>,
    pub authorizer: Arc<Authorizer>,
    pub limiter: Arc<Limiter>,
    /// The cluster CA's PEM, served to anyone at [`CACERTS_PATH`].
    pub cluster_ca_pem: Arc<str>,
    /// `--audit-policy-file` and `--audit-log-path`, when both are set.
    pub audit: Option<Arc<Auditor>>,
}

/// k3s's path for the cluster CA: a joining node fetches it before it trusts the
/// server, and checks it against the hash its join token pins.
pub const CACERTS_PATH: &str = "/cacerts";

async fn connection(
    tcp: TcpStream,
    remote: SocketAddr,
    acceptor: TlsAcceptor,
    state: AppState,
    guards: Guards,
) {
    let _ = tcp.set_nodelay(true);
    let stream = match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(tcp)).await {
        Ok(Ok(s)) => s,
        Ok(Err(e)) => return debug!(error = %e, "TLS handshake failed"),
        Err(_) => return debug!("TLS handshake timed out"),
    };
    let peer = Arc::new(
        guards
            .authn
            .x509
            .peer(stream.get_ref().1.peer_certificates()),
    );
    let service = hyper::service::service_fn(move |req: http::Request<Incoming>| {
        let state = Arc::clone(&state);
        let guards = guards.clone();
        let peer = Arc::clone(&peer);
        async move {
            let req = req.map(axum::body::Body::new);
            Ok::<_, Infallible>(audited(state, &guards, &peer, remote, req).await)
        }
    });
    let served = hyper::server::conn::http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(HEADER_READ_TIMEOUT)
        .serve_connection(TokioIo::new(stream), service)
        .with_upgrades()
        .await;
    if let Err(e) = served {
        debug!(error = %e, "connection ended");
    }
}

/// The user a request acts as: the impersonated one when its headers ask and the
/// requester may.
fn impersonation(
    authorizer: &Authorizer,
    user: cairn_auth::UserInfo,
    headers: &http::HeaderMap,
) -> Result<cairn_auth::UserInfo, cairn_api::status::Status> {
    Ok(authz::impersonation::impersonated(&user, headers, authorizer)?.unwrap_or(user))
}

fn cacerts(pem: &str) -> axum::response::Response {
    let mut response = axum::response::Response::new(axum::body::Body::from(pem.to_string()));
    response.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/x-pem-file"),
    );
    response
}

/// Every request but `/cacerts`, with its audit ID on the response when auditing is on.
pub(crate) async fn audited(
    state: AppState,
    guards: &Guards,
    peer: &PeerCert,
    remote: SocketAddr,
    req: axum::extract::Request,
) -> axum::response::Response {
    if req.uri().path() == CACERTS_PATH && req.method() == http::Method::GET {
        return cacerts(&guards.cluster_ca_pem);
    }
    let Some(auditor) = guards.audit.as_deref() else {
        return guarded(state, guards, peer, None, req).await;
    };
    let audit_id = Auditor::audit_id(req.headers());
    let audit = AuditStart {
        auditor,
        remote,
        audit_id: &audit_id,
    };
    let mut response = guarded(state, guards, peer, Some(audit), req).await;
    if let Ok(id) = http::HeaderValue::from_str(&audit_id) {
        response
            .headers_mut()
            .insert(crate::audit::AUDIT_ID_HEADER, id);
    }
    response
}

/// What a request needs to begin its audit record once its user is known.
struct AuditStart<'a> {
    auditor: &'a Auditor,
    remote: SocketAddr,
    audit_id: &'a str,
}

impl AuditStart<'_> {
    fn begin(
        &self,
        req: &axum::extract::Request,
        info: &RequestInfo,
        user: Option<&cairn_auth::UserInfo>,
    ) -> Option<AuditContext> {
        self.auditor
            .begin(req, info, user, self.remote, self.audit_id)
    }
}

/// `response` recorded in `audit`, if the request is audited.
fn ended(
    audit: Option<AuditContext>,
    response: axum::response::Response,
) -> axum::response::Response {
    match audit {
        Some(mut cx) => cx.complete_now(response),
        None => response,
    }
}

/// A request through [`checked`], counted and timed in the server's metrics.
async fn guarded(
    state: AppState,
    guards: &Guards,
    peer: &PeerCert,
    audit: Option<AuditStart<'_>>,
    req: axum::extract::Request,
) -> axum::response::Response {
    let started = std::time::Instant::now();
    let info = RequestInfo::new(req.method(), req.uri().path(), req.uri().query());
    let apply = req
        .headers()
        .get(http::header::CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes().starts_with(b"application/apply-patch"));
    let dry_run = req.uri().query().is_some_and(|q| q.contains("dryRun=All"));
    let metrics = Arc::clone(&state.metrics);
    let response = checked(state, guards, peer, audit, req, &info).await;
    let code = response.status().as_u16();
    metrics.request(&info, apply, dry_run, code, started.elapsed());
    response
}

/// Authentication, authorization, the in-flight limits and the audit record around the
/// handler.
async fn checked(
    state: AppState,
    guards: &Guards,
    peer: &PeerCert,
    audit: Option<AuditStart<'_>>,
    mut req: axum::extract::Request,
    info: &RequestInfo,
) -> axum::response::Response {
    let user = guards.authn.authenticate(
        req.method(),
        req.uri().path(),
        req.headers(),
        Some(peer),
        &*state,
    );
    let requester = match user {
        Ok(user) => user,
        Err(why) => {
            debug!(reason = %why.0, path = %req.uri().path(), "unauthorized");
            let cx = audit.and_then(|a| a.begin(&req, info, None));
            let status = cairn_api::status::Status::new(401, "Unauthorized", "Unauthorized");
            return ended(cx, handlers::status_response(&status));
        }
    };
    let mut cx = audit.and_then(|a| a.begin(&req, info, Some(&requester)));
    let user = match impersonation(&guards.authorizer, requester, req.headers()) {
        Ok(user) => user,
        Err(status) => return ended(cx, handlers::status_response(&status)),
    };
    let attrs = authz::attributes(&user, info);
    let decision = guards
        .authorizer
        .decide_selected(&attrs, &info.field_selector);
    if let Some(cx) = cx.as_mut() {
        cx.impersonating(&user);
        cx.authorized(decision.is_allowed(), decision.reason());
    }
    if !decision.is_allowed() {
        debug!(user = %user.username, verb = %info.verb, path = %info.path, "forbidden");
        let forbidden = handlers::status_response(&authz::forbidden(&attrs, &decision));
        return ended(cx, forbidden);
    }
    let privileged = user.in_group(cairn_auth::user::MASTERS);
    req.extensions_mut().insert(RequestUser(user));
    // The token, review and RBAC handlers issue, review and check through them.
    req.extensions_mut().insert(Arc::clone(&guards.authn));
    req.extensions_mut().insert(Arc::clone(&guards.authorizer));
    let query = req.uri().query().map(str::to_string);
    // The body an audit record keeps is read under the in-flight limit, as upstream
    // reads it when the handler decodes it: a request refused with 429 reads nothing.
    let mut completed_by_audit = false;
    let handler = async {
        if let Some(cx) = cx.as_mut() {
            req = match cx.record_request_body(req).await {
                Ok(req) => req,
                Err(response) => {
                    completed_by_audit = true;
                    return response;
                }
            };
        }
        handlers::handle(State(state), req).await
    };
    let response = guards
        .limiter
        .run(info, query.as_deref(), privileged, handler)
        .await;
    match cx {
        Some(cx) if !completed_by_audit => cx.finish(response).await,
        _ => response,
    }
}
