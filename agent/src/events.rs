//! Kubernetes Events about pods and provisioned claims (Pulling, Pulled, Created, Started, Killing, BackOff,
//! Failed …), de-duplicated so a level-triggered loop does not repeat itself.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use chrono::Utc;
use k8s_openapi::api::core::v1::{Event, PersistentVolumeClaim, Pod};
use kube::api::{Api, PostParams};
use serde_json::json;

const REPEAT_AFTER: Duration = Duration::from_secs(300);

pub struct EventRecorder {
    client: kube::Client,
    node: String,
    recent: parking_lot::Mutex<HashMap<String, Instant>>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventType {
    Normal,
    Warning,
}

impl EventRecorder {
    pub fn new(client: kube::Client, node: &str) -> Self {
        EventRecorder {
            client,
            node: node.to_string(),
            recent: Default::default(),
        }
    }

    /// Records an event about `pod` (and optionally one of its containers). The same
    /// reason+message for the same object is posted at most once per 5 minutes.
    pub fn pod(
        &self,
        pod: &Pod,
        container: Option<&str>,
        kind: EventType,
        reason: &str,
        message: &str,
    ) {
        let ns = pod
            .metadata
            .namespace
            .clone()
            .unwrap_or_else(|| "default".into());
        let name = pod.metadata.name.clone().unwrap_or_default();
        let uid = pod.metadata.uid.clone().unwrap_or_default();
        let key = format!("{uid}/{}/{reason}/{message}", container.unwrap_or(""));
        if !self.first_in_a_while(key) {
            return;
        }
        let field_path = container.map(|c| {
            let init = pod
                .spec
                .as_ref()
                .and_then(|s| s.init_containers.as_ref())
                .is_some_and(|ics| ics.iter().any(|ic| ic.name == c));
            if init {
                format!("spec.initContainers{{{c}}}")
            } else {
                format!("spec.containers{{{c}}}")
            }
        });
        let involved = json!({"apiVersion": "v1", "kind": "Pod", "name": name, "namespace": ns,
            "uid": uid, "fieldPath": field_path});
        self.post(&ns, &name, involved, kind, reason, message);
    }

    /// Records an event about a claim (the local-path provisioner's), once per 5 minutes
    /// for the same reason and message.
    pub fn claim(
        &self,
        claim: &PersistentVolumeClaim,
        kind: EventType,
        reason: &str,
        message: &str,
    ) {
        let ns = claim
            .metadata
            .namespace
            .clone()
            .unwrap_or_else(|| "default".into());
        let name = claim.metadata.name.clone().unwrap_or_default();
        let uid = claim.metadata.uid.clone().unwrap_or_default();
        if !self.first_in_a_while(format!("{uid}/{reason}/{message}")) {
            return;
        }
        let involved = json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim", "name": name,
            "namespace": ns, "uid": uid});
        self.post(&ns, &name, involved, kind, reason, message);
    }

    /// Records an event about this node (the kubelet's: namespace `default`, the node's
    /// name as its uid), once per 5 minutes for the same reason and message.
    pub fn node(&self, kind: EventType, reason: &str, message: &str) {
        if !self.first_in_a_while(format!("node/{reason}/{message}")) {
            return;
        }
        let node = self.node.clone();
        let involved = json!({"kind": "Node", "name": node, "uid": node});
        self.post("default", &node, involved, kind, reason, message);
    }

    fn first_in_a_while(&self, key: String) -> bool {
        let mut recent = self.recent.lock();
        if recent.get(&key).is_some_and(|t| t.elapsed() < REPEAT_AFTER) {
            return false;
        }
        recent.retain(|_, t| t.elapsed() < REPEAT_AFTER);
        recent.insert(key, Instant::now());
        true
    }

    fn post(
        &self,
        ns: &str,
        name: &str,
        involved: serde_json::Value,
        kind: EventType,
        reason: &str,
        message: &str,
    ) {
        let now = Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
        let event = json!({
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {
                // `<object>.<unique hex>`, the kubelet's event naming.
                "name": format!("{name}.{:x}", chrono::Utc::now().timestamp_nanos_opt().unwrap_or_default()),
                "namespace": ns,
            },
            "involvedObject": involved,
            "reason": reason,
            "message": message,
            "type": match kind { EventType::Normal => "Normal", EventType::Warning => "Warning" },
            "source": {"component": "kubelet", "host": self.node},
            "reportingComponent": "kubelet",
            "reportingInstance": self.node,
            "firstTimestamp": now,
            "lastTimestamp": now,
            "count": 1,
        });
        let Ok(event) = serde_json::from_value::<Event>(event) else {
            return;
        };
        let api: Api<Event> = Api::namespaced(self.client.clone(), ns);
        tracing::info!(object = %format!("{ns}/{name}"), reason, message, "event");
        tokio::spawn(async move {
            if let Err(e) = api.create(&PostParams::default(), &event).await {
                tracing::debug!(error = %e, "posting event");
            }
        });
    }
}
