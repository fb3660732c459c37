//! The persistent-volume binder (upstream `pkg/controller/volume/persistentvolume`) and
//! the protection controllers (`pvc-protection`, `pv-protection`).
//!
//! Claims: an unbound claim is bound to the smallest Available volume that fits it
//! (class, access modes, size, selector, volume mode; a volume pre-bound to it by
//! `claimRef`, or named by its `volumeName`, first); a claim of a `WaitForFirstConsumer`
//! class waits until the scheduler names its node; with no volume to bind and a class
//! with a provisioner, the claim is handed to it (`volume.kubernetes.io/storage-
//! provisioner`) — `cairn.io/local-path` is served by each node's agent.
//! Volumes: `Available` without a claim, `Bound` with one, `Released` when the claim is
//! gone; reclaim `Retain` keeps a released volume, `Delete` leaves it to its provisioner
//! (a volume without one is marked `Failed`).
//! Protection: a claim in use by a pod, and a bound volume, keep their finalizer until
//! they are not.

mod claims;
pub mod matching;
mod protection;
// What the controller watches and how events map to its keys (kube-runtime's
// `.owns()`/`.watches()`), with its context: `lib.rs` only lists it.

fn volume_ctx(client: &Client, inf: &mut Informers, component: &str) -> Arc<Ctx> {
    Arc::new(Ctx {
        client: client.clone(),
        claims: inf.claims.reader(),
        volumes: inf.volumes.reader(),
        classes: inf.storageclasses.reader(),
        nodes: inf.nodes.reader(),
        pods: inf.pods.reader(),
        recorder: Recorder::start(client.clone(), component),
    })
}

pub(crate) fn start_binder(client: &Client, inf: &mut Informers) -> Task {
    let ctx = volume_ctx(client, inf, "persistentvolume-controller");
    let own_claims = inf
        .claims
        .subscribe(|c: &PersistentVolumeClaim| vec![ObjectRef::from_obj(c)]);
    let volume_claims = inf.volumes.subscribe(volume_claim);
    // A volume that becomes Available may suit any waiting claim.
    let claims = inf.claims.reader();
    let freed = inf.volumes.subscribe(move |_: &PersistentVolume| {
        claims
            .state()
            .iter()
            .filter(|c| {
                c.spec
                    .as_ref()
                    .and_then(|s| s.volume_name.as_deref())
                    .is_none_or(str::is_empty)
            })
            .map(|c| ObjectRef::from_obj(c.as_ref()))
            .collect()
    });
    let own_volumes = inf
        .volumes
        .subscribe_with_deletions(|v: &PersistentVolume, _| vec![ObjectRef::from_obj(v)]);
    let claim_volumes = inf
        .claims
        .subscribe_with_deletions(|c: &PersistentVolumeClaim, _| claim_volume(c));
    let claim_triggers =
        futures::stream::select_all([own_claims.boxed(), volume_claims.boxed(), freed.boxed()]);
    let volume_triggers = futures::stream::select(own_volumes, claim_volumes);
    let claims = run_claims(ctx.clone(), claim_triggers, resync_ticks());
    let volumes = run_volumes(ctx, volume_triggers, resync_ticks());
    Box::pin(async move {
        futures::future::join(claims, volumes).await;
    })
}

pub(crate) fn start_claim_protection(client: &Client, inf: &mut Informers) -> Task {
    let ctx = volume_ctx(client, inf, "pvc-protection-controller");
    let own = inf
        .claims
        .subscribe(|c: &PersistentVolumeClaim| vec![ObjectRef::from_obj(c)]);
    let pods = inf
        .pods
        .subscribe_with_deletions(|p: &CachedPod, _| pod_claims(p));
    Box::pin(run_claim_protection(
        ctx,
        futures::stream::select(own, pods),
        resync_ticks(),
    ))
}

pub(crate) fn start_volume_protection(client: &Client, inf: &mut Informers) -> Task {
    let ctx = volume_ctx(client, inf, "pv-protection-controller");
    let own = inf
        .volumes
        .subscribe(|v: &PersistentVolume| vec![ObjectRef::from_obj(v)]);
    Box::pin(run_volume_protection(ctx, own, resync_ticks()))
}

