//! Pinned pod namespaces: a network namespace (and UTS/IPC namespaces the pod's containers
//! share) that outlive any process, kept alive by bind mounts like `ip netns add` does.
//!
//! The pod needs no pause process: runc joins these namespaces by path.

use std::fs;
use std::path::{Path, PathBuf};

use nix::mount::{mount, umount2, MntFlags, MsFlags};
use nix::sched::{unshare, CloneFlags};

#[derive(Debug, thiserror::Error)]
pub enum NetnsError {
    #[error("creating pinned namespace file {path}: {source}")]
    Create {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("unsharing namespaces for {path}: {source}")]
    Unshare { path: PathBuf, source: nix::Error },
    #[error("pinning namespace at {path}: {source}")]
    Pin { path: PathBuf, source: nix::Error },
    #[error("setting hostname {hostname}: {source}")]
    Hostname {
        hostname: String,
        source: nix::Error,
    },
    #[error("unpinning namespace at {path}: {source}")]
    Unpin { path: PathBuf, source: nix::Error },
    #[error("namespace helper thread for {path} died")]
    Thread { path: PathBuf },
}

/// Paths of one pod's pinned namespaces.
#[derive(Debug, Clone, PartialEq)]
pub struct PodNamespaces {
    pub net: PathBuf,
    pub uts: PathBuf,
    pub ipc: PathBuf,
}

impl PodNamespaces {
    pub fn under(dir: &Path, sandbox_id: &str) -> Self {
        PodNamespaces {
            net: dir.join("netns").join(sandbox_id),
            uts: dir.join("utsns").join(sandbox_id),
            ipc: dir.join("ipcns").join(sandbox_id),
        }
    }
}

/// Creates and pins new net, UTS and IPC namespaces; sets `hostname` in the UTS one.
///
/// Runs on a dedicated OS thread because `unshare` changes the calling thread's
/// namespaces; the thread ends right after, so no other work ever runs inside them.
pub fn create(paths: &PodNamespaces, hostname: &str) -> Result<(), NetnsError> {
    for path in [&paths.net, &paths.uts, &paths.ipc] {
        if let Some(parent) = path.parent() {
            fs::create_dir_all(parent).map_err(|source| NetnsError::Create {
                path: parent.to_path_buf(),
                source,
            })?;
        }
        fs::File::create(path).map_err(|source| NetnsError::Create {
            path: path.clone(),
            source,
        })?;
    }
    let thread_paths = paths.clone();
    let hostname = hostname.to_string();
    let result = std::thread::spawn(move || pin_new_namespaces(&thread_paths, &hostname))
        .join()
        .map_err(|_| NetnsError::Thread {
            path: paths.net.clone(),
        })?;
    if result.is_err() {
        remove(paths);
    }
    result
}

fn pin_new_namespaces(paths: &PodNamespaces, hostname: &str) -> Result<(), NetnsError> {
    unshare(CloneFlags::CLONE_NEWNET | CloneFlags::CLONE_NEWUTS | CloneFlags::CLONE_NEWIPC)
        .map_err(|source| NetnsError::Unshare {
            path: paths.net.clone(),
            source,
        })?;
    if !hostname.is_empty() {
        nix::unistd::sethostname(hostname).map_err(|source| NetnsError::Hostname {
            hostname: hostname.to_string(),
            source,
        })?;
    }
    for (kind, target) in [
        ("net", &paths.net),
        ("uts", &paths.uts),
        ("ipc", &paths.ipc),
    ] {
        let source = format!("/proc/thread-self/ns/{kind}");
        mount(
            Some(source.as_str()),
            target.as_path(),
            None::<&str>,
            MsFlags::MS_BIND,
            None::<&str>,
        )
        .map_err(|source| NetnsError::Pin {
            path: target.clone(),
            source,
        })?;
    }
    Ok(())
}

/// Unpins and deletes the namespace files; missing ones are fine (idempotent teardown).
pub fn remove(paths: &PodNamespaces) {
    for path in [&paths.net, &paths.uts, &paths.ipc] {
        if let Err(e) = unpin(path) {
            tracing::warn!(path = %path.display(), error = %e, "unpinning namespace");
        }
    }
}

fn unpin(path: &Path) -> Result<(), NetnsError> {
    match umount2(path, MntFlags::MNT_DETACH) {
        Ok(()) | Err(nix::Error::EINVAL) | Err(nix::Error::ENOENT) => {}
        Err(source) => {
            return Err(NetnsError::Unpin {
                path: path.to_path_buf(),
                source,
            })
        }
    }
    match fs::remove_file(path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(NetnsError::Create {
            path: path.to_path_buf(),
            source: e,
        }),
    }
}

/// Whether `path` is a pinned namespace (a mount point whose inode is an nsfs file).
pub fn is_pinned(path: &Path) -> bool {
    // An nsfs bind mount reports the nsfs magic; a plain empty file does not.
    match nix::sys::statfs::statfs(path) {
        Ok(fs) => fs.filesystem_type() == nix::sys::statfs::NSFS_MAGIC,
        Err(_) => false,
    }
}
