//! The `audit.k8s.io/v1` Event, field for field as upstream writes it.

use std::collections::BTreeMap;

use cairn_auth::UserInfo;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// How much of a request is recorded; ordered so `Request > Metadata`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Level {
    None,
    Metadata,
    Request,
    RequestResponse,
}

/// When in a request's life an event is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Stage {
    RequestReceived,
    /// Headers sent, body still streaming: long-running requests (watch, exec).
    ResponseStarted,
    ResponseComplete,
    Panic,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ObjectRef {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub resource: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub namespace: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub uid: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub api_group: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub api_version: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub resource_version: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub subresource: String,
}

/// The `metav1.Status` upstream records: code always, the rest on failure.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ResponseStatus {
    pub metadata: BTreeMap<String, Value>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub status: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reason: String,
    pub code: u16,
}

impl ResponseStatus {
    pub fn code(code: u16) -> ResponseStatus {
        ResponseStatus {
            code,
            ..ResponseStatus::default()
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Event {
    pub kind: String,
    pub api_version: String,
    pub level: Level,
    #[serde(rename = "auditID")]
    pub audit_id: String,
    pub stage: Stage,
    #[serde(rename = "requestURI")]
    pub request_uri: String,
    pub verb: String,
    pub user: UserInfo,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub impersonated_user: Option<UserInfo>,
    #[serde(rename = "sourceIPs", default, skip_serializing_if = "Vec::is_empty")]
    pub source_ips: Vec<String>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub user_agent: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub object_ref: Option<ObjectRef>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response_status: Option<ResponseStatus>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_object: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response_object: Option<Value>,
    pub request_received_timestamp: String,
    pub stage_timestamp: String,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
}

/// Upstream's MicroTime: RFC 3339 in UTC with microseconds.
pub fn micro_time(t: chrono::DateTime<chrono::Utc>) -> String {
    t.format("%Y-%m-%dT%H:%M:%S%.6fZ").to_string()
}

impl Event {
    /// A new event at `RequestReceived`, stamped now.
    pub fn received(level: Level, audit_id: String, verb: &str, request_uri: &str) -> Event {
        let now = micro_time(chrono::Utc::now());
        Event {
            kind: "Event".into(),
            api_version: "audit.k8s.io/v1".into(),
            level,
            audit_id,
            stage: Stage::RequestReceived,
            request_uri: request_uri.to_string(),
            verb: verb.to_string(),
            user: UserInfo::default(),
            impersonated_user: None,
            source_ips: Vec::new(),
            user_agent: String::new(),
            object_ref: None,
            response_status: None,
            request_object: None,
            response_object: None,
            request_received_timestamp: now.clone(),
            stage_timestamp: now,
            annotations: BTreeMap::new(),
        }
    }

    /// This event at a later stage, stamped now.
    pub fn at(&self, stage: Stage) -> Event {
        let mut next = self.clone();
        next.move_to(stage);
        next
    }

    /// This event, now at `stage` (what a request's record does in place between its
    /// stages, rather than copy itself per stage).
    pub fn move_to(&mut self, stage: Stage) {
        self.stage = stage;
        self.stage_timestamp = micro_time(chrono::Utc::now());
    }

    /// One JSON line (with its newline).
    pub fn to_line(&self) -> Vec<u8> {
        // An Event is plain data: serializing it cannot fail.
        let mut line = serde_json::to_vec(self).unwrap_or_default();
        line.push(b'\n');
        line
    }
}

/// Drops `metadata.managedFields` from an object recorded at Request level or above
/// (the policy's `omitManagedFields`).
pub fn without_managed_fields(mut object: Value) -> Value {
    if let Some(meta) = object.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.remove("managedFields");
    }
    if let Some(items) = object.get_mut("items").and_then(Value::as_array_mut) {
        for item in items {
            if let Some(meta) = item.get_mut("metadata").and_then(Value::as_object_mut) {
                meta.remove("managedFields");
            }
        }
    }
    object
}
