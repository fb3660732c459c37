//! One level-triggered pass over a pod: admission, sandbox, volumes, containers in order,
//! restarts with back-off, pod files.

use super::*;

/// The sandbox of `pod`'s attempt `attempt`.
fn sandbox_config(pod: &Pod, uid: &str, attempt: u32, cgroup: &str) -> PodSandboxConfig {
    let spec = pod.spec.clone().unwrap_or_default();
    PodSandboxConfig {
        uid: uid.to_string(),
        namespace: pod
            .metadata
            .namespace
            .clone()
            .unwrap_or_else(|| "default".into()),
        name: pod.metadata.name.clone().unwrap_or_default(),
        attempt,
        hostname: spec
            .hostname
            .clone()
            .or(pod.metadata.name.clone())
            .unwrap_or_default(),
        host_network: spec.host_network == Some(true),
        cgroup_parent: cgroup.to_string(),
    }
}

impl Worker {
    /// One pass through the phases: admit, stop a finished pod, pod cgroup, sandbox,
    /// volumes, init containers in order, app containers (with their probes), status.
    pub(super) async fn sync(&mut self, pod: &Pod) -> Result<(), cairn_runtime::RuntimeError> {
        let (sandboxes, containers) = self.my_state().await?;
        self.admit(pod, !containers.is_empty() || !sandboxes.is_empty());
        if self.state == WorkerState::Running && is_finished(pod) {
            self.state = WorkerState::Finished;
        }
        match self.state {
            WorkerState::Running => {}
            WorkerState::Finished => {
                let grace = Duration::from_secs(2);
                return self
                    .stop_finished(pod, &sandboxes, &containers, grace)
                    .await;
            }
            // A hard eviction threshold allows no grace period.
            WorkerState::Evicted { .. } => {
                return self
                    .stop_finished(pod, &sandboxes, &containers, Duration::ZERO)
                    .await;
            }
            _ => {
                self.write_status(pod, &[], None).await;
                return Ok(());
            }
        }
        let cgroup = self.ensure_pod_cgroup(pod);
        let Some(sandbox) = self
            .ensure_sandbox(pod, &sandboxes, &containers, &cgroup)
            .await
        else {
            return Ok(());
        };
        let pod_ip = if pod.spec.as_ref().and_then(|s| s.host_network) == Some(true) {
            self.h.node.node_ip.clone()
        } else {
            sandbox.ip.clone()
        };
        let containers: Vec<ContainerStatus> = containers
            .into_iter()
            .filter(|c| c.sandbox_id == sandbox.id)
            .collect();
        if !self.sync_volumes(pod, &containers, pod_ip.as_deref()).await {
            return Ok(());
        }
        let ip = pod_ip.as_deref();
        let init = self
            .sync_init_containers(pod, &containers, &sandbox, ip)
            .await;
        if init == InitState::Done {
            self.sync_app_containers(pod, &containers, &sandbox, ip)
                .await;
            self.sync_ephemeral_containers(pod, &containers, &sandbox, ip)
                .await;
        }
        self.prune_dead(&containers).await;
        let (_, fresh) = self.my_state().await?;
        let fresh: Vec<&ContainerStatus> = fresh
            .iter()
            .filter(|c| c.sandbox_id == sandbox.id)
            .collect();
        self.write_status(pod, &fresh, pod_ip).await;
        if !self.probes.is_empty() {
            self.wake_in(FAST_RESYNC);
        }
        Ok(())
    }

