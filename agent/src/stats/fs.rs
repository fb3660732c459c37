//! Filesystem usage, read once per housekeeping pass beside the cgroups: per container
//! the writable layer from the runtime's snapshotter (the CRI plugin's `WritableLayer`)
//! and the container's log files (every file in its log directory, rotated ones too), as
//! the kubelet's CRI stats provider reports `rootfs` and `logs`; per pod each volume the
//! agent keeps under its pod directory, walked as du walks it (the kubelet's `du`-based
//! volume metrics), without crossing into another filesystem.

use std::collections::HashMap;
use std::path::Path;
use std::time::SystemTime;

use cairn_runtime::LayerUsage;

use crate::sysinfo::FsUsage;

use super::PodTarget;
use crate::Agent;

/// One container's filesystem figures at `time`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ContainerFs {
    pub time: SystemTime,
    pub rootfs: Option<LayerUsage>,
    /// Bytes and files of its logs.
    pub logs: Option<(u64, u64)>,
}

impl ContainerFs {
    /// Bytes and inodes of its writable layer and logs (upstream's container share of
    /// ephemeral storage).
    pub fn storage(&self) -> (u64, u64) {
        let (layer_bytes, layer_inodes) = self.rootfs.map_or((0, 0), |l| (l.bytes, l.inodes));
        let (log_bytes, log_files) = self.logs.unwrap_or((0, 0));
        (layer_bytes + log_bytes, layer_inodes + log_files)
    }
}

/// One pod volume's figures (upstream's `VolumeStats`).
#[derive(Debug, Clone, PartialEq)]
pub struct VolumeFs {
    pub name: String,
    pub time: SystemTime,
    pub used_bytes: u64,
    pub inodes_used: u64,
    /// The filesystem the volume lives on.
    pub filesystem: Option<FsUsage>,
    /// Counted in the pod's ephemeral storage: emptyDir and configMap volumes (upstream's
    /// `IsLocalEphemeralVolume`; cairn keeps every emptyDir on disk, `Memory` ones too).
    pub local_ephemeral: bool,
}

/// What one pass read: containers by id, pod volumes by pod uid.
#[derive(Debug, Clone, Default)]
pub struct FsReadings {
    pub containers: HashMap<String, ContainerFs>,
    pub volumes: HashMap<String, Vec<VolumeFs>>,
}

/// Bytes and files directly in `dir` (a container's log directory).
pub fn directory_usage(dir: &Path) -> Option<(u64, u64)> {
    let entries = std::fs::read_dir(dir).ok()?;
    let (mut bytes, mut files) = (0u64, 0u64);
    for entry in entries.flatten() {
        if let Ok(meta) = entry.metadata() {
            // Allocated blocks, as du counts them (a sparse file holds less than its size).
            use std::os::unix::fs::MetadataExt;
            bytes = bytes.saturating_add(meta.blocks().saturating_mul(512));
            files += 1;
        }
    }
    Some((bytes, files))
}

/// Allocated bytes and inodes of the tree at `dir`, itself included, as `du` counts them:
/// symlinks are not followed and other filesystems mounted inside are not entered. A file
/// that goes away mid-walk is skipped.
pub fn tree_usage(dir: &Path) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    let top = std::fs::symlink_metadata(dir).ok()?;
    let device = top.dev();
    let (mut bytes, mut inodes) = (top.blocks().saturating_mul(512), 1u64);
    let mut pending = vec![dir.to_path_buf()];
    while let Some(next) = pending.pop() {
        let Ok(entries) = std::fs::read_dir(&next) else {
            continue;
        };
        for entry in entries.flatten() {
            let Ok(meta) = entry.metadata() else {
                continue;
            };
            if meta.dev() != device {
                continue;
            }
            bytes = bytes.saturating_add(meta.blocks().saturating_mul(512));
            inodes += 1;
            if meta.is_dir() {
                pending.push(entry.path());
            }
        }
    }
    Some((bytes, inodes))
}

