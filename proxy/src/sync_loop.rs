//! The watch and sync loop: Services and EndpointSlices in compact caches ([`crate::cache`]); a change
//! wakes the loop, which waits out `--min-sync-period` since the last sync, computes the
//! desired state and has the backend apply the difference; every `--sync-period` the sync
//! is full, repairing drift. `/healthz` and `/livez` answer 200 while syncs succeed and
//! 503 once none has for two sync periods. Prometheus metrics (see [`crate::metrics`]) on
//! their own address.

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use cairn_serviceproxy::source::{ServiceSource, SliceSource};
use cairn_serviceproxy::{desired_state_from, ProxyState};
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::{Api, Client};
use parking_lot::Mutex;
use tokio::sync::Notify;
use tracing::{error, info, info_span, warn};

use crate::backend::ProxyBackend;
use crate::cache::{watch, Cache};
use crate::conntrack::UdpCleanup;
use crate::health_check::HealthChecks;
use crate::metrics::{Change, Metrics, Pending, ProgrammingTracker};
use cairn_netfilter::conntrack::ConntrackNetlink;

#[derive(Debug, Clone)]
pub struct ProxyConfig {
    pub node_name: String,
    pub min_sync_period: Duration,
    pub sync_period: Duration,
    pub healthz: Option<SocketAddr>,
    /// `/metrics`.
    pub metrics: Option<SocketAddr>,
    /// Remove stale UDP conntrack flows after syncs (off only to show what they break).
    pub conntrack_cleanup: bool,
    /// The policy controller's view, served beside the metrics (when it runs).
    pub network_policy: Option<Arc<crate::netpol::Observed>>,
    /// The Ingress data plane's request metrics, served beside the proxy's (when it runs).
    pub ingress_metrics: Option<cairn_ingress_proxy::RequestMetrics>,
}

#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error("binding the health server on {addr}: {source}")]
    Bind {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error(transparent)]
    Metrics(#[from] crate::metrics::MetricsError),
}

/// When the last sync succeeded, for the health endpoints.
#[derive(Default)]
struct Health {
    last_success: Mutex<Option<Instant>>,
}

async fn serve_health(
    addr: SocketAddr,
    health: Arc<Health>,
    window: Duration,
) -> Result<(), RunError> {
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|source| RunError::Bind { addr, source })?;
    let answer = move || {
        let health = health.clone();
        async move {
            let fresh = health
                .last_success
                .lock()
                .is_some_and(|t| t.elapsed() < window);
            if fresh {
                (axum::http::StatusCode::OK, "ok")
            } else {
                (
                    axum::http::StatusCode::SERVICE_UNAVAILABLE,
                    "no successful sync recently",
                )
            }
        }
    };
    let app = axum::Router::new()
        .route("/healthz", axum::routing::get(answer.clone()))
        .route("/livez", axum::routing::get(answer));
    tokio::spawn(async move {
        if let Err(e) = axum::serve(listener, app).await {
            error!(error = %e, "health server stopped");
        }
    });
    Ok(())
}

/// What the sync loop carries from one sync to the next.
struct Syncer {
    node_name: String,
    backend: Box<dyn ProxyBackend>,
    services: Arc<Cache<ServiceSource>>,
    slices: Arc<Cache<SliceSource>>,
    health: Arc<Health>,
    metrics: Arc<Metrics>,
    programming: ProgrammingTracker,
    health_checks: HealthChecks,
    conntrack: Option<UdpCleanup>,
    last_warnings: BTreeSet<String>,
}

impl Syncer {
    /// The desired state from the stores, and the slice changes it brings.
    fn desired(&self) -> (ProxyState, Vec<String>, Pending) {
        let (svcs, eps) = (self.services.read(), self.slices.read());
        let pending = self.programming.pending(eps.values());
        let (desired, warnings) = desired_state_from(svcs.values(), eps.values(), &self.node_name);
        (desired, warnings, pending)
    }

    /// One sync; `Some(full)` when it succeeded (`full`: it rewrote everything).
    async fn sync(&mut self, full: bool) -> Option<bool> {
        let started = Instant::now();
        let (desired, mut warnings, pending) = self.desired();
        self.metrics.observe_state(&desired);
        let span = info_span!("sync", full, services = desired.len());
        let backend = &mut self.backend;
        let result = span.in_scope(|| tokio::task::block_in_place(|| backend.sync(&desired, full)));
        let took = started.elapsed();
        let outcome = match result {
            Ok(report) => {
                self.metrics.observe_sync(&report, took);
                let latencies = self.programming.programmed(pending, SystemTime::now());
                self.metrics.observe_programming(&latencies);
                *self.health.last_success.lock() = Some(Instant::now());
                self.health_checks.sync(&desired).await;
                self.clean_conntrack(&desired);
                if report.written > 0 {
                    info!(
                        full = report.full,
                        written = report.written,
                        took_ms = took.as_millis() as u64,
                        "synced"
                    );
                }
                warnings.extend(report.warnings);
                Some(report.full)
            }
            Err(e) => {
                self.metrics.observe_failure(took);
                error!(error = %e, "sync failed; retrying with a full sync");
                None
            }
        };
        self.log_new(warnings);
        outcome
    }

