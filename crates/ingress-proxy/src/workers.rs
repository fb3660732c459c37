//! The data plane's threads: one single-threaded runtime per core, each accepting on
//! every listener (its own duplicate of the one socket) and each with its own endpoint
//! pool, so a client connection, its requests and the backend connections they use
//! stay on one thread, as in nginx's worker processes. Under tokio's work-stealing
//! runtime a proxied request crossed threads (a backend connection driven by another
//! worker, idle workers woken to steal), and those wakeups were a measurable share of
//! each request's cost (`benches/ingress_rate.rs`).
//!
//! The listeners are bound once, by the caller: a worker never binds, so a port is
//! either served by every worker or by none.

use std::sync::Arc;
use std::thread::JoinHandle as ThreadHandle;

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
        let mut tasks = Vec::new();
        for worker in &self.workers {
            let socket = socket.try_clone().map_err(failed)?;
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
