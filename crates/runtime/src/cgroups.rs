//! cgroup v1 and v2 (cgroupfs layout) behind one manager: pod-level cgroups with limits,
//! usage read through `cairn-stats` (the agent's parser), and the OOM-kill counter used for
//! `OOMKilled`.
//!
//! Every path is relative to a mount root (normally `/sys/fs/cgroup`) so tests can use a
//! fixture tree. runc creates the per-container cgroups below the pod's, from the spec's
//! `cgroupsPath`.

use std::fs;
use std::path::{Path, PathBuf};

use cairn_stats::{CgroupReader, CgroupSample};

#[derive(Debug, thiserror::Error)]
pub enum CgroupError {
    #[error("writing {value:?} to {path}: {source}")]
    Write {
        path: PathBuf,
        value: String,
        source: std::io::Error,
    },
    #[error("creating cgroup {path}: {source}")]
    Create {
        path: PathBuf,
        source: std::io::Error,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CgroupVersion {
    V1,
    V2,
}

/// Limits of a pod cgroup (sums of its containers', when all set them).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PodResources {
    pub cpu_shares: Option<u64>,
    pub cpu_quota: Option<i64>,
    pub cpu_period: Option<u64>,
    pub memory_limit: Option<i64>,
}

#[derive(Debug, Clone)]
pub struct CgroupManager {
    root: PathBuf,
    version: CgroupVersion,
    /// The stats collector's reader: one parser of cgroup files for the agent and here.
    reader: CgroupReader,
}

const V1_CONTROLLERS: [&str; 4] = ["memory", "cpu", "cpuacct", "pids"];

impl CgroupManager {
    /// Detects the layout under `root`: a `cgroup.controllers` file at the root means v2.
    pub fn detect(root: &Path) -> Self {
        let version = if root.join("cgroup.controllers").exists() {
            CgroupVersion::V2
        } else {
            CgroupVersion::V1
        };
        CgroupManager {
            root: root.to_path_buf(),
            version,
            reader: CgroupReader::new(root, Path::new("/proc")),
        }
    }

    pub fn version(&self) -> CgroupVersion {
        self.version
    }

    fn rel(path: &str) -> &str {
        path.trim_start_matches('/')
    }

    fn v1_dir(&self, controller: &str, path: &str) -> PathBuf {
        self.root.join(controller).join(Self::rel(path))
    }

    fn v2_dir(&self, path: &str) -> PathBuf {
        self.root.join(Self::rel(path))
    }

    /// Creates the cgroup (and parents) and applies `limits`. Idempotent.
    pub fn ensure(&self, path: &str, limits: &PodResources) -> Result<(), CgroupError> {
        match self.version {
            CgroupVersion::V1 => {
                for controller in V1_CONTROLLERS {
                    if !self.root.join(controller).exists() {
                        continue;
                    }
                    let dir = self.v1_dir(controller, path);
                    create_dir(&dir)?;
                }
                let mem = self.v1_dir("memory", path);
                if mem.exists() {
                    write(
                        &mem.join("memory.limit_in_bytes"),
                        &limits.memory_limit.unwrap_or(-1).to_string(),
                    )?;
                }
                let cpu = self.v1_dir("cpu", path);
                if cpu.exists() {
                    if let Some(shares) = limits.cpu_shares {
                        write(&cpu.join("cpu.shares"), &shares.to_string())?;
                    }
                    if let Some(period) = limits.cpu_period {
                        write(&cpu.join("cpu.cfs_period_us"), &period.to_string())?;
                    }
                    write(
                        &cpu.join("cpu.cfs_quota_us"),
                        &limits.cpu_quota.unwrap_or(-1).to_string(),
                    )?;
                }
            }
            CgroupVersion::V2 => {
                let dir = self.v2_dir(path);
                // Enable controllers down the chain so the pod (and runc below it) can use them.
                let mut current = self.root.clone();
                for part in Self::rel(path).split('/').filter(|p| !p.is_empty()) {
                    let subtree = current.join("cgroup.subtree_control");
                    if subtree.exists() {
                        for c in ["+cpu", "+memory", "+pids"] {
                            // A controller the parent lacks is not an error for the pod.
                            let _ = fs::write(&subtree, c);
                        }
                    }
                    current = current.join(part);
                    create_dir(&current)?;
                }
                write(
                    &dir.join("memory.max"),
                    &limits
                        .memory_limit
                        .map_or_else(|| "max".to_string(), |m| m.to_string()),
                )?;
                if let Some(shares) = limits.cpu_shares {
                    write(
                        &dir.join("cpu.weight"),
                        &shares_to_weight(shares).to_string(),
                    )?;
                }
                let period = limits.cpu_period.unwrap_or(100_000);
                let max = limits
                    .cpu_quota
                    .filter(|q| *q > 0)
                    .map_or_else(|| format!("max {period}"), |q| format!("{q} {period}"));
                write(&dir.join("cpu.max"), &max)?;
            }
        }
        Ok(())
    }

    /// cgroup v2 only: whether the interface file `file` (e.g. `memory.swap.max`) exists in
    /// cgroup `path`, i.e. its controller is enabled there and the kernel has the feature.
    /// The kubelet checks `memory.swap.max` the same way before limiting swap.
    pub fn v2_has_file(&self, path: &str, file: &str) -> bool {
        self.version == CgroupVersion::V2 && self.v2_dir(path).join(file).exists()
    }

