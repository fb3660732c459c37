//! ReplicaSet status (upstream `calculateStatus`): counts of the owned active pods and
//! the `ReplicaFailure` condition, written only when something changed.

use std::sync::Arc;

use cairn_semantics::pod_state;
use k8s_openapi::api::apps::v1::{ReplicaSet, ReplicaSetCondition, ReplicaSetStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, Patch, PatchParams};
use kube::ResourceExt;

use super::manage::ManageError;
use super::{Ctx, Error, Flavor};
use crate::cached_pod::CachedPod;
use k8s_openapi::api::core::v1::ReplicationController;

pub fn calculate(
    rs: &ReplicaSet,
    mine: &[Arc<CachedPod>],
    failure: Option<&ManageError>,
    now: Timestamp,
) -> ReplicaSetStatus {
    let spec = rs.spec.as_ref();
    let template_labels = spec
        .and_then(|s| s.template.as_ref())
        .and_then(|t| t.metadata.as_ref())
        .and_then(|m| m.labels.clone())
        .unwrap_or_default();
    let min_ready = spec.and_then(|s| s.min_ready_seconds).unwrap_or(0);
    let count = |f: &dyn Fn(&CachedPod) -> bool| mine.iter().filter(|p| f(p)).count() as i32;
    let fully_labeled = count(&|p| {
        let labels = p.metadata.labels.as_ref();
        template_labels
            .iter()
            .all(|(k, v)| labels.and_then(|l| l.get(k)) == Some(v))
    });
    let old = rs.status.clone().unwrap_or_default();
    let mut conditions: Vec<ReplicaSetCondition> = old.conditions.clone().unwrap_or_default();
    match failure {
        Some(f) if !conditions.iter().any(|c| c.type_ == "ReplicaFailure") => {
            conditions.push(ReplicaSetCondition {
                type_: "ReplicaFailure".into(),
                status: "True".into(),
                reason: Some(f.reason.into()),
                message: Some(f.source.to_string()),
                last_transition_time: Some(Time(now)),
            })
        }
        Some(_) => {}
        None => conditions.retain(|c| c.type_ != "ReplicaFailure"),
    }
    ReplicaSetStatus {
        replicas: mine.len() as i32,
        fully_labeled_replicas: Some(fully_labeled),
        ready_replicas: Some(count(&pod_state::is_ready)),
        available_replicas: Some(count(&|p| pod_state::is_available(p, min_ready, now))),
        observed_generation: rs.metadata.generation,
        conditions: (!conditions.is_empty()).then_some(conditions),
        terminating_replicas: old.terminating_replicas,
    }
}

/// Writes `status` unless the stored one already says the same.
pub async fn write(
    rs: &ReplicaSet,
    ctx: &Ctx,
    key: &str,
    status: ReplicaSetStatus,
) -> Result<(), Error> {
    if rs.status.as_ref() == Some(&status) {
        return Ok(());
    }
    let mut value = serde_json::to_value(&status).unwrap_or_default();
    if status.conditions.is_none() {
        // A merge patch keeps what it does not mention: remove conditions explicitly.
        value["conditions"] = serde_json::Value::Null;
    }
    let ns = rs.namespace().unwrap_or_default();
    let patch = Patch::Merge(serde_json::json!({ "status": value }));
    let pp = PatchParams::default();
    // The status fields of a ReplicationController are the ReplicaSet's by name.
    let written = match ctx.flavor {
        Flavor::ReplicaSet => Api::<ReplicaSet>::namespaced(ctx.client.clone(), &ns)
            .patch_status(&rs.name_any(), &pp, &patch)
            .await
            .map(|_| ()),
        Flavor::ReplicationController => {
            Api::<ReplicationController>::namespaced(ctx.client.clone(), &ns)
                .patch_status(&rs.name_any(), &pp, &patch)
                .await
                .map(|_| ())
        }
    };
    match written {
        Ok(()) => Ok(()),
        // Deleted meanwhile: nothing to report on.
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
        Err(source) => Err(Error::Api {
            kind: ctx.flavor.kind(),
            key: key.to_string(),
            source,
        }),
    }
}
