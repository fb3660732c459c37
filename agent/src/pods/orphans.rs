//! Orphan cleanup: containerd objects of pods no worker owns (deleted while the agent was
//! down, or left by a crash) are stopped and removed after every full list.

use super::*;

impl PodManager {
    /// Stops and removes containerd objects of pods no worker owns.
    pub async fn clean_orphans(&self) {
        let known = self.known_uids();
        let runtime = &self.h.runtime;
        let containers = match runtime.list_containers().await {
            Ok(c) => c,
            Err(e) => {
                warn!(error = %e, "listing containers for orphan cleanup");
                return;
            }
        };
        let sandboxes = match runtime.list_pod_sandboxes().await {
            Ok(s) => s,
            Err(e) => {
                // The next full list tries again.
                warn!(error = %e, "listing sandboxes for orphan cleanup");
                Vec::new()
            }
        };
        let mut orphan_pods: HashSet<String> = HashSet::new();
        for c in containers.iter().filter(|c| !known.contains(&c.pod_uid)) {
            info!(container = %c.id, pod = %format!("{}/{}", c.pod_namespace, c.pod_name), "removing container of a pod that no longer exists");
            if let Err(e) = runtime.stop_container(&c.id, Duration::from_secs(2)).await {
                warn!(container = %c.id, error = %e, "stopping orphan container");
            }
            if let Err(e) = runtime.remove_container(&c.id).await {
                warn!(container = %c.id, error = %e, "removing orphan container");
            }
            orphan_pods.insert(c.pod_uid.clone());
        }
        for s in sandboxes.iter().filter(|s| !known.contains(&s.uid)) {
            info!(sandbox = %s.id, pod = %format!("{}/{}", s.namespace, s.name), "removing sandbox of a pod that no longer exists");
            if let Err(e) = runtime.remove_pod_sandbox(&s.id).await {
                warn!(sandbox = %s.id, error = %e, "removing orphan sandbox");
            }
            orphan_pods.insert(s.uid.clone());
            let log_dir = cairn_podlogs::pod_log_dir(
                &self.h.node.config.pod_log_dir,
                &s.namespace,
                &s.name,
                &s.uid,
            );
            if let Err(e) = std::fs::remove_dir_all(&log_dir) {
                if e.kind() != std::io::ErrorKind::NotFound {
                    // Only disk space is at stake; the next cleanup tries again.
                    warn!(path = %log_dir.display(), error = %e, "removing an orphan's logs");
                }
            }
        }
        for uid in orphan_pods {
            if !self.known_uids().contains(&uid) {
                let config = &self.h.node.config;
                volumes::teardown(&config.root_dir, &uid);
                for qos in ["", "burstable/", "besteffort/"] {
                    let cgroup = format!("{}/kubepods/{qos}pod{uid}", config.cgroup_root);
                    self.h.cgroups.remove(&cgroup);
                }
            }
        }
    }
}