    /// Removes the cgroup if it is empty; leftovers are logged, not fatal.
    pub fn remove(&self, path: &str) {
        let dirs: Vec<PathBuf> = match self.version {
            CgroupVersion::V1 => V1_CONTROLLERS
                .iter()
                .map(|c| self.v1_dir(c, path))
                .collect(),
            CgroupVersion::V2 => vec![self.v2_dir(path)],
        };
        for dir in dirs {
            if !dir.exists() {
                continue;
            }
            // Children first (runc normally removes its own, but not after a crash).
            if let Ok(entries) = fs::read_dir(&dir) {
                for entry in entries.flatten() {
                    if entry.path().is_dir() {
                        let _ = fs::remove_dir(entry.path());
                    }
                }
            }
            if let Err(e) = fs::remove_dir(&dir) {
                tracing::debug!(path = %dir.display(), error = %e, "removing cgroup");
            }
        }
    }

    /// The cgroup's usage as the stats collector reads it; `None` once it is gone.
    pub fn stats(&self, path: &str) -> Option<CgroupSample> {
        self.reader.read(path).ok()
    }
}

/// cpu.shares (2..262144) to cpu.weight (1..10000), the formula runc and the kubelet use.
pub fn shares_to_weight(shares: u64) -> u64 {
    if shares == 0 {
        return 100;
    }
    1 + (shares.saturating_sub(2) * 9999) / 262_142
}

fn create_dir(dir: &Path) -> Result<(), CgroupError> {
    fs::create_dir_all(dir).map_err(|source| CgroupError::Create {
        path: dir.to_path_buf(),
        source,
    })
}

fn write(path: &Path, value: &str) -> Result<(), CgroupError> {
    fs::write(path, value).map_err(|source| CgroupError::Write {
        path: path.to_path_buf(),
        value: value.to_string(),
        source,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn v1_fixture_limits_and_stats() {
        let root = tempfile::tempdir().unwrap();
        for c in V1_CONTROLLERS {
            fs::create_dir_all(root.path().join(c)).unwrap();
        }
        let m = CgroupManager::detect(root.path());
        assert_eq!(m.version(), CgroupVersion::V1);
        m.ensure(
            "/cairn/kubepods/pod1",
            &PodResources {
                memory_limit: Some(64 << 20),
                cpu_shares: Some(512),
                cpu_quota: Some(50_000),
                cpu_period: Some(100_000),
            },
        )
        .unwrap();
        let mem = root.path().join("memory/cairn/kubepods/pod1");
        assert_eq!(
            fs::read_to_string(mem.join("memory.limit_in_bytes")).unwrap(),
            (64 << 20).to_string()
        );
        fs::write(mem.join("memory.usage_in_bytes"), "1000\n").unwrap();
        fs::write(
            mem.join("memory.stat"),
            "total_inactive_file 300\ntotal_rss 500\n",
        )
        .unwrap();
        fs::write(
            mem.join("memory.oom_control"),
            "oom_kill_disable 0\nunder_oom 0\noom_kill 2\n",
        )
        .unwrap();
        let s = m.stats("/cairn/kubepods/pod1").unwrap();
        assert_eq!(s.memory.working_set_bytes, Some(700));
        assert_eq!(s.memory.rss_bytes, Some(500));
        assert_eq!(s.memory.oom_events, Some(2));
        assert_eq!(
            fs::read_to_string(root.path().join("cpu/cairn/kubepods/pod1/cpu.shares")).unwrap(),
            "512"
        );
    }

    #[test]
    fn v2_fixture_limits_and_stats() {
        let root = tempfile::tempdir().unwrap();
        fs::write(root.path().join("cgroup.controllers"), "cpu memory pids").unwrap();
        let m = CgroupManager::detect(root.path());
        assert_eq!(m.version(), CgroupVersion::V2);
        m.ensure(
            "/cairn/pod2",
            &PodResources {
                memory_limit: Some(1 << 20),
                cpu_shares: Some(1024),
                ..Default::default()
            },
        )
        .unwrap();
        let dir = root.path().join("cairn/pod2");
        assert_eq!(
            fs::read_to_string(dir.join("memory.max")).unwrap(),
            "1048576"
        );
        assert_eq!(
            fs::read_to_string(dir.join("cpu.max")).unwrap(),
            "max 100000"
        );
        fs::write(
            dir.join("memory.events"),
            "low 0\nhigh 0\nmax 3\noom 1\noom_kill 1\n",
        )
        .unwrap();
        fs::write(dir.join("cpu.stat"), "usage_usec 42\n").unwrap();
        assert!(!m.v2_has_file("/cairn/pod2", "memory.swap.max"));
        fs::write(dir.join("memory.swap.max"), "max\n").unwrap();
        assert!(m.v2_has_file("/cairn/pod2", "memory.swap.max"));
        let s = m.stats("/cairn/pod2").unwrap();
        assert_eq!(s.memory.oom_events, Some(1));
        assert_eq!(s.cpu.usage_ns, Some(42_000));
        assert!(m.stats("/cairn/gone").is_none());
    }

    #[test]
    fn weight_conversion_matches_runc() {
        assert_eq!(shares_to_weight(2), 1);
        assert_eq!(shares_to_weight(1024), 39);
        assert_eq!(shares_to_weight(262_144), 10_000);
    }
}
