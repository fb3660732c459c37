//! Termination: preStop hooks, SIGTERM and SIGKILL at the grace deadline, cleanup of
//! containers, sandbox, cgroup and volumes, and the final delete.

use super::*;

impl Worker {
    /// Graceful stop of every running container in parallel: preStop hook, SIGTERM, SIGKILL
    /// at the end of the grace period.
    pub(super) async fn terminate(&mut self, pod: &Pod, grace: Duration) {
        let Ok((sandboxes, containers)) = self.my_state().await else {
            return;
        };
        let spec = pod.spec.clone().unwrap_or_default();
        let pod_ip = if spec.host_network == Some(true) {
            self.agent.node_ip.clone()
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
        let mut stops = Vec::new();
        for (c, message) in &running {
            let spec_c = spec
                .containers
                .iter()
                .chain(spec.init_containers.iter().flatten())
                .find(|s| s.name == c.name);
            stops.push(kill_container(
                &self.agent,
                pod,
                spec_c,
                c,
                pod_ip.as_deref(),
                grace,
                message,
            ));
        }
        futures::future::join_all(stops).await;
        let mut live = self.agent.running_logs.write();
        for c in &containers {
            live.remove(&std::path::PathBuf::from(&c.log_path));
        }
    }

    /// Removes containers, sandbox (CNI DEL), cgroup, volumes and logs of the pod.
    pub(super) async fn cleanup(&mut self, pod: &Pod) {
        if let Ok((sandboxes, containers)) = self.my_state().await {
            // Log followers end once their container is no longer running.
            {
                let mut live = self.agent.running_logs.write();
                for c in &containers {
                    live.remove(&std::path::PathBuf::from(&c.log_path));
                }
            }
            for c in &containers {
                if let Err(e) = self.agent.runtime.remove_container(&c.id).await {
                    warn!(container = %c.id, error = %e, "removing container");
                }
            }
            for s in &sandboxes {
                if let Err(e) = self.agent.runtime.remove_pod_sandbox(&s.id).await {
                    warn!(sandbox = %s.id, error = %e, "removing sandbox");
                }
            }
        }
        self.agent
            .cgroups
            .remove(&cgroup_parent(&self.agent.config.cgroup_root, pod));
        volumes::teardown(&self.agent.config.root_dir, &self.uid);
        let ns = pod
            .metadata
            .namespace
            .clone()
            .unwrap_or_else(|| "default".into());
        let name = pod.metadata.name.clone().unwrap_or_default();
        let _ = std::fs::remove_dir_all(cairn_podlogs::pod_log_dir(
            &self.agent.config.pod_log_dir,
            &ns,
            &name,
            &self.uid,
        ));
    }

    /// The final delete (grace 0, UID precondition) that removes the pod object.
    pub(super) async fn finish_deletion(&self, pod: &Pod) {
        if is_static(pod) {
            return;
        }
        let ns = pod
            .metadata
            .namespace
            .clone()
            .unwrap_or_else(|| "default".into());
        let name = pod.metadata.name.clone().unwrap_or_default();
        let api: Api<Pod> = Api::namespaced(self.agent.client.clone(), &ns);
        let params = DeleteParams {
            grace_period_seconds: Some(0),
            preconditions: Some(Preconditions {
                uid: Some(self.uid.clone()),
                resource_version: None,
            }),
            ..Default::default()
        };
        for _ in 0..5 {
            match api.delete(&name, &params).await {
                Ok(_) => return,
                Err(kube::Error::Api(e)) if e.code == 404 || e.code == 409 => return,
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
    agent: &Agent,
    pod: &Pod,
    spec: Option<&Container>,
    cur: &ContainerStatus,
    pod_ip: Option<&str>,
    grace: Duration,
    message: &str,
) {
    agent
        .events
        .pod(pod, Some(&cur.name), EventType::Normal, "Killing", message);
    let pre_stop = spec.and_then(|c| Some((c, c.lifecycle.as_ref()?.pre_stop.as_ref()?)));
    let mut left = grace;
    if let Some((c, hook)) = pre_stop.filter(|_| !grace.is_zero()) {
        let started = std::time::Instant::now();
        match hooks::run(agent.runtime.as_ref(), c, &cur.id, pod_ip, hook, grace).await {
            Ok(()) => {}
            Err(e) if e.is_deadline() => {
                info!(container = %cur.name, "preStop hook did not finish within the grace period")
            }
            Err(e) => {
                report_hook_failure(agent, pod, c, hook, &e, "PreStop");
            }
        }
        left = grace
            .saturating_sub(started.elapsed())
            .max(MIN_GRACE_AFTER_HOOK);
    }
    if let Err(e) = agent.runtime.stop_container(&cur.id, left).await {
        warn!(container = %cur.id, error = %e, "stopping container");
    }
}
