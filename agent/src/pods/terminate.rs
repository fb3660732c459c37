//! Termination: preStop hooks, SIGTERM and SIGKILL at the grace deadline, cleanup of
//! containers, sandbox, cgroup and volumes, and the final delete.

use super::*;

/// First wait before asking the runtime again about a pod it has not confirmed stopped.
const STOP_RETRY_FIRST: Duration = Duration::from_millis(100);
const STOP_RETRY_MAX: Duration = Duration::from_secs(5);

impl Worker {
    /// Graceful stop of every running container in parallel (preStop hook, SIGTERM,
    /// SIGKILL at the end of the grace period), until the runtime confirms nothing of the
    /// pod runs: an exit is taken from the runtime's task state, never from an event alone,
    /// and a runtime that is down or restarting is asked again (SIGKILL once the grace
    /// period is over) instead of leaving a container running behind a deleted pod.
    pub(super) async fn terminate(&mut self, pod: &Pod, grace: Duration) {
        let deadline = tokio::time::Instant::now() + grace;
        let mut killed: HashSet<String> = HashSet::new();
        let mut retry = STOP_RETRY_FIRST;
        loop {
            let (sandboxes, containers) = match self.my_state().await {
                Ok(state) => state,
                Err(e) => {
                    warn!(error = %e, retry_in = ?retry, "listing the pod's containers to stop them");
                    tokio::time::sleep(retry).await;
                    retry = (retry * 2).min(STOP_RETRY_MAX);
                    continue;
                }
            };
            let running: Vec<&ContainerStatus> = containers
                .iter()
                .filter(|c| c.state == ContainerState::Running)
                .collect();
            if running.is_empty() {
                self.logs_ended(&containers);
                return;
            }
            if running.iter().all(|c| killed.contains(&c.id)) {
                // Stopped before and still running: the runtime has not confirmed the end.
                warn!(containers = running.len(), retry_in = ?retry, "containers still running after their stop");
                tokio::time::sleep(retry).await;
                retry = (retry * 2).min(STOP_RETRY_MAX);
            }
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            self.stop_all(pod, &sandboxes, &running, left, &mut killed)
                .await;
        }
    }

    /// One round of [`Worker::terminate`]: `running` stopped in parallel within `left`; the
    /// `Killing` event and the preStop hook only on a container's first round.
    async fn stop_all(
        &self,
        pod: &Pod,
        sandboxes: &[PodSandbox],
        running: &[&ContainerStatus],
        left: Duration,
        killed: &mut HashSet<String>,
    ) {
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
        let stops = running.iter().map(|c| {
            let first = killed.insert(c.id.clone());
            let spec_c = spec
                .containers
                .iter()
                .chain(spec.init_containers.iter().flatten())
                .find(|s| s.name == c.name);
            let message = format!("Stopping container {}", c.name);
            let h = &self.h;
            let ip = pod_ip.as_deref();
            async move {
                if first {
                    kill_container(h, pod, spec_c, c, ip, left, &message).await;
                } else if let Err(e) = h.runtime.stop_container(&c.id, Duration::ZERO).await {
                    warn!(container = %c.id, error = %e, "stopping container again");
                }
            }
        });
        futures::future::join_all(stops).await;
    }

    /// The last status of a deleted pod, once nothing of it runs: every container
    /// terminated, the phase final (as the kubelet writes before its final delete, so
    /// controllers waiting on a terminal phase — the Job controller's finalizer — see it).
    pub(super) async fn write_final_status(&mut self, pod: &Pod) {
        let (sandboxes, containers) = match self.my_state().await {
            Ok(state) => state,
            Err(e) => {
                warn!(error = %e, "listing the pod's containers for its final status");
                (Vec::new(), Vec::new())
            }
        };
        let sandbox = sandboxes.iter().max_by_key(|s| s.attempt);
        let pod_ip = if pod.spec.as_ref().and_then(|s| s.host_network) == Some(true) {
            self.h.node.node_ip.clone()
        } else {
            sandbox.and_then(|s| s.ip.clone())
        };
        let mine: Vec<&ContainerStatus> = containers
            .iter()
            .filter(|c| sandbox.is_some_and(|s| s.id == c.sandbox_id))
            .collect();
        self.write_status(pod, &mine, pod_ip).await;
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
        self.h.config_source.forget_pod(&self.uid);
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
