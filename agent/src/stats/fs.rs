//! Per-container filesystem usage, read once per housekeeping pass beside the cgroups:
//! the writable layer from the runtime's snapshotter (the CRI plugin's `WritableLayer`)
//! and the container's log files (every file in its log directory, rotated ones too),
//! as the kubelet's CRI stats provider reports `rootfs` and `logs`.

use std::collections::HashMap;
use std::path::Path;
use std::time::SystemTime;

use cairn_runtime::LayerUsage;

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

/// The figures of every running container of `pods`, by container id. A container that
/// went away mid-read is left out (its next pass does not come).
pub async fn read(agent: &Agent, pods: &[PodTarget]) -> HashMap<String, ContainerFs> {
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
}
