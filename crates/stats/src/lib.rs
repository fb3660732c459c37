//! cAdvisor-style usage statistics for the agent: cgroup v1 and v2 readers that take
//! their root path, procfs node statistics, per-pod network counters from a process's
//! network namespace, CPU rates from deltas and a bounded history of passes.
//!
//! Parsing ([`parse`]) does no IO. A missing or malformed file skips its values, and a
//! cgroup that disappears mid-pass (its container exited) skips that container, never
//! the pass.

pub mod cgroup;
pub mod collector;
pub mod exposition;
pub mod history;
pub mod network;
pub mod node;
pub mod parse;
pub mod rate;
pub mod sample;

pub use cgroup::{CgroupReadError, CgroupReader, Hierarchy};
pub use collector::{Collector, NetworkReading, PassSummary, PodCgroups, DEFAULT_INTERVAL};
pub use network::pod_interfaces;
pub use node::{block_device_name, read_node, NodeSample};
pub use sample::{CgroupSample, CpuUsage, MemoryUsage, ProcessCounts};
