//! Container operations: the OCI spec and rootfs on create, the task on start, SIGTERM then
//! SIGKILL on stop, task, snapshot and record on remove.

use super::*;

impl ContainerdRuntime {
    pub(super) async fn create_container_impl(
        &self,
        sandbox: &PodSandbox,
        config: &ContainerConfig,
    ) -> Result<String, RuntimeError> {
        let id = new_id();
        let cgroup = format!("{}/{}", sandbox.cgroup_parent.trim_end_matches('/'), id);
        let snapshotter = self.inner.config.snapshotter.clone();
        let this = self.clone();
        let sandbox = sandbox.clone();
        let config = config.clone();
        let cid = id.clone();
        self.with_lease(&id, |lease| async move {
            let mounts = this
                .snapshots()
                .prepare(this.leased(
                    PrepareSnapshotRequest {
                        snapshotter: snapshotter.clone(),
                        key: cid.clone(),
                        parent: config.image.chain_id.clone(),
                        labels: HashMap::new(),
                    },
                    &lease,
                ))
                .await
                .map_err(grpc("snapshots.Prepare", &cid))?
                .into_inner()
                .mounts;
            let built = async {
                let user = this.resolve_user(&config, &mounts).await?;
                let spec = this.oci_spec(&sandbox, &config, &cgroup, user)?;
                let l = container_labels(&sandbox, &config, &cgroup);
                let record = Container {
                    id: cid.clone(),
                    labels: l,
                    image: config.image.name.clone(),
                    runtime: Some(ContainerRuntime {
                        name: RUNC_RUNTIME.into(),
                        options: None,
                    }),
                    spec: Some(Any {
                        type_url: SPEC_TYPE_URL.into(),
                        value: serde_json::to_vec(&spec).unwrap_or_default(),
                    }),
                    snapshotter: snapshotter.clone(),
                    snapshot_key: cid.clone(),
                    ..Default::default()
                };
                this.containers()
                    .create(this.leased(
                        CreateContainerRequest {
                            container: Some(record),
                        },
                        &lease,
                    ))
                    .await
                    .map_err(grpc("containers.Create", &cid))?;
                Ok::<(), RuntimeError>(())
            }
            .await;
            if let Err(e) = built {
                let _ = this
                    .snapshots()
                    .remove(this.request(RemoveSnapshotRequest {
                        snapshotter: snapshotter.clone(),
                        key: cid.clone(),
                    }))
                    .await;
                return Err(e);
            }
            Ok(())
        })
        .await?;
        Ok(id)
    }

    /// The OCI spec, with what the kubelet asks for on cgroup v2: a cgroup namespace
    /// (unprivileged), no swap and whole-group OOM kills where the pod cgroup has the files.
    fn oci_spec(
        &self,
        sandbox: &PodSandbox,
        config: &ContainerConfig,
        cgroup: &str,
        user: (u32, u32, Vec<u32>),
    ) -> Result<serde_json::Value, RuntimeError> {
        let mut spec = spec::build(config, sandbox, cgroup, user)?;
        if self.inner.cgroups.version() == CgroupVersion::V2 {
            if !config.security.privileged {
                with_cgroup_namespace(&mut spec);
            }
            // What the kubelet asks for on v2, where the pod cgroup has the files.
            for (file, value) in [("memory.swap.max", "0"), ("memory.oom.group", "1")] {
                if self.inner.cgroups.v2_has_file(&sandbox.cgroup_parent, file) {
                    set_unified(&mut spec, file, value);
                }
            }
        }
        Ok(spec)
    }

