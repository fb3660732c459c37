//! Each node's last two scrapes and the usage they give, as metrics-server's storage
//! computes it: CPU is the rate of the cumulative counter between the two points (none
//! when the container restarted or the counter went back), memory the latest working
//! set, the window the time between the points. A node whose scrape failed is dropped:
//! the API then reports it missing, and the others still answer.

use std::collections::{HashMap, HashSet};

use cairn_apimachinery::quantity::{print_nanos, Format};
use chrono::{DateTime, Utc};

use crate::decode::{ContainerKey, NodeScrape, Point};

/// Usage over a window ending at `at`.
#[derive(Debug, Clone, PartialEq)]
pub struct Usage {
    pub cpu_nano_cores: u64,
    pub memory_bytes: u64,
    pub at: DateTime<Utc>,
    pub window: chrono::Duration,
}

/// A pod's containers' usage (every container that reported, by name).
#[derive(Debug, Clone, PartialEq)]
pub struct PodUsage {
    pub at: DateTime<Utc>,
    pub window: chrono::Duration,
    pub containers: Vec<(String, Usage)>,
}

#[derive(Debug, Default)]
struct NodeScrapes {
    earlier: Option<NodeScrape>,
    latest: NodeScrape,
}

#[derive(Debug, Default)]
pub struct MetricsStore {
    nodes: HashMap<String, NodeScrapes>,
}

impl MetricsStore {
    /// Records `node`'s newest scrape; its previous latest becomes the earlier point.
    pub fn store(&mut self, node: &str, scrape: NodeScrape) {
        let entry = self.nodes.entry(node.to_string()).or_default();
        let earlier = std::mem::replace(&mut entry.latest, scrape);
        entry.earlier = Some(earlier);
    }

    /// Forgets every node not in `answered` (gone, not Ready, or its scrape failed).
    pub fn retain(&mut self, answered: &HashSet<String>) {
        self.nodes.retain(|name, _| answered.contains(name));
    }

    pub fn node_usage(&self, node: &str) -> Option<Usage> {
        let scrapes = self.nodes.get(node)?;
        usage(
            scrapes.earlier.as_ref()?.node.as_ref()?,
            scrapes.latest.node.as_ref()?,
        )
    }

    /// The nodes that have usage, by name.
    pub fn nodes(&self) -> Vec<(String, Usage)> {
        let mut nodes: Vec<(String, Usage)> = self
            .nodes
            .keys()
            .filter_map(|n| Some((n.clone(), self.node_usage(n)?)))
            .collect();
        nodes.sort_by(|a, b| a.0.cmp(&b.0));
        nodes
    }

    /// Every pod with usage for each of its reported containers, by namespace and name.
    pub fn pods(&self) -> Vec<((String, String), PodUsage)> {
        let mut pods: HashMap<(String, String), PodUsage> = HashMap::new();
        for scrapes in self.nodes.values() {
            let Some(earlier) = &scrapes.earlier else {
                continue;
            };
            let mut keys: Vec<&ContainerKey> = scrapes.latest.containers.keys().collect();
            keys.sort();
            for key in keys {
                let latest = &scrapes.latest.containers[key];
                let Some(u) = earlier.containers.get(key).and_then(|e| usage(e, latest)) else {
                    continue;
                };
                let pod = pods
                    .entry((key.namespace.clone(), key.pod.clone()))
                    .or_insert_with(|| PodUsage {
                        at: u.at,
                        window: u.window,
                        containers: Vec::new(),
                    });
                pod.containers.push((key.container.clone(), u));
            }
        }
        let mut pods: Vec<_> = pods.into_iter().collect();
        pods.sort_by(|a, b| a.0.cmp(&b.0));
        pods
    }
}

