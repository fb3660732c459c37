//! A pod's network counters, read as cAdvisor reads them: `/proc/<pid>/net/dev` of one of
//! its processes shows the interfaces of that process's network namespace, with no
//! `setns` and no privilege beyond reading procfs.

use std::path::Path;

use crate::parse::{net_dev, InterfaceCounters};

/// Interfaces cAdvisor leaves out: loopback and the host ends of container links.
const IGNORED_PREFIXES: [&str; 3] = ["lo", "veth", "docker"];

/// The interfaces of `pid`'s network namespace under `proc_root`, without loopback and
/// host-side links; `None` when the process is gone.
pub fn pod_interfaces(proc_root: &Path, pid: u32) -> Option<Vec<InterfaceCounters>> {
    let all = network_from_dev(&proc_root.join(pid.to_string()).join("net/dev"))?;
    Some(interfaces(all))
}

pub(crate) fn network_from_dev(path: &Path) -> Option<Vec<InterfaceCounters>> {
    std::fs::read_to_string(path).ok().map(|t| net_dev(&t))
}

/// `all` without the ignored interfaces (cAdvisor leaves them out of the node's figures
/// too: a pod's traffic would count twice, on its veth and on the uplink).
pub(crate) fn interfaces(all: Vec<InterfaceCounters>) -> Vec<InterfaceCounters> {
    all.into_iter()
        .filter(|i| !IGNORED_PREFIXES.iter().any(|p| i.name.starts_with(p)))
        .collect()
}
