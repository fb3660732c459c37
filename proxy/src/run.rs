//! The watch and sync loop: Services and EndpointSlices in reflector stores; a change
//! wakes the loop, which waits out `--min-sync-period` since the last sync, computes the
//! desired state and has the backend apply the difference; every `--sync-period` the sync
//! is full, repairing drift. `/healthz` and `/livez` answer 200 while syncs succeed and
//! 503 once none has for two sync periods. Prometheus metrics (see [`crate::metrics`]) on
//! their own address.

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use cairn_serviceproxy::{desired_state, ProxyState};
use futures::StreamExt;
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::runtime::{reflector, watcher, WatchStreamExt};
use kube::{Api, Client};
use parking_lot::Mutex;
use tokio::sync::Notify;
use tracing::{error, info, info_span, warn};

use crate::backend::ProxyBackend;
use crate::conntrack::UdpCleanup;
use crate::health_check::HealthChecks;
use crate::metrics::{Change, Metrics, Pending, ProgrammingTracker, TRIGGER_TIME};
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

/// Drops what the proxy does not read from a cached object: managedFields, and every
/// annotation but `keep` (kubectl's last-applied copy alone can double a Service).
fn slim(meta: &mut ObjectMeta, keep: Option<&str>) {
    meta.managed_fields = None;
    let annotations = meta.annotations.take();
    meta.annotations = keep.and_then(|k| {
        let value = annotations?.remove(k)?;
        Some(BTreeMap::from([(k.to_string(), value)]))
    });
}

/// The label naming a slice's service (the only label the proxy reads).
const SERVICE_NAME_LABEL: &str = "kubernetes.io/service-name";

/// A cached Service: what `desired_state` reads (at 10,000 services the caches are most
/// of the proxy's memory).
fn slim_service(s: &mut Service) {
    slim(&mut s.metadata, None);
    drop_identity(&mut s.metadata);
    s.metadata.labels = None;
    if let Some(spec) = s.spec.as_mut() {
        spec.selector = None;
        spec.cluster_ips = None;
        spec.ip_families = None;
    }
    if let Some(status) = s.status.as_mut() {
        status.conditions = None;
    }
}

/// A cached EndpointSlice: addresses, conditions and node names of its endpoints.
fn slim_slice(s: &mut EndpointSlice) {
    slim(&mut s.metadata, Some(TRIGGER_TIME));
    drop_identity(&mut s.metadata);
    s.metadata.labels = s
        .metadata
        .labels
        .take()
        .and_then(|mut l| l.remove_entry(SERVICE_NAME_LABEL))
        .map(|(k, v)| BTreeMap::from([(k, v)]));
    for e in &mut s.endpoints {
        e.target_ref = None;
        e.hints = None;
        e.zone = None;
        e.hostname = None;
        e.deprecated_topology = None;
    }
}

fn drop_identity(meta: &mut ObjectMeta) {
    meta.uid = None;
    meta.creation_timestamp = None;
    meta.owner_references = None;
    meta.generate_name = None;
    meta.finalizers = None;
    meta.generation = None;
}

/// A reflector store of `api`'s objects, each slimmed by `slim_object`; every object the
/// watch touches is reported to `seen` and wakes `changed`.
fn watch<K>(
    api: Api<K>,
    changed: Arc<Notify>,
    seen: impl Fn() + Send + 'static,
    slim_object: fn(&mut K),
) -> reflector::Store<K>
where
    K: kube::Resource<DynamicType = ()>
        + Clone
        + std::fmt::Debug
        + serde::de::DeserializeOwned
        + Send
        + Sync
        + 'static,
{
    let (store, writer) = reflector::store();
    let events = watcher::watcher(api, watcher::Config::default()).modify(slim_object);
    let stream = reflector::reflector(writer, events)
        .default_backoff()
        .touched_objects();
    tokio::spawn(async move {
        let mut stream = std::pin::pin!(stream);
        while let Some(ev) = stream.next().await {
            match ev {
                Ok(_) => seen(),
                Err(e) => warn!(error = %e, "watch failed; re-listing"),
            }
            changed.notify_one();
        }
    });
    store
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
    services: reflector::Store<Service>,
    slices: reflector::Store<EndpointSlice>,
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
        let (svcs, eps) = (self.services.state(), self.slices.state());
        let pending = self.programming.pending(eps.iter().map(|s| s.as_ref()));
        let (desired, warnings) = desired_state(
            svcs.iter().map(|s| s.as_ref()),
            eps.iter().map(|s| s.as_ref()),
            &self.node_name,
        );
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
    let metrics = Arc::new(Metrics::new());
    let services = watch(
        Api::<Service>::all(client.clone()),
        changed.clone(),
        count(&metrics, Change::Service),
        slim_service,
    );
    let slices = watch(
        Api::<EndpointSlice>::all(client),
        changed.clone(),
        count(&metrics, Change::EndpointSlice),
        slim_slice,
    );
    let health = Arc::new(Health::default());
    if let Some(addr) = config.healthz {
        serve_health(addr, health.clone(), config.sync_period * 2).await?;
    }
    if let Some(addr) = config.metrics {
        let bound = crate::metrics::serve(addr, metrics.clone()).await?;
        info!(%bound, "serving metrics");
    }
    // Wait for both lists, so the first sync is not made from half a cluster.
    let _ = services.wait_until_ready().await;
    let _ = slices.wait_until_ready().await;
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
    loop {
        let full = last_full.is_none_or(|t| t.elapsed() >= config.sync_period);
        let started = Instant::now();
        let wait = match syncer.sync(full).await {
            Some(was_full) => {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn meta(annotations: &[(&str, &str)]) -> ObjectMeta {
        let annotations = annotations
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        ObjectMeta {
            annotations: Some(annotations),
            managed_fields: Some(Vec::new()),
            ..Default::default()
        }
    }

    #[test]
    fn slim_keeps_only_the_trigger_time() {
        let both = [
            (TRIGGER_TIME, "2025-01-01T00:00:00Z"),
            ("kubectl.kubernetes.io/last-applied-configuration", "{}"),
        ];
        let mut m = meta(&both);
        slim(&mut m, Some(TRIGGER_TIME));
        assert_eq!(m.managed_fields, None);
        let want = BTreeMap::from([(TRIGGER_TIME.to_string(), both[0].1.to_string())]);
        assert_eq!(m.annotations, Some(want));

        let mut m = meta(&both[1..]);
        slim(&mut m, Some(TRIGGER_TIME));
        assert_eq!(m.annotations, None);

        let mut m = meta(&both);
        slim(&mut m, None);
        assert_eq!(m.annotations, None);
    }
}
