//! The accept side both secure ports share (the agent's :10250, the standalone
//! components' ports): accept, back off when accepting fails, a handshake deadline, then
//! HTTP/1.1 with a header read deadline against slow clients.

use std::future::Future;
use std::time::Duration;

use hyper_util::rt::TokioTimer;
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::server::TlsStream;
use tokio_rustls::TlsAcceptor;
use tracing::{debug, warn};

const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(30);

/// Accepts on `listener` until the task is dropped; each connection that completes its
/// TLS handshake in time goes to `handle` on a task of its own. `port` names the port in
/// the log.
pub async fn accept_tls<F, Fut>(
    listener: TcpListener,
    acceptor: TlsAcceptor,
    port: &'static str,
    handle: F,
) where
    F: Fn(TlsStream<TcpStream>) -> Fut + Clone + Send + 'static,
    Fut: Future<Output = ()> + Send + 'static,
{
    loop {
        match listener.accept().await {
            Ok((tcp, _)) => {
                let (acceptor, handle) = (acceptor.clone(), handle.clone());
                tokio::spawn(async move {
                    if let Some(stream) = handshake(tcp, &acceptor).await {
                        handle(stream).await;
                    }
                });
            }
            Err(e) => {
                // Out of descriptors, most likely: back off rather than spin.
                warn!(error = %e, port, "accepting a connection");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
}

async fn handshake(tcp: TcpStream, acceptor: &TlsAcceptor) -> Option<TlsStream<TcpStream>> {
    let _ = tcp.set_nodelay(true);
    match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(tcp)).await {
        Ok(Ok(stream)) => Some(stream),
        Ok(Err(e)) => {
            debug!(error = %e, "TLS handshake failed");
            None
        }
        Err(_) => {
            debug!("TLS handshake timed out");
            None
        }
    }
}

/// HTTP/1.1 with the header read deadline.
pub fn http1() -> hyper::server::conn::http1::Builder {
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(HEADER_READ_TIMEOUT);
    builder
}
