//! Sandbox operations: pinned namespaces, CNI ADD on run, CNI DEL and unpinning on stop,
//! the record's removal.

use super::*;

impl ContainerdRuntime {
    pub(super) async fn run_pod_sandbox_impl(
        &self,
        config: &PodSandboxConfig,
    ) -> Result<PodSandbox, RuntimeError> {
        let id = new_id();
        let span = tracing::info_span!("sandbox", pod = %format!("{}/{}", config.namespace, config.name), id = %id);
        // Entered per poll (instrument), not held across awaits by a guard: a guard leaked
        // this span into whatever other pod's task ran on the thread next.
        async {
            let mut l: HashMap<String, String> = HashMap::from([
                (labels::KIND.into(), labels::KIND_SANDBOX.into()),
                (labels::POD_UID.into(), config.uid.clone()),
                (labels::POD_NAME.into(), config.name.clone()),
                (labels::POD_NAMESPACE.into(), config.namespace.clone()),
                (labels::ATTEMPT.into(), config.attempt.to_string()),
                (labels::CGROUP.into(), config.cgroup_parent.clone()),
                (labels::SANDBOX_STATE.into(), "ready".into()),
            ]);
            // Record the sandbox before creating anything, so a crash in between leaves an
            // object the cleanup finds.
            let namespaces = (!config.host_network)
                .then(|| PodNamespaces::under(&self.inner.config.state_dir, &id));
            if let Some(ns) = &namespaces {
                l.insert(labels::NETNS.into(), ns.net.display().to_string());
                l.insert(labels::UTSNS.into(), ns.uts.display().to_string());
                l.insert(labels::IPCNS.into(), ns.ipc.display().to_string());
            }
            let record = Container {
                id: id.clone(),
                labels: l,
                runtime: Some(ContainerRuntime {
                    name: RUNC_RUNTIME.into(),
                    options: None,
                }),
                spec: Some(Any {
                    type_url: SPEC_TYPE_URL.into(),
                    value: br#"{"ociVersion":"1.0.2-dev"}"#.to_vec(),
                }),
                ..Default::default()
            };
            self.containers()
                .create(self.request(CreateContainerRequest {
                    container: Some(record),
                }))
                .await
                .map_err(grpc("containers.Create", &id))?;

            let mut ip = None;
            if let Some(ns) = &namespaces {
                let ns_clone = ns.clone();
                let hostname = config.hostname.clone();
                let created =
                    tokio::task::spawn_blocking(move || netns::create(&ns_clone, &hostname))
                        .await
                        .map_err(|e| RuntimeError::Io {
                            what: format!("namespace setup task for sandbox {id}"),
                            source: std::io::Error::other(e.to_string()),
                        })?;
                if let Err(e) = created {
                    let _ = self.remove_pod_sandbox(&id).await;
                    return Err(e.into());
                }
                let netns_path = ns.net.display().to_string();
                let attachment = Attachment {
                    container_id: &id,
                    netns: &netns_path,
                    pod_namespace: &config.namespace,
                    pod_name: &config.name,
                    pod_uid: &config.uid,
                };
                match self.inner.config.cni.add(&attachment).await {
                    Ok(addr) => ip = Some(addr),
                    Err(e) => {
                        let _ = self.remove_pod_sandbox(&id).await;
                        return Err(e.into());
                    }
                }
                if let Some(addr) = &ip {
                    self.set_labels(&id, &[(labels::POD_IP, addr.clone())])
                        .await?;
                }
            }
            let record = self.get_container(&id).await?;
            let mut sandbox = self.sandbox_from(&record);
            sandbox.ip = ip;
            Ok(sandbox)
        }
        .instrument(span)
        .await
    }

    pub(super) async fn stop_pod_sandbox_impl(&self, id: &str) -> Result<(), RuntimeError> {
        let record = self.get_container(id).await?;
        let sandbox = self.sandbox_from(&record);
        if let Some(netns_path) = &sandbox.netns {
            let path = netns_path.display().to_string();
            // CNI DEL must run even when the netns is gone (plugins clean host-side state).
            let attachment = Attachment {
                container_id: id,
                netns: if netns::is_pinned(netns_path) {
                    &path
                } else {
                    ""
                },
                pod_namespace: &sandbox.namespace,
                pod_name: &sandbox.name,
                pod_uid: &sandbox.uid,
            };
            if record.labels.get(labels::SANDBOX_STATE).map(String::as_str) == Some("ready") {
                if let Err(e) = self.inner.config.cni.del(&attachment).await {
                    tracing::warn!(sandbox = %id, error = %e, "CNI DEL failed; continuing teardown");
                }
            }
            netns::remove(&PodNamespaces::under(&self.inner.config.state_dir, id));
        }
        self.set_labels(id, &[(labels::SANDBOX_STATE, "notready".into())])
            .await
    }

    pub(super) async fn remove_pod_sandbox_impl(&self, id: &str) -> Result<(), RuntimeError> {
        match self.stop_pod_sandbox(id).await {
            Ok(()) => {}
            Err(e) if e.is_not_found() => return Ok(()),
            Err(e) => tracing::warn!(sandbox = %id, error = %e, "stopping sandbox before removal"),
        }
        match self
            .containers()
            .delete(self.request(DeleteContainerRequest { id: id.to_string() }))
            .await
        {
            Ok(_) => Ok(()),
            Err(s) if s.code() == tonic::Code::NotFound => Ok(()),
            Err(s) => Err(grpc("containers.Delete", id)(s)),
        }
    }
}
