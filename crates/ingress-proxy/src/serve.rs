//! The listeners: plain HTTP and HTTPS (certificates by SNI), HTTP/1.1 and HTTP/2 on
//! each, every connection its own task.
//!
//! A client gets [`ServeConfig::header_timeout`] to finish its TLS handshake and each
//! request's headers, so a slow-loris client holds only its own connection. On shutdown
//! the listeners close, open connections finish their requests in flight and close
//! (HTTP/2: GOAWAY), and connections still open after the drain deadline are dropped.

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use hyper::server::conn::{http1, http2};
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio_rustls::TlsAcceptor;
use tracing::{debug, info, warn};

use crate::direct::{self, Outcome};
use crate::forward::{Connection, Forwarder};
use crate::sniff::{sniff, Protocol};

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
    // Accepted connections inherit it (Linux): no system call per connection.
    if let Err(e) = socket2::SockRef::from(&listener.socket).set_tcp_nodelay(true) {
        warn!(error = %e, "setting TCP_NODELAY on a listener");
    }
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
        let scheme = if listener.tls.is_some() {
            "https"
        } else {
            "http"
        };
        let conn = Connection::new(client, local_port, scheme, listener.ingress);
        let (forwarder, timeout, draining) =
            (forwarder.clone(), config.header_timeout, draining.clone());
        // Two task types: a plain connection's future (copied into its task when spawned)
        // is not as large as a TLS one's.
        match listener.tls.clone() {
            None => tokio::spawn(http(stream, conn, forwarder, timeout, draining)),
            Some(tls) => tokio::spawn(tls_connection(
                stream, tls, conn, forwarder, timeout, draining,
            )),
        };
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

async fn tls_connection(
    stream: TcpStream,
    acceptor: TlsAcceptor,
    conn: Connection,
    forwarder: Arc<Forwarder>,
    header_timeout: Duration,
    draining: watch::Receiver<bool>,
) {
    match tokio::time::timeout(header_timeout, acceptor.accept(stream)).await {
        Ok(Ok(stream)) => http(stream, conn, forwarder, header_timeout, draining).await,
        Ok(Err(e)) => debug!(client = %conn.client, error = %e, "TLS handshake failed"),
        Err(_) => debug!(client = %conn.client, "TLS handshake timed out"),
    }
}

/// Serves HTTP on `stream` (HTTP/2 when its first bytes are the preface).
async fn http<S>(
    stream: S,
    conn: Connection,
    forwarder: Arc<Forwarder>,
    header_timeout: Duration,
    mut draining: watch::Receiver<bool>,
) where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let client = conn.client;
    // The first bytes count against the header timeout, as the rest of the head does.
    let (protocol, mut io) = match tokio::time::timeout(header_timeout, sniff(stream)).await {
        Ok(Ok(Some(sniffed))) => sniffed,
        Ok(Ok(None)) => return,
        Ok(Err(e)) => return debug!(%client, error = %e, "reading a connection's first bytes"),
        Err(_) => return debug!(%client, "no request before the header timeout"),
    };
    // Plain Ingress requests first; hyper takes over at the first other one.
    if protocol == Protocol::Http1 && conn.ingress {
        let direct = direct::serve(io, &conn, &forwarder, header_timeout, &mut draining);
        io = match Box::pin(direct).await {
            Outcome::Done => return,
            Outcome::HandOff(io) => io,
        };
    }
    let conn = Arc::new(conn);
    let service = service_fn(move |request| {
        let (forwarder, conn) = (forwarder.clone(), conn.clone());
        async move { Ok::<_, Infallible>(forwarder.handle(request, &conn).await) }
    });
    let io = TokioIo::new(io);
    // hyper's connections are boxed: inline, they made every connection's task as large
    // as the largest of them, copied whole when spawned and again when it ends.
    let result = match protocol {
        Protocol::Http1 => {
            let served = http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(header_timeout)
                .serve_connection(io, service)
                .with_upgrades();
            until_drained(Box::pin(served), draining, |s| s.graceful_shutdown()).await
        }
        Protocol::Http2 => {
            let served = http2::Builder::new(TokioExecutor::new())
                .timer(TokioTimer::new())
                .serve_connection(io, service);
            until_drained(Box::pin(served), draining, |s| s.graceful_shutdown()).await
        }
    };
    if let Err(e) = result {
        debug!(%client, error = %e, "ingress connection ended");
    }
}

/// Runs a connection to its end; once draining begins, it finishes what it has in
/// flight and closes (HTTP/2: GOAWAY).
async fn until_drained<C>(
    mut served: Pin<Box<C>>,
    mut draining: watch::Receiver<bool>,
    graceful: fn(Pin<&mut C>),
) -> Result<(), hyper::Error>
where
    C: Future<Output = Result<(), hyper::Error>>,
{
    let drained = async move {
        // The guard `wait_for` returns is not held across the connection's await.
        let _ = draining.wait_for(|d| *d).await.map(|_| ());
    };
    tokio::select! {
        // The connection first: no random pick per wakeup. It matters after a hand-off
        // from `direct`, too: the request's bytes wait in `Sniffed`, not yet in hyper's
        // read buffer, and a graceful shutdown before hyper has read them would close
        // the connection with the request unanswered.
        biased;
        result = served.as_mut() => result,
        _ = drained => {
            graceful(served.as_mut());
            served.await
        }
    }
}
