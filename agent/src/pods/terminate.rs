//! Termination: preStop hooks, SIGTERM and SIGKILL at the grace deadline, cleanup of
//! containers, sandbox, cgroup and volumes, and the final delete.

use super::*;

impl Worker {
    /// Graceful stop of every running container in parallel: preStop hook, SIGTERM, SIGKILL
    /// at the end of the grace period.
    pub(super) async fn terminate(&mut self, pod: &Pod, grace: Duration) {
        let (sandboxes, containers) = match self.my_state().await {
            Ok(state) => state,
            Err(e) => {
                // Nothing can be stopped without knowing what runs; cleanup still removes
                // what it can find, and orphan cleanup the rest after the next full list.
                warn!(error = %e, "listing the pod's containers to stop them");
                return;
            }
        };
        let spec = pod.spec.clone().unwrap_or_default();
        let pod_ip = if spec.host_network == Some(true) {
            self.h.node.node_ip.clone()
        } else {
            sandboxes
                .iter()
                .filter(|s| s.state == SandboxState::Ready)
                .max_by_key(|s| s.attempt)
                .and_then(|s| s.ip.clone())
        };
        let running: Vec<(&ContainerStatus, String)> = containers
            .iter()
            .filter(|c| c.state == ContainerState::Running)
            .map(|c| (c, format!("Stopping container {}", c.name)))
            .collect();
        let stops = running.iter().map(|(c, message)| {
            let spec_c = spec
                .containers
                .iter()
                .chain(spec.init_containers.iter().flatten())
                .find(|s| s.name == c.name);
            kill_container(&self.h, pod, spec_c, c, pod_ip.as_deref(), grace, message)
        });
        futures::future::join_all(stops).await;
        self.logs_ended(&containers);
    }

    /// Log followers end once their container is no longer running.
    fn logs_ended(&self, containers: &[ContainerStatus]) {
        for c in containers {
            let path = std::path::Path::new(&c.log_path);
            self.h.ledger.set_log_live(path, false);
        }
    }

    /// Removes containers, sandbox (CNI DEL), cgroup, volumes and logs of the pod.
    pub(super) async fn cleanup(&mut self, pod: &Pod) {
        match self.my_state().await {
            Ok((sandboxes, containers)) => {
                self.logs_ended(&containers);
                for c in &containers {
                    if let Err(e) = self.h.runtime.remove_container(&c.id).await {
                        // Orphan cleanup retries after the next full list.
                        warn!(container = %c.id, error = %e, "removing container");
                    }
                }
                for s in &sandboxes {
                    if let Err(e) = self.h.runtime.remove_pod_sandbox(&s.id).await {
                        // Orphan cleanup retries after the next full list.
                        warn!(sandbox = %s.id, error = %e, "removing sandbox");
                    }
                }
            }
            // Orphan cleanup finds what is left after the next full list.
            Err(e) => warn!(error = %e, "listing the pod's containers to remove them"),
        }
        let config = &self.h.node.config;
        self.h
            .cgroups
            .remove(&cgroup_parent(&config.cgroup_root, pod));
        volumes::teardown(&config.root_dir, &self.uid);
        let ns = pod.metadata.namespace.as_deref().unwrap_or("default");
        let name = pod.metadata.name.as_deref().unwrap_or("");
        let logs = cairn_podlogs::pod_log_dir(&config.pod_log_dir, ns, name, &self.uid);
        if let Err(e) = std::fs::remove_dir_all(&logs) {
            if e.kind() != std::io::ErrorKind::NotFound {
                // Only disk space is at stake; the directory is named by the pod's UID.
                warn!(path = %logs.display(), error = %e, "removing the pod's logs");
            }
        }
    }

    /// The final delete (grace 0, UID precondition) that removes the pod object.
    pub(super) async fn finish_deletion(&self, pod: &Pod) {
        if is_static(pod) {
            return;
        }
        let ns = pod.metadata.namespace.as_deref().unwrap_or("default");
        let name = pod.metadata.name.as_deref().unwrap_or("");
        for _ in 0..5 {
            match self.h.api.delete_final(ns, name, &self.uid).await {
                Ok(()) | Err(PodApiError::NotFound(_) | PodApiError::Conflict(_)) => return,
                Err(e) => {
                    warn!(error = %e, "final pod delete");
                    tokio::time::sleep(Duration::from_secs(1)).await;
                }
            }
        }
    }
}

/// The pod's `terminationGracePeriodSeconds` (default 30).
pub(super) fn pod_grace(pod: &Pod) -> Duration {
    let secs = pod
        .spec
        .as_ref()
        .and_then(|s| s.termination_grace_period_seconds)
        .unwrap_or(30);
    Duration::from_secs(secs.max(0) as u64)
}

/// Grace for a kill after a failed liveness/startup probe: the probe's own
/// `terminationGracePeriodSeconds` when set, else the pod's.
pub(super) fn probe_grace(pod: &Pod, probe: &k8s_openapi::api::core::v1::Probe) -> Duration {
    match probe.termination_grace_period_seconds {
        Some(secs) => Duration::from_secs(secs.max(0) as u64),
        None => pod_grace(pod),
    }
}

/// The kubelet's `killContainer`: a `Killing` event, the preStop hook bounded by the grace
/// period (a failure is a `FailedPreStopHook` warning, nothing more), then SIGTERM and SIGKILL
/// when what is left of the grace period (at least 2 s after a hook) runs out.
pub(super) async fn kill_container(
    h: &Handles,
    pod: &Pod,
    spec: Option<&Container>,
    cur: &ContainerStatus,
    pod_ip: Option<&str>,
    grace: Duration,
    message: &str,
) {
    h.events
        .pod(pod, Some(&cur.name), EventType::Normal, "Killing", message);
    let pre_stop = spec.and_then(|c| Some((c, c.lifecycle.as_ref()?.pre_stop.as_ref()?)));
    let mut left = grace;
    if let Some((c, hook)) = pre_stop.filter(|_| !grace.is_zero()) {
        let started = tokio::time::Instant::now();
        match hooks::run(h.runtime.as_ref(), c, &cur.id, pod_ip, hook, grace).await {
            Ok(()) => {}
            Err(e) if e.is_deadline() => {
                info!(container = %cur.name, "preStop hook did not finish within the grace period")
            }
            Err(e) => {
                report_hook_failure(h.events.as_ref(), pod, c, hook, &e, "PreStop");
            }
        }
        left = grace
            .saturating_sub(started.elapsed())
            .max(MIN_GRACE_AFTER_HOOK);
    }
    if let Err(e) = h.runtime.stop_container(&cur.id, left).await {
        warn!(container = %cur.id, error = %e, "stopping container");
    }
}
