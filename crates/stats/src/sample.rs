//! What one housekeeping pass reads of one cgroup. Every value is optional: a file that
//! is missing (an old kernel, a controller not enabled) or malformed leaves its values
//! out and nothing else.

pub use crate::parse::{DeviceIo, InterfaceCounters};

/// CPU time in nanoseconds and CFS bandwidth counters.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CpuUsage {
    pub usage_ns: Option<u64>,
    pub user_ns: Option<u64>,
    pub system_ns: Option<u64>,
    /// CFS enforcement periods elapsed.
    pub periods: Option<u64>,
    /// Periods in which the cgroup was throttled.
    pub throttled_periods: Option<u64>,
    pub throttled_ns: Option<u64>,
}

/// Memory as cAdvisor reports it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MemoryUsage {
    pub usage_bytes: Option<u64>,
    /// Usage minus inactive file pages: what the kubelet evicts on and `kubectl top` shows.
    pub working_set_bytes: Option<u64>,
    pub rss_bytes: Option<u64>,
    pub cache_bytes: Option<u64>,
    pub swap_bytes: Option<u64>,
    pub mapped_file_bytes: Option<u64>,
    pub page_faults: Option<u64>,
    pub major_page_faults: Option<u64>,
    pub oom_events: Option<u64>,
    /// The cgroup's limit; `None` when unlimited.
    pub limit_bytes: Option<u64>,
}

/// Processes, threads and open file descriptors of the cgroup's own processes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProcessCounts {
    pub processes: Option<u64>,
    pub threads: Option<u64>,
    pub file_descriptors: Option<u64>,
}

/// One read of one cgroup.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CgroupSample {
    pub cpu: CpuUsage,
    pub memory: MemoryUsage,
    pub processes: ProcessCounts,
    pub io: Vec<DeviceIo>,
    /// The cgroup's process ids (the first one's network namespace is the pod's).
    pub pids: Vec<u32>,
}

/// Working set as cAdvisor computes it: usage minus inactive file pages, never below 0.
pub fn working_set(usage: Option<u64>, inactive_file: Option<u64>) -> Option<u64> {
    usage.map(|u| u.saturating_sub(inactive_file.unwrap_or(0)))
}
