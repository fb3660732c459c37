//! One housekeeping pass: read every cgroup the caller names and the node, record them in
//! the bounded history, forget cgroups that are gone. The agent runs a pass every 10 s
//! (the kubelet's housekeeping interval) and answers its stats endpoints from the history.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

use crate::cgroup::{CgroupReadError, CgroupReader};
use crate::history::{History, Timed};
use crate::network::pod_interfaces;
use crate::node::{read_node, NodeSample};
use crate::parse::InterfaceCounters;
use crate::rate::nano_cores;

/// The kubelet's default housekeeping interval.
pub const DEFAULT_INTERVAL: Duration = Duration::from_secs(10);

/// The node's readings and when they were taken.
#[derive(Debug, Clone)]
pub struct NodeReading {
    pub at: Instant,
    pub time: SystemTime,
    pub sample: NodeSample,
}

/// A pod to read: its own cgroup and its running containers' (which share its network
/// namespace).
#[derive(Debug, Clone, Default)]
pub struct PodCgroups {
    pub uid: String,
    pub cgroup: String,
    pub containers: Vec<String>,
}

/// A pod's interfaces, read through one of its containers' processes.
#[derive(Debug, Clone)]
pub struct NetworkReading {
    pub time: SystemTime,
    pub interfaces: Vec<InterfaceCounters>,
}

/// What a pass did, for logs and the agent's own metrics.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct PassSummary {
    pub read: usize,
    /// Cgroups that were gone (their containers exited) by the time they were read.
    pub gone: usize,
}

#[derive(Debug)]
pub struct Collector {
    reader: CgroupReader,
    proc_root: PathBuf,
    history: History,
    networks: HashMap<String, NetworkReading>,
    node: Option<NodeReading>,
    node_usage_nano_cores: Option<u64>,
}

impl Collector {
    pub fn new(cgroup_root: &Path, proc_root: &Path, interval: Duration) -> Collector {
        Collector {
            reader: CgroupReader::new(cgroup_root, proc_root),
            proc_root: proc_root.to_path_buf(),
            history: History::for_interval(interval),
            networks: HashMap::new(),
            node: None,
            node_usage_nano_cores: None,
        }
    }

    /// Reads every pod (its cgroup, its containers', its network) and the node once. A
    /// cgroup that is gone is skipped and forgotten, as is a pod no longer named.
    pub fn housekeep(&mut self, pods: &[PodCgroups]) -> PassSummary {
        let mut summary = PassSummary::default();
        let mut seen = HashSet::new();
        for pod in pods {
            for cgroup in std::iter::once(&pod.cgroup).chain(&pod.containers) {
                if self.read_cgroup(cgroup) {
                    seen.insert(cgroup.clone());
                    summary.read += 1;
                } else {
                    summary.gone += 1;
                }
            }
            self.read_network(pod);
        }
        self.history.retain(|c| seen.contains(c));
        let uids: HashSet<&str> = pods.iter().map(|p| p.uid.as_str()).collect();
        self.networks.retain(|uid, _| uids.contains(uid.as_str()));
        self.read_node();
        summary
    }

    /// Records one reading of `cgroup`; false when it is gone.
    fn read_cgroup(&mut self, cgroup: &str) -> bool {
        match self.reader.read(cgroup) {
            Ok(sample) => {
                let reading = Timed {
                    at: Instant::now(),
                    time: SystemTime::now(),
                    sample,
                };
                self.history.record(cgroup, reading);
                true
            }
            Err(CgroupReadError::Gone { .. }) => false,
        }
    }

    /// The pod's interfaces through the first of its containers with a live process.
    fn read_network(&mut self, pod: &PodCgroups) {
        let pids = pod
            .containers
            .iter()
            .filter_map(|c| self.history.latest(c))
            .flat_map(|reading| reading.sample.pids.iter().copied());
        let found = pids
            .map(|pid| pod_interfaces(&self.proc_root, pid))
            .find_map(|interfaces| interfaces);
        match found {
            Some(interfaces) => {
                let time = SystemTime::now();
                self.networks
                    .insert(pod.uid.clone(), NetworkReading { time, interfaces });
            }
            None => {
                self.networks.remove(&pod.uid);
            }
        }
    }

    fn read_node(&mut self) {
        let now = NodeReading {
            at: Instant::now(),
            time: SystemTime::now(),
            sample: read_node(&self.proc_root),
        };
        if let Some(prev) = &self.node {
            self.node_usage_nano_cores = match (prev.sample.cpu_usage_ns, now.sample.cpu_usage_ns) {
                (Some(a), Some(b)) => nano_cores(a, b, now.at.duration_since(prev.at)),
                _ => None,
            };
        }
        self.node = Some(now);
    }

    pub fn history(&self) -> &History {
        &self.history
    }

    pub fn network(&self, pod_uid: &str) -> Option<&NetworkReading> {
        self.networks.get(pod_uid)
    }

    pub fn node(&self) -> Option<&NodeReading> {
        self.node.as_ref()
    }

    /// The node's CPU use between the last two passes.
    pub fn node_usage_nano_cores(&self) -> Option<u64> {
        self.node_usage_nano_cores
    }
}
