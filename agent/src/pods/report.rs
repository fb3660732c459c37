//! The pod's status, written to `pods/status` only when it changed.

use super::*;

impl Worker {
    pub(super) async fn write_status(
        &mut self,
        pod: &Pod,
        containers: &[&ContainerStatus],
        pod_ip: Option<String>,
    ) {
        let mut obs = Observed {
            containers: containers.to_vec(),
            waiting: self.waiting.clone(),
            pod_ip,
            host_ip: self.agent.node_ip.clone(),
            pod_failure: self.rejected.clone(),
            ..Default::default()
        };
        for ((name, kind), st) in &self.probes {
            match kind {
                ProbeKind::Readiness => {
                    obs.ready.insert(name.clone(), st.ok);
                }
                ProbeKind::Startup => {
                    obs.started.insert(name.clone(), st.ok);
                }
                ProbeKind::Liveness => {}
            }
        }
        let spec = pod.spec.clone().unwrap_or_default();
        for c in &spec.containers {
            if c.readiness_probe.is_some() && !obs.ready.contains_key(&c.name) {
                obs.ready.insert(c.name.clone(), false);
            }
            if c.startup_probe.is_some() && !obs.started.contains_key(&c.name) {
                obs.started.insert(c.name.clone(), false);
            }
        }
        {
            let mut live = self.agent.running_logs.write();
            for c in containers {
                let path = std::path::PathBuf::from(&c.log_path);
                if c.state == ContainerState::Running {
                    live.insert(path);
                } else {
                    live.remove(&path);
                }
            }
        }
        let status = status::pod_status(pod, &obs, Utc::now());
        let current = pod
            .status
            .as_ref()
            .and_then(|s| serde_json::to_value(s).ok());
        if self.last_status.as_ref() == Some(&status) || same_status(current.as_ref(), &status) {
            self.last_status = Some(status);
            return;
        }
        let ns = pod
            .metadata
            .namespace
            .clone()
            .unwrap_or_else(|| "default".into());
        let name = if is_static(pod) {
            crate::pod_meta::api_name(pod)
        } else {
            pod.metadata.name.clone().unwrap_or_default()
        };
        let api: Api<Pod> = Api::namespaced(self.agent.client.clone(), &ns);
        let body = json!({"status": status});
        match api
            .patch_status(&name, &PatchParams::default(), &Patch::Merge(&body))
            .await
        {
            Ok(_) => self.last_status = Some(status),
            Err(kube::Error::Api(e)) if e.code == 404 => {}
            Err(e) => {
                warn!(error = %e, "writing pod status");
                self.wake_in(Duration::from_secs(2));
            }
        }
    }
}

pub(super) fn same_status(current: Option<&Value>, new: &Value) -> bool {
    let Some(current) = current else { return false };
    // Compare after a round trip through the typed status so formatting does not matter.
    let typed: Option<k8s_openapi::api::core::v1::PodStatus> =
        serde_json::from_value(new.clone()).ok();
    typed.and_then(|t| serde_json::to_value(t).ok()).as_ref() == Some(current)
}

pub(super) fn write_if_changed(path: &std::path::Path, content: &[u8]) -> std::io::Result<()> {
    if std::fs::read(path).ok().as_deref() == Some(content) {
        return Ok(());
    }
    std::fs::write(path, content)
}
