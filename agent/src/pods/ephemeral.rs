//! Ephemeral containers (`kubectl debug`): started once each, never restarted, in the
//! pod's namespaces, and in the PID namespace of `targetContainerName` when it names a
//! running container, so the debugger sees the target's processes.

use super::*;
use crate::pod_meta::ephemeral_as_container as as_container;

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
