//! The volumes phase: the pod's etc files (hosts, resolv.conf, hostname) and its volumes.

use super::*;

impl Worker {
    /// Every pass asks to be woken when a mounted token is due: other wake-ups reset
    /// the timer, and the ten-second resync alone could miss a short token's expiry.
    fn wake_for_token(&mut self) {
        if let Some(at) = self.volumes_refresh_by {
            let wait = at.duration_since(std::time::SystemTime::now());
            // A token already due (a clock skewed against the server's) must not spin.
            self.wake_in(wait.unwrap_or_default().max(Duration::from_secs(1)));
        }
    }

    /// Pod files and volumes (volumes refreshed every minute so configMap/secret updates
    /// land). `false`: a volume failed; the pass ends (reported, retried in 5 s).
    pub(super) async fn sync_volumes(
        &mut self,
        pod: &Pod,
        containers: &[ContainerStatus],
        pod_ip: Option<&str>,
    ) -> bool {
        if let Err(e) = self.write_pod_files(pod, pod_ip) {
            // hosts/hostname/resolv.conf are rewritten on every sync: the next one repairs.
            warn!(error = %e, "writing pod etc files");
        }
        // Refreshed each minute, and sooner when a projected token is due.
        let token_due = self
            .volumes_refresh_by
            .is_some_and(|at| std::time::SystemTime::now() >= at);
        let fresh = self
            .volumes_synced
            .is_some_and(|t| t.elapsed() <= Duration::from_secs(60));
        if fresh && !token_due {
            self.wake_for_token();
            return true;
        }
        let alloc = self.h.node.allocatable();
        let ctx = VolumeContext {
            root: &self.h.node.config.root_dir,
            pod,
            source: self.h.config_source.as_ref(),
            host_ip: self.h.node.node_ip.as_deref(),
            pod_ip,
            node_alloc: &alloc,
            refresh_by: parking_lot::Mutex::new(None),
        };
        match volumes::setup(&ctx).await {
            Ok(paths) => {
                self.volume_paths = paths;
                self.volumes_synced = Some(tokio::time::Instant::now());
                self.volumes_refresh_by = ctx.refresh_by.into_inner();
                self.wake_for_token();
                true
            }
            Err(e) => {
                let message = e.to_string();
                self.h
                    .events
                    .pod(pod, None, EventType::Warning, "FailedMount", &message);
                let spec = pod.spec.clone().unwrap_or_default();
                let all = spec
                    .init_containers
                    .iter()
                    .flatten()
                    .chain(spec.containers.iter());
                self.wait_all(all, "ContainerCreating", &message);
                let refs: Vec<&ContainerStatus> = containers.iter().collect();
                self.write_status(pod, &refs, pod_ip.map(str::to_string))
                    .await;
                self.wake_in(Duration::from_secs(5));
                false
            }
        }
    }

    pub(super) fn write_pod_files(&self, pod: &Pod, ip: Option<&str>) -> std::io::Result<()> {
        let dir = volumes::pod_dir(&self.h.node.config.root_dir, &self.uid);
        std::fs::create_dir_all(&dir)?;
        let cfg = &self.h.node.config;
        let hosts = volumes::hosts_file(pod, ip, &cfg.cluster_domain);
        write_if_changed(&dir.join("etc-hosts"), hosts.as_bytes())?;
        let host_resolv = std::fs::read_to_string("/etc/resolv.conf").unwrap_or_default();
        let resolv = volumes::resolv_conf(pod, &cfg.cluster_dns, &cfg.cluster_domain, &host_resolv);
        write_if_changed(&dir.join("resolv.conf"), resolv.as_bytes())?;
        let spec = pod.spec.as_ref();
        let hostname = if spec.and_then(|s| s.host_network) == Some(true) {
            cfg.node_name.clone()
        } else {
            spec.and_then(|s| s.hostname.clone())
                .or(pod.metadata.name.clone())
                .unwrap_or_default()
        };
        write_if_changed(&dir.join("hostname"), format!("{hostname}\n").as_bytes())?;
        Ok(())
    }
}
