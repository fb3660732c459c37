//! cgroup v2: one unified directory per cgroup. Keys as cAdvisor reads them.

use std::path::Path;

use super::{gone, process_counts, read, CgroupReadError};
use crate::parse::{flat_keyed, io_stat, key, single};
use crate::sample::{working_set, CgroupSample, CpuUsage, MemoryUsage};

pub(super) fn sample(root: &Path, rel: &str) -> Result<CgroupSample, CgroupReadError> {
    let dir = root.join(rel);
    gone(&dir)?;
    let (processes, pids) = process_counts(
        read(&dir.join("cgroup.procs")),
        read(&dir.join("cgroup.threads")),
    );
    Ok(CgroupSample {
        cpu: cpu(&dir),
        memory: memory(&dir),
        processes,
        io: read(&dir.join("io.stat"))
            .map(|t| io_stat(&t))
            .unwrap_or_default(),
        pids,
    })
}

fn cpu(dir: &Path) -> CpuUsage {
    let stat = read(&dir.join("cpu.stat")).unwrap_or_default();
    let stat = flat_keyed(&stat);
    let usec = |name: &str| key(&stat, name).map(|v| v.saturating_mul(1000));
    CpuUsage {
        usage_ns: usec("usage_usec"),
        user_ns: usec("user_usec"),
        system_ns: usec("system_usec"),
        periods: key(&stat, "nr_periods"),
        throttled_periods: key(&stat, "nr_throttled"),
        throttled_ns: usec("throttled_usec"),
    }
}

fn memory(dir: &Path) -> MemoryUsage {
    let stat = read(&dir.join("memory.stat")).unwrap_or_default();
    let stat = flat_keyed(&stat);
    let usage = read(&dir.join("memory.current")).and_then(|t| single(&t));
    let events = read(&dir.join("memory.events")).unwrap_or_default();
    MemoryUsage {
        usage_bytes: usage,
        working_set_bytes: working_set(usage, key(&stat, "inactive_file")),
        rss_bytes: key(&stat, "anon"),
        cache_bytes: key(&stat, "file"),
        swap_bytes: read(&dir.join("memory.swap.current")).and_then(|t| single(&t)),
        mapped_file_bytes: key(&stat, "file_mapped"),
        page_faults: key(&stat, "pgfault"),
        major_page_faults: key(&stat, "pgmajfault"),
        oom_events: key(&flat_keyed(&events), "oom_kill"),
        // "max" (no limit) does not parse as a number.
        limit_bytes: read(&dir.join("memory.max")).and_then(|t| single(&t)),
    }
}
