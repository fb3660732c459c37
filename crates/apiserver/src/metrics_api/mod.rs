//! `metrics.k8s.io/v1beta1` served in the API server itself, so `kubectl top` works on a
//! fresh cluster with no metrics-server: a scraper reads every Ready node's
//! `/metrics/resource` every `--metric-resolution` (15 s, metrics-server's period) into a
//! [`MetricsStore`] (`cairn-resourcemetrics`), and NodeMetrics and PodMetrics are
//! answered from it, with the labels of the Node and Pod objects in the cache.

mod handler;
mod scraper;

use std::sync::{Mutex, MutexGuard};

use cairn_api::registry::ResourceInfo;
use cairn_resourcemetrics::MetricsStore;

pub use handler::serve;
pub use scraper::scrape_loop;

pub const GROUP: &str = "metrics.k8s.io";
pub const VERSION: &str = "v1beta1";

/// The last scrapes of every node, shared by the scraper and the handler.
#[derive(Debug, Default)]
pub struct ResourceMetrics(Mutex<MetricsStore>);

impl ResourceMetrics {
    /// The store. A panic elsewhere while it was held left readings, not broken
    /// invariants: keep serving them.
    pub fn store(&self) -> MutexGuard<'_, MetricsStore> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// NodeMetrics and PodMetrics: read-only, never stored, listed in discovery as
/// metrics-server's APIService lists them.
pub static RESOURCES: [ResourceInfo; 2] = [
    metrics_resource("NodeMetrics", "nodes", false),
    metrics_resource("PodMetrics", "pods", true),
];

const fn metrics_resource(
    kind: &'static str,
    plural: &'static str,
    namespaced: bool,
) -> ResourceInfo {
    ResourceInfo::unstored(GROUP, VERSION, kind, plural, namespaced, &["get", "list"])
}
