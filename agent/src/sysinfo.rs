//! Host facts for the Node object, read from procfs and /etc under a root path so tests can
//! use fixture trees.

use std::path::{Path, PathBuf};

#[derive(Debug, Clone)]
pub struct HostRoot {
    pub proc: PathBuf,
    pub etc: PathBuf,
}

impl Default for HostRoot {
    fn default() -> Self {
        HostRoot {
            proc: "/proc".into(),
            etc: "/etc".into(),
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct MemInfo {
    pub total_bytes: u64,
    pub available_bytes: u64,
}

impl HostRoot {
    pub fn meminfo(&self) -> Option<MemInfo> {
        let text = std::fs::read_to_string(self.proc.join("meminfo")).ok()?;
        let field = |name: &str| -> Option<u64> {
            text.lines().find_map(|l| {
                let rest = l.strip_prefix(name)?.strip_prefix(':')?;
                let kb: u64 = rest.trim().trim_end_matches("kB").trim().parse().ok()?;
                Some(kb * 1024)
            })
        };
        Some(MemInfo {
            total_bytes: field("MemTotal")?,
            available_bytes: field("MemAvailable").or_else(|| field("MemFree"))?,
        })
    }

    /// Online CPUs (the count the scheduler may use), from /proc/cpuinfo.
    pub fn cpus(&self) -> u64 {
        std::fs::read_to_string(self.proc.join("cpuinfo"))
            .map(|t| t.lines().filter(|l| l.starts_with("processor")).count() as u64)
            .ok()
            .filter(|n| *n > 0)
            .unwrap_or(1)
    }

    pub fn boot_id(&self) -> String {
        read_trim(&self.proc.join("sys/kernel/random/boot_id"))
    }

    pub fn kernel_version(&self) -> String {
        read_trim(&self.proc.join("sys/kernel/osrelease"))
    }

    pub fn pid_max(&self) -> u64 {
        read_trim(&self.proc.join("sys/kernel/pid_max"))
            .parse()
            .unwrap_or(32768)
    }

    /// Number of processes (numeric entries of /proc).
    pub fn process_count(&self) -> u64 {
        std::fs::read_dir(&self.proc)
            .map(|d| {
                d.flatten()
                    .filter(|e| {
                        e.file_name()
                            .to_string_lossy()
                            .bytes()
                            .all(|b| b.is_ascii_digit())
                    })
                    .count() as u64
            })
            .unwrap_or(0)
    }

    pub fn machine_id(&self) -> String {
        let id = read_trim(&self.etc.join("machine-id"));
        if id.is_empty() {
            read_trim(Path::new("/var/lib/dbus/machine-id"))
        } else {
            id
        }
    }

    pub fn os_image(&self) -> String {
        let text = std::fs::read_to_string(self.etc.join("os-release")).unwrap_or_default();
        text.lines()
            .find_map(|l| l.strip_prefix("PRETTY_NAME="))
            .map(|v| v.trim_matches('"').to_string())
            .unwrap_or_else(|| "Linux".into())
    }
}

fn read_trim(path: &Path) -> String {
    std::fs::read_to_string(path)
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

/// Capacity and availability of one filesystem, in bytes and inodes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FsUsage {
    pub bytes: u64,
    pub available: u64,
    /// Zero where the filesystem keeps no inode count (btrfs, some overlays).
    pub inodes: u64,
    pub inodes_free: u64,
}

/// The filesystem holding `path` (one statvfs: the node's status, eviction's nodefs and
/// imagefs signals and the image GC all read it).
pub fn filesystem_usage(path: &Path) -> Option<FsUsage> {
    let st = nix::sys::statvfs::statvfs(path).ok()?;
    let frag = st.fragment_size();
    Some(FsUsage {
        bytes: st.blocks() * frag,
        available: st.blocks_available() * frag,
        inodes: st.files(),
        inodes_free: st.files_available(),
    })
}

/// Total and available bytes of the filesystem holding `path`.
pub fn filesystem_bytes(path: &Path) -> Option<(u64, u64)> {
    filesystem_usage(path).map(|fs| (fs.bytes, fs.available))
}

/// The first global IPv4 address of a non-pod interface.
pub fn detect_node_ip() -> Option<String> {
    let addrs = nix::ifaddrs::getifaddrs().ok()?;
    let mut found = Vec::new();
    for ifa in addrs {
        let name = ifa.interface_name.clone();
        if name == "lo"
            || name.starts_with("cni")
            || name.starts_with("cairn")
            || name.starts_with("veth")
        {
            continue;
        }
        if let Some(addr) = ifa.address.as_ref().and_then(|a| a.as_sockaddr_in()) {
            let ip = addr.ip();
            if !ip.is_loopback() && !ip.is_link_local() {
                found.push(ip.to_string());
            }
        }
    }
    found.into_iter().next()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_fixture_proc() {
        let dir = tempfile::tempdir().unwrap();
        let proc = dir.path().join("proc");
        std::fs::create_dir_all(proc.join("sys/kernel/random")).unwrap();
        std::fs::write(
            proc.join("meminfo"),
            "MemTotal:       2048 kB\nMemFree:  100 kB\nMemAvailable:   1024 kB\n",
        )
        .unwrap();
        std::fs::write(proc.join("cpuinfo"), "processor\t: 0\nx\nprocessor\t: 1\n").unwrap();
        std::fs::write(proc.join("sys/kernel/random/boot_id"), "abc\n").unwrap();
        std::fs::create_dir_all(proc.join("42")).unwrap();
        let etc = dir.path().join("etc");
        std::fs::create_dir_all(&etc).unwrap();
        std::fs::write(
            etc.join("os-release"),
            "ID=debian\nPRETTY_NAME=\"Debian GNU/Linux 12 (bookworm)\"\n",
        )
        .unwrap();
        let root = HostRoot { proc, etc };
        assert_eq!(
            root.meminfo(),
            Some(MemInfo {
                total_bytes: 2048 * 1024,
                available_bytes: 1024 * 1024
            })
        );
        assert_eq!(root.cpus(), 2);
        assert_eq!(root.boot_id(), "abc");
        assert_eq!(root.process_count(), 1);
        assert_eq!(root.os_image(), "Debian GNU/Linux 12 (bookworm)");
    }
}
