//! Starting a container: image, spec, mounts, resources, the runtime calls, and the
//! postStart hook.

use super::*;

impl Worker {
    pub(super) async fn start_container(
        &mut self,
        pod: &Pod,
        c: &Container,
        attempt: u32,
        sandbox: &PodSandbox,
        pod_ip: Option<&str>,
        init: bool,
    ) {
        let agent = self.agent.clone();
        // Container records can vanish (containerd state wiped) while logs stay: continue the
        // numbering after the newest log, as the kubelet derives restart counts from it.
        let attempt = if attempt == 0 {
            let dir = cairn_podlogs::pod_log_dir(
                &agent.config.pod_log_dir,
                &pod.metadata
                    .namespace
                    .clone()
                    .unwrap_or_else(|| "default".into()),
                pod.metadata.name.as_deref().unwrap_or(""),
                &self.uid,
            )
            .join(&c.name);
            std::fs::read_dir(&dir)
                .map(|d| {
                    d.flatten()
                        .filter_map(|e| {
                            e.file_name()
                                .to_str()?
                                .strip_suffix(".log")?
                                .parse::<u32>()
                                .ok()
                        })
                        .map(|n| n + 1)
                        .max()
                        .unwrap_or(0)
                })
                .unwrap_or(0)
        } else {
            attempt
        };
        // Image.
        let image = match agent.images.ensure(&agent.client, pod, c).await {
            Outcome::Ready {
                image,
                pulled,
                took,
            } => {
                if pulled {
                    agent.events.pod(
                        pod,
                        Some(&c.name),
                        EventType::Normal,
                        "Pulled",
                        &format!(
                            "Successfully pulled image {:?} in {:.3}s",
                            c.image.clone().unwrap_or_default(),
                            took.as_secs_f64()
                        ),
                    );
                } else {
                    agent.events.pod(
                        pod,
                        Some(&c.name),
                        EventType::Normal,
                        "Pulled",
                        &format!(
                            "Container image {:?} already present on machine",
                            c.image.clone().unwrap_or_default()
                        ),
                    );
                }
                image
            }
            Outcome::Failed(f) => {
                let kind = if f.reason == "ImagePullBackOff" {
                    "BackOff"
                } else {
                    "Failed"
                };
                agent
                    .events
                    .pod(pod, Some(&c.name), EventType::Warning, kind, &f.message);
                if f.reason == "ErrImagePull" {
                    agent.events.pod(
                        pod,
                        Some(&c.name),
                        EventType::Warning,
                        "Failed",
                        &format!("Error: {}", f.reason),
                    );
                }
                self.waiting.insert(
                    c.name.clone(),
                    Waiting {
                        reason: f.reason.into(),
                        message: f.message,
                    },
                );
                self.wake_in(Duration::from_secs(5));
                return;
            }
        };
        // Environment.
        let (_, alloc) = crate::node::resources(&agent.config, &agent.host);
        let services: Vec<_> = agent
            .services
            .state()
            .iter()
            .map(|s| (**s).clone())
            .collect();
        let source = crate::env::ApiConfigSource(agent.client.clone());
        let env = match crate::env::container_env(
            pod,
            c,
            &services,
            &source,
            agent.node_ip.as_deref(),
            pod_ip,
            &alloc,
        )
        .await
        {
            Ok(env) => env,
            Err(e) => {
                self.hold(
                    pod,
                    c,
                    "CreateContainerConfigError",
                    e.to_string(),
                    Duration::from_secs(5),
                );
                return;
            }
        };
        let vars: std::collections::BTreeMap<String, String> = env.iter().cloned().collect();
        let expand = |v: &Vec<String>| {
            v.iter()
                .map(|s| crate::env::expand(s, &vars))
                .collect::<Vec<_>>()
        };
        // Mounts.
        let mut mounts = match volumes::container_mounts(c, &self.volume_paths) {
            Ok(m) => m,
            Err(e) => {
                self.hold(
                    pod,
                    c,
                    "CreateContainerConfigError",
                    e.to_string(),
                    Duration::from_secs(5),
                );
                return;
            }
        };
        let pod_dir = volumes::pod_dir(&agent.config.root_dir, &self.uid);
        let has = |mounts: &Vec<Mount>, p: &str| mounts.iter().any(|m| m.container_path == p);
        for (file, target) in [
            ("etc-hosts", "/etc/hosts"),
            ("resolv.conf", "/etc/resolv.conf"),
            ("hostname", "/etc/hostname"),
        ] {
            if !has(&mounts, target) {
                mounts.push(Mount {
                    host_path: pod_dir.join(file),
                    container_path: target.into(),
                    readonly: false,
                });
            }
        }
        let term_dir = pod_dir.join("containers").join(&c.name);
        let term_file = term_dir.join(format!("{attempt}-termination-log"));
        let term_target = c
            .termination_message_path
            .clone()
            .unwrap_or_else(|| "/dev/termination-log".into());
        let term_ok = std::fs::create_dir_all(&term_dir)
            .and_then(|_| std::fs::write(&term_file, b""))
            .is_ok();
        if term_ok && !has(&mounts, &term_target) {
            mounts.push(Mount {
                host_path: term_file.clone(),
                container_path: term_target,
                readonly: false,
            });
        }
        // Logs.
        let ns = pod
            .metadata
            .namespace
            .clone()
            .unwrap_or_else(|| "default".into());
        let name = pod.metadata.name.clone().unwrap_or_default();
        let log_path = cairn_podlogs::container_log_path(
            &agent.config.pod_log_dir,
            &ns,
            &name,
            &self.uid,
            &c.name,
            attempt,
        );
        if let Some(parent) = log_path.parent() {
            let _ = std::fs::create_dir_all(parent);
        }
        let rotate = cairn_podlogs::RotateOptions {
            max_size: agent.config.container_log_max_bytes,
            max_files: agent.config.container_log_max_files,
        };
        let log_uri = cairn_podlogs::binary_log_uri(&agent.config.logger_path, &log_path, &rotate);
        let config = ContainerConfig {
            name: c.name.clone(),
            attempt,
            image,
            command: expand(&c.command.clone().unwrap_or_default()),
            args: expand(&c.args.clone().unwrap_or_default()),
            working_dir: c.working_dir.clone(),
            env,
            mounts,
            resources: container_resources(
                pod,
                c,
                agent.host.meminfo().map_or(1, |m| m.total_bytes as i64),
            ),
            security: security(pod, c),
            log_uri,
            log_path,
            spec_hash: spec_hash(c),
            termination_message_path: term_ok.then_some(term_file),
            init,
            tty: c.tty == Some(true),
            stdin: c.stdin == Some(true),
        };
        let id = match agent.runtime.create_container(sandbox, &config).await {
            Ok(id) => id,
            Err(e) => {
                self.hold(
                    pod,
                    c,
                    "CreateContainerError",
                    e.to_string(),
                    Duration::from_secs(10),
                );
                return;
            }
        };
        agent.events.pod(
            pod,
            Some(&c.name),
            EventType::Normal,
            "Created",
            &format!("Created container {}", c.name),
        );
        match agent.runtime.start_container(&id).await {
            Ok(()) => {
                self.waiting.remove(&c.name);
                agent.events.pod(
                    pod,
                    Some(&c.name),
                    EventType::Normal,
                    "Started",
                    &format!("Started container {}", c.name),
                );
                for kind in [
                    ProbeKind::Liveness,
                    ProbeKind::Readiness,
                    ProbeKind::Startup,
                ] {
                    self.probes.remove(&(c.name.clone(), kind));
                }
                if let Some(hook) = c.lifecycle.as_ref().and_then(|l| l.post_start.as_ref()) {
                    self.post_start(pod, c, &id, pod_ip, hook).await;
                }
            }
            Err(e) => {
                agent.events.pod(
                    pod,
                    Some(&c.name),
                    EventType::Warning,
                    "Failed",
                    &format!("Error: {e}"),
                );
                self.waiting.remove(&c.name);
            }
        }
    }

