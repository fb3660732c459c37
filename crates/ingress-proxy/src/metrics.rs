//! What the data plane counts, for Prometheus (served on the proxy's `/metrics`):
//! requests by backend Service and response status, as Traefik's `service` metrics and
//! ingress-nginx's `requests` counter label them, and the time to the response's headers.
//!
//! - `cairn_ingress_requests_total{namespace, service, code}`: every response the data
//!   plane gave; `namespace` and `service` are empty when no Service was chosen (no rule
//!   matched: 404; a redirect; a routed Service with nothing to send to: 503, whose body
//!   names it).
//! - `cairn_ingress_request_duration_seconds`: from the request's headers to the
//!   response's, with Prometheus's default buckets (ingress-nginx's): the body streams
//!   after.
//!
//! A backend's labels are made once per snapshot (`Arc<str>`), and each worker counts
//! into its own shard, summed when `/metrics` is read: a shared counter or histogram
//! lock made every request of both workers contend for the same cache lines, which cost
//! 3-5 % of keep-alive throughput in `benches/ingress_rate.rs`.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use http::StatusCode;
use parking_lot::Mutex;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Registry;

/// A backend Service's name, as its requests are labelled.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct ServiceName {
    pub namespace: Arc<str>,
    pub name: Arc<str>,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, EncodeLabelSet)]
struct RequestLabels {
    namespace: Arc<str>,
    service: Arc<str>,
    code: u16,
}

/// Prometheus's default histogram buckets, which ingress-nginx uses for its request
/// durations (and `+Inf` after them).
const BUCKETS: [f64; 11] = [
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];

/// One worker's counts.
#[derive(Debug, Default)]
struct Shard {
    requests: Mutex<HashMap<RequestLabels, u64>>,
    /// Per bucket (not cumulative), the last one `+Inf`.
    buckets: [AtomicU64; BUCKETS.len() + 1],
    /// Microseconds: an integer, so adding needs no compare-and-swap loop.
    sum_micros: AtomicU64,
}

/// The data plane's request metrics; clones share them. Each worker counts through its
/// own [`RequestCounter`].
#[derive(Debug, Clone, Default)]
pub struct RequestMetrics {
    shards: Arc<Mutex<Vec<Arc<Shard>>>>,
}

/// Where one worker counts its requests.
#[derive(Debug)]
pub struct RequestCounter {
    shard: Arc<Shard>,
    /// The empty labels of a response no Service gave, made once, not per request.
    unrouted: ServiceName,
}

impl RequestCounter {
    /// Counts one response.
    pub fn record(&self, service: Option<&ServiceName>, code: StatusCode, took: Duration) {
        let service = service.unwrap_or(&self.unrouted);
        let labels = RequestLabels {
            namespace: service.namespace.clone(),
            service: service.name.clone(),
            code: code.as_u16(),
        };
        *self.shard.requests.lock().entry(labels).or_default() += 1;
        let seconds = took.as_secs_f64();
        let bucket = BUCKETS
            .iter()
            .position(|b| seconds <= *b)
            .unwrap_or(BUCKETS.len());
        self.shard.buckets[bucket].fetch_add(1, Ordering::Relaxed);
        let micros = u64::try_from(took.as_micros()).unwrap_or(u64::MAX);
        self.shard.sum_micros.fetch_add(micros, Ordering::Relaxed);
    }
}

/// Every shard's counts summed: by labels, per bucket, and the sum in seconds.
struct Totals {
    requests: BTreeMap<RequestLabels, u64>,
    buckets: [u64; BUCKETS.len() + 1],
    sum: f64,
}

impl RequestMetrics {
    /// A counter for one more worker.
    pub fn counter(&self) -> RequestCounter {
        let shard = Arc::new(Shard::default());
        self.shards.lock().push(shard.clone());
        RequestCounter {
            shard,
            unrouted: ServiceName::default(),
        }
    }

    /// How many responses with `code` came from `namespace/service` (empty: none chosen).
    pub fn requests(&self, namespace: &str, service: &str, code: u16) -> u64 {
        let labels = RequestLabels {
            namespace: namespace.into(),
            service: service.into(),
            code,
        };
        self.totals().requests.get(&labels).copied().unwrap_or(0)
    }

    fn totals(&self) -> Totals {
        let mut totals = Totals {
            requests: BTreeMap::new(),
            buckets: [0; BUCKETS.len() + 1],
            sum: 0.0,
        };
        let mut micros = 0u64;
        for shard in self.shards.lock().iter() {
            for (labels, count) in shard.requests.lock().iter() {
                *totals.requests.entry(labels.clone()).or_default() += count;
            }
            for (total, bucket) in totals.buckets.iter_mut().zip(&shard.buckets) {
                *total += bucket.load(Ordering::Relaxed);
            }
            micros = micros.saturating_add(shard.sum_micros.load(Ordering::Relaxed));
        }
        totals.sum = micros as f64 / 1e6;
        totals
    }

    /// Adds the metrics to `registry`.
    pub fn register(&self, registry: &mut Registry) {
        registry.register_collector(Box::new(self.clone()));
    }
}

impl Collector for RequestMetrics {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let totals = self.totals();
        let mut family = encoder.encode_descriptor(
            "cairn_ingress_requests",
            "Responses of the Ingress and Gateway data plane, by backend Service and status code",
            None,
            MetricType::Counter,
        )?;
        for (labels, count) in &totals.requests {
            ConstCounter::new(*count).encode(family.encode_family(labels)?)?;
        }
        let bounds = BUCKETS.iter().copied().chain([f64::INFINITY]);
        let buckets: Vec<(f64, u64)> = bounds.zip(totals.buckets).collect();
        let count = totals.buckets.iter().sum();
        let mut histogram = encoder.encode_descriptor(
            "cairn_ingress_request_duration_seconds",
            "Time from a request's headers to its response's headers, in seconds",
            None,
            MetricType::Histogram,
        )?;
        histogram.encode_histogram::<prometheus_client::encoding::NoLabelSet>(
            totals.sum, count, &buckets, None,
        )
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn responses_are_counted_by_service_and_code_and_exposed() {
        let metrics = RequestMetrics::default();
        let (one, two) = (metrics.counter(), metrics.counter());
        let web = ServiceName {
            namespace: "default".into(),
            name: "web".into(),
        };
        let ms = Duration::from_millis(3);
        one.record(Some(&web), StatusCode::OK, ms);
        two.record(Some(&web), StatusCode::OK, ms);
        two.record(None, StatusCode::NOT_FOUND, Duration::from_secs(20));
        assert_eq!(metrics.requests("default", "web", 200), 2);
        assert_eq!(metrics.requests("", "", 404), 1);
        assert_eq!(metrics.requests("default", "web", 502), 0);
        let mut registry = Registry::default();
        metrics.register(&mut registry);
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
        assert!(
            text.contains(
                "cairn_ingress_requests_total{namespace=\"default\",service=\"web\",code=\"200\"} 2"
            ),
            "{text}"
        );
        assert!(
            text.contains("cairn_ingress_request_duration_seconds_count 3"),
            "{text}"
        );
        assert!(
            text.contains("cairn_ingress_request_duration_seconds_bucket{le=\"0.005\"} 2"),
            "{text}"
        );
        assert!(
            text.contains("cairn_ingress_request_duration_seconds_bucket{le=\"+Inf\"} 3"),
            "{text}"
        );
        assert!(
            text.contains("cairn_ingress_request_duration_seconds_sum 20.006"),
            "{text}"
        );
    }
}
