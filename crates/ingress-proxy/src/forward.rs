//! One request: its route in the snapshot in force, then a backend endpoint over a
//! pooled keep-alive connection (straight to the pod, not through the ClusterIP): a raw
//! one written in this task for a bodiless request ([`Upstream`]), hyper's client
//! connection for one with a body or an upgrade ([`Pool`]).
//!
//! A request goes to the next endpoint (at most [`MAX_ATTEMPTS`] in all) only when it
//! never reached a backend: its connection could not be made, or a pooled connection
//! turned out closed before the request was written whole (hyper hands the request
//! back; a raw write fails), so
//! nothing can run twice; a request that was sent is never repeated. No route: 404; a
//! routed Service with nothing to send to: 503 saying why; a backend that fails: 502;
//! one that does not answer in time: 504.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use http::{header, Method, Request, Response, StatusCode, Uri, Version};
use http_body::Body as _;
use http_body_util::BodyExt;
use hyper::body::Incoming;
use tracing::debug;

use cairn_ingress::gateway::filters::modify_headers;
use cairn_ingress::gateway::route::Filter;

use crate::gateway::{self, Decision};
use crate::headers::{set_forwarded, strip_hop_by_hop, upgrade_of};
use crate::metrics::{RequestCounter, RequestMetrics, ServiceName};
use crate::pool::{Pool, PooledBody};
use crate::snapshot::{Backend, Routes, Snapshot};
use crate::upgrade::tunnel;
use crate::upstream::body::UpstreamBody;
use crate::upstream::head::encode_request;
use crate::upstream::relay::Relayed;
use crate::upstream::{Exchanged, Failure, Upstream, Want};

pub use crate::body::{plain, BoxError, ProxyBody};
pub use crate::connection::Connection;

/// How many endpoints one request may try.
const MAX_ATTEMPTS: usize = 3;

#[derive(Debug, Clone)]
pub struct ForwardConfig {
    /// ingress-nginx's `proxy-connect-timeout` default.
    pub connect_timeout: Duration,
    /// Until the backend's response headers: ingress-nginx's `proxy-read-timeout`.
    pub response_timeout: Duration,
    pub pool_idle_timeout: Duration,
    pub pool_max_idle_per_endpoint: usize,
    /// Where requests are counted (shared by every worker given a clone).
    pub metrics: RequestMetrics,
}

impl Default for ForwardConfig {
    fn default() -> ForwardConfig {
        ForwardConfig {
            connect_timeout: Duration::from_secs(5),
            response_timeout: Duration::from_secs(60),
            pool_idle_timeout: Duration::from_secs(60),
            pool_max_idle_per_endpoint: 64,
            metrics: RequestMetrics::default(),
        }
    }
}

pub struct Forwarder {
    routes: Arc<Routes>,
    pool: Arc<Pool>,
    upstream: Arc<Upstream>,
    response_timeout: Duration,
    metrics: RequestCounter,
}

impl Forwarder {
    pub fn new(routes: Arc<Routes>, config: &ForwardConfig) -> Forwarder {
        let pool = Pool::new(
            config.connect_timeout,
            config.pool_idle_timeout,
            config.pool_max_idle_per_endpoint,
        );
        let upstream = Upstream::new(
            config.connect_timeout,
            config.pool_idle_timeout,
            config.pool_max_idle_per_endpoint,
        );
        Forwarder {
            routes,
            pool: Arc::new(pool),
            upstream: Arc::new(upstream),
            response_timeout: config.response_timeout,
            metrics: config.metrics.counter(),
        }
    }

    /// Serves one request, and counts it.
    pub async fn handle(
        &self,
        request: Request<Incoming>,
        conn: &Connection,
    ) -> Response<ProxyBody> {
        let started = Instant::now();
        let (response, service) = self.route(request, conn).await;
        self.metrics
            .record(service.as_ref(), response.status(), started.elapsed());
        response
    }

