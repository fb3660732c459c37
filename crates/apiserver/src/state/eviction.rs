//! `pods/eviction` (policy/v1 `Eviction`): deletes a pod unless the PodDisruptionBudget
//! that covers it has no disruption left, as kube-apiserver's eviction REST does —
//! finished, pending and already deleting pods go at once; more than one budget is an
//! error; a budget the disruption controller has not caught up with, or without room,
//! answers 429 so `kubectl drain` waits and retries; an allowed eviction takes one
//! disruption from the budget (recording the pod in `status.disruptedPods`) before the
//! pod is deleted.

use std::sync::Arc;

use cairn_api::registry;
use cairn_api::status::{Cause, Status};
use cairn_semantics::selector::Selector;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use serde_json::{json, Value};

use super::{ApiState, DeleteOptions, WriteOptions};
use crate::objects::now_rfc3339;

fn find(group: &str, plural: &str) -> Result<&'static registry::ResourceInfo, Status> {
    let version = "v1";
    registry::find(group, version, plural)
        .ok_or_else(|| Status::internal(format!("{plural} not registered")))
}

fn too_many_requests(cause: String) -> Status {
    let mut s = Status::new(
        429,
        "TooManyRequests",
        "Cannot evict pod as it would violate the pod's disruption budget.",
    );
    s.details.causes.push(Cause {
        reason: "DisruptionBudget",
        field: String::new(),
        message: cause,
    });
    s
}

/// Whether the pod may go without asking its budget (upstream `canIgnorePDB`).
fn ignores_budget(pod: &Value) -> bool {
    let phase = pod
        .pointer("/status/phase")
        .and_then(Value::as_str)
        .unwrap_or("");
    matches!(phase, "Succeeded" | "Failed" | "Pending" | "")
        || !pod
            .pointer("/metadata/deletionTimestamp")
            .is_none_or(Value::is_null)
}

fn is_ready(pod: &Value) -> bool {
    pod.pointer("/status/conditions")
        .and_then(Value::as_array)
        .is_some_and(|cs| {
            cs.iter()
                .any(|c| c["type"] == "Ready" && c["status"] == "True")
        })
}

impl ApiState {
    /// Evicts `ns/name` as the Eviction `body` asks.
    pub async fn evict_pod(
        self: &Arc<Self>,
        ns: Option<&str>,
        name: &str,
        body: &Value,
    ) -> Result<(), Status> {
        if let Some(named) = body.pointer("/metadata/name").and_then(Value::as_str) {
            if !named.is_empty() && named != name {
                return Err(Status::bad_request(
                    "name in URL does not match name in Eviction object",
                ));
            }
        }
        let pods = find("", "pods")?;
        let current = self.get(pods, ns, name)?;
        let pod: Value =
            serde_json::from_slice(&current.bytes).map_err(|e| Status::internal(e.to_string()))?;
        let opts = eviction_delete_options(body);
        if !ignores_budget(&pod) {
            self.take_disruption(ns, name, &pod).await?;
        }
        self.delete(pods, ns, name, &opts).await.map(|_| ())
    }

    /// Checks the pod's budget and takes one disruption from it.
    async fn take_disruption(
        &self,
        ns: Option<&str>,
        name: &str,
        pod: &Value,
    ) -> Result<(), Status> {
        let pdbs = find("policy", "poddisruptionbudgets")?;
        let (objects, _) = self.cache.list(&pdbs.list_prefix(ns));
        let labels = serde_json::from_value(
            pod.pointer("/metadata/labels")
                .cloned()
                .unwrap_or(json!({})),
        )
        .unwrap_or_default();
        let matching: Vec<Value> = objects
            .iter()
            .filter_map(|o| serde_json::from_slice::<Value>(&o.bytes).ok())
            .filter(|pdb| {
                let sel: Option<LabelSelector> = pdb
                    .pointer("/spec/selector")
                    .and_then(|s| serde_json::from_value(s.clone()).ok());
                // policy/v1: a missing selector selects no pod, an empty one every pod.
                sel.and_then(|s| Selector::from_label_selector(&s).ok())
                    .is_some_and(|s| s.matches(&labels))
            })
            .collect();
        let pdb = match matching.as_slice() {
            [] => return Ok(()),
            [one] => one,
            _ => return Err(Status::internal("This pod has more than one PodDisruptionBudget, which the eviction subresource does not support.")),
        };
        let pdb_name = pdb
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        let status = pdb.get("status").cloned().unwrap_or(json!({}));
        let int = |k: &str| status.get(k).and_then(Value::as_i64).unwrap_or(0);
        let policy = pdb
            .pointer("/spec/unhealthyPodEvictionPolicy")
            .and_then(Value::as_str)
            .unwrap_or("IfHealthyBudget");
        if !is_ready(pod)
            && (policy == "AlwaysAllow"
                || int("currentHealthy") >= int("desiredHealthy") && int("desiredHealthy") > 0)
        {
            return Ok(());
        }
        let generation = pdb
            .pointer("/metadata/generation")
            .and_then(Value::as_i64)
            .unwrap_or(0);
        if int("observedGeneration") < generation {
            return Err(too_many_requests(format!(
                "The disruption budget {pdb_name} is still being processed by the server."
            )));
        }
        if int("disruptionsAllowed") <= 0 {
            return Err(too_many_requests(format!(
                "The disruption budget {pdb_name} needs {} healthy pods and has {} currently",
                int("desiredHealthy"),
                int("currentHealthy")
            )));
        }
        let opts = WriteOptions::default();
        self.guaranteed_update(pdbs, ns, &pdb_name, Some("status"), &opts, |current| {
            let mut next = current.clone();
            let allowed = next
                .pointer("/status/disruptionsAllowed")
                .and_then(Value::as_i64)
                .unwrap_or(0);
            if allowed <= 0 {
                return Err(too_many_requests(format!(
                    "The disruption budget {pdb_name} has no disruptions allowed"
                )));
            }
            next["status"]["disruptionsAllowed"] = json!(allowed - 1);
            if !next["status"]["disruptedPods"].is_object() {
                next["status"]["disruptedPods"] = json!({});
            }
            next["status"]["disruptedPods"][name] = json!(now_rfc3339());
            Ok(next)
        })
        .await
        .map(|_| ())
    }
}

/// The Eviction's `deleteOptions` (grace period, preconditions, dry run).
fn eviction_delete_options(body: &Value) -> DeleteOptions {
    let d = body.get("deleteOptions").cloned().unwrap_or(json!({}));
    DeleteOptions {
        grace_period_seconds: d.get("gracePeriodSeconds").and_then(Value::as_i64),
        propagation_policy: d
            .get("propagationPolicy")
            .and_then(Value::as_str)
            .map(str::to_string),
        precondition_uid: d
            .pointer("/preconditions/uid")
            .and_then(Value::as_str)
            .map(str::to_string),
        precondition_resource_version: d
            .pointer("/preconditions/resourceVersion")
            .and_then(Value::as_str)
            .map(str::to_string),
        dry_run: d
            .get("dryRun")
            .and_then(Value::as_array)
            .is_some_and(|a| !a.is_empty()),
    }
}
