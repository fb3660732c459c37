//! A node's `/metrics/resource`, read as metrics-server reads it: node CPU and memory,
//! each container's CPU, memory and start time, each with its sample's timestamp. A
//! container whose CPU or memory is 0 is left out (metrics-server: not yet running).

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use prometheus_parse::{Sample, Scrape, Value};

#[derive(Debug, thiserror::Error)]
pub enum DecodeError {
    #[error("decoding the resource metrics: {0}")]
    Format(String),
}

/// Cumulative CPU seconds and the working set at one moment.
#[derive(Debug, Clone, PartialEq)]
pub struct Point {
    pub cpu_seconds: f64,
    pub memory_bytes: u64,
    pub at: DateTime<Utc>,
    /// The container's start (seconds since the epoch): a new start is a new counter.
    pub started: Option<f64>,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ContainerKey {
    pub namespace: String,
    pub pod: String,
    pub container: String,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct NodeScrape {
    pub node: Option<Point>,
    pub containers: HashMap<ContainerKey, Point>,
}

/// Partial readings, joined into points once the whole scrape is read.
#[derive(Default)]
struct Partial {
    cpu: Option<(f64, DateTime<Utc>)>,
    memory: Option<u64>,
    started: Option<f64>,
}

impl Partial {
    fn point(self) -> Option<Point> {
        let (cpu_seconds, at) = self.cpu?;
        let memory_bytes = self.memory?;
        (cpu_seconds > 0.0 && memory_bytes > 0).then_some(Point {
            cpu_seconds,
            memory_bytes,
            at,
            started: self.started,
        })
    }
}

pub fn decode(text: &str) -> Result<NodeScrape, DecodeError> {
    let lines = text.lines().map(|l| Ok(l.to_string()));
    let scrape = Scrape::parse(lines).map_err(|e| DecodeError::Format(e.to_string()))?;
    let mut node = Partial::default();
    let mut containers: HashMap<ContainerKey, Partial> = HashMap::new();
    for sample in &scrape.samples {
        let Some(value) = number(&sample.value) else {
            continue;
        };
        match sample.metric.as_str() {
            "node_cpu_usage_seconds_total" => node.cpu = Some((value, sample.timestamp)),
            "node_memory_working_set_bytes" => node.memory = Some(value as u64),
            "container_cpu_usage_seconds_total" => {
                if let Some(key) = key(sample) {
                    containers.entry(key).or_default().cpu = Some((value, sample.timestamp));
                }
            }
            "container_memory_working_set_bytes" => {
                if let Some(key) = key(sample) {
                    containers.entry(key).or_default().memory = Some(value as u64);
                }
            }
            "container_start_time_seconds" => {
                if let Some(key) = key(sample) {
                    containers.entry(key).or_default().started = Some(value);
                }
            }
            _ => {}
        }
    }
    Ok(NodeScrape {
        node: node.point(),
        containers: containers
            .into_iter()
            .filter_map(|(k, p)| Some((k, p.point()?)))
            .collect(),
    })
}

fn number(value: &Value) -> Option<f64> {
    match value {
        Value::Counter(v) | Value::Gauge(v) | Value::Untyped(v) if v.is_finite() => Some(*v),
        _ => None,
    }
}

fn key(sample: &Sample) -> Option<ContainerKey> {
    Some(ContainerKey {
        namespace: sample.labels.get("namespace")?.to_string(),
        pod: sample.labels.get("pod")?.to_string(),
        container: sample.labels.get("container")?.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = "# HELP node_cpu_usage_seconds_total [STABLE] Cumulative cpu time consumed by the node in core-seconds
# TYPE node_cpu_usage_seconds_total counter
node_cpu_usage_seconds_total 357.5 1700000000000
# HELP node_memory_working_set_bytes [STABLE] Current working set of the node in bytes
# TYPE node_memory_working_set_bytes gauge
node_memory_working_set_bytes 1.2e+09 1700000000000
# TYPE container_cpu_usage_seconds_total counter
container_cpu_usage_seconds_total{container=\"app\",namespace=\"default\",pod=\"web\"} 12.5 1700000001000
container_cpu_usage_seconds_total{container=\"idle\",namespace=\"default\",pod=\"web\"} 0 1700000001000
# TYPE container_memory_working_set_bytes gauge
container_memory_working_set_bytes{container=\"app\",namespace=\"default\",pod=\"web\"} 4096 1700000001000
container_memory_working_set_bytes{container=\"idle\",namespace=\"default\",pod=\"web\"} 4096 1700000001000
# TYPE container_start_time_seconds gauge
container_start_time_seconds{container=\"app\",namespace=\"default\",pod=\"web\"} 1.69e+09 1700000001000
# TYPE resource_scrape_error gauge
resource_scrape_error 0
";

    #[test]
    fn node_and_containers_with_their_timestamps() {
        let scrape = decode(TEXT).expect("decode");
        let node = scrape.node.expect("node");
        assert_eq!(node.cpu_seconds, 357.5);
        assert_eq!(node.memory_bytes, 1_200_000_000);
        assert_eq!(node.at.timestamp_millis(), 1_700_000_000_000);
        let app = ContainerKey {
            namespace: "default".into(),
            pod: "web".into(),
            container: "app".into(),
        };
        let point = &scrape.containers[&app];
        assert_eq!((point.cpu_seconds, point.memory_bytes), (12.5, 4096));
        assert_eq!(point.at.timestamp_millis(), 1_700_000_001_000);
        assert_eq!(point.started, Some(1.69e9));
        assert_eq!(
            scrape.containers.len(),
            1,
            "a container with 0 CPU is not counted"
        );
    }

    #[test]
    fn garbage_is_an_error_or_nothing_never_a_panic() {
        for text in ["{{{", "node_cpu_usage_seconds_total abc", "\u{0}\u{1}", ""] {
            if let Ok(scrape) = decode(text) {
                assert!(
                    scrape.node.is_none() && scrape.containers.is_empty(),
                    "{text:?}"
                );
            }
        }
    }
}
