//! The ReplicaSet controller: keeps `spec.replicas` active pods from the template,
//! adopting matching orphans and releasing pods it no longer selects, and reports counts
//! and the `ReplicaFailure` condition in status (upstream `pkg/controller/replicaset`).
//! ReplicationControllers run through the same code ([`Flavor`]), held in the cache as
//! ReplicaSets ([`rc::to_replica_set`]), as upstream's replication controller does.

mod manage;
pub mod rc;
mod status;

use crate::wiring::{resync_ticks, Informers, Task};
use std::sync::Arc;
use std::time::Duration;

use cairn_events::Recorder;
use cairn_semantics::selector::Selector;
use futures::Stream;
use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::runtime::controller::Action;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Client, ResourceExt};
use thiserror::Error;

use crate::cached_pod::CachedPod;
use crate::expectations::Expectations;
use crate::owner;
use crate::reconcile_loop;

/// Most pods created or deleted in one sync (upstream's burstReplicas).
pub const BURST_REPLICAS: usize = 500;

#[derive(Debug, Error)]
pub enum Error {
    #[error("{kind} {key}: {source}")]
    Api {
        kind: &'static str,
        key: String,
        #[source]
        source: kube::Error,
    },
    #[error("replica controller {key}: invalid selector: {message}")]
    Selector { key: String, message: String },
}

/// Which kind a replica controller manages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flavor {
    ReplicaSet,
    ReplicationController,
}

impl Flavor {
    pub fn api_version(self) -> &'static str {
        match self {
            Flavor::ReplicaSet => "apps/v1",
            Flavor::ReplicationController => "v1",
        }
    }

    pub fn kind(self) -> &'static str {
        match self {
            Flavor::ReplicaSet => "ReplicaSet",
            Flavor::ReplicationController => "ReplicationController",
        }
    }

    /// The controller's name in `--controllers` and logs.
    pub fn controller_name(self) -> &'static str {
        match self {
            Flavor::ReplicaSet => "replicaset",
            Flavor::ReplicationController => "replicationcontroller",
        }
    }

    /// The controller reference of pods this object owns.
    pub fn owner_ref(self, rs: &ReplicaSet) -> OwnerReference {
        owner::controller_ref_as(self.api_version(), self.kind(), &rs.metadata)
    }

    /// The object as an Event's `involvedObject`.
    pub fn reference(self, rs: &ReplicaSet) -> ObjectReference {
        ObjectReference {
            api_version: Some(self.api_version().into()),
            kind: Some(self.kind().into()),
            ..cairn_events::reference(rs)
        }
    }
}

pub struct Ctx {
    pub flavor: Flavor,
    pub client: Client,
    pub pods: Store<CachedPod>,
    pub replicasets: Store<ReplicaSet>,
    pub recorder: Recorder,
    pub expectations: Expectations,
}

fn key_of(rs: &ReplicaSet) -> String {
    reconcile_loop::key_of(rs)
}

/// The ReplicaSets a touched pod concerns: its controller, or for an orphan every
/// ReplicaSet in its namespace whose selector matches it (a candidate for adoption).
pub fn pod_owners(
    flavor: Flavor,
    replicasets: Store<ReplicaSet>,
) -> impl Fn(&CachedPod) -> Vec<ObjectRef<ReplicaSet>> {
    move |pod| {
        let ns = pod.namespace().unwrap_or_default();
        if let Some(r) = owner::controller_of(&pod.metadata) {
            if r.kind == flavor.kind() {
                return vec![ObjectRef::new(&r.name).within(&ns)];
            }
            return Vec::new();
        }
        let empty = Default::default();
        let labels = pod.metadata.labels.as_ref().unwrap_or(&empty);
        replicasets
            .state()
            .iter()
            .filter(|rs| rs.namespace().as_deref() == Some(ns.as_str()))
            .filter(|rs| selector_of(rs).is_ok_and(|s| !s.is_everything() && s.matches(labels)))
            .map(|rs| ObjectRef::from_obj(rs.as_ref()))
            .collect()
    }
}

fn selector_of(rs: &ReplicaSet) -> Result<Selector, Error> {
    let spec = rs.spec.as_ref();
    let sel = spec.map(|s| s.selector.clone()).unwrap_or_default();
    Selector::from_label_selector(&sel).map_err(|e| Error::Selector {
        key: key_of(rs),
        message: e.to_string(),
    })
}

/// Runs the controller until its triggers end.
pub async fn run(
    ctx: Arc<Ctx>,
    triggers: impl Stream<Item = ObjectRef<ReplicaSet>> + Send + 'static,
    resync: impl Stream<Item = ()> + Send + 'static,
) {
    let store = ctx.replicasets.clone();
    let name = ctx.flavor.controller_name();
    reconcile_loop::run(name, store, triggers, resync, 16, ctx, reconcile).await;
}