    pub(super) async fn start_container_impl(&self, id: &str) -> Result<(), RuntimeError> {
        let container = self.get_container(id).await?;
        let rootfs = self.rootfs_mounts(id).await?;
        let stdio = container
            .labels
            .get(labels::LOG_URI)
            .cloned()
            .unwrap_or_default();
        let started = Utc::now();
        let created = self
            .tasks()
            .create(self.request(CreateTaskRequest {
                container_id: id.to_string(),
                rootfs,
                stdout: stdio.clone(),
                stderr: stdio,
                ..Default::default()
            }))
            .await;
        if let Err(status) = created {
            // runc refused (bad command, missing mount source…): the container ends as
            // "StartError" with exit code 128, as containerd's CRI reports it.
            self.record_start_error(
                id,
                started,
                &format!("failed to create containerd task: {}", status.message()),
            )
            .await?;
            return Err(grpc("tasks.Create", id)(status));
        }
        let pod_uid = container
            .labels
            .get(labels::POD_UID)
            .cloned()
            .unwrap_or_default();
        self.watch_exit(id, &pod_uid);
        let start = self
            .tasks()
            .start(self.request(StartRequest {
                container_id: id.to_string(),
                exec_id: String::new(),
            }))
            .await;
        if let Err(status) = start {
            let _ = self
                .tasks()
                .delete(self.request(DeleteTaskRequest {
                    container_id: id.to_string(),
                }))
                .await;
            self.record_start_error(
                id,
                started,
                &format!("failed to start containerd task: {}", status.message()),
            )
            .await?;
            return Err(grpc("tasks.Start", id)(status));
        }
        self.set_labels(id, &[(labels::STARTED_AT, rfc3339(started))])
            .await
    }

    pub(super) async fn stop_container_impl(
        &self,
        id: &str,
        grace: Duration,
    ) -> Result<(), RuntimeError> {
        let Some(task) = self.task(id).await? else {
            return Ok(());
        };
        if TaskStatus::try_from(task.status) == Ok(TaskStatus::Running) {
            let kill = |signal: u32, all: bool| {
                let mut tasks = self.tasks();
                let req = self.request(KillRequest {
                    container_id: id.to_string(),
                    exec_id: String::new(),
                    signal,
                    all,
                });
                async move { tasks.kill(req).await }
            };
            let wait = || {
                let mut tasks = self.tasks();
                let req = self.request(WaitRequest {
                    container_id: id.to_string(),
                    exec_id: String::new(),
                });
                async move { tasks.wait(req).await }
            };
            let mut exited = false;
            if !grace.is_zero() {
                if let Err(s) = kill(15, false).await {
                    if s.code() != tonic::Code::NotFound {
                        tracing::warn!(container = %id, error = %s, "SIGTERM");
                    }
                }
                exited = tokio::time::timeout(grace, wait()).await.is_ok();
            }
            if !exited {
                if let Err(s) = kill(9, true).await {
                    if s.code() != tonic::Code::NotFound {
                        return Err(grpc("tasks.Kill", id)(s));
                    }
                }
                let _ = tokio::time::timeout(Duration::from_secs(10), wait()).await;
            }
        }
        self.finalize_exit(id).await?;
        Ok(())
    }

    pub(super) async fn remove_container_impl(&self, id: &str) -> Result<(), RuntimeError> {
        if self.task(id).await?.is_some() {
            self.stop_container(id, Duration::ZERO).await?;
            // A task that never started (Created) is deleted here.
            let _ = self
                .tasks()
                .delete(self.request(DeleteTaskRequest {
                    container_id: id.to_string(),
                }))
                .await;
        }
        let cgroup = self
            .get_container(id)
            .await
            .ok()
            .and_then(|c| c.labels.get(labels::CGROUP).cloned());
        match self
            .containers()
            .delete(self.request(DeleteContainerRequest { id: id.to_string() }))
            .await
        {
            Ok(_) => {}
            Err(s) if s.code() == tonic::Code::NotFound => {}
            Err(s) => return Err(grpc("containers.Delete", id)(s)),
        }
        match self
            .snapshots()
            .remove(self.request(RemoveSnapshotRequest {
                snapshotter: self.inner.config.snapshotter.clone(),
                key: id.to_string(),
            }))
            .await
        {
            Ok(_) => {}
            Err(s) if s.code() == tonic::Code::NotFound => {}
            Err(s) => return Err(grpc("snapshots.Remove", id)(s)),
        }
        if let Some(cg) = cgroup {
            self.inner.cgroups.remove(&cg);
        }
        Ok(())
    }
}

