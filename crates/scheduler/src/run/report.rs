//! What the scheduler tells users: `Scheduled` / `FailedScheduling` Events and the
//! pod's `PodScheduled` condition. Events go through a bounded queue and are dropped
//! when it is full, as client-go's event broadcaster drops them, so reporting never
//! holds up scheduling.

use std::sync::Arc;

use chrono::Utc;
use futures::StreamExt;
use k8s_openapi::api::core::v1::{Event, EventSource, ObjectReference, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta, Time};
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::Client;
use tokio::sync::mpsc;
use tracing::{debug, warn};

const MAX_QUEUED_EVENTS: usize = 1000;
const EVENT_WRITERS: usize = 8;

#[derive(Clone)]
pub struct Reporter {
    client: Client,
    events: mpsc::Sender<Event>,
    component: String,
}

impl Reporter {
    pub fn start(client: Client, component: &str) -> Reporter {
        let (tx, rx) = mpsc::channel::<Event>(MAX_QUEUED_EVENTS);
        let writer = client.clone();
        tokio::spawn(async move {
            tokio_stream::wrappers::ReceiverStream::new(rx)
                .for_each_concurrent(EVENT_WRITERS, |ev| {
                    let client = writer.clone();
                    async move {
                        let ns = ev.metadata.namespace.clone().unwrap_or_default();
                        if let Err(e) = Api::<Event>::namespaced(client, &ns)
                            .create(&PostParams::default(), &ev)
                            .await
                        {
                            debug!(namespace = ns, error = %e, "event not recorded");
                        }
                    }
                })
                .await;
        });
        Reporter {
            client,
            events: tx,
            component: component.to_string(),
        }
    }

    pub fn event(&self, pod: &Pod, kind: &str, reason: &str, message: &str) {
        let now = k8s_openapi::jiff::Timestamp::now();
        let name = pod.metadata.name.clone().unwrap_or_default();
        let ev = Event {
            metadata: ObjectMeta {
                name: Some(format!("{name}.{:x}", now.as_nanosecond())),
                namespace: pod.metadata.namespace.clone(),
                ..Default::default()
            },
            involved_object: ObjectReference {
                api_version: Some("v1".into()),
                kind: Some("Pod".into()),
                name: Some(name),
                namespace: pod.metadata.namespace.clone(),
                uid: pod.metadata.uid.clone(),
                resource_version: pod.metadata.resource_version.clone(),
                field_path: None,
            },
            reason: Some(reason.into()),
            message: Some(message.into()),
            type_: Some(kind.into()),
            source: Some(EventSource {
                component: Some(self.component.clone()),
                host: None,
            }),
            first_timestamp: Some(Time(now)),
            last_timestamp: Some(Time(now)),
            event_time: Some(MicroTime(now)),
            count: Some(1),
            action: Some(
                if kind == "Normal" {
                    "Binding"
                } else {
                    "Scheduling"
                }
                .into(),
            ),
            reporting_component: Some(self.component.clone()),
            reporting_instance: Some(self.component.clone()),
            ..Default::default()
        };
        // Full queue: the event is dropped (client-go's DropIfChannelFull).
        if self.events.try_send(ev).is_err() {
            debug!("event queue full, event dropped");
        }
    }

    /// `PodScheduled=False` with the reason, written only when it changes.
    pub fn unschedulable(&self, pod: Arc<Pod>, reason: &'static str, message: String) {
        self.event(&pod, "Warning", "FailedScheduling", &message);
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
