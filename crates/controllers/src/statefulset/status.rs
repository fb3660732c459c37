//! StatefulSet status: counts by readiness and revision, and the current revision that
//! becomes the update revision once a rolling update has reached every pod.

use std::collections::BTreeMap;
use std::sync::Arc;

use cairn_semantics::pod_state::{self, PodView};
use k8s_openapi::api::apps::v1::{StatefulSet, StatefulSetStatus};
use kube::api::{Api, Patch, PatchParams};
use kube::ResourceExt;

use super::plan::{self, View};
use super::{Ctx, Error};
use crate::cached_pod::CachedPod;

pub fn calculate(
    set: &StatefulSet,
    view: &View,
    valid: &BTreeMap<i32, Arc<CachedPod>>,
    condemned: &[Arc<CachedPod>],
    current: &str,
    update: &str,
) -> StatefulSetStatus {
    let all: Vec<&Arc<CachedPod>> = valid.values().chain(condemned.iter()).collect();
    let live = || all.iter().filter(|p| !p.deleting());
    let count = |f: &dyn Fn(&CachedPod) -> bool| live().filter(|p| f(p)).count() as i32;
    let ready = count(&|p| p.phase() == "Running" && pod_state::is_ready(p));
    let mut st = StatefulSetStatus {
        replicas: all.len() as i32,
        ready_replicas: Some(ready),
        available_replicas: Some(count(&|p| plan::healthy(view, p))),
        current_replicas: Some(count(&|p| plan::revision_of(p) == current)),
        updated_replicas: Some(count(&|p| plan::revision_of(p) == update)),
        current_revision: Some(current.to_string()),
        update_revision: Some(update.to_string()),
        observed_generation: set.metadata.generation,
        collision_count: set.status.as_ref().and_then(|s| s.collision_count),
        conditions: set.status.as_ref().and_then(|s| s.conditions.clone()),
    };
    // A finished rolling update makes the update revision current.
    let replicas = view.replicas;
    if view.partition.is_some()
        && st.updated_replicas == Some(replicas)
        && ready == replicas
        && st.replicas == replicas
    {
        st.current_revision = Some(update.to_string());
        st.current_replicas = st.updated_replicas;
    }
    st
}

pub async fn write(
    set: &StatefulSet,
    ctx: &Ctx,
    key: &str,
    st: &StatefulSetStatus,
) -> Result<(), Error> {
    if set.status.as_ref() == Some(st) {
        return Ok(());
    }
    let api: Api<StatefulSet> =
        Api::namespaced(ctx.client.clone(), &set.namespace().unwrap_or_default());
    let patch = Patch::Merge(serde_json::json!({ "status": st }));
    match api
        .patch_status(&set.name_any(), &PatchParams::default(), &patch)
        .await
    {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
        Err(source) => Err(Error::Api {
            key: key.to_string(),
            source,
        }),
    }
}
