//! `pvc-protection` and `pv-protection`: the API server puts the finalizers on; these
//! take them off once a deleted claim is used by no pod, and a deleted volume is not
//! bound.

use std::sync::Arc;

use futures::Stream;
use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::controller::Action;
use kube::runtime::reflector::ObjectRef;
use kube::{Resource, ResourceExt};
use serde_json::json;

use super::*;
use crate::reconcile_loop::key_of;

/// The claims a pod's volumes name (what a pod event wakes).
pub fn pod_claims(p: &CachedPod) -> Vec<ObjectRef<PersistentVolumeClaim>> {
    let ns = p.metadata.namespace.clone().unwrap_or_default();
    p.claims
        .iter()
        .map(|c| ObjectRef::new(c).within(&ns))
        .collect()
}

fn in_use(ctx: &Ctx, c: &PersistentVolumeClaim) -> bool {
    let name = c.name_any();
    ctx.pods.state().iter().any(|p| {
        p.metadata.namespace == c.metadata.namespace
            && !cairn_semantics::pod_state::is_terminal(p.as_ref())
            && p.claims.contains(&name)
    })
}

async fn drop_finalizer<K>(api: Api<K>, obj: &K, finalizer: &str) -> Result<(), Error>
where
    K: Resource<DynamicType = ()> + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let rest: Vec<&String> = obj
        .finalizers()
        .iter()
        .filter(|f| *f != finalizer)
        .collect();
    let patch =
        json!({"metadata": {"finalizers": rest, "resourceVersion": obj.resource_version()}});
    api.patch(
        &obj.name_any(),
        &PatchParams::default(),
        &Patch::Merge(&patch),
    )
    .await
    .map_err(|source| Error {
        object: key_of(obj),
        action: "removing its protection finalizer",
        source,
    })?;
    Ok(())
}

async fn sync_claim(c: Arc<PersistentVolumeClaim>, ctx: Arc<Ctx>) -> Result<Action, Error> {
    let protected = c.finalizers().iter().any(|f| f == CLAIM_FINALIZER);
    if c.metadata.deletion_timestamp.is_none() || !protected || in_use(&ctx, &c) {
        return Ok(Action::await_change());
    }
    let api = Api::namespaced(ctx.client.clone(), &c.namespace().unwrap_or_default());
    drop_finalizer(api, c.as_ref(), CLAIM_FINALIZER).await?;
    Ok(Action::await_change())
}

async fn sync_volume(v: Arc<PersistentVolume>, ctx: Arc<Ctx>) -> Result<Action, Error> {
    let protected = v.finalizers().iter().any(|f| f == VOLUME_FINALIZER);
    let bound = v.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Bound");
    if v.metadata.deletion_timestamp.is_none() || !protected || bound {
        return Ok(Action::await_change());
    }
    drop_finalizer(Api::all(ctx.client.clone()), v.as_ref(), VOLUME_FINALIZER).await?;
    Ok(Action::await_change())
}

pub async fn run_claim_protection(
    ctx: Arc<Ctx>,
    triggers: impl Stream<Item = ObjectRef<PersistentVolumeClaim>> + Send + 'static,
    resync: impl Stream<Item = ()> + Send + 'static,
) {
    let store = ctx.claims.clone();
    crate::reconcile_loop::run(
        "pvc-protection",
        store,
        triggers,
        resync,
        2,
        ctx,
        sync_claim,
    )
    .await;
}

pub async fn run_volume_protection(
    ctx: Arc<Ctx>,
    triggers: impl Stream<Item = ObjectRef<PersistentVolume>> + Send + 'static,
    resync: impl Stream<Item = ()> + Send + 'static,
) {
    let store = ctx.volumes.clone();
    crate::reconcile_loop::run(
        "pv-protection",
        store,
        triggers,
        resync,
        2,
        ctx,
        sync_volume,
    )
    .await;
}