#[cfg(test)]
mod tests;
mod volumes;

use crate::wiring::{resync_ticks, Informers, Task};
use futures::StreamExt;
use std::sync::Arc;

use cairn_events::Recorder;
use futures::Stream;
use k8s_openapi::api::core::v1::{Node, PersistentVolume, PersistentVolumeClaim};
use k8s_openapi::api::storage::v1::StorageClass;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::Client;
use thiserror::Error;

use crate::cached_pod::CachedPod;

pub use protection::{pod_claims, run_claim_protection, run_volume_protection};

pub const BIND_COMPLETED: &str = "pv.kubernetes.io/bind-completed";
pub const BOUND_BY_CONTROLLER: &str = "pv.kubernetes.io/bound-by-controller";
pub const PROVISIONED_BY: &str = "pv.kubernetes.io/provisioned-by";
pub const STORAGE_PROVISIONER: &str = "volume.kubernetes.io/storage-provisioner";
pub const BETA_STORAGE_PROVISIONER: &str = "volume.beta.kubernetes.io/storage-provisioner";
pub const SELECTED_NODE: &str = "volume.kubernetes.io/selected-node";
pub const CLAIM_FINALIZER: &str = "kubernetes.io/pvc-protection";
pub const VOLUME_FINALIZER: &str = "kubernetes.io/pv-protection";
/// Classes with this provisioner only bind pre-made volumes.
pub const NO_PROVISIONER: &str = "kubernetes.io/no-provisioner";

#[derive(Debug, Error)]
#[error("persistentvolume-binder, {object}: {action}: {source}")]
pub struct Error {
    pub object: String,
    pub action: &'static str,
    #[source]
    pub source: kube::Error,
}

pub struct Ctx {
    pub client: Client,
    pub claims: Store<PersistentVolumeClaim>,
    pub volumes: Store<PersistentVolume>,
    pub classes: Store<StorageClass>,
    pub nodes: Store<Node>,
    pub pods: Store<CachedPod>,
    pub recorder: Recorder,
}

/// The claim a volume's `claimRef` names.
pub fn volume_claim(v: &PersistentVolume) -> Vec<ObjectRef<PersistentVolumeClaim>> {
    let claim = v.spec.as_ref().and_then(|s| s.claim_ref.as_ref());
    claim
        .and_then(|c| Some(ObjectRef::new(c.name.as_deref()?).within(c.namespace.as_deref()?)))
        .into_iter()
        .collect()
}

/// The volume a claim's `volumeName` names.
pub fn claim_volume(c: &PersistentVolumeClaim) -> Vec<ObjectRef<PersistentVolume>> {
    let name = c.spec.as_ref().and_then(|s| s.volume_name.as_deref());
    name.filter(|n| !n.is_empty())
        .map(ObjectRef::new)
        .into_iter()
        .collect()
}

pub async fn run_claims(
    ctx: Arc<Ctx>,
    triggers: impl Stream<Item = ObjectRef<PersistentVolumeClaim>> + Send + 'static,
    resync: impl Stream<Item = ()> + Send + 'static,
) {
    let store = ctx.claims.clone();
    crate::reconcile_loop::run(
        "persistentvolume-binder-claims",
        store,
        triggers,
        resync,
        2,
        ctx,
        claims::reconcile,
    )
    .await;
}

pub async fn run_volumes(
    ctx: Arc<Ctx>,
    triggers: impl Stream<Item = ObjectRef<PersistentVolume>> + Send + 'static,
    resync: impl Stream<Item = ()> + Send + 'static,
) {
    let store = ctx.volumes.clone();
    crate::reconcile_loop::run(
        "persistentvolume-binder-volumes",
        store,
        triggers,
        resync,
        2,
        ctx,
        volumes::reconcile,
    )
    .await;
}

fn has_annotation(
    meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
    key: &str,
) -> Option<String> {
    meta.annotations.as_ref()?.get(key).cloned()
}