    /// Runs the postStart hook right after the start, as the kubelet does: the pod's sync (and
    /// so its status, which still shows the container waiting) holds until the hook returns.
    /// A failed hook kills the container (restarted per restartPolicy) and leaves it waiting
    /// with `PostStartHookError`.
    pub(super) async fn post_start(
        &mut self,
        pod: &Pod,
        c: &Container,
        id: &str,
        pod_ip: Option<&str>,
        hook: &k8s_openapi::api::core::v1::LifecycleHandler,
    ) {
        let agent = self.agent.clone();
        let run = hooks::run(
            agent.runtime.as_ref(),
            c,
            id,
            pod_ip,
            hook,
            POST_START_LIMIT,
        );
        let result = match self.desired.clone() {
            Some(mut rx) => {
                let deleted = async move {
                    loop {
                        let gone = match &*rx.borrow_and_update() {
                            Desired::Gone(_) => true,
                            Desired::Run(p) => p.metadata.deletion_timestamp.is_some(),
                        };
                        if gone || rx.changed().await.is_err() {
                            return;
                        }
                    }
                };
                tokio::select! {
                    r = run => Some(r),
                    _ = deleted => None,
                }
            }
            None => Some(run.await),
        };
        let error = match result {
            Some(Ok(())) => return,
            Some(Err(e)) => e,
            None => {
                info!(container = %c.name, "pod is being deleted; postStart hook interrupted");
                return;
            }
        };
        let message = report_hook_failure(&agent, pod, c, hook, &error, "PostStart");
        if let Ok(status) = agent.runtime.container_status(id).await {
            kill_container(
                &agent,
                pod,
                Some(c),
                &status,
                pod_ip,
                pod_grace(pod),
                "FailedPostStartHook",
            )
            .await;
        } else if let Err(e) = agent.runtime.stop_container(id, pod_grace(pod)).await {
            warn!(container = %c.name, error = %e, "stopping container after its postStart hook failed");
        }
        self.waiting.insert(
            c.name.clone(),
            Waiting {
                reason: "PostStartHookError".into(),
                message,
            },
        );
        self.wake_in(FAST_RESYNC);
    }
}