async fn reconcile(rs: Arc<ReplicaSet>, ctx: Arc<Ctx>) -> Result<Action, Error> {
    sync(&rs, &ctx, &key_of(&rs)).await
}

/// The pods this ReplicaSet owns after claiming (active ones only).
async fn claim_pods(
    rs: &ReplicaSet,
    ctx: &Ctx,
    selector: &Selector,
) -> Result<Vec<Arc<CachedPod>>, Error> {
    let owner_ref = ctx.flavor.owner_ref(rs);
    owner::claim_pods(&ctx.client, &ctx.pods, &rs.metadata, owner_ref, selector)
        .await
        .map_err(|source| Error::Api {
            kind: ctx.flavor.kind(),
            key: key_of(rs),
            source,
        })
}

async fn sync(rs: &ReplicaSet, ctx: &Ctx, key: &str) -> Result<Action, Error> {
    let selector = selector_of(rs)?;
    let ns = rs.namespace().unwrap_or_default();
    let satisfied = ctx.expectations.satisfied(
        key,
        |name| ctx.pods.get(&ObjectRef::new(name).within(&ns)).is_some(),
        |name| {
            ctx.pods
                .get(&ObjectRef::new(name).within(&ns))
                .is_none_or(|p| p.metadata.deletion_timestamp.is_some())
        },
    );
    let mine = claim_pods(rs, ctx, &selector).await?;
    let mut failure = None;
    if satisfied && rs.metadata.deletion_timestamp.is_none() {
        failure = manage::manage_replicas(rs, ctx, key, &mine).await.err();
    }
    let now = k8s_openapi::jiff::Timestamp::now();
    let new_status = status::calculate(rs, &mine, failure.as_ref(), now);
    status::write(rs, ctx, key, new_status.clone()).await?;
    if let Some(e) = failure {
        return Err(Error::Api {
            kind: ctx.flavor.kind(),
            key: key.to_string(),
            source: e.source,
        });
    }
    let replicas = rs.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1);
    let min_ready = rs
        .spec
        .as_ref()
        .and_then(|s| s.min_ready_seconds)
        .unwrap_or(0);
    if !satisfied {
        // Outstanding creates/deletes: look again soon even if an event was missed.
        return Ok(Action::requeue(Duration::from_secs(1)));
    }
    if min_ready > 0
        && new_status.ready_replicas == Some(replicas)
        && new_status.available_replicas != Some(replicas)
    {
        return Ok(Action::requeue(Duration::from_secs(min_ready as u64)));
    }
    Ok(Action::await_change())
}

// What the controller watches and how events map to its keys (kube-runtime's
// `.owns()`/`.watches()`), with its context: `lib.rs` only lists it.

pub(crate) fn start(client: &Client, inf: &mut Informers) -> Task {
    let own = inf
        .replicasets
        .subscribe(|rs: &ReplicaSet| vec![ObjectRef::from_obj(rs)]);
    let flavor = Flavor::ReplicaSet;
    let pods = inf
        .pods
        .subscribe(pod_owners(flavor, inf.replicasets.reader()));
    let replicasets = inf.replicasets.reader();
    start_replica_controller(client, inf, flavor, replicasets, own, pods)
}

pub(crate) fn start_replication_controller(client: &Client, inf: &mut Informers) -> Task {
    let own = inf
        .replicationcontrollers
        .subscribe(|rc: &ReplicaSet| vec![ObjectRef::from_obj(rc)]);
    let flavor = Flavor::ReplicationController;
    let pods = inf
        .pods
        .subscribe(pod_owners(flavor, inf.replicationcontrollers.reader()));
    let rcs = inf.replicationcontrollers.reader();
    start_replica_controller(client, inf, flavor, rcs, own, pods)
}

fn start_replica_controller(
    client: &Client,
    inf: &mut Informers,
    flavor: Flavor,
    store: kube::runtime::reflector::Store<ReplicaSet>,
    own: impl futures::Stream<Item = ObjectRef<ReplicaSet>> + Send + 'static,
    pods: impl futures::Stream<Item = ObjectRef<ReplicaSet>> + Send + 'static,
) -> Task {
    let component = match flavor {
        Flavor::ReplicaSet => "replicaset-controller",
        Flavor::ReplicationController => "replication-controller",
    };
    let ctx = Arc::new(Ctx {
        flavor,
        client: client.clone(),
        pods: inf.pods.reader(),
        replicasets: store,
        recorder: Recorder::start(client.clone(), component),
        expectations: Default::default(),
    });
    Box::pin(run(ctx, futures::stream::select(own, pods), resync_ticks()))
}