    /// A finished (or evicted) pod stays finished: stop what runs within `grace`, never
    /// start anything.
    async fn stop_finished(
        &mut self,
        pod: &Pod,
        sandboxes: &[PodSandbox],
        containers: &[ContainerStatus],
        grace: Duration,
    ) -> Result<(), cairn_runtime::RuntimeError> {
        let running = containers
            .iter()
            .filter(|c| c.state == ContainerState::Running);
        for c in running {
            if let Err(e) = self.h.runtime.stop_container(&c.id, grace).await {
                // The next sync tries again; the status below says what still runs.
                warn!(container = %c.name, error = %e, "stopping a finished pod's container");
            }
        }
        for s in sandboxes.iter().filter(|s| s.state == SandboxState::Ready) {
            if let Err(e) = self.h.runtime.stop_pod_sandbox(&s.id).await {
                // Retried on the next sync, and removed with the pod at the latest.
                warn!(sandbox = %s.id, error = %e, "stopping a finished pod's sandbox");
            }
        }
        let (_, containers) = self.my_state().await?;
        if containers
            .iter()
            .all(|c| c.state != ContainerState::Running)
        {
            volumes::teardown_volumes(&self.h.node.config.root_dir, &self.uid);
        }
        let refs: Vec<&ContainerStatus> = containers.iter().collect();
        self.write_status(pod, &refs, None).await;
        Ok(())
    }

    /// The pod's cgroup under its QoS parent (the parents refreshed once per worker).
    fn ensure_pod_cgroup(&mut self, pod: &Pod) -> String {
        if !self.qos_counted {
            self.h.cgroups.refresh_qos();
            self.qos_counted = true;
        }
        let cgroup = cgroup_parent(&self.h.node.config.cgroup_root, pod);
        if let Err(e) = self.h.cgroups.ensure(&cgroup, &pod_resources(pod)) {
            warn!(cgroup = %cgroup, error = %e, "creating pod cgroup");
        }
        cgroup
    }

    /// Reuses the ready sandbox with the highest attempt; otherwise makes a new one (which
    /// restarts every container, as a lost pod network namespace must). `None`: the pass
    /// ends here (the failure is reported and retried in 5 s).
    async fn ensure_sandbox(
        &mut self,
        pod: &Pod,
        sandboxes: &[PodSandbox],
        containers: &[ContainerStatus],
        cgroup: &str,
    ) -> Option<PodSandbox> {
        let ready = sandboxes
            .iter()
            .filter(|s| s.state == SandboxState::Ready)
            .max_by_key(|s| s.attempt);
        if let Some(s) = ready {
            return Some(s.clone());
        }
        let attempt = sandboxes.iter().map(|s| s.attempt + 1).max().unwrap_or(0);
        for c in containers {
            if let Err(e) = self.h.runtime.remove_container(&c.id).await {
                // A leftover is pruned with the pod's other dead instances later.
                warn!(container = %c.id, error = %e, "removing a container of a lost sandbox");
            }
        }
        for s in sandboxes {
            if let Err(e) = self.h.runtime.remove_pod_sandbox(&s.id).await {
                // Orphan cleanup removes it after the next full list.
                warn!(sandbox = %s.id, error = %e, "removing a lost sandbox");
            }
        }
        let config = sandbox_config(pod, &self.uid, attempt, cgroup);
        match self.h.runtime.run_pod_sandbox(&config).await {
            Ok(s) => Some(s),
            Err(e) => {
                let message = format!("Failed to create pod sandbox: {e}");
                self.h.events.pod(
                    pod,
                    None,
                    EventType::Warning,
                    "FailedCreatePodSandBox",
                    &message,
                );
                let spec = pod.spec.clone().unwrap_or_default();
                self.wait_all(spec.containers.iter(), "ContainerCreating", &message);
                self.write_status(pod, &[], None).await;
                self.wake_in(Duration::from_secs(5));
                None
            }
        }
    }

    /// Marks `containers` waiting with `reason`/`message` in the next status.
    pub(super) fn wait_all<'a>(
        &mut self,
        containers: impl Iterator<Item = &'a Container>,
        reason: &str,
        message: &str,
    ) {
        for c in containers {
            self.waiting.insert(
                c.name.clone(),
                Waiting {
                    reason: reason.into(),
                    message: message.into(),
                },
            );
        }
    }
}
