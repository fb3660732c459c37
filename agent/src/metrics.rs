//! The agent's own Prometheus metrics with the kubelet's names: `/metrics` (the node name,
//! pod start latency, running pods and containers) and `/metrics/probes`
//! (`prober_probe_total`). OpenMetrics text as `prometheus-client` writes it: counters
//! are declared without `_total` and their samples carry it, as in `cairn-proxy`.

use std::sync::Arc;
use std::time::Duration;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

/// The OpenMetrics text format's content type.
pub const OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

type Labels = Vec<(&'static str, String)>;

/// The kubelet's `pod_start_duration_seconds` buckets.
const POD_START_BUCKETS: [f64; 25] = [
    0.5, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 8.0, 10.0, 20.0, 30.0, 45.0, 60.0, 120.0, 180.0, 240.0,
    300.0, 360.0, 480.0, 600.0, 900.0, 1200.0, 1800.0, 2700.0, 3600.0,
];

/// Which probe ran, for `prober_probe_total`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProbeType {
    Liveness,
    Readiness,
    Startup,
}

/// A probe's pod and container, as upstream labels `prober_probe_total`.
#[derive(Debug, Clone, Copy)]
pub struct ProbeTarget<'a> {
    pub namespace: &'a str,
    pub pod: &'a str,
    pub pod_uid: &'a str,
    pub container: &'a str,
}

#[derive(Debug)]
pub struct AgentMetrics {
    kubelet: Registry,
    probes: Registry,
    probe_total: Family<Labels, Counter>,
    pod_start: Histogram,
    running_pods: Gauge,
    running_containers: Family<Labels, Gauge>,
    /// The cluster DNS server's, served on `/metrics` with the kubelet's.
    pub dns: Arc<cairn_dns::DnsMetrics>,
}

impl AgentMetrics {
    pub fn new(node: &str) -> AgentMetrics {
        let mut kubelet = Registry::default();
        let node_name = Family::<Labels, Gauge>::default();
        node_name
            .get_or_create(&vec![("node", node.to_string())])
            .set(1);
        kubelet.register(
            "kubelet_node_name",
            "The node's name. The count is always 1.",
            node_name,
        );
        let pod_start = Histogram::new(POD_START_BUCKETS);
        kubelet.register(
            "kubelet_pod_start_duration_seconds",
            "Duration in seconds from kubelet seeing a pod for the first time to the pod starting to run",
            pod_start.clone(),
        );
        let running_pods = Gauge::default();
        kubelet.register(
            "kubelet_running_pods",
            "Number of pods that have a running pod sandbox",
            running_pods.clone(),
        );
        let running_containers = Family::<Labels, Gauge>::default();
        kubelet.register(
            "kubelet_running_containers",
            "Number of containers currently running",
            running_containers.clone(),
        );
        let dns = Arc::new(cairn_dns::DnsMetrics::default());
        dns.register(&mut kubelet);
        let mut probes = Registry::default();
        let probe_total = Family::<Labels, Counter>::default();
        probes.register("prober_probe", "Cumulative number of a liveness, readiness or startup probe for a container by result.", probe_total.clone());
        AgentMetrics {
            kubelet,
            probes,
            probe_total,
            pod_start,
            running_pods,
            running_containers,
            dns,
        }
    }

    /// Counts one probe run: `Some(true)` successful, `Some(false)` failed, `None` unknown.
    pub fn probe(&self, kind: ProbeType, target: ProbeTarget<'_>, ok: Option<bool>) {
        let probe_type = match kind {
            ProbeType::Liveness => "Liveness",
            ProbeType::Readiness => "Readiness",
            ProbeType::Startup => "Startup",
        };
        let result = match ok {
            Some(true) => "successful",
            Some(false) => "failed",
            None => "unknown",
        };
        let labels = vec![
            ("probe_type", probe_type.to_string()),
            ("result", result.to_string()),
            ("container", target.container.to_string()),
            ("pod", target.pod.to_string()),
            ("namespace", target.namespace.to_string()),
            ("pod_uid", target.pod_uid.to_string()),
        ];
        self.probe_total.get_or_create(&labels).inc();
    }

    /// A pod ran `after` it was first seen.
    pub fn pod_started(&self, after: Duration) {
        self.pod_start.observe(after.as_secs_f64());
    }

    pub fn set_running(&self, pods: usize, containers: usize) {
        self.running_pods
            .set(i64::try_from(pods).unwrap_or(i64::MAX));
        let labels = vec![("container_state", "running".to_string())];
        let count = i64::try_from(containers).unwrap_or(i64::MAX);
        self.running_containers.get_or_create(&labels).set(count);
    }

    pub fn encode_kubelet(&self) -> Result<String, std::fmt::Error> {
        encode(&self.kubelet)
    }

    pub fn encode_probes(&self) -> Result<String, std::fmt::Error> {
        encode(&self.probes)
    }
}

fn encode(registry: &Registry) -> Result<String, std::fmt::Error> {
    let mut out = String::new();
    prometheus_client::encoding::text::encode(&mut out, registry)?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn probes_and_pod_starts_are_counted_under_upstreams_names() {
        let m = AgentMetrics::new("node-1");
        let target = ProbeTarget {
            namespace: "default",
            pod: "web",
            pod_uid: "u1",
            container: "app",
        };
        m.probe(ProbeType::Readiness, target, Some(true));
        m.probe(ProbeType::Readiness, target, Some(true));
        m.probe(ProbeType::Liveness, target, Some(false));
        m.pod_started(Duration::from_millis(1500));
        m.set_running(3, 4);
        let probes = m.encode_probes().expect("encode");
        assert!(probes.contains("prober_probe_total{probe_type=\"Readiness\",result=\"successful\",container=\"app\",pod=\"web\",namespace=\"default\",pod_uid=\"u1\"} 2"), "{probes}");
        assert!(
            probes.contains("prober_probe_total{probe_type=\"Liveness\",result=\"failed\""),
            "{probes}"
        );
        let kubelet = m.encode_kubelet().expect("encode");
        assert!(
            kubelet.contains("kubelet_node_name{node=\"node-1\"} 1"),
            "{kubelet}"
        );
        assert!(
            kubelet.contains("kubelet_pod_start_duration_seconds_bucket{le=\"2.0\"} 1"),
            "{kubelet}"
        );
        assert!(kubelet.contains("kubelet_running_pods 3"), "{kubelet}");
        assert!(
            kubelet.contains("kubelet_running_containers{container_state=\"running\"} 4"),
            "{kubelet}"
        );
    }
}
