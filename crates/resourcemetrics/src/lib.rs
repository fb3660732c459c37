//! The metrics API's core, as metrics-server does it, with no IO: decode a node's
//! `/metrics/resource` ([`decode`]), keep each node's last two scrapes ([`MetricsStore`]),
//! and answer usage: CPU as the rate between the two scrapes, memory as the latest
//! working set, over the window between them. `cairn-apiserver` scrapes the agents and
//! serves `metrics.k8s.io/v1beta1` from it.

pub mod decode;
pub mod store;

pub use decode::{decode, ContainerKey, DecodeError, NodeScrape, Point};
pub use store::{cpu_quantity, memory_quantity, MetricsStore, PodUsage, Usage};
