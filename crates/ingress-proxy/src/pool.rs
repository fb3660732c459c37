//! hyper's keep-alive HTTP/1.1 client connections to endpoints, for requests with a
//! body or an upgrade (a body is written while the answer is read: a backend may answer
//! early); bodiless requests take the leaner [`crate::upstream`].
//!
//! A connection is taken before a request is committed to it, so a refused or timed-out
//! connect leaves the request in hand for the next endpoint. It comes back to the pool
//! when its response body has been read to the end ([`PooledBody`]); a response dropped
//! half-read takes its connection with it. Written over hyper's connection API rather
//! than hyper-util's legacy client, whose generic pool (a connect racing every checkout,
//! a URI key hashed per request) cost a measurable share of each proxied request.

use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use hyper::body::Incoming;
use hyper::client::conn::http1::{self, SendRequest};
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;
use tracing::debug;

use crate::body::ProxyBody;
use crate::idle::{Idle, Reusable};

#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    #[error("connecting: {0}")]
    Io(#[from] std::io::Error),
    #[error("connecting: no answer in {0:?}")]
    Timeout(Duration),
    #[error("HTTP handshake: {0}")]
    Handshake(#[from] hyper::Error),
}

pub type Sender = SendRequest<ProxyBody>;

impl Reusable for Sender {
    fn closed(&mut self) -> bool {
        self.is_closed()
    }
}

pub struct Pool {
    idle: Idle<Sender>,
    connect_timeout: Duration,
}

impl Pool {
    pub fn new(
        connect_timeout: Duration,
        idle_timeout: Duration,
        max_idle_per_endpoint: usize,
    ) -> Pool {
        Pool {
            idle: Idle::new(idle_timeout, max_idle_per_endpoint),
            connect_timeout,
        }
    }

    /// An idle connection to `endpoint` that is still open, else a new one. `upgrade`: a
    /// new connection that may switch protocols, never pooled.
    pub async fn checkout(
        &self,
        endpoint: SocketAddr,
        upgrade: bool,
    ) -> Result<Sender, ConnectError> {
        if !upgrade {
            if let Some(sender) = self.reuse(endpoint).await {
                return Ok(sender);
            }
        }
        self.connect(endpoint, upgrade).await
    }

    /// An idle connection to `endpoint` that is still open and not expired.
    async fn reuse(&self, endpoint: SocketAddr) -> Option<Sender> {
        loop {
            let mut sender = self.idle.take(endpoint)?;
            // A connection the endpoint closed while idle fails here, before any request.
            if sender.ready().await.is_ok() {
                return Some(sender);
            }
        }
    }

    async fn connect(&self, endpoint: SocketAddr, upgrade: bool) -> Result<Sender, ConnectError> {
        let stream = connect(endpoint, self.connect_timeout).await?;
        let (sender, conn) = http1::handshake(TokioIo::new(stream)).await?;
        tokio::spawn(async move {
            let result = match upgrade {
                true => conn.with_upgrades().await,
                false => conn.await,
            };
            if let Err(e) = result {
                debug!(%endpoint, error = %e, "endpoint connection ended");
            }
        });
        Ok(sender)
    }

    fn checkin(&self, endpoint: SocketAddr, sender: Sender) {
        self.idle.put(endpoint, sender);
    }

    /// Idle connections, for tests.
    pub fn idle_count(&self) -> usize {
        self.idle.count()
    }
}

/// A TCP connection to `endpoint`, with no delay (requests are written whole).
pub async fn connect(endpoint: SocketAddr, timeout: Duration) -> Result<TcpStream, ConnectError> {
    let connected = tokio::time::timeout(timeout, TcpStream::connect(endpoint));
    let stream = connected
        .await
        .map_err(|_| ConnectError::Timeout(timeout))??;
    let _ = stream.set_nodelay(true);
    Ok(stream)
}

/// A response body that gives its connection back to the pool once read to the end.
pub struct PooledBody {
    inner: Incoming,
    back: Option<(Arc<Pool>, SocketAddr, Sender)>,
}

impl PooledBody {
    pub fn new(
        inner: Incoming,
        pool: Arc<Pool>,
        endpoint: SocketAddr,
        sender: Sender,
    ) -> PooledBody {
        let mut body = PooledBody {
            inner,
            back: Some((pool, endpoint, sender)),
        };
        if body.inner.is_end_stream() {
            body.give_back();
        }
        body
    }

    fn give_back(&mut self) {
        if let Some((pool, endpoint, sender)) = self.back.take() {
            pool.checkin(endpoint, sender);
        }
    }
}

impl Body for PooledBody {
    type Data = Bytes;
    type Error = hyper::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, hyper::Error>>> {
        let polled = Pin::new(&mut self.inner).poll_frame(cx);
        match &polled {
            Poll::Ready(None) => self.give_back(),
            Poll::Ready(Some(Ok(_))) if self.inner.is_end_stream() => self.give_back(),
            // An error: the connection is not reused (dropped with `back`).
            Poll::Ready(Some(Err(_))) => self.back = None,
            _ => {}
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}
