//! Port-forward: dialing a port inside the pod's network namespace (on `localhost`, as
//! the kubelet does) and relaying one connection.

use std::net::{Ipv4Addr, SocketAddrV4};
use std::path::{Path, PathBuf};
use std::time::Duration;

use nix::sched::CloneFlags;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;

/// The pod a port-forward session reaches.
#[derive(Debug, Clone)]
pub struct Target {
    /// `ns/name`, for messages.
    pub pod: String,
    pub netns: PathBuf,
}

#[derive(Debug, thiserror::Error)]
pub enum DialError {
    #[error("failed to enter network namespace {path}: {source}")]
    Netns {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("failed to connect to localhost:{port} inside namespace {path}: {source}")]
    Connect {
        port: u16,
        path: PathBuf,
        source: std::io::Error,
    },
}

const DIAL_TIMEOUT: Duration = Duration::from_secs(10);

/// Connects to 127.0.0.1:`port` in `netns`. The socket is made on a thread of its own
/// that enters the namespace and ends: a socket keeps the namespace it was made in, and
/// no pooled thread is left in the pod's namespace.
pub async fn dial(netns: &Path, port: u16) -> Result<TcpStream, DialError> {
    let path = netns.to_path_buf();
    let (tx, rx) = tokio::sync::oneshot::channel();
    let thread_path = path.clone();
    let spawned = std::thread::Builder::new()
        .name("portforward-dial".into())
        .spawn(move || {
            // The receiver may have gone (the client left); the socket is dropped then.
            let _ = tx.send(dial_blocking(&thread_path, port));
        });
    if let Err(source) = spawned {
        return Err(DialError::Netns { path, source });
    }
    let stream = rx.await.map_err(|_| DialError::Netns {
        path: path.clone(),
        source: std::io::Error::other("the dialing thread ended without an answer"),
    })??;
    TcpStream::from_std(stream).map_err(|source| DialError::Connect { port, path, source })
}

fn dial_blocking(netns: &Path, port: u16) -> Result<std::net::TcpStream, DialError> {
    let netns_err = |source| DialError::Netns {
        path: netns.to_path_buf(),
        source,
    };
    let file = std::fs::File::open(netns).map_err(netns_err)?;
    nix::sched::setns(&file, CloneFlags::CLONE_NEWNET)
        .map_err(|e| netns_err(std::io::Error::from(e)))?;
    let addr = SocketAddrV4::new(Ipv4Addr::LOCALHOST, port).into();
    let connect_err = |source| DialError::Connect {
        port,
        path: netns.to_path_buf(),
        source,
    };
    let stream = std::net::TcpStream::connect_timeout(&addr, DIAL_TIMEOUT).map_err(connect_err)?;
    stream.set_nonblocking(true).map_err(connect_err)?;
    Ok(stream)
}

/// Relays bytes both ways until either side ends; each side's end is passed on as a
/// half-close (FIN) to the other.
pub async fn relay<R, W>(mut from_client: R, mut to_client: W, conn: TcpStream)
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let (mut conn_read, mut conn_write) = conn.into_split();
    let upstream = async {
        // Either side failing ends this direction; the other is torn down with it.
        let _ = tokio::io::copy(&mut from_client, &mut conn_write).await;
        let _ = conn_write.shutdown().await;
    };
    let downstream = async {
        let _ = tokio::io::copy(&mut conn_read, &mut to_client).await;
        let _ = to_client.shutdown().await;
    };
    tokio::join!(upstream, downstream);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn dial_in_own_namespace_and_refused_port() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let own = Path::new("/proc/self/ns/net");
        let accept = tokio::spawn(async move { listener.accept().await.map(|_| ()) });
        // The suite runs as root (setns needs CAP_SYS_ADMIN, even into one's own namespace).
        dial(own, port).await.unwrap();
        accept.await.unwrap().unwrap();
        let closed = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap().port()
        };
        let err = dial(own, closed).await.unwrap_err();
        assert!(
            err.to_string().contains(&format!("localhost:{closed}")),
            "{err}"
        );
    }

    #[tokio::test]
    async fn missing_namespace_is_named() {
        let err = dial(Path::new("/nonexistent/netns"), 80).await.unwrap_err();
        assert!(err.to_string().contains("/nonexistent/netns"), "{err}");
    }
}
