//! The data plane's threads: one single-threaded runtime per core, each accepting on
//! every listener (its own duplicate of the one socket) and each with its own endpoint
//! pool, so a client connection, its requests and the backend connections they use
//! stay on one thread, as in nginx's worker processes. Under tokio's work-stealing
//! runtime a proxied request crossed threads (a backend connection driven by another
//! worker, idle workers woken to steal), and those wakeups were a measurable share of
//! each request's cost (`benches/ingress_rate.rs`).
//!
//! The listeners are bound by the caller, with [`bind_listener`]: `SO_REUSEPORT`, so
//! each worker gets a socket of its own on the port (bound here, before any is served:
//! a port is either served by every worker or by none) and the kernel hands each new
//! connection to one of them. With one socket shared, every worker woke for every new
//! connection and all but one found nothing to accept (a failed `accept4` each), where
//! nginx's workers wait with `EPOLLEXCLUSIVE`. A socket bound without `SO_REUSEPORT` is
//! shared by the workers as before.

use std::net::SocketAddr;
use std::sync::Arc;
use std::thread::JoinHandle as ThreadHandle;

use socket2::{Domain, Protocol, SockRef, Socket, Type};

use tokio::net::TcpListener;
use tokio::runtime::Handle;
use tokio::sync::{oneshot, watch};
use tokio::task::JoinHandle;
use tokio_rustls::TlsAcceptor;
use tracing::warn;

use crate::forward::{ForwardConfig, Forwarder};
use crate::serve::{serve, Listener, ServeConfig};
use crate::snapshot::Routes;

#[derive(Debug, thiserror::Error)]
pub enum WorkersError {
    #[error("starting data plane worker {index}: {source}")]
    Start {
        index: usize,
        source: std::io::Error,
    },
    #[error("handing listener port {port} to the data plane workers: {source}")]
    Listener { port: u16, source: std::io::Error },
}

struct Worker {
    runtime: Handle,
    forwarder: Arc<Forwarder>,
    stop: Option<oneshot::Sender<()>>,
    thread: Option<ThreadHandle<()>>,
}

/// The worker threads; dropping them stops their runtimes (serve's own drain is the
/// graceful way: wait for [`Served`] before dropping).
pub struct Workers {
    workers: Vec<Worker>,
}

/// One listener served by every worker.
pub struct Served {
    tasks: Vec<JoinHandle<()>>,
}

impl Served {
    /// Until every worker has drained the listener.
    pub async fn finished(self) {
        for task in self.tasks {
            let _ = task.await;
        }
    }
}

impl Workers {
    /// `count` threads routing by `routes`; 0: one per core, as
    /// `std::thread::available_parallelism` counts them.
    pub fn start(
        count: usize,
        routes: &Arc<Routes>,
        config: &ForwardConfig,
    ) -> Result<Workers, WorkersError> {
        let count = match count {
            0 => std::thread::available_parallelism().map_or(1, |n| n.get()),
            n => n,
        };
        let workers = (0..count)
            .map(|index| start_worker(index, routes, config))
            .collect::<Result<_, _>>()?;
        Ok(Workers { workers })
    }

    /// Serves `socket` on every worker until `stop` turns true, then drains as
    /// [`serve`] does.
    pub fn serve(
        &self,
        socket: std::net::TcpListener,
        tls: Option<TlsAcceptor>,
        ingress: bool,
        config: &ServeConfig,
        stop: &watch::Receiver<bool>,
    ) -> Result<Served, WorkersError> {
        let port = socket.local_addr().map_or(0, |a| a.port());
        let failed = |source| WorkersError::Listener { port, source };
        socket.set_nonblocking(true).map_err(failed)?;
        let sockets = worker_sockets(socket, self.workers.len()).map_err(failed)?;
        let mut tasks = Vec::new();
        for (worker, socket) in self.workers.iter().zip(sockets) {
            let (tls, forwarder) = (tls.clone(), worker.forwarder.clone());
            let (config, mut stop) = (config.clone(), stop.clone());
            tasks.push(worker.runtime.spawn(async move {
                // Registered with this worker's reactor, so inside its runtime.
                let socket = match TcpListener::from_std(socket) {
                    Ok(socket) => socket,
                    Err(e) => return warn!(port, error = %e, "a data plane worker cannot serve a listener"),
                };
                let listener = Listener {
                    socket,
                    tls,
                    ingress,
                };
                let until = async move {
                    let _ = stop.wait_for(|s| *s).await;
                };
                serve(listener, forwarder, config, until).await;
            }));
        }
        Ok(Served { tasks })
    }
}

/// A listening socket on `address` for [`Workers::serve`], with `SO_REUSEPORT`. Any
/// other socket of the same user with `SO_REUSEPORT` on the port would share its
/// connections rather than fail to bind, so it is for ports nothing else of the proxy
/// binds (cairn-proxy's Ingress ports, bound first; a Gateway listener's port is bound
/// without it and shared by the workers).
pub fn bind_listener(address: SocketAddr) -> std::io::Result<std::net::TcpListener> {
    let socket = Socket::new(
        Domain::for_address(address),
        Type::STREAM,
        Some(Protocol::TCP),
    )?;
    socket.set_reuse_address(true)?;
    socket.set_reuse_port(true)?;
    socket.bind(&address.into())?;
    // As tokio's and std's listeners.
    socket.listen(1024)?;
    Ok(socket.into())
}

/// One socket per worker: `socket` and more bound beside it when it has
/// `SO_REUSEPORT`, else `socket` shared.
fn worker_sockets(
    socket: std::net::TcpListener,
    count: usize,
) -> std::io::Result<Vec<std::net::TcpListener>> {
    let own = SockRef::from(&socket).reuse_port()?;
    let address = socket.local_addr()?;
    let mut sockets = Vec::with_capacity(count);
    for _ in 1..count {
        let next = match own {
            true => bind_listener(address)?,
            false => socket.try_clone()?,
        };
        next.set_nonblocking(true)?;
        sockets.push(next);
    }
    sockets.insert(0, socket);
    Ok(sockets)
}

fn start_worker(
    index: usize,
    routes: &Arc<Routes>,
    config: &ForwardConfig,
) -> Result<Worker, WorkersError> {
    let failed = |source| WorkersError::Start { index, source };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(failed)?;
    let handle = runtime.handle().clone();
    let (stop, stopped) = oneshot::channel::<()>();
    let thread = std::thread::Builder::new()
        .name(format!("ingress-{index}"))
        .spawn(move || {
            // The runtime runs its tasks only inside block_on.
            let _ = runtime.block_on(stopped);
        })
        .map_err(failed)?;
    Ok(Worker {
        runtime: handle,
        forwarder: Arc::new(Forwarder::new(routes.clone(), config)),
        stop: Some(stop),
        thread: Some(thread),
    })
}

impl Drop for Workers {
    fn drop(&mut self) {
        for worker in &mut self.workers {
            if let Some(stop) = worker.stop.take() {
                let _ = stop.send(());
            }
        }
        for worker in &mut self.workers {
            if let Some(thread) = worker.thread.take() {
                let _ = thread.join();
            }
        }
    }
}
