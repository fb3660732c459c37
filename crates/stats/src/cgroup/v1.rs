//! cgroup v1: one directory per controller (`memory/`, `cpu/`, `cpuacct/`, `pids/`,
//! `blkio/`), the cgroup's path below each. Keys as cAdvisor reads them (`total_*`:
//! hierarchical, so a pod's cgroup counts its containers).

use std::path::Path;

use super::{process_counts, read_in, CgroupDir, CgroupReadError};
use crate::parse::{blkio_v1, flat_keyed, key, single};
use crate::sample::{working_set, CgroupSample, CpuUsage, MemoryUsage};

/// Above this a v1 limit means "none" (the kernel's page-aligned i64::MAX).
const UNLIMITED: u64 = 1 << 62;

pub(super) fn sample(
    root: &Path,
    rel: &str,
    clock_ticks: u64,
) -> Result<CgroupSample, CgroupReadError> {
    let dir = |controller: &str| CgroupDir::open(&root.join(controller).join(rel));
    // cpuacct decides whether the cgroup exists; any other controller may be absent.
    let cpuacct = dir("cpuacct")?;
    let cpu_dir = dir("cpu").ok();
    let memory_dir = dir("memory").ok();
    let blkio = dir("blkio").ok();
    let cpu = cpu(&cpuacct, cpu_dir.as_ref(), clock_ticks);
    let memory = memory(memory_dir.as_ref());
    let (processes, pids) = process_counts(
        read_in(cpu_dir.as_ref(), "cgroup.procs"),
        read_in(cpu_dir.as_ref(), "tasks"),
    );
    let io = match (
        read_in(blkio.as_ref(), "blkio.throttle.io_service_bytes_recursive"),
        read_in(blkio.as_ref(), "blkio.throttle.io_serviced_recursive"),
    ) {
        (Some(bytes), Some(ops)) => blkio_v1(&bytes, &ops),
        (Some(bytes), None) => blkio_v1(&bytes, ""),
        _ => Vec::new(),
    };
    Ok(CgroupSample {
        cpu,
        memory,
        processes,
        io,
        pids,
    })
}

fn cpu(cpuacct: &CgroupDir, cpu: Option<&CgroupDir>, clock_ticks: u64) -> CpuUsage {
    let ticks = cpuacct.read("cpuacct.stat").unwrap_or_default();
    let ticks = flat_keyed(&ticks);
    let to_ns = |t: u64| t.saturating_mul(1_000_000_000 / clock_ticks);
    let bandwidth = read_in(cpu, "cpu.stat").unwrap_or_default();
    let bandwidth = flat_keyed(&bandwidth);
    CpuUsage {
        usage_ns: cpuacct.read("cpuacct.usage").and_then(|t| single(&t)),
        user_ns: key(&ticks, "user").map(to_ns),
        system_ns: key(&ticks, "system").map(to_ns),
        periods: key(&bandwidth, "nr_periods"),
        throttled_periods: key(&bandwidth, "nr_throttled"),
        throttled_ns: key(&bandwidth, "throttled_time"),
    }
}

fn memory(dir: Option<&CgroupDir>) -> MemoryUsage {
    let stat = read_in(dir, "memory.stat").unwrap_or_default();
    let stat = flat_keyed(&stat);
    let usage = read_in(dir, "memory.usage_in_bytes").and_then(|t| single(&t));
    let with_swap = read_in(dir, "memory.memsw.usage_in_bytes").and_then(|t| single(&t));
    let oom = read_in(dir, "memory.oom_control").unwrap_or_default();
    MemoryUsage {
        usage_bytes: usage,
        working_set_bytes: working_set(usage, key(&stat, "total_inactive_file")),
        rss_bytes: key(&stat, "total_rss"),
        cache_bytes: key(&stat, "total_cache"),
        // As cAdvisor: memory+swap usage less memory usage (the accounting of memsw).
        swap_bytes: match (with_swap, usage) {
            (Some(both), Some(mem)) => Some(both.saturating_sub(mem)),
            _ => key(&stat, "total_swap"),
        },
        mapped_file_bytes: key(&stat, "total_mapped_file"),
        page_faults: key(&stat, "total_pgfault"),
        major_page_faults: key(&stat, "total_pgmajfault"),
        oom_events: key(&flat_keyed(&oom), "oom_kill"),
        limit_bytes: read_in(dir, "memory.limit_in_bytes")
            .and_then(|t| single(&t))
            .filter(|l| *l < UNLIMITED),
    }
}
