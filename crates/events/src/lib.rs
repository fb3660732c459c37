//! Events (`core/v1`) as components record them for users (`kubectl describe`,
//! `kubectl get events`). They go through a bounded queue and are dropped when it is
//! full, as client-go's event broadcaster drops them, so reporting never holds up the
//! component's own work. A repeat of the same warning for the same object bumps the
//! first event's `count` and `lastTimestamp`, as client-go's event correlator
//! aggregates, instead of creating another object.

use std::collections::HashMap;
use std::sync::Arc;

use chrono::Utc;
use futures::StreamExt;
use k8s_openapi::api::core::v1::{Event, EventSource, ObjectReference};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta, Time};
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::{Client, Resource, ResourceExt};
use parking_lot::Mutex;
use tokio::sync::mpsc;
use tracing::debug;

const MAX_QUEUED_EVENTS: usize = 1000;
const EVENT_WRITERS: usize = 8;
/// Events remembered for aggregation; past it the memory starts over.
const MAX_REMEMBERED: usize = 4096;

/// (object uid, reason, message) → (event namespace, name, count so far).
type Seen = HashMap<(String, String, String), (String, String, i32)>;

enum EventWrite {
    Create(Box<Event>),
    Repeat {
        namespace: String,
        name: String,
        count: i32,
    },
}

/// `Normal` or `Warning`, as the Event's `type`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventType {
    Normal,
    Warning,
}

impl EventType {
    fn as_str(self) -> &'static str {
        match self {
            EventType::Normal => "Normal",
            EventType::Warning => "Warning",
        }
    }
}

/// What happened, to whom.
pub struct Note<'a> {
    pub kind: EventType,
    pub reason: &'a str,
    pub message: &'a str,
    /// The Event's `action` (e.g. `Binding`, `Create`).
    pub action: &'a str,
}

#[derive(Clone)]
pub struct Recorder {
    events: mpsc::Sender<EventWrite>,
    seen: Arc<Mutex<Seen>>,
    component: String,
}

/// The reference an Event's `involvedObject` holds for `obj`.
pub fn reference<K: Resource<DynamicType = ()>>(obj: &K) -> ObjectReference {
    ObjectReference {
        api_version: Some(K::api_version(&()).into_owned()),
        kind: Some(K::kind(&()).into_owned()),
        name: Some(obj.name_any()),
        namespace: obj.namespace(),
        uid: obj.uid(),
        resource_version: obj.resource_version(),
        field_path: None,
    }
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

impl Recorder {
    /// Starts the writers; `component` is the Event's `source.component`.
    pub fn start(client: Client, component: &str) -> Recorder {
        let (tx, rx) = mpsc::channel::<EventWrite>(MAX_QUEUED_EVENTS);
        tokio::spawn(async move {
            tokio_stream::wrappers::ReceiverStream::new(rx)
                .for_each_concurrent(EVENT_WRITERS, |w| write_event(client.clone(), w))
                .await;
        });
        Recorder {
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

    fn new_event(&self, involved: ObjectReference, note: &Note) -> Event {
        let now = k8s_openapi::jiff::Timestamp::now();
        let name = involved.name.clone().unwrap_or_default();
        // Events of cluster-scoped objects live in `default`, as upstream records them.
        let namespace = involved
            .namespace
            .clone()
            .filter(|n| !n.is_empty())
            .unwrap_or_else(|| "default".into());
        Event {
            metadata: ObjectMeta {
                name: Some(format!("{name}.{:x}", now.as_nanosecond())),
                namespace: Some(namespace),
                ..Default::default()
            },
            involved_object: involved,
            reason: Some(note.reason.into()),
            message: Some(note.message.into()),
            type_: Some(note.kind.as_str().into()),
            source: Some(EventSource {
                component: Some(self.component.clone()),
                host: None,
            }),
            first_timestamp: Some(Time(now)),
            last_timestamp: Some(Time(now)),
            event_time: Some(MicroTime(now)),
            count: Some(1),
            action: Some(note.action.into()),
            reporting_component: Some(self.component.clone()),
            reporting_instance: Some(self.component.clone()),
            ..Default::default()
        }
    }

    /// Records an Event about `involved`; never waits.
    pub fn record(&self, involved: ObjectReference, note: &Note) {
        // Only warnings are expected to repeat, so only they are remembered and looked up.
        let key = (note.kind == EventType::Warning).then(|| {
            (
                involved.uid.clone().unwrap_or_default(),
                note.reason.to_string(),
                note.message.to_string(),
            )
        });
        if let Some(key) = &key {
            if let Some(w) = self.repeat(key) {
                // Full queue: dropped, like a new event would be.
                let _ = self.events.try_send(w);
                return;
            }
        }
        let ev = self.new_event(involved, note);
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
}