    /// The request's response, and the Service it went to (`None`: no Service was
    /// chosen).
    async fn route(
        &self,
        request: Request<Incoming>,
        conn: &Connection,
    ) -> (Response<ProxyBody>, Option<ServiceName>) {
        let authority = request
            .uri()
            .authority()
            .map(|a| a.as_str().to_string())
            .or_else(|| {
                let host = request.headers().get(header::HOST)?;
                host.to_str().ok().map(str::to_string)
            });
        let Some(authority) = authority else {
            return (
                plain(StatusCode::BAD_REQUEST, "the request names no host"),
                None,
            );
        };
        let snapshot = self.routes.current();
        match gateway::decide(&snapshot, &request, conn, &authority) {
            Decision::NotClaimed => {}
            Decision::Respond(response) => return (response, None),
            Decision::Forward { backend, filters } => {
                drop(snapshot);
                let filtered = self.forward_filtered(request, &backend, &authority, conn, &filters);
                let response = Box::pin(filtered).await;
                return (response, Some(backend.service.clone()));
            }
        }
        let path = request.uri().path();
        if !conn.ingress {
            let why = format!("no HTTPRoute rule matches host {authority:?} and path {path:?}");
            return (plain(StatusCode::NOT_FOUND, &why), None);
        }
        match ingress_backend(&snapshot, &authority, path) {
            Err((status, why)) => (plain(status, &why), None),
            Ok(backend) => {
                drop(snapshot);
                let response = self.forward(request, &backend, &authority, conn).await;
                (response, Some(backend.service.clone()))
            }
        }
    }

    /// Forwards with an HTTPRoute rule's request and response header modifiers.
    async fn forward_filtered(
        &self,
        mut request: Request<Incoming>,
        backend: &Backend,
        authority: &str,
        conn: &Connection,
        filters: &[Filter],
    ) -> Response<ProxyBody> {
        for modifier in filters
            .iter()
            .filter_map(|f| f.request_header_modifier.as_ref())
        {
            modify_headers(request.headers_mut(), modifier);
        }
        let mut response = self.forward(request, backend, authority, conn).await;
        for modifier in filters
            .iter()
            .filter_map(|f| f.response_header_modifier.as_ref())
        {
            modify_headers(response.headers_mut(), modifier);
        }
        response
    }

    async fn forward(
        &self,
        mut request: Request<Incoming>,
        backend: &Backend,
        authority: &str,
        conn: &Connection,
    ) -> Response<ProxyBody> {
        let upgrade = upgrade_of(request.headers());
        let client_side = upgrade.as_ref().map(|_| hyper::upgrade::on(&mut request));
        let (mut parts, body) = request.into_parts();
        strip_hop_by_hop(&mut parts.headers, upgrade.as_ref());
        set_forwarded(&mut parts.headers, &conn.origin(authority));
        parts.version = Version::HTTP_11;
        // Origin form: the endpoint is the connection's, the Host header the client's.
        parts.uri = parts
            .uri
            .path_and_query()
            .map_or_else(|| Uri::from_static("/"), |p| Uri::from(p.clone()));
        if upgrade.is_none() && body.is_end_stream() {
            return self.forward_bodiless(&parts, backend).await;
        }
        let body = body.map_err(BoxError::from).boxed();
        let request = Request::from_parts(parts, body);
        // Boxed: every request's future (hyper moves each into its connection) would
        // otherwise be as large as this rarer path's.
        Box::pin(self.forward_over_hyper(request, backend, upgrade.is_some(), client_side)).await
    }

    /// A request with no body and no upgrade, over a raw connection ([`Upstream`]).
    async fn forward_bodiless(
        &self,
        parts: &http::request::Parts,
        backend: &Backend,
    ) -> Response<ProxyBody> {
        let target = parts.uri.path_and_query().map_or("/", |p| p.as_str());
        let mut head = Vec::with_capacity(512);
        encode_request(&parts.method, target, &parts.headers, &mut head);
        self.send_head(&head, backend, parts.method == Method::HEAD)
            .await
    }

