//! The container phases: init containers in order, then app containers — started, restarted
//! under the restart policy with back-off, restarted on a spec change, probed — and pruning
//! of old instances.

use super::start::Role;
use super::*;

/// Where the init containers stand after a pass.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum InitState {
    /// All succeeded: the app containers may run.
    Done,
    /// One is running, starting or waiting to restart.
    Running,
    /// One failed and the restart policy is Never: the pod fails.
    Failed,
}

impl Worker {
    /// Init containers, in order: the first one not yet succeeded is started, restarted
    /// or waited for.
    pub(super) async fn sync_init_containers(
        &mut self,
        pod: &Pod,
        containers: &[ContainerStatus],
        sandbox: &PodSandbox,
        ip: Option<&str>,
    ) -> InitState {
        let spec = pod.spec.clone().unwrap_or_default();
        let policy = spec.restart_policy.as_deref().unwrap_or("Always");
        let refs: Vec<&ContainerStatus> = containers.iter().collect();
        for ic in spec.init_containers.iter().flatten() {
            let (cur, _) = status::instances(&refs, &ic.name);
            match cur {
                Some(c) if c.state == ContainerState::Exited && c.exit_code == Some(0) => continue,
                Some(c)
                    if c.state == ContainerState::Running || c.state == ContainerState::Created =>
                {
                    return InitState::Running;
                }
                Some(_) if policy == "Never" => return InitState::Failed,
                Some(c) => {
                    self.restart_with_backoff(pod, ic, c, sandbox, ip, true)
                        .await;
                    return InitState::Running;
                }
                None => {
                    self.start_container(pod, ic, 0, sandbox, ip, Role::Init)
                        .await;
                    return InitState::Running;
                }
            }
        }
        InitState::Done
    }

    /// App containers: start missing ones, restart changed ones, probe running ones,
    /// restart exited ones as the restart policy says.
    pub(super) async fn sync_app_containers(
        &mut self,
        pod: &Pod,
        containers: &[ContainerStatus],
        sandbox: &PodSandbox,
        ip: Option<&str>,
    ) {
        let spec = pod.spec.clone().unwrap_or_default();
        let policy = spec.restart_policy.as_deref().unwrap_or("Always");
        let refs: Vec<&ContainerStatus> = containers.iter().collect();
        for c in &spec.containers {
            let (cur, _) = status::instances(&refs, &c.name);
            match cur {
                None => {
                    self.start_container(pod, c, 0, sandbox, ip, Role::App)
                        .await
                }
                Some(cur) if cur.state == ContainerState::Running => {
                    self.sync_running(pod, c, cur, sandbox, ip).await
                }
                Some(cur) if cur.state == ContainerState::Exited => {
                    if status::will_restart(policy, cur.exit_code.unwrap_or(0)) {
                        self.restart_with_backoff(pod, c, cur, sandbox, ip, false)
                            .await;
                    } else {
                        self.waiting.remove(&c.name);
                    }
                }
                Some(cur) => {
                    // Created but not started (agent died between the two): start it.
                    if let Err(e) = self.h.runtime.start_container(&cur.id).await {
                        warn!(container = %c.name, error = %e, "starting created container");
                    }
                }
            }
        }
    }

    /// A running container: restarted when its spec changed, else probed.
    async fn sync_running(
        &mut self,
        pod: &Pod,
        c: &Container,
        cur: &ContainerStatus,
        sandbox: &PodSandbox,
        ip: Option<&str>,
    ) {
        if cur.spec_hash == spec_hash(c) {
            self.waiting.remove(&c.name);
            self.run_probes(pod, c, cur, ip).await;
            return;
        }
        info!(container = %c.name, "container spec changed; restarting it");
        // Like the kubelet, the preStop hook comes from the current spec.
        let message = format!("Container {} definition changed, will be restarted", c.name);
        kill_container(&self.h, pod, Some(c), cur, ip, pod_grace(pod), &message).await;
        self.start_container(pod, c, cur.attempt + 1, sandbox, ip, Role::App)
            .await;
    }

    /// Keeps the latest two instances per container name (current and previous, for
    /// `kubectl logs --previous`), removes older ones.
    pub(super) async fn prune_dead(&self, containers: &[ContainerStatus]) {
        let mut by_name: HashMap<&str, Vec<&ContainerStatus>> = HashMap::new();
        for c in containers {
            by_name.entry(c.name.as_str()).or_default().push(c);
        }
        for (_, mut list) in by_name {
            list.sort_by_key(|c| std::cmp::Reverse(c.attempt));
            for old in list
                .iter()
                .skip(2)
                .filter(|c| c.state == ContainerState::Exited)
            {
                if let Err(e) = self.h.runtime.remove_container(&old.id).await {
                    warn!(container = %old.id, error = %e, "removing old container instance");
                }
            }
        }
    }

    pub(super) async fn restart_with_backoff(
        &mut self,
        pod: &Pod,
        c: &Container,
        last: &ContainerStatus,
        sandbox: &PodSandbox,
        pod_ip: Option<&str>,
        init: bool,
    ) {
        let now = self.h.clock.now();
        if let Some(backoff) = restart_backoff(last, now) {
            let ns = pod.metadata.namespace.clone().unwrap_or_default();
            let name = pod.metadata.name.clone().unwrap_or_default();
            let message = format!(
                "back-off {}s restarting failed container={} pod={}_{}({})",
                backoff.num_seconds(),
                c.name,
                name,
                ns,
                self.uid
            );
            self.h.events.pod(
                pod,
                Some(&c.name),
                EventType::Warning,
                "BackOff",
                "Back-off restarting failed container",
            );
            self.waiting.insert(
                c.name.clone(),
                Waiting {
                    reason: "CrashLoopBackOff".into(),
                    message,
                },
            );
            let until = last.finished_at.unwrap_or(now) + backoff - now;
            self.wake_in(
                until
                    .to_std()
                    .unwrap_or(FAST_RESYNC)
                    .max(Duration::from_millis(200)),
            );
            return;
        }
        let role = if init { Role::Init } else { Role::App };
        self.start_container(pod, c, last.attempt + 1, sandbox, pod_ip, role)
            .await;
    }
}
