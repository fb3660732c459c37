//! Prometheus metrics on `--metrics-bind-address` (`GET /metrics`), with kube-proxy's names
//! and types where kube-proxy has the metric, `cairn_proxy_*` where it does not. Served
//! in the OpenMetrics text format (what `prometheus-client` writes, and Prometheus
//! negotiates by default): counters are declared without their `_total` suffix there, the
//! samples carry it, so series are named as kube-proxy's.

use std::net::SocketAddr;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::response::IntoResponse;
use cairn_serviceproxy::ProxyState;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, linear_buckets, Histogram};
use prometheus_client::registry::Registry;
use tracing::error;

use crate::backend::SyncReport;

mod programming;

pub use programming::{Pending, ProgrammingTracker, TRIGGER_TIME};

/// The OpenMetrics text format's content type.
const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

#[derive(Debug, thiserror::Error)]
pub enum MetricsError {
    #[error("binding the metrics server on {addr}: {source}")]
    Bind {
        addr: SocketAddr,
        source: std::io::Error,
    },
}

/// What a watch event was about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change {
    Service,
    EndpointSlice,
}

type PolicyLabel = [(&'static str, &'static str); 1];
const INTERNAL: PolicyLabel = [("traffic_policy", "internal")];
const EXTERNAL: PolicyLabel = [("traffic_policy", "external")];

/// The proxy's metrics and their registry.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    sync_duration: Histogram,
    full_duration: Histogram,
    partial_duration: Histogram,
    last_sync: Gauge<f64, AtomicU64>,
    last_queued: Gauge<f64, AtomicU64>,
    network_programming: Histogram,
    endpoint_changes: Counter,
    service_changes: Counter,
    no_local_endpoints: Family<PolicyLabel, Gauge>,
    sync_failures: Counter,
    service_ports: Gauge,
    full_syncs: Counter,
    partial_syncs: Counter,
}

/// kube-proxy's sync buckets: 1 ms doubling to about 16 s.
fn sync_buckets() -> Histogram {
    Histogram::new(exponential_buckets(0.001, 2.0, 15))
}

/// kube-proxy's network programming buckets: 0 (upstream's merge starts with it), 0.25 s,
/// 0.5 s, each second to 59 s, every 5 s to 115 s, every 30 s to 5 min.
fn programming_buckets() -> Histogram {
    let buckets = std::iter::once(0.0)
        .chain(linear_buckets(0.25, 0.25, 2))
        .chain(linear_buckets(1.0, 1.0, 59))
        .chain(linear_buckets(60.0, 5.0, 12))
        .chain(linear_buckets(120.0, 30.0, 7));
    Histogram::new(buckets)
}

/// Seconds since the Unix epoch.
fn unix_now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

