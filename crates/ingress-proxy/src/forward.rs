//! One request: its route in the snapshot in force, then a backend endpoint over a
//! pooled keep-alive connection (straight to the pod, not through the ClusterIP).
//!
//! A request is retried on the next endpoint only when it never reached a backend (the
//! connection was refused or timed out) and is idempotent with no body, so nothing can
//! run twice. No route: 404; a routed Service with nothing to send to: 503 saying why;
//! a backend that fails: 502; one that does not answer in time: 504.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{header, Method, Request, Response, StatusCode, Uri, Version};
use http_body::Body as _;
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Empty, Full};
use hyper::body::Incoming;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use tracing::debug;

use crate::headers::{set_forwarded, strip_hop_by_hop, upgrade_of, Origin};
use crate::snapshot::{Backend, Routes};
use crate::upgrade::tunnel;

pub type ProxyBody = BoxBody<Bytes, hyper::Error>;

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
}

impl Default for ForwardConfig {
    fn default() -> ForwardConfig {
        ForwardConfig {
            connect_timeout: Duration::from_secs(5),
            response_timeout: Duration::from_secs(60),
            pool_idle_timeout: Duration::from_secs(60),
            pool_max_idle_per_endpoint: 64,
        }
    }
}

/// The connection a request came on.
#[derive(Debug, Clone, Copy)]
pub struct Connection {
    pub client: SocketAddr,
    pub local_port: u16,
    pub scheme: &'static str,
}

pub struct Forwarder {
    routes: Arc<Routes>,
    client: Client<HttpConnector, ProxyBody>,
    response_timeout: Duration,
}

/// A response of the proxy's own, with a one-line plain-text body.
pub fn plain(status: StatusCode, message: &str) -> Response<ProxyBody> {
    let body = Full::new(Bytes::from(format!("{message}\n")))
        .map_err(|e: Infallible| match e {})
        .boxed();
    let mut response = Response::new(body);
    *response.status_mut() = status;
    let text = header::HeaderValue::from_static("text/plain; charset=utf-8");
    response.headers_mut().insert(header::CONTENT_TYPE, text);
    response
}

fn empty() -> ProxyBody {
    Empty::new().map_err(|e: Infallible| match e {}).boxed()
}

/// Methods that may be sent twice (RFC 9110 §9.2.2).
fn idempotent(method: &Method) -> bool {
    matches!(
        *method,
        Method::GET | Method::HEAD | Method::OPTIONS | Method::TRACE | Method::PUT | Method::DELETE
    )
}

impl Forwarder {
    pub fn new(routes: Arc<Routes>, config: &ForwardConfig) -> Forwarder {
        let mut connector = HttpConnector::new();
        connector.set_nodelay(true);
        connector.set_connect_timeout(Some(config.connect_timeout));
        let client = Client::builder(TokioExecutor::new())
            .pool_idle_timeout(config.pool_idle_timeout)
            .pool_max_idle_per_host(config.pool_max_idle_per_endpoint)
            .build(connector);
        Forwarder {
            routes,
            client,
            response_timeout: config.response_timeout,
        }
    }

    /// Serves one request.
    pub async fn handle(
        &self,
        request: Request<Incoming>,
        conn: Connection,
    ) -> Response<ProxyBody> {
        let authority = request
            .uri()
            .authority()
            .map(|a| a.as_str().to_string())
            .or_else(|| {
                let host = request.headers().get(header::HOST)?;
                host.to_str().ok().map(str::to_string)
            });
        let Some(authority) = authority else {
            return plain(StatusCode::BAD_REQUEST, "the request names no host");
        };
        let snapshot = self.routes.current();
        let path = request.uri().path();
        match snapshot.backend(&authority, path) {
            None => plain(
                StatusCode::NOT_FOUND,
                &format!("no Ingress rule matches host {authority:?} and path {path:?}"),
            ),
            Some(Err(why)) => plain(StatusCode::SERVICE_UNAVAILABLE, &why.to_string()),
            Some(Ok(backend)) => {
                let backend = backend.clone();
                drop(snapshot);
                self.forward(request, &backend, &authority, conn).await
            }
        }
    }

    async fn forward(
        &self,
        mut request: Request<Incoming>,
        backend: &Backend,
        authority: &str,
        conn: Connection,
    ) -> Response<ProxyBody> {
        let upgrade = upgrade_of(request.headers());
        let client_side = upgrade.as_ref().map(|_| hyper::upgrade::on(&mut request));
        let (mut parts, body) = request.into_parts();
        strip_hop_by_hop(&mut parts.headers, upgrade.as_ref());
        let origin = Origin {
            client: conn.client.ip(),
            scheme: conn.scheme,
            port: conn.local_port,
            host: authority,
        };
        set_forwarded(&mut parts.headers, &origin);
        parts.version = Version::HTTP_11;
        let retryable = idempotent(&parts.method) && body.is_end_stream() && upgrade.is_none();
        let mut body = Some(body.boxed());
        let path = parts.uri.path_and_query().cloned();
        let attempts = if retryable { MAX_ATTEMPTS } else { 1 };
        let mut endpoints = backend.order().take(attempts).peekable();
        let mut last = plain(StatusCode::BAD_GATEWAY, "no endpoint was tried");
        while let Some(endpoint) = endpoints.next() {
            let Some(uri) = endpoint_uri(endpoint, path.as_ref()) else {
                return plain(StatusCode::BAD_REQUEST, "the request's path is not valid");
            };
            // Only a request that may be tried again keeps a copy of its head.
            let head = match endpoints.peek() {
                Some(_) => parts.clone(),
                None => std::mem::replace(&mut parts, Request::new(()).into_parts().0),
            };
            let mut attempt = Request::from_parts(head, body.take().unwrap_or_else(empty));
            *attempt.uri_mut() = uri;
            let sent = tokio::time::timeout(self.response_timeout, self.client.request(attempt));
            match sent.await {
                Ok(Ok(response)) => return respond(response, client_side),
                Ok(Err(e)) if e.is_connect() && retryable => {
                    debug!(%endpoint, error = %e, "endpoint refused; trying the next");
                    last = plain(
                        StatusCode::BAD_GATEWAY,
                        &format!("endpoint {endpoint}: {e}"),
                    );
                }
                Ok(Err(e)) => {
                    let why = std::error::Error::source(&e)
                        .map_or(e.to_string(), |s| format!("{e}: {s}"));
                    return plain(
                        StatusCode::BAD_GATEWAY,
                        &format!("endpoint {endpoint}: {why}"),
                    );
                }
                Err(_) => {
                    let why = format!(
                        "endpoint {endpoint} did not answer in {:?}",
                        self.response_timeout
                    );
                    return plain(StatusCode::GATEWAY_TIMEOUT, &why);
                }
            }
        }
        last
    }
}

/// `http://ENDPOINT/PATH?QUERY`, built from parts (no text to parse).
fn endpoint_uri(endpoint: SocketAddr, path: Option<&http::uri::PathAndQuery>) -> Option<Uri> {
    let authority = http::uri::Authority::try_from(endpoint.to_string()).ok()?;
    let path = path
        .cloned()
        .unwrap_or_else(|| http::uri::PathAndQuery::from_static("/"));
    Uri::builder()
        .scheme(http::uri::Scheme::HTTP)
        .authority(authority)
        .path_and_query(path)
        .build()
        .ok()
}

/// The backend's response on its way to the client; a `101 Switching Protocols` joins
/// the two upgraded connections.
fn respond(
    mut response: Response<Incoming>,
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
    Response::from_parts(parts, body.boxed())
}
