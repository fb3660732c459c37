//! The node's Ingress and Gateway API data plane (issue 33), beside the service proxy:
//! reflectors of Ingresses, IngressClasses, Services, EndpointSlices and TLS Secrets, and
//! of GatewayClasses, Gateways, HTTPRoutes, ReferenceGrants (while their CRDs are absent
//! their stores stay empty) and Namespaces; on any change the whole snapshot is built
//! again (`cairn-ingress-proxy`) and swapped in as one pointer. Gateway listeners on the
//! Ingress ports share those listeners (a request no HTTPRoute claims goes to the Ingress
//! routes); other ports are bound while a listener names them ([`ports`]).
//! The listeners are bound at start (a port in use is one clear error) but serve only
//! once the first snapshot is in, so a restarted proxy never answers 404 for routes it
//! has not read yet: connections wait in the listen backlog meanwhile.

use std::collections::BTreeSet;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;

use cairn_events::{EventType, Note, Recorder};
use cairn_ingress::gateway::Protocol;
use cairn_ingress_proxy::{
    bind_listener, default_certificate, server_config, ForwardConfig, Problem, Routes, ServeConfig,
    SniResolver, Workers, WorkersError,
};
use kube::runtime::reflector::ObjectRef;
use kube::runtime::watcher;
use kube::Api;
use tokio::sync::{watch, Notify};
use tokio::task::JoinSet;
use tracing::{info, warn};

use crate::follow::{follow, follow_optional};

mod picked;
mod ports;
mod stores;

pub use picked::run_where_picked;

use ports::{Ports, Unavailable};
use stores::{GatewayStores, Stores};

