//! A connection to the API server from inside its own process. The embedded scheduler
//! and controllers send their requests through the same authentication (a bearer token
//! of their own identity), authorization, audit, limits and handlers as a network
//! client, but without TLS and HTTP framing: over loopback TLS every watch event was
//! encrypted by the server and decrypted again by the same process, once per informer.

use std::convert::Infallible;
use std::future::Future;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use http::header::{AUTHORIZATION, USER_AGENT};
use http::HeaderValue;

use crate::authn::PeerCert;
use crate::handlers::AppState;
use crate::serve::{self, Guards};

/// What audit events and logs call the in-process clients.
const IN_PROCESS_AGENT: &str =
    concat!("cairn-control/", env!("CARGO_PKG_VERSION"), " (in-process)");
/// The address audit events name for in-process requests.
const IN_PROCESS_REMOTE: SocketAddr = SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), 0);

/// A `tower::Service` serving requests in process as the holder of `bearer`.
#[derive(Clone)]
pub struct InProcessService {
    state: AppState,
    guards: Guards,
    bearer: HeaderValue,
    peer: Arc<PeerCert>,
}

impl InProcessService {
    pub(crate) fn new(state: AppState, guards: Guards, token: &str) -> Option<Self> {
        let mut bearer = HeaderValue::from_str(&format!("Bearer {token}")).ok()?;
        bearer.set_sensitive(true);
        Some(Self {
            state,
            guards,
            bearer,
            peer: Arc::new(PeerCert::Absent),
        })
    }
}

type ResponseFuture =
    Pin<Box<dyn Future<Output = Result<http::Response<axum::body::Body>, Infallible>> + Send>>;

impl<B> tower::Service<http::Request<B>> for InProcessService
where
    B: http_body::Body<Data = Bytes> + Send + 'static,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    type Response = http::Response<axum::body::Body>;
    type Error = Infallible;
    type Future = ResponseFuture;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: http::Request<B>) -> Self::Future {
        let mut req = req.map(axum::body::Body::new);
        // The holder's identity, whatever the caller set: this is the only credential.
        let headers = req.headers_mut();
        headers.insert(AUTHORIZATION, self.bearer.clone());
        if !headers.contains_key(USER_AGENT) {
            headers.insert(USER_AGENT, HeaderValue::from_static(IN_PROCESS_AGENT));
        }
        let state = Arc::clone(&self.state);
        let guards = self.guards.clone();
        let peer = Arc::clone(&self.peer);
        Box::pin(
            async move { Ok(serve::audited(state, &guards, &peer, IN_PROCESS_REMOTE, req).await) },
        )
    }
}
