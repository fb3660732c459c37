//! Starting a container: image, spec, mounts, resources, the runtime calls, and the
//! postStart hook.

use super::*;

/// What a container is to its pod.
pub(super) enum Role {
    App,
    Init,
    /// An ephemeral (debug) container, in a target container's PID namespace if any.
    Ephemeral {
        pid_namespace: Option<std::path::PathBuf>,
    },
}

impl Worker {
    /// Starts container `c` of `pod` (instance `attempt`): image, environment, mounts,
    /// logs, then the runtime's create and start and the postStart hook. A step that
    /// fails leaves the container waiting with the kubelet's reason and retries later.
    pub(super) async fn start_container(
        &mut self,
        pod: &Pod,
        c: &Container,
        attempt: u32,
        sandbox: &PodSandbox,
        pod_ip: Option<&str>,
        role: Role,
    ) {
        let (init, pid_namespace) = match role {
            Role::App => (false, None),
            Role::Init => (true, None),
            Role::Ephemeral { pid_namespace } => (false, pid_namespace),
        };
        let attempt = self.next_attempt(pod, c, attempt);
        let Some(image) = self.ensure_image(pod, c).await else {
            return;
        };
        let Some(env) = self.environment(pod, c, pod_ip).await else {
            return;
        };
        let Some((mounts, term_file)) = self.mounts(pod, c, attempt) else {
            return;
        };
        let (log_path, log_uri) = self.log_target(pod, c, attempt);
        let vars: std::collections::BTreeMap<String, String> = env.iter().cloned().collect();
        let expand = |v: &Option<Vec<String>>| {
            v.iter()
                .flatten()
                .map(|s| crate::env::expand(s, &vars))
                .collect::<Vec<_>>()
        };
        let node_memory = self.h.node.memory_bytes();
        let config = ContainerConfig {
            name: c.name.clone(),
            attempt,
            image,
            command: expand(&c.command),
            args: expand(&c.args),
            working_dir: c.working_dir.clone(),
            env,
            mounts,
            resources: container_resources(pod, c, node_memory),
            security: security(pod, c),
            log_uri,
            log_path,
            spec_hash: spec_hash(c),
            termination_message_path: term_file,
            init,
            tty: c.tty == Some(true),
            stdin: c.stdin == Some(true),
            pid_namespace,
        };
        self.create_and_start(pod, c, sandbox, &config, pod_ip)
            .await;
    }

