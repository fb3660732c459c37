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
//! A backend's labels are made once per snapshot (`Arc<str>`), so counting a request
//! clones two pointers, not two strings.

use std::sync::Arc;
use std::time::Duration;

use http::StatusCode;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

/// A backend Service's name, as its requests are labelled.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct ServiceName {
    pub namespace: Arc<str>,
    pub name: Arc<str>,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct RequestLabels {
    namespace: Arc<str>,
    service: Arc<str>,
    code: u16,
}

/// Prometheus's default histogram buckets, which ingress-nginx uses for its request
/// durations.
const BUCKETS: [f64; 11] = [
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];

/// The data plane's request metrics; clones share them (every worker counts into one).
#[derive(Debug, Clone)]
pub struct RequestMetrics {
    requests: Family<RequestLabels, Counter>,
    duration: Histogram,
}

impl Default for RequestMetrics {
    fn default() -> RequestMetrics {
        RequestMetrics {
            requests: Family::default(),
            duration: Histogram::new(BUCKETS),
        }
    }
}

impl RequestMetrics {
    /// Counts one response.
    pub fn record(&self, service: Option<&ServiceName>, code: StatusCode, took: Duration) {
        let none = ServiceName::default();
        let service = service.unwrap_or(&none);
        let labels = RequestLabels {
            namespace: service.namespace.clone(),
            service: service.name.clone(),
            code: code.as_u16(),
        };
        self.requests.get_or_create(&labels).inc();
        self.duration.observe(took.as_secs_f64());
    }

    /// How many responses with `code` came from `namespace/service` (empty: none chosen).
    pub fn requests(&self, namespace: &str, service: &str, code: u16) -> u64 {
        let labels = RequestLabels {
            namespace: namespace.into(),
            service: service.into(),
            code,
        };
        self.requests.get(&labels).map_or(0, |c| c.get())
    }

    /// Adds the metrics to `registry` (counters are registered without `_total`, which
    /// the exposition adds).
    pub fn register(&self, registry: &mut Registry) {
        registry.register(
            "cairn_ingress_requests",
            "Responses of the Ingress and Gateway data plane, by backend Service and status code",
            self.requests.clone(),
        );
        registry.register(
            "cairn_ingress_request_duration_seconds",
            "Time from a request's headers to its response's headers, in seconds",
            self.duration.clone(),
        );
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn responses_are_counted_by_service_and_code_and_exposed() {
        let metrics = RequestMetrics::default();
        let web = ServiceName {
            namespace: "default".into(),
            name: "web".into(),
        };
        let ms = Duration::from_millis(3);
        metrics.record(Some(&web), StatusCode::OK, ms);
        metrics.record(Some(&web), StatusCode::OK, ms);
        metrics.record(None, StatusCode::NOT_FOUND, ms);
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
            text.contains("cairn_ingress_request_duration_seconds_bucket{le=\"0.005\"} 3"),
            "{text}"
        );
    }
}
