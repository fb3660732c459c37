//! Where a container's logs are: the pod log directory's files of the instances the
//! agent ran (for `/containerLogs` and attach).

use std::sync::Arc;

use cairn_podlogs::{LocateError, LogLocation, LogSource};

use crate::Agent;

/// Log locations from the pod log directory: `<attempt>.log` per instance, the highest is
/// current. Running instances are those the workers last saw running.
pub struct AgentLogs {
    pub agent: Arc<Agent>,
    pub ledger: Arc<crate::ledger::PodLedger>,
}

impl LogSource for AgentLogs {
    fn locate(
        &self,
        namespace: &str,
        pod: &str,
        container: &str,
        previous: bool,
    ) -> Result<LogLocation, LocateError> {
        let key = format!("{namespace}/{pod}");
        let found = self.ledger.pods().into_values().find(|p| {
            format!(
                "{}/{}",
                p.metadata.namespace.as_deref().unwrap_or("default"),
                crate::pod_meta::api_name(p)
            ) == key
        });
        let Some(p) = found else {
            return Err(LocateError::PodNotFound(pod.to_string()));
        };
        let spec = p.spec.clone().unwrap_or_default();
        let ephemeral = spec.ephemeral_containers.iter().flatten().map(|c| &c.name);
        if !spec
            .containers
            .iter()
            .chain(spec.init_containers.iter().flatten())
            .map(|c| &c.name)
            .chain(ephemeral)
            .any(|name| name == container)
        {
            return Err(LocateError::ContainerNotFound {
                pod: pod.into(),
                container: container.into(),
            });
        }
        let uid = p.metadata.uid.clone().unwrap_or_default();
        let name = p.metadata.name.clone().unwrap_or_default();
        let dir =
            cairn_podlogs::pod_log_dir(&self.agent.config.pod_log_dir, namespace, &name, &uid)
                .join(container);
        let mut attempts: Vec<u32> = std::fs::read_dir(&dir)
            .map(|d| {
                d.flatten()
                    .filter_map(|e| e.file_name().to_str()?.strip_suffix(".log")?.parse().ok())
                    .collect()
            })
            .unwrap_or_default();
        attempts.sort_unstable_by(|a, b| b.cmp(a));
        let pick = if previous {
            attempts.get(1)
        } else {
            attempts.first()
        };
        let Some(attempt) = pick else {
            if previous {
                return Err(LocateError::NoPreviousInstance {
                    pod: pod.into(),
                    container: container.into(),
                });
            }
            return Err(LocateError::Unavailable(format!(
                "container {container:?} in pod {pod:?} is waiting to start: ContainerCreating"
            )));
        };
        let path = dir.join(format!("{attempt}.log"));
        if previous {
            return Ok(LogLocation::exited(path));
        }
        let ledger = self.ledger.clone();
        let probe_path = path.clone();
        Ok(LogLocation {
            path,
            running: Arc::new(move || ledger.is_log_live(&probe_path)),
        })
    }
}
