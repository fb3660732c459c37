//! What the scheduler tells users: `Scheduled` / `FailedScheduling` Events (through
//! `cairn-events`: queued, dropped when full, repeats aggregated) and the pod's
//! `PodScheduled` condition.

use std::sync::Arc;

use cairn_events::{EventType, Note, Recorder};
use chrono::Utc;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, Patch, PatchParams};
use kube::Client;
use tracing::warn;

#[derive(Clone)]
pub struct Reporter {
    client: Client,
    recorder: Recorder,
}

impl Reporter {
    pub fn start(client: Client, component: &str) -> Reporter {
        Reporter {
            recorder: Recorder::start(client.clone(), component),
            client,
        }
    }

    pub fn event(&self, pod: &Pod, kind: EventType, reason: &str, message: &str) {
        let action = match kind {
            EventType::Normal => "Binding",
            EventType::Warning => "Scheduling",
        };
        self.recorder.record(
            cairn_events::reference(pod),
            &Note {
                kind,
                reason,
                message,
                action,
            },
        );
    }

    /// `PodScheduled=False` with the reason, written only when it changes.
    pub fn unschedulable(&self, pod: Arc<Pod>, reason: &'static str, message: String) {
        self.event(&pod, EventType::Warning, "FailedScheduling", &message);
        let same = pod
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .and_then(|c| c.iter().find(|c| c.type_ == "PodScheduled"))
            .is_some_and(|c| {
                c.status == "False"
                    && c.reason.as_deref() == Some(reason)
                    && c.message.as_deref() == Some(message.as_str())
            });
        if same {
            return;
        }
        let client = self.client.clone();
        tokio::spawn(async move {
            let ns = pod.metadata.namespace.clone().unwrap_or_default();
            let name = pod.metadata.name.clone().unwrap_or_default();
            let patch = serde_json::json!({"status": {"conditions": [{
                "type": "PodScheduled", "status": "False", "reason": reason, "message": message,
                "lastProbeTime": null, "lastTransitionTime": Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
            }]}});
            let api = Api::<Pod>::namespaced(client, &ns);
            if let Err(e) = api
                .patch_status(&name, &PatchParams::default(), &Patch::Strategic(patch))
                .await
            {
                warn!(namespace = ns, pod = name, error = %e, "could not set PodScheduled=False");
            }
        });
    }
}
