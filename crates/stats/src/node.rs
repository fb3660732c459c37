//! Node-wide statistics from procfs under a given root (normally `/proc`), parsed by the
//! `procfs` crate: CPU time, memory, load, process counts and the host's interfaces.

use std::path::Path;

use procfs::{FromRead, FromReadSI, KernelStats, LoadAverage, Meminfo};

use crate::network::{interfaces, network_from_dev};
use crate::parse::InterfaceCounters;

#[derive(Debug, Clone, Default, PartialEq)]
pub struct NodeSample {
    /// CPU time used by every CPU (all but idle and iowait), in nanoseconds.
    pub cpu_usage_ns: Option<u64>,
    pub memory_total_bytes: Option<u64>,
    pub memory_available_bytes: Option<u64>,
    pub load: Option<[f32; 3]>,
    /// Processes (threads) on the node (the kubelet's `rlimit.curproc`).
    pub processes: Option<u64>,
    /// The kernel's `pid_max` (the kubelet's `rlimit.maxpid`).
    pub pid_max: Option<u64>,
    pub interfaces: Vec<InterfaceCounters>,
}

/// Reads the node under `proc_root`; each file that cannot be read leaves its values out.
pub fn read_node(proc_root: &Path) -> NodeSample {
    let stat = KernelStats::from_file(proc_root.join("stat"), procfs::current_system_info());
    let memory = Meminfo::from_file(proc_root.join("meminfo")).ok();
    let load = LoadAverage::from_file(proc_root.join("loadavg")).ok();
    NodeSample {
        cpu_usage_ns: stat.ok().map(|s| busy_ns(&s.total)),
        memory_total_bytes: memory.as_ref().map(|m| m.mem_total),
        memory_available_bytes: memory.and_then(|m| m.mem_available),
        load: load.as_ref().map(|l| [l.one, l.five, l.fifteen]),
        // What the kubelet reports as `rlimit.curproc` (sysinfo's procs): the kernel's
        // scheduling entities, which loadavg's fourth field counts; no walk of /proc.
        processes: load.map(|l| u64::from(l.max)),
        pid_max: std::fs::read_to_string(proc_root.join("sys/kernel/pid_max"))
            .ok()
            .and_then(|t| t.trim().parse().ok()),
        interfaces: network_from_dev(&proc_root.join("net/dev"))
            .map(interfaces)
            .unwrap_or_default(),
    }
}

fn busy_ns(t: &procfs::CpuTime) -> u64 {
    let optional = [t.irq_ms(), t.softirq_ms(), t.steal_ms()];
    let ms = t.user_ms() + t.nice_ms() + t.system_ms() + optional.iter().flatten().sum::<u64>();
    ms.saturating_mul(1_000_000)
}

/// cAdvisor's `device` label for a block device: `/dev/<name>` from sysfs's
/// `dev/block/<major>:<minor>` link under `sys_root`, else `<major>:<minor>`.
pub fn block_device_name(sys_root: &Path, major: u64, minor: u64) -> String {
    std::fs::read_link(sys_root.join(format!("dev/block/{major}:{minor}")))
        .ok()
        .and_then(|target| Some(format!("/dev/{}", target.file_name()?.to_str()?)))
        .unwrap_or_else(|| format!("{major}:{minor}"))
}
