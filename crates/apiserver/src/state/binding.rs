//! `pods/binding`: the scheduler's (or anyone's) write of a pod's node.

use bytes::Bytes;
use cairn_api::registry;
use cairn_api::status::Status;
use cairn_store::StoreError;
use serde_json::{json, Value};

use super::{store_status, ApiState, Written};
use crate::objects::*;

impl ApiState {
    /// Binds a pod to a node (`pods/binding`): sets `spec.nodeName` once, with the
    /// PodScheduled condition. Bypasses update validation, which forbids nodeName changes.
    pub async fn bind_pod(
        &self,
        ns: Option<&str>,
        name: &str,
        node: &str,
    ) -> Result<Written, Status> {
        let r = registry::find("", "v1", "pods")
            .ok_or_else(|| Status::internal("pods not registered"))?;
        let key = r.key(ns, name);
        for _ in 0..10 {
            let current = self.get(r, ns, name)?;
            let mut pod: Value = serde_json::from_slice(&current.bytes)
                .map_err(|e| Status::internal(e.to_string()))?;
            if let Some(bound) = pod
                .pointer("/spec/nodeName")
                .and_then(Value::as_str)
                .filter(|n| !n.is_empty())
            {
                return Err(Status::conflict(
                    "pods",
                    name,
                    &format!("pod {name} is already assigned to node \"{bound}\""),
                ));
            }
            if has_deletion_timestamp(&pod) {
                return Err(Status::conflict(
                    "pods",
                    name,
                    "pod is being deleted, cannot be assigned to a host",
                ));
            }
            pod["spec"]["nodeName"] = json!(node);
            if !pod.get("status").is_some_and(Value::is_object) {
                pod["status"] = json!({});
            }
            let mut conditions: Vec<Value> = pod
                .pointer("/status/conditions")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default();
            conditions.retain(|c| c.get("type").and_then(Value::as_str) != Some("PodScheduled"));
            conditions.push(json!({"type": "PodScheduled", "status": "True", "lastProbeTime": null, "lastTransitionTime": now_rfc3339()}));
            pod["status"]["conditions"] = Value::Array(conditions);
            remove_meta(&mut pod, "resourceVersion");
            let bytes =
                Bytes::from(serde_json::to_vec(&pod).map_err(|e| Status::internal(e.to_string()))?);
            match self
                .cache
                .backend()
                .update(&key, bytes, current.mod_revision)
                .await
            {
                Ok(rev) => return self.written(&key, rev, Vec::new()).await,
                Err(StoreError::Conflict { actual, .. }) => self.settle(actual).await?,
                Err(e) => return Err(store_status(e, r, name)),
            }
        }
        Err(Status::conflict(
            "pods",
            name,
            "too many concurrent updates",
        ))
    }
}
