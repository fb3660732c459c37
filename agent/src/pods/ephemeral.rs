//! Ephemeral containers (`kubectl debug`): started once each, never restarted, in the
//! pod's namespaces, and in the PID namespace of `targetContainerName` when it names a
//! running container, so the debugger sees the target's processes.

use k8s_openapi::api::core::v1::EphemeralContainer;

use super::*;

/// An ephemeral container as a regular one: the same fields, minus the target.
pub fn as_container(ec: &EphemeralContainer) -> Option<Container> {
    let mut v = serde_json::to_value(ec).ok()?;
    if let Some(m) = v.as_object_mut() {
        m.remove("targetContainerName");
    }
    serde_json::from_value(v).ok()
}

impl Worker {
    pub(super) async fn sync_ephemeral_containers(
        &mut self,
        pod: &Pod,
        containers: &[ContainerStatus],
        sandbox: &PodSandbox,
        ip: Option<&str>,
    ) {
        let ephemeral = pod
            .spec
            .as_ref()
            .and_then(|s| s.ephemeral_containers.clone())
            .unwrap_or_default();
        for ec in &ephemeral {
            if containers.iter().any(|c| c.name == ec.name) {
                continue;
            }
            let Some(c) = as_container(ec) else {
                warn!(container = %ec.name, "ephemeral container does not convert to a container");
                continue;
            };
            let pid_namespace = ec.target_container_name.as_ref().and_then(|target| {
                containers
                    .iter()
                    .filter(|c| &c.name == target && c.state == ContainerState::Running)
                    .max_by_key(|c| c.attempt)
                    .and_then(|c| c.pid)
                    .map(|pid| std::path::PathBuf::from(format!("/proc/{pid}/ns/pid")))
            });
            let role = super::start::Role::Ephemeral { pid_namespace };
            self.start_container(pod, &c, 0, sandbox, ip, role).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn converts_without_the_target() {
        let ec: EphemeralContainer = serde_json::from_value(serde_json::json!({
            "name": "debugger",
            "image": "busybox",
            "command": ["sh"],
            "stdin": true,
            "tty": true,
            "targetContainerName": "web",
        }))
        .unwrap();
        let c = as_container(&ec).unwrap();
        assert_eq!(c.name, "debugger");
        assert_eq!(c.image.as_deref(), Some("busybox"));
        assert_eq!(c.tty, Some(true));
    }
}
