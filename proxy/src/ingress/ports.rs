//! The ports Gateway listeners ask for beyond the Ingress listeners': bound when a
//! snapshot first names one, drained and closed when none does any more. A port that
//! cannot be bound (another process holds it) is reported once ([`Unavailable`], a
//! Warning event on its Gateways) and tried again with the next snapshot.

use std::collections::{BTreeMap, BTreeSet};
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use cairn_ingress::gateway::Protocol;
use cairn_ingress_proxy::{server_config, Routes, ServeConfig, Served, SniResolver, Workers};
use rustls::sign::CertifiedKey;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tracing::{info, warn};

/// A listener port this node could not bind.
pub(super) struct Unavailable {
    pub(super) port: u16,
    pub(super) message: String,
}

struct Running {
    stop: watch::Sender<bool>,
    served: Served,
}

pub(super) struct Ports {
    /// The address the extra ports bind on (the Ingress HTTP listener's).
    host: IpAddr,
    /// Served by the Ingress listeners already.
    fixed: Vec<(u16, Protocol)>,
    routes: Arc<Routes>,
    workers: Arc<Workers>,
    fallback: Arc<CertifiedKey>,
    running: BTreeMap<(u16, Protocol), Running>,
    /// Ports whose bind failure was reported, until they bind or are not wanted.
    told: BTreeSet<(u16, Protocol)>,
}

impl Ports {
    pub(super) fn new(
        host: IpAddr,
        fixed: Vec<(u16, Protocol)>,
        routes: Arc<Routes>,
        workers: Arc<Workers>,
        fallback: Arc<CertifiedKey>,
    ) -> Ports {
        Ports {
            host,
            fixed,
            routes,
            workers,
            fallback,
            running: BTreeMap::new(),
            told: BTreeSet::new(),
        }
    }

    /// Serves the ports the snapshot in force names, and only those; the ports that
    /// could not be bound and were not reported before.
    pub(super) async fn sync(&mut self) -> Vec<Unavailable> {
        let snapshot = self.routes.current();
        let wanted: BTreeSet<(u16, Protocol)> = snapshot
            .gateways
            .iter()
            .map(|l| (l.port, l.protocol))
            .filter(|p| !self.fixed.contains(p))
            .collect();
        drop(snapshot);
        let gone: Vec<(u16, Protocol)> = self
            .running
            .keys()
            .filter(|p| !wanted.contains(p))
            .copied()
            .collect();
        for port in gone {
            if let Some(running) = self.running.remove(&port) {
                info!(
                    port = port.0,
                    "no Gateway listener uses the port any more; draining it"
                );
                stop(running).await;
            }
        }
        self.told.retain(|p| wanted.contains(p));
        let mut unavailable = Vec::new();
        for port in wanted {
            if self.running.contains_key(&port) {
                continue;
            }
            match self.start(port).await {
                Ok(()) => {
                    self.told.remove(&port);
                }
                Err(message) if self.told.insert(port) => {
                    unavailable.push(Unavailable {
                        port: port.0,
                        message,
                    });
                }
                Err(_) => {}
            }
        }
        unavailable
    }

    /// Serves one port; why not, when it cannot be bound.
    async fn start(&mut self, (port, protocol): (u16, Protocol)) -> Result<(), String> {
        let address = SocketAddr::new(self.host, port);
        // Not `SO_REUSEPORT` (`bind_listener`): a port already served, say the Ingress
        // port in another protocol, must fail to bind here, not be shared with it.
        let socket = match TcpListener::bind(address).await.and_then(|s| s.into_std()) {
            Ok(socket) => socket,
            Err(e) => {
                warn!(%address, error = %e, "a Gateway listener's port cannot be bound; trying again on the next change");
                return Err(format!("listening on {address}: {e}"));
            }
        };
        let tls = match protocol {
            Protocol::Http => None,
            Protocol::Https => {
                let resolver =
                    SniResolver::new(self.routes.clone(), self.fallback.clone(), port, false);
                match server_config(Arc::new(resolver)) {
                    Ok(config) => Some(tokio_rustls::TlsAcceptor::from(config)),
                    Err(e) => {
                        warn!(%address, error = %e, "TLS configuration of a Gateway listener's port");
                        return Err(format!("TLS configuration of {address}: {e}"));
                    }
                }
            }
        };
        let (stop, stopping) = watch::channel(false);
        let config = ServeConfig::default();
        let served = match self.workers.serve(socket, tls, false, &config, &stopping) {
            Ok(served) => served,
            Err(e) => {
                warn!(%address, error = %e, "serving a Gateway listener's port");
                return Err(e.to_string());
            }
        };
        info!(%address, ?protocol, "serving a Gateway listener's port");
        self.running
            .insert((port, protocol), Running { stop, served });
        Ok(())
    }

    /// Drains every port it serves.
    pub(super) async fn stop_all(&mut self) {
        for (_, running) in std::mem::take(&mut self.running) {
            stop(running).await;
        }
    }
}

async fn stop(running: Running) {
    let _ = running.stop.send(true);
    running.served.finished().await;
}