fn gauge_count(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    pub fn new() -> Self {
        let m = Metrics {
            registry: Registry::default(),
            sync_duration: sync_buckets(),
            full_duration: sync_buckets(),
            partial_duration: sync_buckets(),
            last_sync: Gauge::default(),
            last_queued: Gauge::default(),
            network_programming: programming_buckets(),
            endpoint_changes: Counter::default(),
            service_changes: Counter::default(),
            no_local_endpoints: Family::default(),
            sync_failures: Counter::default(),
            service_ports: Gauge::default(),
            full_syncs: Counter::default(),
            partial_syncs: Counter::default(),
        };
        // Both series from the start, at 0.
        m.no_local_endpoints.get_or_create(&INTERNAL).set(0);
        m.no_local_endpoints.get_or_create(&EXTERNAL).set(0);
        m.register()
    }

    fn register(mut self) -> Self {
        let r = &mut self.registry;
        r.register(
            "kubeproxy_sync_proxy_rules_duration_seconds",
            "SyncProxyRules latency in seconds",
            self.sync_duration.clone(),
        );
        r.register(
            "kubeproxy_sync_full_proxy_rules_duration_seconds",
            "SyncProxyRules latency in seconds for full resyncs",
            self.full_duration.clone(),
        );
        r.register(
            "kubeproxy_sync_partial_proxy_rules_duration_seconds",
            "SyncProxyRules latency in seconds for partial resyncs",
            self.partial_duration.clone(),
        );
        r.register(
            "kubeproxy_sync_proxy_rules_last_timestamp_seconds",
            "The last time proxy rules were successfully synced",
            self.last_sync.clone(),
        );
        r.register(
            "kubeproxy_sync_proxy_rules_last_queued_timestamp_seconds",
            "The last time a sync of proxy rules was queued",
            self.last_queued.clone(),
        );
        r.register(
            "kubeproxy_network_programming_duration_seconds",
            "In Cluster Network Programming Latency in seconds",
            self.network_programming.clone(),
        );
        r.register(
            "kubeproxy_sync_proxy_rules_endpoint_changes",
            "Cumulative proxy rules Endpoint changes",
            self.endpoint_changes.clone(),
        );
        r.register(
            "kubeproxy_sync_proxy_rules_service_changes",
            "Cumulative proxy rules Service changes",
            self.service_changes.clone(),
        );
        r.register(
            "kubeproxy_sync_proxy_rules_no_local_endpoints_total",
            "Number of services with a Local traffic policy and no endpoints",
            self.no_local_endpoints.clone(),
        );
        r.register(
            "cairn_proxy_sync_failures",
            "Syncs the backend failed (each is retried as a full sync)",
            self.sync_failures.clone(),
        );
        r.register(
            "cairn_proxy_service_ports",
            "Service ports in the desired state",
            self.service_ports.clone(),
        );
        r.register(
            "cairn_proxy_full_syncs",
            "Successful syncs that rewrote every service port",
            self.full_syncs.clone(),
        );
        r.register(
            "cairn_proxy_partial_syncs",
            "Successful syncs that rewrote only the changed service ports",
            self.partial_syncs.clone(),
        );
        self
    }

    /// A watch event: counted, and a sync is queued.
    pub fn changed(&self, kind: Change) {
        match kind {
            Change::Service => self.service_changes.inc(),
            Change::EndpointSlice => self.endpoint_changes.inc(),
        };
        self.queued();
    }

    /// A sync was asked for.
    pub fn queued(&self) {
        self.last_queued.set(unix_now());
    }

    /// A successful sync that took `took`.
    pub fn observe_sync(&self, report: &SyncReport, took: Duration) {
        let secs = took.as_secs_f64();
        self.sync_duration.observe(secs);
        if report.full {
            self.full_duration.observe(secs);
            self.full_syncs.inc();
        } else {
            self.partial_duration.observe(secs);
            self.partial_syncs.inc();
        }
        self.last_sync.set(unix_now());
    }

    /// A failed sync that took `took`.
    pub fn observe_failure(&self, took: Duration) {
        self.sync_duration.observe(took.as_secs_f64());
        self.sync_failures.inc();
    }

    /// The desired state a sync computed: its size and its Local ports with no local
    /// endpoints.
    pub fn observe_state(&self, state: &ProxyState) {
        let without_local = state.values().filter(|e| e.local_count == 0);
        let (mut internal, mut external) = (0, 0);
        for e in without_local {
            internal += usize::from(e.port.internal_local);
            external += usize::from(e.port.external_local);
        }
        let set = |label: &PolicyLabel, n| self.no_local_endpoints.get_or_create(label).set(n);
        set(&INTERNAL, gauge_count(internal));
        set(&EXTERNAL, gauge_count(external));
        self.service_ports.set(gauge_count(state.len()));
    }

    /// Network programming latencies of the slice changes a sync programmed.
    pub fn observe_programming(&self, latencies: &[Duration]) {
        for l in latencies {
            self.network_programming.observe(l.as_secs_f64());
        }
    }

    /// Adds metrics read at each scrape (the policy drop counters).
    pub fn register_collector(
        &mut self,
        collector: Box<dyn prometheus_client::collector::Collector>,
    ) {
        self.registry.register_collector(collector);
    }

    /// The Ingress data plane's request metrics (`cairn_ingress_*`).
    pub fn register_ingress(&mut self, ingress: &cairn_ingress_proxy::RequestMetrics) {
        ingress.register(&mut self.registry);
    }

    /// The exposition, in the OpenMetrics text format.
    pub fn encode(&self) -> Result<String, std::fmt::Error> {
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &self.registry)?;
        Ok(out)
    }
}

fn answer(metrics: &Metrics) -> axum::response::Response {
    use axum::http::{header, StatusCode};
    match metrics.encode() {
        Ok(body) => ([(header::CONTENT_TYPE, CONTENT_TYPE)], body).into_response(),
        Err(e) => {
            error!(error = %e, "encoding the metrics");
            StatusCode::INTERNAL_SERVER_ERROR.into_response()
        }
    }
}

/// Serves `/metrics` and `routes` on `addr` from a task; returns the address bound
/// (`addr` with the port chosen, where it asked for port 0).
pub async fn serve(
    addr: SocketAddr,
    metrics: Arc<Metrics>,
    routes: axum::Router,
) -> Result<SocketAddr, MetricsError> {
    let bind_error = |source| MetricsError::Bind { addr, source };
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(bind_error)?;
    let bound = listener.local_addr().map_err(bind_error)?;
    let app = routes.route(
        "/metrics",
        axum::routing::get(move || {
            let metrics = metrics.clone();
            // Collectors may read the kernel (the policy drop counters): not on a worker.
            async move {
                tokio::task::spawn_blocking(move || answer(&metrics))
                    .await
                    .unwrap_or_else(|e| {
                        error!(error = %e, "encoding the metrics");
                        axum::http::StatusCode::INTERNAL_SERVER_ERROR.into_response()
                    })
            }
        }),
    );
    tokio::spawn(async move {
        if let Err(e) = axum::serve(listener, app).await {
            error!(error = %e, "metrics server stopped");
        }
    });
    Ok(bound)
}

#[cfg(test)]
mod tests;
