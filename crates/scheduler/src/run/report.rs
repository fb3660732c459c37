//! What the scheduler tells users: `Scheduled` / `FailedScheduling` Events and the
//! pod's `PodScheduled` condition. Events go through a bounded queue and are dropped
//! when it is full, as client-go's event broadcaster drops them, so reporting never
//! holds up scheduling. A repeat of the same event for the same pod (a pod retried and
//! still unschedulable) bumps the first event's `count` and `lastTimestamp`, as
//! client-go's event correlator aggregates, instead of creating another object.

use std::collections::HashMap;
use std::sync::Arc;

use parking_lot::Mutex;

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
/// Events remembered for aggregation; past it the memory starts over.
const MAX_REMEMBERED: usize = 4096;

/// (pod uid, reason, message) → (event namespace, name, count so far).
type Seen = HashMap<(String, String, String), (String, String, i32)>;

enum EventWrite {
    Create(Box<Event>),
    Repeat {
        namespace: String,
        name: String,
        count: i32,
    },
}

#[derive(Clone)]
pub struct Reporter {
    client: Client,
    events: mpsc::Sender<EventWrite>,
    seen: Arc<Mutex<Seen>>,
    component: String,
}

async fn write_event(client: Client, w: EventWrite) {
    let result = match w {
        EventWrite::Create(ev) => {
            let ns = ev.metadata.namespace.clone().unwrap_or_default();
            Api::<Event>::namespaced(client, &ns)
                .create(&PostParams::default(), &ev)
                .await
                .map(|_| ())
        }
        EventWrite::Repeat {
            namespace,
            name,
            count,
        } => {
            let now = Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
            let patch = serde_json::json!({"count": count, "lastTimestamp": now});
            Api::<Event>::namespaced(client, &namespace)
                .patch(&name, &PatchParams::default(), &Patch::Merge(patch))
                .await
                .map(|_| ())
        }
    };
    if let Err(e) = result {
        debug!(error = %e, "event not recorded");
    }
}

impl Reporter {
    pub fn start(client: Client, component: &str) -> Reporter {
        let (tx, rx) = mpsc::channel::<EventWrite>(MAX_QUEUED_EVENTS);
        let writer = client.clone();
        tokio::spawn(async move {
            tokio_stream::wrappers::ReceiverStream::new(rx)
                .for_each_concurrent(EVENT_WRITERS, |w| write_event(writer.clone(), w))
                .await;
        });
        Reporter {
            client,
            events: tx,
            seen: Arc::new(Mutex::new(HashMap::new())),
            component: component.to_string(),
        }
    }

    /// The write for a repeat of an event already recorded, if it is one.
    fn repeat(&self, key: &(String, String, String)) -> Option<EventWrite> {
        let mut seen = self.seen.lock();
        let (namespace, name, count) = seen.get_mut(key)?;
        *count += 1;
        Some(EventWrite::Repeat {
            namespace: namespace.clone(),
            name: name.clone(),
            count: *count,
        })
    }

    fn new_event(&self, pod: &Pod, kind: &str, reason: &str, message: &str) -> Event {
        let now = k8s_openapi::jiff::Timestamp::now();
        let name = pod.metadata.name.clone().unwrap_or_default();
        Event {
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
        }
    }

    pub fn event(&self, pod: &Pod, kind: &str, reason: &str, message: &str) {
        // Only failures repeat (Scheduled/Preempted happen once per pod), so only they are
        // remembered and looked up.
        let key = (kind == "Warning").then(|| {
            (
                pod.metadata.uid.clone().unwrap_or_default(),
                reason.to_string(),
                message.to_string(),
            )
        });
        if let Some(key) = &key {
            if let Some(w) = self.repeat(key) {
                // Full queue: dropped, like a new event would be.
                let _ = self.events.try_send(w);
                return;
            }
        }
        let ev = self.new_event(pod, kind, reason, message);
        let ev_name = ev.metadata.name.clone().unwrap_or_default();
        let ev_ns = ev.metadata.namespace.clone().unwrap_or_default();
        // Full queue: the event is dropped (client-go's DropIfChannelFull).
        if self
            .events
            .try_send(EventWrite::Create(Box::new(ev)))
            .is_err()
        {
            debug!("event queue full, event dropped");
            return;
        }
        if let Some(key) = key {
            let mut seen = self.seen.lock();
            if seen.len() >= MAX_REMEMBERED {
                seen.clear();
            }
            seen.insert(key, (ev_ns, ev_name, 1));
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