    /// Sends a bodiless request's `head` (HTTP/1.1, origin form, headers already set
    /// for the backend) to one of `backend`'s endpoints: its answer, or the proxy's
    /// 502/504. `head_request`: the method is HEAD, so the answer has no body.
    pub async fn send_head(
        &self,
        head: &[u8],
        backend: &Backend,
        head_request: bool,
    ) -> Response<ProxyBody> {
        match self
            .exchange(head, backend, head_request, Want::Response)
            .await
        {
            Ok(Exchanged::Response(response)) => {
                let (mut parts, body) = response.into_parts();
                strip_hop_by_hop(&mut parts.headers, None);
                let body = body.map_err(BoxError::from).boxed();
                Response::from_parts(parts, body)
            }
            Ok(Exchanged::Relayed(..)) => plain(StatusCode::BAD_GATEWAY, "unasked relay"),
            Err(answer) => *answer,
        }
    }

    /// As [`Forwarder::send_head`], with the client's HTTP/1.1 head written to `out`
    /// from the backend's bytes ([`crate::upstream::relay`]); the body is the caller's
    /// to write. `Err`: the proxy's own answer.
    pub async fn relay_head(
        &self,
        head: &[u8],
        backend: &Backend,
        head_request: bool,
        close: bool,
        out: &mut Vec<u8>,
    ) -> Result<(Relayed, UpstreamBody), Box<Response<ProxyBody>>> {
        let want = Want::Relay { close, out };
        match self.exchange(head, backend, head_request, want).await? {
            Exchanged::Relayed(relayed, body) => Ok((relayed, body)),
            Exchanged::Response(_) => {
                Err(Box::new(plain(StatusCode::BAD_GATEWAY, "unasked response")))
            }
        }
    }

    /// `head` to the endpoints of `backend` in turn until one takes it whole.
    async fn exchange(
        &self,
        head: &[u8],
        backend: &Backend,
        head_request: bool,
        mut want: Want<'_>,
    ) -> Result<Exchanged, Box<Response<ProxyBody>>> {
        let mut last = String::from("no endpoint was tried");
        for endpoint in backend.order().take(MAX_ATTEMPTS) {
            match self
                .try_endpoint(endpoint, head, head_request, &mut want)
                .await
            {
                Ok(answer) => return answer,
                Err(why) => last = why,
            }
        }
        Err(Box::new(plain(StatusCode::BAD_GATEWAY, &last)))
    }

    /// The routes in force.
    pub fn routes(&self) -> &Routes {
        &self.routes
    }

    /// Counts one response that did not go through [`Forwarder::handle`].
    pub fn record(&self, service: Option<&ServiceName>, status: StatusCode, took: Duration) {
        self.metrics.record(service, status, took);
    }

    /// A bodiless request on `endpoint`: its answer (or the proxy's 502/504), else why
    /// the request never reached it whole. An idle connection is tried first; one found
    /// closed as the request was written is no sign the endpoint is gone, so a new
    /// connection to it follows.
    async fn try_endpoint(
        &self,
        endpoint: SocketAddr,
        head: &[u8],
        head_request: bool,
        want: &mut Want<'_>,
    ) -> Result<Result<Exchanged, Box<Response<ProxyBody>>>, String> {
        let mut idle = self.upstream.reuse(endpoint);
        loop {
            let reused = idle.is_some();
            let raw = match idle.take() {
                Some(raw) => raw,
                None => self.upstream.connect(endpoint).await.map_err(|e| {
                    debug!(%endpoint, error = %e, "endpoint unreachable; trying the next");
                    format!("endpoint {endpoint}: {e}")
                })?,
            };
            let exchange = self
                .upstream
                .exchange(raw, endpoint, head, head_request, want);
            match tokio::time::timeout(self.response_timeout, exchange).await {
                Ok(Ok(exchanged)) => return Ok(Ok(exchanged)),
                Ok(Err(Failure::Unsent(_))) if reused => continue,
                Ok(Err(Failure::Unsent(e))) => return Err(format!("endpoint {endpoint}: {e}")),
                Ok(Err(Failure::Sent(e))) => {
                    let why = format!("endpoint {endpoint}: {e}");
                    return Ok(Err(Box::new(plain(StatusCode::BAD_GATEWAY, &why))));
                }
                Err(_) => return Ok(Err(Box::new(self.timed_out(endpoint)))),
            }
        }
    }

