//! Reads a cgroup's statistics under a root path (normally `/sys/fs/cgroup`), v1 or v2,
//! as youki's libcgroups does: a fixture tree stands in for the real one in tests.

mod v1;
mod v2;

use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};

use nix::fcntl::OFlag;
use nix::sys::stat::Mode;

use crate::sample::{CgroupSample, ProcessCounts};

#[derive(Debug, thiserror::Error)]
pub enum CgroupReadError {
    /// The cgroup is gone: its container exited. The pass skips it.
    #[error("cgroup {path} does not exist (its container has exited)")]
    Gone { path: PathBuf },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hierarchy {
    V1,
    V2,
}

/// Reads cgroups under `root`; process details (file descriptors) under `proc_root`.
#[derive(Debug, Clone)]
pub struct CgroupReader {
    root: PathBuf,
    proc_root: PathBuf,
    hierarchy: Hierarchy,
    /// USER_HZ: the unit of cgroup v1's `cpuacct.stat`.
    clock_ticks: u64,
}

impl CgroupReader {
    /// Detects the hierarchy: a `cgroup.controllers` file at the root means v2.
    pub fn new(root: &Path, proc_root: &Path) -> CgroupReader {
        let hierarchy = match root.join("cgroup.controllers").exists() {
            true => Hierarchy::V2,
            false => Hierarchy::V1,
        };
        CgroupReader {
            root: root.to_path_buf(),
            proc_root: proc_root.to_path_buf(),
            hierarchy,
            clock_ticks: procfs::ticks_per_second().max(1),
        }
    }

    pub fn hierarchy(&self) -> Hierarchy {
        self.hierarchy
    }

    /// Reads `cgroup` (a path as the runtime names it, e.g. `/kubepods/pod<uid>/<id>`).
    pub fn read(&self, cgroup: &str) -> Result<CgroupSample, CgroupReadError> {
        let rel = cgroup.trim_start_matches('/');
        let mut sample = match self.hierarchy {
            Hierarchy::V1 => v1::sample(&self.root, rel, self.clock_ticks)?,
            Hierarchy::V2 => v2::sample(&self.root, rel)?,
        };
        sample.processes.file_descriptors = self.count_fds(&sample.pids);
        Ok(sample)
    }

    /// Open descriptors of `pids`; a process that exits meanwhile counts none.
    fn count_fds(&self, pids: &[u32]) -> Option<u64> {
        let mut total = 0u64;
        let mut seen_any = false;
        for pid in pids {
            let Ok(entries) = std::fs::read_dir(self.proc_root.join(pid.to_string()).join("fd"))
            else {
                continue;
            };
            seen_any = true;
            total += entries.count() as u64;
        }
        (seen_any || pids.is_empty()).then_some(total)
    }
}

/// A cgroup directory, opened once per read (`O_PATH`): its files are opened relative
/// to it, so the kernel walks one path component per file instead of the whole path
/// from `/` (a pass opens some 2,000 files; the walks were a third of its CPU).
pub(super) struct CgroupDir(OwnedFd);

impl CgroupDir {
    /// The directory, or `Gone` if it cannot be opened (its container has exited).
    pub(super) fn open(path: &Path) -> Result<CgroupDir, CgroupReadError> {
        let flags = OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC;
        nix::fcntl::open(path, flags, Mode::empty())
            .map(CgroupDir)
            .map_err(|_| CgroupReadError::Gone {
                path: path.to_path_buf(),
            })
    }

    /// A file's text; missing or unreadable is `None`, as is every value it would give.
    /// Not `fs::read_to_string`: `File`'s size hint costs a `statx` and an `lseek` per
    /// file, and cgroupfs reports size 0 anyway.
    pub(super) fn read(&self, name: &str) -> Option<String> {
        use std::io::Read;
        let flags = OFlag::O_RDONLY | OFlag::O_CLOEXEC;
        let fd = nix::fcntl::openat(&self.0, name, flags, Mode::empty()).ok()?;
        let mut file = std::fs::File::from(fd);
        let mut buf = vec![0u8; READ_CAPACITY];
        let mut len = 0;
        loop {
            if len == buf.len() {
                buf.resize(len * 2, 0);
            }
            match file.read(&mut buf[len..]) {
                Ok(0) => break,
                Ok(n) => len += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(_) => return None,
            }
        }
        buf.truncate(len);
        String::from_utf8(buf).ok()
    }
}

/// A file of a directory that may be missing (an absent v1 controller).
pub(super) fn read_in(dir: Option<&CgroupDir>, name: &str) -> Option<String> {
    dir?.read(name)
}

/// Enough for v1's `memory.stat` (the largest file a pass reads) in one `read`.
const READ_CAPACITY: usize = 4096;

/// Process and thread counts from the cgroup's `procs` and thread list files.
fn process_counts(procs: Option<String>, threads: Option<String>) -> (ProcessCounts, Vec<u32>) {
    let pids = procs.as_deref().map(crate::parse::pid_list);
    let counts = ProcessCounts {
        processes: pids.as_ref().map(|p| p.len() as u64),
        threads: threads
            .as_deref()
            .map(|t| crate::parse::pid_list(t).len() as u64),
        file_descriptors: None,
    };
    (counts, pids.unwrap_or_default())
}
