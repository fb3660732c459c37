//! One level-triggered pass over a pod: admission, sandbox, volumes, containers in order,
//! restarts with back-off, pod files.

use super::*;

impl Worker {
    pub(super) async fn sync(&mut self, pod: &Pod) -> Result<(), cairn_runtime::RuntimeError> {
        let (sandboxes, containers) = self.my_state().await?;
        if !self.admit(pod, !containers.is_empty() || !sandboxes.is_empty()) {
            self.write_status(pod, &[], None).await;
            return Ok(());
        }
        let spec = pod.spec.clone().unwrap_or_default();
        let policy = spec
            .restart_policy
            .clone()
            .unwrap_or_else(|| "Always".into());
        let phase = pod
            .status
            .as_ref()
            .and_then(|s| s.phase.clone())
            .unwrap_or_default();
        let terminal = matches!(phase.as_str(), "Succeeded" | "Failed");

        // A finished pod stays finished: stop what runs, never start anything.
        if terminal {
            for c in containers
                .iter()
                .filter(|c| c.state == ContainerState::Running)
            {
                let _ = self
                    .agent
                    .runtime
                    .stop_container(&c.id, Duration::from_secs(2))
                    .await;
            }
            for s in sandboxes.iter().filter(|s| s.state == SandboxState::Ready) {
                let _ = self.agent.runtime.stop_pod_sandbox(&s.id).await;
            }
            let (_, containers) = self.my_state().await?;
            let refs: Vec<&ContainerStatus> = containers.iter().collect();
            self.write_status(pod, &refs, None).await;
            return Ok(());
        }

        if !self.qos_counted {
            crate::qos::refresh(&self.agent);
            self.qos_counted = true;
        }
        let cgroup = cgroup_parent(&self.agent.config.cgroup_root, pod);
        if let Err(e) = self.agent.cgroups.ensure(&cgroup, &pod_resources(pod)) {
            warn!(error = %e, "creating pod cgroup");
        }

        // Sandbox: reuse the ready one with the highest attempt; otherwise make a new one
        // (which restarts every container, as a lost pod network namespace must).
        let mut ready: Vec<&PodSandbox> = sandboxes
            .iter()
            .filter(|s| s.state == SandboxState::Ready)
            .collect();
        ready.sort_by_key(|s| std::cmp::Reverse(s.attempt));
        let sandbox = match ready.first() {
            Some(s) => (*s).clone(),
            None => {
                let attempt = sandboxes.iter().map(|s| s.attempt + 1).max().unwrap_or(0);
                for c in &containers {
                    let _ = self.agent.runtime.remove_container(&c.id).await;
                }
                for s in &sandboxes {
                    let _ = self.agent.runtime.remove_pod_sandbox(&s.id).await;
                }
                let config = PodSandboxConfig {
                    uid: self.uid.clone(),
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
                    cgroup_parent: cgroup.clone(),
                };
                match self.agent.runtime.run_pod_sandbox(&config).await {
                    Ok(s) => s,
                    Err(e) => {
                        let message = format!("Failed to create pod sandbox: {e}");
                        self.agent.events.pod(
                            pod,
                            None,
                            EventType::Warning,
                            "FailedCreatePodSandBox",
                            &message,
                        );
                        for c in &spec.containers {
                            self.waiting.insert(
                                c.name.clone(),
                                Waiting {
                                    reason: "ContainerCreating".into(),
                                    message: message.clone(),
                                },
                            );
                        }
                        self.write_status(pod, &[], None).await;
                        self.wake_in(Duration::from_secs(5));
                        return Ok(());
                    }
                }
            }
        };
        let pod_ip = if spec.host_network == Some(true) {
            self.agent.node_ip.clone()
        } else {
            sandbox.ip.clone()
        };
        let containers: Vec<ContainerStatus> = containers
            .into_iter()
            .filter(|c| c.sandbox_id == sandbox.id)
            .collect();

        // Pod files and volumes (refreshed every minute so configMap/secret updates land).
        let etc_ok = self.write_pod_files(pod, pod_ip.as_deref());
        if let Err(e) = etc_ok {
            warn!(error = %e, "writing pod etc files");
        }
        if self
            .volumes_synced
            .is_none_or(|t| t.elapsed() > Duration::from_secs(60))
        {
            let (_, alloc) = crate::node::resources(&self.agent.config, &self.agent.host);
            let source = crate::env::ApiConfigSource(self.agent.client.clone());
            let ctx = VolumeContext {
                root: &self.agent.config.root_dir,
                pod,
                source: &source,
                host_ip: self.agent.node_ip.as_deref(),
                pod_ip: pod_ip.as_deref(),
                node_alloc: &alloc,
            };
            match volumes::setup(&ctx).await {
                Ok(paths) => {
                    self.volume_paths = paths;
                    self.volumes_synced = Some(std::time::Instant::now());
                }
                Err(e) => {
                    let message = e.to_string();
                    self.agent
                        .events
                        .pod(pod, None, EventType::Warning, "FailedMount", &message);
                    for c in spec
                        .init_containers
                        .iter()
                        .flatten()
                        .chain(spec.containers.iter())
                    {
                        self.waiting.insert(
                            c.name.clone(),
                            Waiting {
                                reason: "ContainerCreating".into(),
                                message: message.clone(),
                            },
                        );
                    }
                    let refs: Vec<&ContainerStatus> = containers.iter().collect();
                    self.write_status(pod, &refs, pod_ip.clone()).await;
                    self.wake_in(Duration::from_secs(5));
                    return Ok(());
                }
            }
        }

        // Init containers, in order.
        let mut init_done = true;
        let mut init_failed = false;
        for ic in spec.init_containers.iter().flatten() {
            let (cur, _) = status::instances(&containers.iter().collect::<Vec<_>>(), &ic.name);
            match cur {
                Some(c) if c.state == ContainerState::Exited && c.exit_code == Some(0) => continue,
                Some(c)
                    if c.state == ContainerState::Running || c.state == ContainerState::Created =>
                {
                    init_done = false;
                    break;
                }
                Some(c) if c.state == ContainerState::Exited => {
                    init_done = false;
                    if policy == "Never" {
                        init_failed = true;
                    } else {
                        self.restart_with_backoff(pod, ic, c, &sandbox, pod_ip.as_deref(), true)
                            .await;
                    }
                    break;
                }
                _ => {
                    init_done = false;
                    self.start_container(pod, ic, 0, &sandbox, pod_ip.as_deref(), true)
                        .await;
                    break;
                }
            }
        }

        if init_done && !init_failed {
            for c in &spec.containers {
                let (cur, _) = status::instances(&containers.iter().collect::<Vec<_>>(), &c.name);
                match cur {
                    None => {
                        self.start_container(pod, c, 0, &sandbox, pod_ip.as_deref(), false)
                            .await;
                    }
                    Some(cur) if cur.state == ContainerState::Running => {
                        if cur.spec_hash != spec_hash(c) {
                            info!(container = %c.name, "container spec changed; restarting it");
                            // Like the kubelet, the preStop hook comes from the current spec.
                            kill_container(
                                &self.agent,
                                pod,
                                Some(c),
                                cur,
                                pod_ip.as_deref(),
                                pod_grace(pod),
                                &format!(
                                    "Container {} definition changed, will be restarted",
                                    c.name
                                ),
                            )
                            .await;
                            self.start_container(
                                pod,
                                c,
                                cur.attempt + 1,
                                &sandbox,
                                pod_ip.as_deref(),
                                false,
                            )
                            .await;
                        } else {
                            self.waiting.remove(&c.name);
                            self.run_probes(pod, c, cur, pod_ip.as_deref()).await;
                        }
                    }
                    Some(cur) if cur.state == ContainerState::Exited => {
                        if status::will_restart(&policy, cur.exit_code.unwrap_or(0)) {
                            self.restart_with_backoff(
                                pod,
                                c,
                                cur,
                                &sandbox,
                                pod_ip.as_deref(),
                                false,
                            )
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
        self.prune_dead(&containers).await;
        let (_, fresh) = self.my_state().await?;
        let fresh: Vec<ContainerStatus> = fresh
            .into_iter()
            .filter(|c| c.sandbox_id == sandbox.id)
            .collect();
        let refs: Vec<&ContainerStatus> = fresh.iter().collect();
        if init_failed {
            self.rejected = None;
        }
        self.write_status(pod, &refs, pod_ip).await;
        if !self.probes.is_empty() {
            self.wake_in(FAST_RESYNC);
        }
        Ok(())
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
