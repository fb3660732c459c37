//! One level-triggered pass over a pod: admission, sandbox, volumes, containers in order,
//! restarts with back-off, pod files.

use super::*;

/// Where the init containers stand after a pass.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum InitState {
    /// All succeeded: the app containers may run.
    Done,
    /// One is running, starting or waiting to restart.
    Running,
    /// One failed and the restart policy is Never: the pod fails.
    Failed,
}

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
    /// volumes, init containers in order, app containers, status.
    pub(super) async fn sync(&mut self, pod: &Pod) -> Result<(), cairn_runtime::RuntimeError> {
        let (sandboxes, containers) = self.my_state().await?;
        if !self.admit(pod, !containers.is_empty() || !sandboxes.is_empty()) {
            self.write_status(pod, &[], None).await;
            return Ok(());
        }
        let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
        if matches!(phase, Some("Succeeded" | "Failed")) {
            return self.stop_finished(pod, &sandboxes, &containers).await;
        }
        let cgroup = self.ensure_pod_cgroup(pod);
        let Some(sandbox) = self
            .ensure_sandbox(pod, &sandboxes, &containers, &cgroup)
            .await
        else {
            return Ok(());
        };
        let pod_ip = if pod.spec.as_ref().and_then(|s| s.host_network) == Some(true) {
            self.agent.node_ip.clone()
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
        }
        self.prune_dead(&containers).await;
        let (_, fresh) = self.my_state().await?;
        let fresh: Vec<&ContainerStatus> = fresh
            .iter()
            .filter(|c| c.sandbox_id == sandbox.id)
            .collect();
        if init == InitState::Failed {
            self.rejected = None;
        }
        self.write_status(pod, &fresh, pod_ip).await;
        if !self.probes.is_empty() {
            self.wake_in(FAST_RESYNC);
        }
        Ok(())
    }

    /// A finished pod stays finished: stop what runs, never start anything.
    async fn stop_finished(
        &mut self,
        pod: &Pod,
        sandboxes: &[PodSandbox],
        containers: &[ContainerStatus],
    ) -> Result<(), cairn_runtime::RuntimeError> {
        let running = containers
            .iter()
            .filter(|c| c.state == ContainerState::Running);
        for c in running {
            if let Err(e) = self
                .agent
                .runtime
                .stop_container(&c.id, Duration::from_secs(2))
                .await
            {
                // The next sync tries again; the status below says what still runs.
                warn!(container = %c.name, error = %e, "stopping a finished pod's container");
            }
        }
        for s in sandboxes.iter().filter(|s| s.state == SandboxState::Ready) {
            if let Err(e) = self.agent.runtime.stop_pod_sandbox(&s.id).await {
                // Retried on the next sync, and removed with the pod at the latest.
                warn!(sandbox = %s.id, error = %e, "stopping a finished pod's sandbox");
            }
        }
        let (_, containers) = self.my_state().await?;
        let refs: Vec<&ContainerStatus> = containers.iter().collect();
        self.write_status(pod, &refs, None).await;
        Ok(())
    }

    /// The pod's cgroup under its QoS parent (the parents refreshed once per worker).
    fn ensure_pod_cgroup(&mut self, pod: &Pod) -> String {
        if !self.qos_counted {
            crate::qos::refresh(&self.agent);
            self.qos_counted = true;
        }
        let cgroup = cgroup_parent(&self.agent.config.cgroup_root, pod);
        if let Err(e) = self.agent.cgroups.ensure(&cgroup, &pod_resources(pod)) {
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
            if let Err(e) = self.agent.runtime.remove_container(&c.id).await {
                // A leftover is pruned with the pod's other dead instances later.
                warn!(container = %c.id, error = %e, "removing a container of a lost sandbox");
            }
        }
        for s in sandboxes {
            if let Err(e) = self.agent.runtime.remove_pod_sandbox(&s.id).await {
                // Orphan cleanup removes it after the next full list.
                warn!(sandbox = %s.id, error = %e, "removing a lost sandbox");
            }
        }
        let config = sandbox_config(pod, &self.uid, attempt, cgroup);
        match self.agent.runtime.run_pod_sandbox(&config).await {
            Ok(s) => Some(s),
            Err(e) => {
                let message = format!("Failed to create pod sandbox: {e}");
                self.agent.events.pod(
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
    fn wait_all<'a>(
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

    /// Pod files and volumes (volumes refreshed every minute so configMap/secret updates
    /// land). `false`: a volume failed; the pass ends (reported, retried in 5 s).
    async fn sync_volumes(
        &mut self,
        pod: &Pod,
        containers: &[ContainerStatus],
        pod_ip: Option<&str>,
    ) -> bool {
        if let Err(e) = self.write_pod_files(pod, pod_ip) {
            // hosts/hostname/resolv.conf are rewritten on every sync: the next one repairs.
            warn!(error = %e, "writing pod etc files");
        }
        let fresh = self
            .volumes_synced
            .is_some_and(|t| t.elapsed() <= Duration::from_secs(60));
        if fresh {
            return true;
        }
        let (_, alloc) = crate::node::resources(&self.agent.config, &self.agent.host);
        let source = crate::env::ApiConfigSource(self.agent.client.clone());
        let ctx = VolumeContext {
            root: &self.agent.config.root_dir,
            pod,
            source: &source,
            host_ip: self.agent.node_ip.as_deref(),
            pod_ip,
            node_alloc: &alloc,
        };
        match volumes::setup(&ctx).await {
            Ok(paths) => {
                self.volume_paths = paths;
                self.volumes_synced = Some(std::time::Instant::now());
                true
            }
            Err(e) => {
                let message = e.to_string();
                self.agent
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

    /// Init containers, in order: the first one not yet succeeded is started, restarted
    /// or waited for.
    async fn sync_init_containers(
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
                    self.start_container(pod, ic, 0, sandbox, ip, true).await;
                    return InitState::Running;
                }
            }
        }
        InitState::Done
    }

    /// App containers: start missing ones, restart changed ones, probe running ones,
    /// restart exited ones as the restart policy says.
    async fn sync_app_containers(
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
                None => self.start_container(pod, c, 0, sandbox, ip, false).await,
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
                    if let Err(e) = self.agent.runtime.start_container(&cur.id).await {
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
        kill_container(&self.agent, pod, Some(c), cur, ip, pod_grace(pod), &message).await;
        self.start_container(pod, c, cur.attempt + 1, sandbox, ip, false)
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
                if let Err(e) = self.agent.runtime.remove_container(&old.id).await {
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
        if let Some(backoff) = restart_backoff(last) {
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
            self.agent.events.pod(
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
            let until = last.finished_at.unwrap_or_else(Utc::now) + backoff - Utc::now();
            self.wake_in(
                until
                    .to_std()
                    .unwrap_or(FAST_RESYNC)
                    .max(Duration::from_millis(200)),
            );
            return;
        }
        self.start_container(pod, c, last.attempt + 1, sandbox, pod_ip, init)
            .await;
    }

    pub(super) fn write_pod_files(&self, pod: &Pod, ip: Option<&str>) -> std::io::Result<()> {
        let dir = volumes::pod_dir(&self.agent.config.root_dir, &self.uid);
        std::fs::create_dir_all(&dir)?;
        let cfg = &self.agent.config;
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