    /// A request with a body or an upgrade, over hyper's client connection ([`Pool`]).
    async fn forward_over_hyper(
        &self,
        mut request: Request<ProxyBody>,
        backend: &Backend,
        upgrade: bool,
        client_side: Option<hyper::upgrade::OnUpgrade>,
    ) -> Response<ProxyBody> {
        let mut last = String::from("no endpoint was tried");
        for endpoint in backend.order().take(MAX_ATTEMPTS) {
            let mut sender = match self.pool.checkout(endpoint, upgrade).await {
                Ok(sender) => sender,
                Err(e) => {
                    debug!(%endpoint, error = %e, "endpoint unreachable; trying the next");
                    last = format!("endpoint {endpoint}: {e}");
                    continue;
                }
            };
            let sent =
                tokio::time::timeout(self.response_timeout, sender.try_send_request(request));
            match sent.await {
                Ok(Ok(response)) => {
                    let (parts, body) = response.into_parts();
                    let body = PooledBody::new(body, self.pool.clone(), endpoint, sender);
                    return respond(Response::from_parts(parts, body), client_side);
                }
                Ok(Err(mut e)) => match e.take_message() {
                    // Never written: the connection was closed under it.
                    Some(unsent) => {
                        last = format!("endpoint {endpoint}: {}", e.error());
                        request = unsent;
                    }
                    None => {
                        let e = e.into_error();
                        let why = std::error::Error::source(&e)
                            .map_or(e.to_string(), |s| format!("{e}: {s}"));
                        return plain(
                            StatusCode::BAD_GATEWAY,
                            &format!("endpoint {endpoint}: {why}"),
                        );
                    }
                },
                Err(_) => return self.timed_out(endpoint),
            }
        }
        plain(StatusCode::BAD_GATEWAY, &last)
    }

    fn timed_out(&self, endpoint: SocketAddr) -> Response<ProxyBody> {
        let why = format!(
            "endpoint {endpoint} did not answer in {:?}",
            self.response_timeout
        );
        plain(StatusCode::GATEWAY_TIMEOUT, &why)
    }
}

/// The Ingress backend of a request for `authority` and `path`, or the status and
/// reason the proxy answers with: 404 when no rule matches, 503 when the routed Service
/// has nothing to send to.
pub fn ingress_backend(
    snapshot: &Snapshot,
    authority: &str,
    path: &str,
) -> Result<Arc<Backend>, (StatusCode, String)> {
    match snapshot.backend(authority, path) {
        None => {
            let why = format!("no Ingress rule matches host {authority:?} and path {path:?}");
            Err((StatusCode::NOT_FOUND, why))
        }
        Some(Err(why)) => Err((StatusCode::SERVICE_UNAVAILABLE, why.to_string())),
        Some(Ok(backend)) => Ok(backend.clone()),
    }
}

/// The backend's response on its way to the client; a `101 Switching Protocols` joins
/// the two upgraded connections.
fn respond(
    mut response: Response<PooledBody>,
    client_side: Option<hyper::upgrade::OnUpgrade>,
) -> Response<ProxyBody> {
    let upgrade = upgrade_of(response.headers());
    if response.status() == StatusCode::SWITCHING_PROTOCOLS {
        if let Some(client_side) = client_side {
            let backend_side = hyper::upgrade::on(&mut response);
            tokio::spawn(tunnel(client_side, backend_side));
        }
    }
    let (mut parts, body) = response.into_parts();
    strip_hop_by_hop(&mut parts.headers, upgrade.as_ref());
    Response::from_parts(parts, body.map_err(BoxError::from).boxed())
}