    /// Container records can vanish (containerd state wiped) while logs stay: a first
    /// instance continues the numbering after the newest log, as the kubelet derives
    /// restart counts from it.
    fn next_attempt(&self, pod: &Pod, c: &Container, attempt: u32) -> u32 {
        if attempt != 0 {
            return attempt;
        }
        let dir = cairn_podlogs::pod_log_dir(
            &self.h.node.config.pod_log_dir,
            pod.metadata.namespace.as_deref().unwrap_or("default"),
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
    }

    /// The container's image, pulled as its policy says; `None` leaves it waiting
    /// (`ErrImagePull`/`ImagePullBackOff`, retried in 5 s).
    async fn ensure_image(&mut self, pod: &Pod, c: &Container) -> Option<cairn_runtime::ImageSpec> {
        let events = self.h.events.clone();
        let image_name = c.image.clone().unwrap_or_default();
        let Some(outcome) = self.unless_deleted(self.h.images.ensure(pod, c)).await else {
            info!(container = %c.name, "pod is being deleted; image pull abandoned");
            return None;
        };
        match outcome {
            Outcome::Ready {
                image,
                pulled,
                took,
            } => {
                let message = if pulled {
                    format!(
                        "Successfully pulled image {image_name:?} in {:.3}s",
                        took.as_secs_f64()
                    )
                } else {
                    format!("Container image {image_name:?} already present on machine")
                };
                events.pod(pod, Some(&c.name), EventType::Normal, "Pulled", &message);
                Some(image)
            }
            Outcome::Failed(f) => {
                let kind = if f.reason == "ImagePullBackOff" {
                    "BackOff"
                } else {
                    "Failed"
                };
                events.pod(pod, Some(&c.name), EventType::Warning, kind, &f.message);
                if f.reason == "ErrImagePull" {
                    let message = format!("Error: {}", f.reason);
                    events.pod(pod, Some(&c.name), EventType::Warning, "Failed", &message);
                }
                self.waiting.insert(
                    c.name.clone(),
                    Waiting {
                        reason: f.reason.into(),
                        message: f.message,
                    },
                );
                self.wake_in(Duration::from_secs(5));
                None
            }
        }
    }

    /// The container's environment; `None` leaves it waiting (`CreateContainerConfigError`).
    async fn environment(
        &mut self,
        pod: &Pod,
        c: &Container,
        pod_ip: Option<&str>,
    ) -> Option<Vec<(String, String)>> {
        let alloc = self.h.node.allocatable();
        let services: Vec<_> = self
            .h
            .services
            .state()
            .iter()
            .map(|s| (**s).clone())
            .collect();
        let source = self.h.config_source.as_ref();
        let node_ip = self.h.node.node_ip.as_deref();
        match crate::env::container_env(pod, c, &services, source, node_ip, pod_ip, &alloc).await {
            Ok(env) => Some(env),
            Err(e) => {
                let retry = Duration::from_secs(5);
                self.hold(pod, c, "CreateContainerConfigError", e.to_string(), retry);
                None
            }
        }
    }

    /// Volume mounts plus the pod's etc files and the termination-message file (when it
    /// could be made); `None` leaves the container waiting (`CreateContainerConfigError`).
    fn mounts(
        &mut self,
        pod: &Pod,
        c: &Container,
        attempt: u32,
    ) -> Option<(Vec<Mount>, Option<std::path::PathBuf>)> {
        let mut mounts = match volumes::container_mounts(c, &self.volume_paths) {
            Ok(m) => m,
            Err(e) => {
                let retry = Duration::from_secs(5);
                self.hold(pod, c, "CreateContainerConfigError", e.to_string(), retry);
                return None;
            }
        };
        let pod_dir = volumes::pod_dir(&self.h.node.config.root_dir, &self.uid);
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
        // Without the file the container still runs; it just reports no message.
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
        Some((mounts, term_ok.then_some(term_file)))
    }

    /// The instance's log file and the logger URI containerd starts it with.
    fn log_target(&self, pod: &Pod, c: &Container, attempt: u32) -> (std::path::PathBuf, String) {
        let config = &self.h.node.config;
        let log_path = cairn_podlogs::container_log_path(
            &config.pod_log_dir,
            pod.metadata.namespace.as_deref().unwrap_or("default"),
            pod.metadata.name.as_deref().unwrap_or(""),
            &self.uid,
            &c.name,
            attempt,
        );
        if let Some(parent) = log_path.parent() {
            if let Err(e) = std::fs::create_dir_all(parent) {
                // The logger reports the same failure to containerd, which fails the start.
                warn!(path = %parent.display(), error = %e, "creating the container log directory");
            }
        }
        let rotate = cairn_podlogs::RotateOptions {
            max_size: config.container_log_max_bytes,
            max_files: config.container_log_max_files,
        };
        let log_uri = cairn_podlogs::binary_log_uri(&config.logger_path, &log_path, &rotate);
        (log_path, log_uri)
    }

    /// The runtime's create and start, their events, fresh probe state, postStart.
    async fn create_and_start(
        &mut self,
        pod: &Pod,
        c: &Container,
        sandbox: &PodSandbox,
        config: &ContainerConfig,
        pod_ip: Option<&str>,
    ) {
        let h = self.h.clone();
        let id = match h.runtime.create_container(sandbox, config).await {
            Ok(id) => id,
            Err(e) => {
                let retry = Duration::from_secs(10);
                self.hold(pod, c, "CreateContainerError", e.to_string(), retry);
                return;
            }
        };
        let created = format!("Created container {}", c.name);
        h.events
            .pod(pod, Some(&c.name), EventType::Normal, "Created", &created);
        if let Err(e) = h.runtime.start_container(&id).await {
            let message = format!("Error: {e}");
            h.events
                .pod(pod, Some(&c.name), EventType::Warning, "Failed", &message);
            self.waiting.remove(&c.name);
            return;
        }
        self.waiting.remove(&c.name);
        let started = format!("Started container {}", c.name);
        h.events
            .pod(pod, Some(&c.name), EventType::Normal, "Started", &started);
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
        let h = self.h.clone();
        let run = hooks::run(h.runtime.as_ref(), c, id, pod_ip, hook, POST_START_LIMIT);
        let error = match self.unless_deleted(run).await {
            Some(Ok(())) => return,
            Some(Err(e)) => e,
            None => {
                info!(container = %c.name, "pod is being deleted; postStart hook interrupted");
                return;
            }
        };
        let message = report_hook_failure(h.events.as_ref(), pod, c, hook, &error, "PostStart");
        if let Ok(status) = h.runtime.container_status(id).await {
            kill_container(
                &h,
                pod,
                Some(c),
                &status,
                pod_ip,
                pod_grace(pod),
                "FailedPostStartHook",
            )
            .await;
        } else if let Err(e) = h.runtime.stop_container(id, pod_grace(pod)).await {
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