    fn clean_conntrack(&mut self, desired: &ProxyState) {
        let Some(conntrack) = &mut self.conntrack else {
            return;
        };
        match tokio::task::block_in_place(|| conntrack.after_sync(desired)) {
            Ok(0) => {}
            Ok(deleted) => info!(deleted, "removed stale UDP conntrack flows"),
            Err(e) => {
                warn!(error = %e, "removing stale UDP conntrack flows; retried after the next sync")
            }
        }
    }

    /// Logs the warnings the last sync did not have.
    fn log_new(&mut self, warnings: Vec<String>) {
        let now: BTreeSet<String> = warnings.into_iter().collect();
        for w in now.difference(&self.last_warnings) {
            warn!("{w}");
        }
        self.last_warnings = now;
    }
}

/// The watch callback counting `kind`'s events.
fn count(metrics: &Arc<Metrics>, kind: Change) -> impl Fn() + Send + 'static {
    let metrics = metrics.clone();
    move || metrics.changed(kind)
}

/// Runs until the process stops.
pub async fn run(
    client: Client,
    config: ProxyConfig,
    backend: Box<dyn ProxyBackend>,
) -> Result<(), RunError> {
    let started = SystemTime::now();
    let changed = Arc::new(Notify::new());
    let mut metrics = Metrics::new();
    let mut routes = axum::Router::new();
    if let Some(observed) = &config.network_policy {
        metrics.register_collector(Box::new(observed.clone()));
        routes = crate::netpol::routes(observed.clone());
    }
    if let Some(ingress) = &config.ingress_metrics {
        metrics.register_ingress(ingress);
    }
    let metrics = Arc::new(metrics);
    let services = watch(
        Api::<Service>::all(client.clone()),
        changed.clone(),
        count(&metrics, Change::Service),
        |s: &Service| Some(ServiceSource::from_service(s)),
    );
    let slices = watch(
        Api::<EndpointSlice>::all(client),
        changed.clone(),
        count(&metrics, Change::EndpointSlice),
        SliceSource::from_slice,
    );
    let health = Arc::new(Health::default());
    if let Some(addr) = config.healthz {
        serve_health(addr, health.clone(), config.sync_period * 2).await?;
    }
    if let Some(addr) = config.metrics {
        let bound = crate::metrics::serve(addr, metrics.clone(), routes).await?;
        info!(%bound, "serving metrics");
    }
    // Wait for both lists, so the first sync is not made from half a cluster.
    services.wait_until_ready().await;
    slices.wait_until_ready().await;
    let syncer = Syncer {
        node_name: config.node_name.clone(),
        backend,
        services,
        slices,
        health,
        metrics,
        programming: ProgrammingTracker::new(started),
        health_checks: HealthChecks::default(),
        conntrack: config
            .conntrack_cleanup
            .then(|| UdpCleanup::new(Arc::new(ConntrackNetlink::new()))),
        last_warnings: BTreeSet::new(),
    };
    sync_loop(syncer, &config, &changed).await;
    Ok(())
}

/// Syncs on changes and every sync period, at most once per min sync period; a failed
/// sync is retried as a full one, backing off 1 s doubling to the sync period.
async fn sync_loop(mut syncer: Syncer, config: &ProxyConfig, changed: &Notify) {
    let mut last_full: Option<Instant> = None;
    let mut failures = 0u32;
    let mut notified = false;
    let _watchdog = cairn_systemd::spawn_watchdog();
    loop {
        let full = last_full.is_none_or(|t| t.elapsed() >= config.sync_period);
        let started = Instant::now();
        let wait = match syncer.sync(full).await {
            Some(was_full) => {
                if !notified {
                    // The first rules are programmed: Services work on this node.
                    cairn_systemd::ready("service rules programmed");
                    notified = true;
                }
                if was_full {
                    last_full = Some(started);
                }
                failures = 0;
                last_full.map_or(Duration::ZERO, |t| {
                    config.sync_period.saturating_sub(t.elapsed())
                })
            }
            None => {
                last_full = None;
                failures += 1;
                Duration::from_secs(1u64 << failures.min(16)).min(config.sync_period)
            }
        };
        tokio::select! {
            _ = changed.notified() => {}
            _ = tokio::time::sleep(wait) => {}
        }
        // Rate limit: at most one sync per min period, changes batched meanwhile.
        let since = started.elapsed();
        if since < config.min_sync_period {
            tokio::time::sleep(config.min_sync_period - since).await;
        }
    }
}