#[derive(Debug, thiserror::Error)]
pub enum IngressError {
    #[error("ingress: listening on {address}: {source}")]
    Bind {
        address: SocketAddr,
        source: std::io::Error,
    },
    #[error("ingress: the default certificate: {0}")]
    Certificate(#[from] cairn_ingress_proxy::CertificateError),
    #[error("ingress: TLS configuration: {0}")]
    Tls(#[from] rustls::Error),
    #[error("ingress: the {0} watch ended before its first list: {1}")]
    Watch(&'static str, String),
    #[error("ingress: {0}")]
    Workers(#[from] WorkersError),
}

/// Where the data plane listens (`None`: that listener is off), on how many threads.
#[derive(Debug, Clone, Default)]
pub struct IngressConfig {
    pub http: Option<SocketAddr>,
    pub https: Option<SocketAddr>,
    /// 0: one per core.
    pub workers: usize,
    /// Where the data plane counts its requests (the proxy's `/metrics` serves them).
    pub metrics: cairn_ingress_proxy::RequestMetrics,
}

/// A listening socket for the workers (bound here, so a port in use is one error).
fn bind(address: Option<SocketAddr>) -> Result<Option<std::net::TcpListener>, IngressError> {
    let Some(address) = address else {
        return Ok(None);
    };
    let failed = |source| IngressError::Bind { address, source };
    // One socket per worker on the port (`SO_REUSEPORT`): no herd of woken workers.
    bind_listener(address).map(Some).map_err(failed)
}

fn start_stores(client: &kube::Client, notify: &Arc<Notify>) -> Stores {
    let all = watcher::Config::default;
    let tls = all().fields("type=kubernetes.io/tls");
    let mut watches = JoinSet::new();
    let w = &mut watches;
    Stores {
        ingresses: follow(Api::all(client.clone()), all(), notify, "ingresses", w),
        classes: follow(Api::all(client.clone()), all(), notify, "ingressclasses", w),
        services: follow(Api::all(client.clone()), all(), notify, "services", w),
        slices: follow(Api::all(client.clone()), all(), notify, "endpointslices", w),
        secrets: follow(Api::all(client.clone()), tls, notify, "secrets", w),
        gateway: gateway_stores(client, notify, w),
        _watches: watches,
    }
}

fn gateway_stores(
    client: &kube::Client,
    notify: &Arc<Notify>,
    w: &mut JoinSet<()>,
) -> GatewayStores {
    let (classes, a) = follow_optional(Api::all(client.clone()), notify, "gatewayclasses", w);
    let (gateways, b) = follow_optional(Api::all(client.clone()), notify, "gateways", w);
    let (routes, c) = follow_optional(Api::all(client.clone()), notify, "httproutes", w);
    let (grants, d) = follow_optional(Api::all(client.clone()), notify, "referencegrants", w);
    let all = watcher::Config::default();
    GatewayStores {
        classes,
        gateways,
        routes,
        grants,
        namespaces: follow(Api::all(client.clone()), all, notify, "namespaces", w),
        listed: vec![a, b, c, d],
    }
}

async fn wait_until_ready(stores: &Stores) -> Result<(), IngressError> {
    for (what, ready) in [
        ("ingresses", stores.ingresses.wait_until_ready().await),
        ("ingressclasses", stores.classes.wait_until_ready().await),
        ("services", stores.services.wait_until_ready().await),
        ("endpointslices", stores.slices.wait_until_ready().await),
        ("secrets", stores.secrets.wait_until_ready().await),
        (
            "namespaces",
            stores.gateway.namespaces.wait_until_ready().await,
        ),
    ] {
        ready.map_err(|e| IngressError::Watch(what, e.to_string()))?;
    }
    for listed in &stores.gateway.listed {
        let _ = listed.clone().wait_for(|l| *l).await;
    }
    Ok(())
}

/// Runs until `shutdown` completes, then drains open connections.
pub async fn run(
    client: kube::Client,
    config: IngressConfig,
    shutdown: impl Future<Output = ()>,
) -> Result<(), IngressError> {
    let http = bind(config.http)?;
    let https = bind(config.https)?;
    let routes = Arc::new(Routes::default());
    let fallback = Arc::new(default_certificate()?);
    let https_port = config.https.map_or(0, |a| a.port());
    let resolver = Arc::new(SniResolver::new(
        routes.clone(),
        fallback.clone(),
        https_port,
        true,
    ));
    let acceptor = tokio_rustls::TlsAcceptor::from(server_config(resolver)?);
    let notify = Arc::new(Notify::new());
    let stores = start_stores(&client, &notify);
    wait_until_ready(&stores).await?;
    let mut reported = BTreeSet::new();
    let events = Recorder::start(client.clone(), "cairn-ingress");
    let publish =
        |reported: &mut BTreeSet<(String, String)>| publish(&stores, &routes, reported, &events);
    publish(&mut reported);
    info!(http = ?config.http, https = ?config.https, "ingress data plane in sync; serving");
    let forwarding = ForwardConfig {
        metrics: config.metrics.clone(),
        ..ForwardConfig::default()
    };
    let workers = Workers::start(config.workers, &routes, &forwarding)?;
    let workers = Arc::new(workers);
    let (stop, stopping) = watch::channel(false);
    let mut servers = Vec::new();
    let listeners = [(http, None), (https, Some(acceptor))];
    for (socket, tls) in listeners {
        let Some(socket) = socket else { continue };
        servers.push(workers.serve(socket, tls, true, &ServeConfig::default(), &stopping)?);
    }
    let mut ports = extra_ports(&config, &routes, &workers, fallback);
    let unavailable = ports.sync().await;
    tell_unavailable(&stores, &routes, &events, &unavailable);
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            _ = &mut shutdown => break,
            _ = notify.notified() => {
                publish(&mut reported);
                let unavailable = ports.sync().await;
                tell_unavailable(&stores, &routes, &events, &unavailable);
            }
        }
    }
    let _ = stop.send(true);
    ports.stop_all().await;
    for server in servers {
        server.finished().await;
    }
    Ok(())
}

/// A port this node could not bind is a Warning event on each Gateway with a listener
/// on it (upstream's listener reason `PortUnavailable`): the controller's `Programmed`
/// speaks for the cluster, the event for this node.
fn tell_unavailable(
    stores: &Stores,
    routes: &Routes,
    events: &Recorder,
    unavailable: &[Unavailable],
) {
    let snapshot = routes.current();
    for port in unavailable {
        let gateways: BTreeSet<&(String, String)> = snapshot
            .gateways
            .iter()
            .filter(|l| l.port == port.port)
            .map(|l| &l.gateway)
            .collect();
        for (namespace, name) in gateways {
            let key = ObjectRef::new(name).within(namespace);
            let Some(gateway) = stores.gateway.gateways.get(&key) else {
                continue;
            };
            let note = Note {
                kind: EventType::Warning,
                reason: "PortUnavailable",
                message: &port.message,
                action: "Bind",
            };
            events.record(cairn_events::reference(gateway.as_ref()), &note);
        }
    }
}

/// The Gateway listeners' ports beyond the Ingress listeners', bound on the Ingress
/// HTTP listener's address.
fn extra_ports(
    config: &IngressConfig,
    routes: &Arc<Routes>,
    workers: &Arc<Workers>,
    fallback: Arc<rustls::sign::CertifiedKey>,
) -> Ports {
    let host = config
        .http
        .or(config.https)
        .map_or(std::net::IpAddr::from([0, 0, 0, 0]), |a| a.ip());
    let mut fixed = Vec::new();
    fixed.extend(config.http.map(|a| (a.port(), Protocol::Http)));
    fixed.extend(config.https.map(|a| (a.port(), Protocol::Https)));
    Ports::new(host, fixed, routes.clone(), workers.clone(), fallback)
}

/// Builds the snapshot, swaps it in, and logs what it could not serve once per problem.
/// A certificate this node cannot serve is also a Warning event on the Ingress (the
/// control plane's `ingress` controller reports conflicts and missing Services; only the
/// data plane reads the Secrets' contents).
fn publish(
    stores: &Stores,
    routes: &Routes,
    reported: &mut BTreeSet<(String, String)>,
    events: &Recorder,
) {
    let (snapshot, problems) = stores.snapshot();
    routes.replace(snapshot);
    let now: BTreeSet<(String, String)> = problems.iter().map(problem_key).collect();
    for problem in problems
        .iter()
        .filter(|p| !reported.contains(&problem_key(p)))
    {
        warn!(ingress = %problem.ingress, reason = problem.reason, "{}", problem.message);
        if problem.reason != "InvalidCertificate" {
            continue;
        }
        let key = ObjectRef::new(&problem.ingress.name).within(&problem.ingress.namespace);
        if let Some(ingress) = stores.ingresses.get(&key) {
            let note = Note {
                kind: EventType::Warning,
                reason: problem.reason,
                message: &problem.message,
                action: "LoadCertificate",
            };
            events.record(cairn_events::reference(ingress.as_ref()), &note);
        }
    }
    *reported = now;
}

fn problem_key(p: &Problem) -> (String, String) {
    (p.ingress.to_string(), p.message.clone())
}
