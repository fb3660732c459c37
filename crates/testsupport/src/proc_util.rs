//! Process and mount cleanup helpers shared by the harnesses.

use std::path::Path;

use nix::mount::{umount2, MntFlags};
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

/// PIDs whose command line (NUL-joined args, as bytes) contains every one of `needles`.
pub fn pids_whose_cmdline_contains(needles: &[&str]) -> Vec<i32> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return out;
    };
    for entry in entries.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<i32>().ok())
        else {
            continue;
        };
        let Ok(raw) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        let cmdline = String::from_utf8_lossy(&raw).replace('\0', " ");
        if needles.iter().all(|n| cmdline.contains(n)) {
            out.push(pid);
        }
    }
    out
}

/// Direct children of `pid` (from `/proc/*/stat`'s ppid field).
pub fn children_of(pid: i32) -> Vec<i32> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return out;
    };
    for entry in entries.flatten() {
        let Some(child) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<i32>().ok())
        else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        // The comm field may contain spaces and parentheses: fields after the last ')'.
        let Some(rest) = stat.rsplit_once(')').map(|(_, r)| r) else {
            continue;
        };
        let ppid = rest
            .split_whitespace()
            .nth(1)
            .and_then(|s| s.parse::<i32>().ok());
        if ppid == Some(pid) {
            out.push(child);
        }
    }
    out
}

/// SIGKILLs `pid` and all its descendants (children first, so a container's init, which
/// takes its whole PID namespace down, is hit before its shim disappears).
pub fn kill_tree(pid: i32) {
    let _ = kill(Pid::from_raw(pid), Signal::SIGSTOP);
    for child in children_of(pid) {
        kill_tree(child);
    }
    let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
    let _ = kill(Pid::from_raw(pid), Signal::SIGCONT);
}

/// Lazily unmounts every mount point at or below `dir` (deepest/latest first).
pub fn unmount_under(dir: &Path) {
    let Ok(info) = std::fs::read_to_string("/proc/self/mountinfo") else {
        return;
    };
    let prefix = dir.to_string_lossy().into_owned();
    let mut points: Vec<String> = info
        .lines()
        .filter_map(|l| l.split_whitespace().nth(4))
        .map(unescape_mountinfo)
        .filter(|p| p == &prefix || p.starts_with(&format!("{prefix}/")))
        .collect();
    points.reverse();
    for p in points {
        let _ = umount2(p.as_str(), MntFlags::MNT_DETACH);
    }
}

/// mountinfo escapes space, tab, newline and backslash as `\ooo` octal.
fn unescape_mountinfo(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'\\' && i + 3 < bytes.len() {
            let digits = std::str::from_utf8(&bytes[i + 1..i + 4]).unwrap_or("");
            if let Ok(v) = u8::from_str_radix(digits, 8) {
                out.push(v);
                i += 4;
                continue;
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Removes the (empty) cgroup directory `relative` and everything below it in every
/// mounted hierarchy (cgroup v1 controllers, the v2 unified tree, or a pure v2 root).
/// Only `rmdir`: a cgroup that still has processes stays, and is reported.
pub fn remove_cgroup(relative: &str) -> Vec<std::path::PathBuf> {
    let relative = relative.trim_start_matches('/');
    let mut left = Vec::new();
    let mut roots = vec![std::path::PathBuf::from("/sys/fs/cgroup")];
    if let Ok(entries) = std::fs::read_dir("/sys/fs/cgroup") {
        roots.extend(entries.flatten().map(|e| e.path()));
    }
    for root in roots {
        let dir = root.join(relative);
        if dir.is_dir() && !dir.join("cgroup.procs").is_symlink() {
            rmdir_tree(&dir, &mut left);
        }
    }
    left
}

fn rmdir_tree(dir: &Path, left: &mut Vec<std::path::PathBuf>) {
    if let Ok(entries) = std::fs::read_dir(dir) {
        for e in entries.flatten() {
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                rmdir_tree(&e.path(), left);
            }
        }
    }
    if std::fs::remove_dir(dir).is_err() {
        left.push(dir.to_path_buf());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mountinfo_unescape() {
        assert_eq!(unescape_mountinfo("/a\\040b"), "/a b");
        assert_eq!(unescape_mountinfo("/plain"), "/plain");
        assert_eq!(unescape_mountinfo("/end\\"), "/end\\");
    }
}
