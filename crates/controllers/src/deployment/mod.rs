//! The Deployment controller: one ReplicaSet per pod template (`pod-template-hash`),
//! rolled by RollingUpdate (maxSurge/maxUnavailable) or Recreate, scaled proportionally
//! mid-rollout, old ReplicaSets pruned past `revisionHistoryLimit`, and the status and
//! conditions `kubectl rollout status` reads (upstream `pkg/controller/deployment`).

mod cleanup;
mod replicasets;
mod rolling;
mod scale;
mod status;
pub mod util;

use crate::wiring::{resync_ticks, Informers, Task};
use futures::StreamExt;
use std::sync::Arc;

use cairn_events::{EventType, Note, Recorder};
use cairn_semantics::selector::Selector;
use futures::Stream;
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use kube::runtime::controller::Action;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Client, ResourceExt};
use thiserror::Error;

use crate::cached_pod::CachedPod;
use crate::owner;

#[derive(Debug, Error)]
pub enum Error {
    #[error("deployment {key}: {source}")]
    Api {
        key: String,
        #[source]
        source: kube::Error,
    },
    #[error("deployment {key}: invalid selector: {message}")]
    Selector { key: String, message: String },
}

pub struct Ctx {
    pub client: Client,
    pub pods: Store<CachedPod>,
    pub replicasets: Store<ReplicaSet>,
    pub deployments: Store<Deployment>,
    pub recorder: Recorder,
}

impl Ctx {
    fn note(&self, d: &Deployment, kind: EventType, reason: &str, message: &str) {
        self.recorder.record(
            cairn_events::reference(d),
            &Note {
                kind,
                reason,
                message,
                action: "Sync",
            },
        );
    }
}

pub(crate) fn key_of(d: &Deployment) -> String {
    crate::reconcile_loop::key_of(d)
}

fn selector_of(d: &Deployment) -> Result<Selector, Error> {
    let sel = d
        .spec
        .as_ref()
        .map(|s| s.selector.clone())
        .unwrap_or_default();
    Selector::from_label_selector(&sel).map_err(|e| Error::Selector {
        key: key_of(d),
        message: e.to_string(),
    })
}

/// The Deployments a touched ReplicaSet concerns: its controller, or for an orphan the
/// Deployments whose selector matches it.
pub fn rs_owners(
    deployments: Store<Deployment>,
) -> impl Fn(&ReplicaSet) -> Vec<ObjectRef<Deployment>> {
    move |rs| {
        let ns = rs.namespace().unwrap_or_default();
        if let Some(r) = owner::controller_of(&rs.metadata) {
            return match r.kind.as_str() {
                "Deployment" => vec![ObjectRef::new(&r.name).within(&ns)],
                _ => Vec::new(),
            };
        }
        let empty = Default::default();
        let labels = rs.metadata.labels.as_ref().unwrap_or(&empty);
        deployments
            .state()
            .iter()
            .filter(|d| d.namespace().as_deref() == Some(ns.as_str()))
            .filter(|d| selector_of(d).is_ok_and(|s| !s.is_everything() && s.matches(labels)))
            .map(|d| ObjectRef::from_obj(d.as_ref()))
            .collect()
    }
}

/// The Deployment a touched pod's ReplicaSet belongs to (Recreate waits for old pods).
pub fn pod_owners(
    replicasets: Store<ReplicaSet>,
) -> impl Fn(&CachedPod) -> Vec<ObjectRef<Deployment>> {
    move |pod| {
        let ns = pod.namespace().unwrap_or_default();
        let Some(r) = owner::controller_of(&pod.metadata).filter(|r| r.kind == "ReplicaSet") else {
            return Vec::new();
        };
        replicasets
            .get(&ObjectRef::new(&r.name).within(&ns))
            .and_then(|rs| owner::controller_of(&rs.metadata).cloned())
            .filter(|d| d.kind == "Deployment")
            .map(|d| vec![ObjectRef::new(&d.name).within(&ns)])
            .unwrap_or_default()
    }
}

pub async fn run(
    ctx: Arc<Ctx>,
    triggers: impl Stream<Item = ObjectRef<Deployment>> + Send + 'static,
    resync: impl Stream<Item = ()> + Send + 'static,
) {
    let store = ctx.deployments.clone();
    crate::reconcile_loop::run("deployment", store, triggers, resync, 8, ctx, reconcile).await;
}

async fn reconcile(d: Arc<Deployment>, ctx: Arc<Ctx>) -> Result<Action, Error> {
    sync(&d, &ctx).await
}

async fn sync(d: &Deployment, ctx: &Ctx) -> Result<Action, Error> {
    let selector = selector_of(d)?;
    if selector.is_everything() {
        ctx.note(
            d,
            EventType::Warning,
            "SelectingAll",
            "This deployment is selecting all pods. A non-empty selector is required.",
        );
        return status::observe_generation_only(d, ctx)
            .await
            .map(|_| Action::await_change());
    }
    let all = replicasets::claim(d, ctx, &selector).await?;
    if d.metadata.deletion_timestamp.is_some() {
        return status::sync_only(d, ctx, &all).await;
    }
    let paused = d.spec.as_ref().and_then(|s| s.paused).unwrap_or(false);
    let scaling = !paused && is_scaling_event(d, &all);
    if paused || scaling {
        return scale::sync(d, ctx, &all, paused).await;
    }
    if util::is_recreate(d) {
        rolling::rollout_recreate(d, ctx, &all).await
    } else {
        rolling::rollout_rolling(d, ctx, &all).await
    }
}

/// Some active ReplicaSet was sized for another replica count than the Deployment's.
fn is_scaling_event(d: &Deployment, all: &[Arc<ReplicaSet>]) -> bool {
    let want = util::desired(d);
    all.iter()
        .filter(|rs| util::spec_replicas(rs) > 0)
        .any(|rs| util::annotated_replicas(rs, util::DESIRED_REPLICAS).is_some_and(|v| v != want))
}

// What the controller watches and how events map to its keys (kube-runtime's
// `.owns()`/`.watches()`), with its context: `lib.rs` only lists it.

pub(crate) fn start(client: &Client, inf: &mut Informers) -> Task {
    let own = inf
        .deployments
        .subscribe(|d: &Deployment| vec![ObjectRef::from_obj(d)]);
    let rss = inf
        .replicasets
        .subscribe(rs_owners(inf.deployments.reader()));
    let pods = inf.pods.subscribe(pod_owners(inf.replicasets.reader()));
    let ctx = Arc::new(Ctx {
        client: client.clone(),
        pods: inf.pods.reader(),
        replicasets: inf.replicasets.reader(),
        deployments: inf.deployments.reader(),
        recorder: Recorder::start(client.clone(), "deployment-controller"),
    });
    let triggers = futures::stream::select_all([own.boxed(), rss.boxed(), pods.boxed()]);
    Box::pin(run(ctx, triggers, resync_ticks()))
}