/// Every volume under `<pod dir>/volumes/<plugin>/<name>`.
pub fn pod_volumes(pod_dir: &Path) -> Vec<VolumeFs> {
    let Ok(plugins) = std::fs::read_dir(pod_dir.join("volumes")) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for plugin in plugins.flatten() {
        let plugin_name = plugin.file_name().to_string_lossy().into_owned();
        let local_ephemeral = matches!(
            plugin_name.as_str(),
            "kubernetes.io~empty-dir" | "kubernetes.io~configmap"
        );
        let Ok(volumes) = std::fs::read_dir(plugin.path()) else {
            continue;
        };
        for volume in volumes.flatten() {
            let path = volume.path();
            let Some((used_bytes, inodes_used)) = tree_usage(&path) else {
                continue;
            };
            out.push(VolumeFs {
                name: volume.file_name().to_string_lossy().into_owned(),
                time: SystemTime::now(),
                used_bytes,
                inodes_used,
                filesystem: crate::sysinfo::filesystem_usage(&path),
                local_ephemeral,
            });
        }
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    out
}

/// The figures of every running container of `pods` and of their volumes. A container
/// that went away mid-read is left out (its next pass does not come).
pub async fn read(agent: &Agent, pods: &[PodTarget]) -> FsReadings {
    let root = agent.config.root_dir.clone();
    let uids: Vec<String> = pods.iter().map(|p| p.uid.clone()).collect();
    // A deep emptyDir takes a while to walk: off the async workers.
    let volumes = tokio::task::spawn_blocking(move || {
        uids.into_iter()
            .map(|uid| {
                let volumes = pod_volumes(&crate::volumes::pod_dir(&root, &uid));
                (uid, volumes)
            })
            .collect()
    })
    .await
    .unwrap_or_default();
    FsReadings {
        containers: containers(agent, pods).await,
        volumes,
    }
}

async fn containers(agent: &Agent, pods: &[PodTarget]) -> HashMap<String, ContainerFs> {
    let mut out = HashMap::new();
    for pod in pods {
        let dir = cairn_podlogs::pod_log_dir(
            &agent.config.pod_log_dir,
            &pod.namespace,
            &pod.name,
            &pod.uid,
        );
        for c in &pod.containers {
            let rootfs = agent
                .runtime
                .writable_layer_usage(&c.id)
                .await
                .ok()
                .flatten();
            let logs = directory_usage(&dir.join(&c.name));
            let time = SystemTime::now();
            out.insert(c.id.clone(), ContainerFs { time, rootfs, logs });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_directories_count_their_files() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(dir.path().join("0.log"), vec![b'x'; 64 * 1024]).expect("write");
        std::fs::write(dir.path().join("0.log.20261129-100000"), vec![b'y'; 8192]).expect("write");
        let (bytes, files) = directory_usage(dir.path()).expect("usage");
        assert_eq!(files, 2);
        assert!(bytes >= 72 * 1024, "{bytes}");
        assert_eq!(directory_usage(&dir.path().join("gone")), None);
    }

    #[test]
    fn volumes_are_walked_to_the_bottom_and_only_local_ones_count() {
        let pod = tempfile::tempdir().expect("tempdir");
        let scratch = pod.path().join("volumes/kubernetes.io~empty-dir/scratch");
        std::fs::create_dir_all(scratch.join("a/b")).expect("mkdir");
        std::fs::write(scratch.join("a/b/data"), vec![7u8; 256 * 1024]).expect("write");
        std::os::unix::fs::symlink("/usr", scratch.join("a/usr")).expect("symlink");
        let token = pod.path().join("volumes/kubernetes.io~projected/token");
        std::fs::create_dir_all(&token).expect("mkdir");
        std::fs::write(token.join("token"), b"jwt").expect("write");
        let volumes = pod_volumes(pod.path());
        let names: Vec<(&str, bool)> = volumes
            .iter()
            .map(|v| (v.name.as_str(), v.local_ephemeral))
            .collect();
        assert_eq!(names, [("scratch", true), ("token", false)]);
        // scratch, a, b, data and the symlink itself (not what it points at).
        assert_eq!(volumes[0].inodes_used, 5);
        assert!(volumes[0].used_bytes >= 256 * 1024, "{volumes:?}");
        assert!(volumes[0].used_bytes < 1024 * 1024, "{volumes:?}");
        assert!(volumes[0].filesystem.is_some_and(|f| f.bytes > 0));
        assert!(pod_volumes(&pod.path().join("gone")).is_empty());
    }
}