/// The usage between two points of one counter.
fn usage(earlier: &Point, latest: &Point) -> Option<Usage> {
    let window = latest.at - earlier.at;
    let restarted = earlier.started != latest.started;
    if restarted || window <= chrono::Duration::zero() || latest.cpu_seconds < earlier.cpu_seconds {
        return None;
    }
    let seconds = window.num_nanoseconds()? as f64 / 1e9;
    let cores = (latest.cpu_seconds - earlier.cpu_seconds) / seconds;
    Some(Usage {
        cpu_nano_cores: (cores * 1e9).round() as u64,
        memory_bytes: latest.memory_bytes,
        at: latest.at,
        window,
    })
}

/// CPU as metrics-server writes it: nano-cores in canonical form (`250m`, `12345n`).
pub fn cpu_quantity(nano_cores: u64) -> String {
    print_nanos(i128::from(nano_cores), Format::DecimalSI)
        .unwrap_or_else(|| format!("{nano_cores}n"))
}

/// Memory as metrics-server writes it: bytes in canonical binary form (`64Mi`, `4097`).
pub fn memory_quantity(bytes: u64) -> String {
    print_nanos(i128::from(bytes) * 1_000_000_000, Format::BinarySI)
        .unwrap_or_else(|| bytes.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn point(cpu_seconds: f64, ms: i64, started: f64) -> Point {
        Point {
            cpu_seconds,
            memory_bytes: 64 << 20,
            at: DateTime::from_timestamp_millis(ms).expect("time"),
            started: Some(started),
        }
    }

    fn scrape(node: Point, containers: &[(&str, Point)]) -> NodeScrape {
        NodeScrape {
            node: Some(node),
            containers: containers
                .iter()
                .map(|(name, p)| {
                    let key = ContainerKey {
                        namespace: "default".into(),
                        pod: "web".into(),
                        container: name.to_string(),
                    };
                    (key, p.clone())
                })
                .collect(),
        }
    }

    #[test]
    fn usage_is_the_rate_between_the_last_two_scrapes() {
        let mut store = MetricsStore::default();
        store.store(
            "n1",
            scrape(point(100.0, 0, 1.0), &[("app", point(10.0, 0, 1.0))]),
        );
        assert!(store.node_usage("n1").is_none(), "one scrape gives no rate");
        store.store(
            "n1",
            scrape(
                point(115.0, 15_000, 1.0),
                &[("app", point(17.5, 15_000, 1.0))],
            ),
        );
        let node = store.node_usage("n1").expect("node usage");
        assert_eq!(node.cpu_nano_cores, 1_000_000_000);
        assert_eq!(node.window, chrono::Duration::seconds(15));
        let pods = store.pods();
        assert_eq!(pods.len(), 1);
        let (name, app) = &pods[0].1.containers[0];
        assert_eq!((name.as_str(), app.cpu_nano_cores), ("app", 500_000_000));
        assert_eq!(cpu_quantity(app.cpu_nano_cores), "500m");
        assert_eq!(memory_quantity(app.memory_bytes), "64Mi");
    }

    #[test]
    fn a_restart_or_a_failed_node_gives_no_usage() {
        let mut store = MetricsStore::default();
        store.store(
            "n1",
            scrape(point(100.0, 0, 1.0), &[("app", point(10.0, 0, 1.0))]),
        );
        store.store(
            "n1",
            scrape(
                point(115.0, 15_000, 1.0),
                &[("app", point(1.0, 15_000, 2.0))],
            ),
        );
        assert!(
            store.pods().is_empty(),
            "the container restarted between the scrapes"
        );
        store.store("n2", scrape(point(1.0, 0, 1.0), &[]));
        store.store("n2", scrape(point(2.0, 15_000, 1.0), &[]));
        assert_eq!(store.nodes().len(), 2);
        store.retain(&HashSet::from(["n2".to_string()]));
        assert!(
            store.node_usage("n1").is_none(),
            "n1's scrape failed: it is missing"
        );
        assert_eq!(store.nodes().len(), 1);
    }

    #[test]
    fn quantities_are_canonical() {
        assert_eq!(cpu_quantity(12_345), "12345n");
        assert_eq!(cpu_quantity(2_000_000_000), "2");
        assert_eq!(memory_quantity(4097), "4097");
        assert_eq!(memory_quantity(3 << 10), "3Ki");
    }
}
