//! Container lifecycle handlers (`postStart`, `preStop`) as the kubelet's handler runner
//! runs them: `exec` in the container, `httpGet` against the pod (host defaults to the pod
//! IP; only transport errors fail, the status code is not checked, as upstream), `sleep`.

use std::time::Duration;

use k8s_openapi::api::core::v1::{Container, LifecycleHandler, Pod};
use thiserror::Error;

use cairn_runtime::Runtime;

use crate::probes;

/// Why a hook failed (the `error:` part of the kubelet's hook failure message).
#[derive(Debug, Error)]
pub enum HookError {
    #[error("command {command:?} exited with {code}, message: {output:?}")]
    ExitCode {
        command: Vec<String>,
        code: i32,
        /// What the command wrote (stdout and stderr).
        output: String,
    },
    #[error("running command {command:?}: {source}")]
    Exec {
        command: Vec<String>,
        #[source]
        source: cairn_runtime::RuntimeError,
    },
    #[error("{0}")]
    Http(String),
    #[error("hook did not finish within {0:?}")]
    Deadline(Duration),
    #[error("invalid handler: none of exec, httpGet or sleep is set")]
    Invalid,
}

impl HookError {
    /// A hook cut off by the grace period is not reported as failed (the kubelet just moves on).
    pub fn is_deadline(&self) -> bool {
        match self {
            HookError::Deadline(_) => true,
            HookError::Exec { source, .. } => {
                matches!(source, cairn_runtime::RuntimeError::ExecTimeout { .. })
            }
            _ => false,
        }
    }
}

/// `<name>_<namespace>(<uid>)`, the kubelet's `format.Pod`.
fn pod_ref(pod: &Pod) -> String {
    format!(
        "{}_{}({})",
        pod.metadata.name.as_deref().unwrap_or(""),
        pod.metadata.namespace.as_deref().unwrap_or("default"),
        pod.metadata.uid.as_deref().unwrap_or("")
    )
}

/// The kubelet's message for a failed hook, e.g.
/// `Exec lifecycle hook ([sh -c exit 1]) for Container "c" in Pod "p_default(uid)" failed - error: …`.
pub fn failure_message(
    pod: &Pod,
    container: &Container,
    handler: &LifecycleHandler,
    error: &HookError,
) -> String {
    let what = if let Some(exec) = &handler.exec {
        format!(
            "Exec lifecycle hook ([{}])",
            exec.command.clone().unwrap_or_default().join(" ")
        )
    } else if let Some(http) = &handler.http_get {
        format!(
            "HTTP lifecycle hook ({})",
            http.path.as_deref().unwrap_or("")
        )
    } else if let Some(sleep) = &handler.sleep {
        format!("Sleep lifecycle hook ({})", sleep.seconds)
    } else {
        "Lifecycle hook".to_string()
    };
    format!(
        "{what} for Container {:?} in Pod {:?} failed - error: {error}",
        container.name,
        pod_ref(pod)
    )
}

/// Runs `handler` for the container instance `container_id`, giving up after `limit`.
pub async fn run(
    runtime: &dyn Runtime,
    container: &Container,
    container_id: &str,
    pod_ip: Option<&str>,
    handler: &LifecycleHandler,
    limit: Duration,
) -> Result<(), HookError> {
    if let Some(exec) = &handler.exec {
        let command = exec.command.clone().unwrap_or_default();
        return match runtime.exec_sync(container_id, &command, limit).await {
            Ok(r) if r.exit_code == 0 => Ok(()),
            Ok(r) => Err(HookError::ExitCode {
                command,
                code: r.exit_code,
                output: r.output,
            }),
            Err(source) => Err(HookError::Exec { command, source }),
        };
    }
    if let Some(http) = &handler.http_get {
        let url = probes::http_url(container, http, pod_ip).map_err(HookError::Http)?;
        let get = probes::http_get(&url, http, "kube-lifecycle", limit);
        return match get.await {
            // Any answer counts: lifecycle hooks do not look at the status code.
            Ok(_) => Ok(()),
            Err(e) if e.timed_out => Err(HookError::Deadline(limit)),
            Err(e) => Err(HookError::Http(e.message)),
        };
    }
    if let Some(sleep) = &handler.sleep {
        return sleep_hook(sleep.seconds, limit).await;
    }
    Err(HookError::Invalid)
}

/// The `sleep` action: sleeps `seconds`, or fails at `limit` if that comes first.
async fn sleep_hook(seconds: i64, limit: Duration) -> Result<(), HookError> {
    let wanted = Duration::from_secs(seconds.max(0) as u64);
    if wanted > limit {
        tokio::time::sleep(limit).await;
        return Err(HookError::Deadline(limit));
    }
    tokio::time::sleep(wanted).await;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn failure_messages_name_hook_container_and_pod() {
        let pod: Pod = serde_json::from_value(
            json!({"metadata": {"name": "p", "namespace": "ns", "uid": "u1"}}),
        )
        .unwrap();
        let c: Container = serde_json::from_value(json!({"name": "c"})).unwrap();
        let h: LifecycleHandler =
            serde_json::from_value(json!({"exec": {"command": ["sh", "-c", "exit 1"]}})).unwrap();
        let e = HookError::ExitCode {
            command: vec!["sh".into(), "-c".into(), "exit 1".into()],
            code: 1,
            output: "no such file\n".into(),
        };
        assert_eq!(
            failure_message(&pod, &c, &h, &e),
            r#"Exec lifecycle hook ([sh -c exit 1]) for Container "c" in Pod "p_ns(u1)" failed - error: command ["sh", "-c", "exit 1"] exited with 1, message: "no such file\n""#
        );
        let h: LifecycleHandler =
            serde_json::from_value(json!({"httpGet": {"path": "/stop", "port": 80}})).unwrap();
        assert!(
            failure_message(&pod, &c, &h, &HookError::Http("refused".into()))
                .starts_with("HTTP lifecycle hook (/stop) for Container \"c\"")
        );
        assert!(HookError::Deadline(Duration::from_secs(1)).is_deadline());
        assert!(!HookError::Invalid.is_deadline());
    }

    #[tokio::test]
    async fn sleep_is_cut_at_the_limit() {
        let r = sleep_hook(3600, Duration::from_millis(10)).await;
        assert!(matches!(r, Err(HookError::Deadline(_))), "{r:?}");
        assert!(sleep_hook(0, Duration::from_millis(10)).await.is_ok());
    }
}