/// A private cgroup namespace, as containerd's CRI gives unprivileged containers on cgroup
/// v2: the container's `/sys/fs/cgroup` is then its own cgroup (its `memory.max`, `cpu.max`)
/// instead of the host's whole tree, and `/proc/self/cgroup` reads `0::/`.
fn with_cgroup_namespace(spec: &mut serde_json::Value) {
    if let Some(namespaces) = spec
        .pointer_mut("/linux/namespaces")
        .and_then(serde_json::Value::as_array_mut)
    {
        if !namespaces.iter().any(|n| n["type"] == "cgroup") {
            namespaces.push(serde_json::json!({"type": "cgroup"}));
        }
    }
}

/// A cgroup v2 file for runc to write (`linux.resources.unified`), as the kubelet asks for
/// every container on v2: `memory.swap.max = 0` (its default `NoSwap`; swap is accounted
/// apart from memory there, so without it a container on a node with swap swaps past its
/// limit instead of being OOM-killed) and `memory.oom.group = 1` (an OOM kill ends the
/// whole container, not one of its processes).
fn set_unified(spec: &mut serde_json::Value, file: &str, value: &str) {
    if let Some(resources) = spec
        .pointer_mut("/linux/resources")
        .and_then(serde_json::Value::as_object_mut)
    {
        let unified = resources
            .entry("unified")
            .or_insert_with(|| serde_json::json!({}));
        if let Some(unified) = unified.as_object_mut() {
            unified.insert(file.into(), value.into());
        }
    }
}

pub(super) fn mount_readonly(mounts: &[ContainerdMount], target: &Path) -> bool {
    let Some(m) = mounts.first() else {
        return false;
    };
    let mut flags = nix::mount::MsFlags::MS_RDONLY;
    let mut data = Vec::new();
    for o in &m.options {
        match o.as_str() {
            "rbind" => flags |= nix::mount::MsFlags::MS_BIND | nix::mount::MsFlags::MS_REC,
            "bind" => flags |= nix::mount::MsFlags::MS_BIND,
            "ro" | "rw" => {}
            other => data.push(other.to_string()),
        }
    }
    let data = data.join(",");
    nix::mount::mount(
        Some(m.source.as_str()),
        target,
        Some(m.r#type.as_str()),
        flags,
        Some(data.as_str()).filter(|d| !d.is_empty()),
    )
    .is_ok()
}

/// The labels cairn finds a container by after a restart (see `labels`).
fn container_labels(
    sandbox: &PodSandbox,
    config: &ContainerConfig,
    cgroup: &str,
) -> HashMap<String, String> {
    let mut l: HashMap<String, String> = HashMap::from([
        (labels::KIND.into(), labels::KIND_CONTAINER.into()),
        (labels::POD_UID.into(), sandbox.uid.clone()),
        (labels::POD_NAME.into(), sandbox.name.clone()),
        (labels::POD_NAMESPACE.into(), sandbox.namespace.clone()),
        (labels::SANDBOX_ID.into(), sandbox.id.clone()),
        (labels::CONTAINER_NAME.into(), config.name.clone()),
        (labels::ATTEMPT.into(), config.attempt.to_string()),
        (labels::SPEC_HASH.into(), config.spec_hash.clone()),
        (labels::CGROUP.into(), cgroup.to_string()),
        (
            labels::LOG_PATH.into(),
            config.log_path.display().to_string(),
        ),
        (labels::IMAGE_REF.into(), config.image.name.clone()),
        (labels::IMAGE_ID.into(), config.image.id.clone()),
        (labels::INIT.into(), config.init.to_string()),
        (labels::LOG_URI.into(), config.log_uri.clone()),
    ]);
    if let Some(p) = &config.termination_message_path {
        l.insert(labels::MESSAGE_PATH.into(), p.display().to_string());
    }
    l
}
