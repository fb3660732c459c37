//! The listeners: plain HTTP and HTTPS (certificates by SNI), HTTP/1.1 and HTTP/2 on
//! each, every connection its own task.
//!
//! A client gets [`ServeConfig::header_timeout`] to finish its TLS handshake and each
//! request's headers, so a slow-loris client holds only its own connection. On shutdown
//! the listeners close, open connections finish their requests in flight and close
//! (HTTP/2: GOAWAY), and connections still open after the drain deadline are dropped.

use std::convert::Infallible;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio_rustls::TlsAcceptor;
use tracing::{debug, info, warn};

use crate::forward::{Connection, Forwarder};

#[derive(Debug, Clone)]
pub struct ServeConfig {
    pub header_timeout: Duration,
    /// How long open connections get to finish after shutdown begins.
    pub drain_timeout: Duration,
}

impl Default for ServeConfig {
    fn default() -> ServeConfig {
        ServeConfig {
            header_timeout: Duration::from_secs(10),
            drain_timeout: Duration::from_secs(30),
        }
    }
}

/// One listener: plain, or TLS with its acceptor.
pub struct Listener {
    pub socket: TcpListener,
    pub tls: Option<TlsAcceptor>,
    /// Whether the Ingress routes are served here too (a port only Gateway listeners
    /// use serves only theirs).
    pub ingress: bool,
}

/// Serves `listener` until `shutdown` completes, then drains.
pub async fn serve(
    listener: Listener,
    forwarder: Arc<Forwarder>,
    config: ServeConfig,
    shutdown: impl Future<Output = ()>,
) {
    let (drain, draining) = watch::channel(false);
    let local_port = listener.socket.local_addr().map_or(0, |a| a.port());
    tokio::pin!(shutdown);
    loop {
        let accepted = tokio::select! {
            _ = &mut shutdown => break,
            accepted = listener.socket.accept() => accepted,
        };
        let (stream, client) = match accepted {
            Ok(a) => a,
            Err(e) => {
                // Out of descriptors and the like: wait rather than spin.
                warn!(error = %e, "accepting a connection");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        let scheme = if listener.tls.is_some() {
            "https"
        } else {
            "http"
        };
        let conn = Connection::new(client, local_port, scheme, listener.ingress);
        let task = connection(
            stream,
            listener.tls.clone(),
            conn,
            forwarder.clone(),
            config.clone(),
            draining.clone(),
        );
        tokio::spawn(task);
    }
    drop((listener, draining));
    let _ = drain.send(true);
    info!(port = local_port, "draining ingress connections");
    if tokio::time::timeout(config.drain_timeout, drain.closed())
        .await
        .is_err()
    {
        warn!(
            port = local_port,
            "ingress connections still open after the drain deadline"
        );
    }
}

async fn connection(
    stream: TcpStream,
    tls: Option<TlsAcceptor>,
    conn: Connection,
    forwarder: Arc<Forwarder>,
    config: ServeConfig,
    draining: watch::Receiver<bool>,
) {
    let Some(acceptor) = tls else {
        return http(stream, conn, forwarder, &config, draining).await;
    };
    match tokio::time::timeout(config.header_timeout, acceptor.accept(stream)).await {
        Ok(Ok(stream)) => http(stream, conn, forwarder, &config, draining).await,
        Ok(Err(e)) => debug!(client = %conn.client, error = %e, "TLS handshake failed"),
        Err(_) => debug!(client = %conn.client, "TLS handshake timed out"),
    }
}

async fn http<S>(
    stream: S,
    conn: Connection,
    forwarder: Arc<Forwarder>,
    config: &ServeConfig,
    mut draining: watch::Receiver<bool>,
) where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(config.header_timeout);
    builder.http2().timer(TokioTimer::new());
    let client = conn.client;
    let conn = Arc::new(conn);
    let service = service_fn(move |request| {
        let (forwarder, conn) = (forwarder.clone(), conn.clone());
        async move { Ok::<_, Infallible>(forwarder.handle(request, &conn).await) }
    });
    let served = builder.serve_connection_with_upgrades(TokioIo::new(stream), service);
    tokio::pin!(served);
    let drained = async move {
        // The guard `wait_for` returns is not held across the connection's await.
        let _ = draining.wait_for(|d| *d).await.map(|_| ());
    };
    let result = tokio::select! {
        result = served.as_mut() => result,
        _ = drained => {
            served.as_mut().graceful_shutdown();
            served.await
        }
    };
    if let Err(e) = result {
        debug!(%client, error = %e, "ingress connection ended");
    }
}
