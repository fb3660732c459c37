//! cgroup v2: one unified directory per cgroup. Keys as cAdvisor reads them.

use std::path::Path;

use super::{process_counts, CgroupDir, CgroupReadError};
use crate::parse::{flat_keyed, io_stat, key, single};
use crate::sample::{working_set, CgroupSample, CpuUsage, MemoryUsage};

pub(super) fn sample(root: &Path, rel: &str) -> Result<CgroupSample, CgroupReadError> {
    let dir = CgroupDir::open(&root.join(rel))?;
    let (processes, pids) = process_counts(dir.read("cgroup.procs"), dir.read("cgroup.threads"));
    Ok(CgroupSample {
        cpu: cpu(&dir),
        memory: memory(&dir),
        processes,
        io: dir.read("io.stat").map(|t| io_stat(&t)).unwrap_or_default(),
        pids,
    })
}

fn cpu(dir: &CgroupDir) -> CpuUsage {
    let stat = dir.read("cpu.stat").unwrap_or_default();
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

fn memory(dir: &CgroupDir) -> MemoryUsage {
    let stat = dir.read("memory.stat").unwrap_or_default();
    let stat = flat_keyed(&stat);
    let usage = dir.read("memory.current").and_then(|t| single(&t));
    let events = dir.read("memory.events").unwrap_or_default();
    MemoryUsage {
        usage_bytes: usage,
        working_set_bytes: working_set(usage, key(&stat, "inactive_file")),
        rss_bytes: key(&stat, "anon"),
        cache_bytes: key(&stat, "file"),
        swap_bytes: dir.read("memory.swap.current").and_then(|t| single(&t)),
        mapped_file_bytes: key(&stat, "file_mapped"),
        page_faults: key(&stat, "pgfault"),
        major_page_faults: key(&stat, "pgmajfault"),
        oom_events: key(&flat_keyed(&events), "oom_kill"),
        // "max" (no limit) does not parse as a number.
        limit_bytes: dir.read("memory.max").and_then(|t| single(&t)),
    }
}
