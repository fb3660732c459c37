//! The DaemonSet controller: one pod per eligible node (nodeSelector, node affinity,
//! taints against the template's and the default daemon tolerations), placed by the
//! scheduler through a node-affinity term naming the node; pods on nodes that no longer
//! qualify (or are gone) removed; RollingUpdate by `maxUnavailable` or OnDelete; status
//! counts (upstream `pkg/controller/daemon`).

mod placement;
mod plan;

use crate::wiring::{resync_ticks, Informers, Task};
use futures::StreamExt;
use std::sync::Arc;
use std::time::Duration;

use cairn_events::{EventType, Note, Recorder};
use cairn_semantics::pod_state;
use cairn_semantics::selector::Selector;
use futures::future::join_all;
use futures::Stream;
use k8s_openapi::api::apps::v1::{ControllerRevision, DaemonSet, DaemonSetStatus};
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::runtime::controller::Action;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Client, ResourceExt};
use thiserror::Error;

use crate::cached_pod::CachedPod;
use crate::deployment::util::compute_hash;
use crate::expectations::Expectations;
use crate::owner;
use crate::revisions;

pub use placement::HASH_LABEL;

#[derive(Debug, Error)]
pub enum Error {
    #[error("daemonset {key}: {source}")]
    Api {
        key: String,
        #[source]
        source: kube::Error,
    },
    #[error("daemonset {key}: invalid selector: {message}")]
    Selector { key: String, message: String },
}

pub struct Ctx {
    pub client: Client,
    pub revisions: Store<ControllerRevision>,
    pub pods: Store<CachedPod>,
    pub nodes: Store<Node>,
    pub daemonsets: Store<DaemonSet>,
    pub recorder: Recorder,
    pub expectations: Expectations,
}

fn key_of(ds: &DaemonSet) -> String {
    crate::reconcile_loop::key_of(ds)
}

/// A touched pod wakes its controlling DaemonSet.
pub fn pod_owner(pod: &CachedPod) -> Vec<ObjectRef<DaemonSet>> {
    owner::controller_key(&pod.metadata)
}

/// A node that joins, leaves, or changes what placement reads (labels, taints) concerns
/// every DaemonSet; its status heartbeats (every node, every few seconds) do not.
pub fn node_daemonsets(
    daemonsets: Store<DaemonSet>,
) -> impl Fn(&Node, bool) -> Vec<ObjectRef<DaemonSet>> {
    let seen: parking_lot::Mutex<std::collections::HashMap<String, u64>> = Default::default();
    move |node, deleted| {
        use std::hash::{Hash, Hasher};
        let mut h = std::collections::hash_map::DefaultHasher::new();
        node.metadata.labels.hash(&mut h);
        if let Some(spec) = &node.spec {
            serde_json::to_string(&spec.taints)
                .unwrap_or_default()
                .hash(&mut h);
        }
        let fingerprint = h.finish();
        let changed = {
            let mut seen = seen.lock();
            if deleted {
                seen.remove(&node.name_any());
                true
            } else {
                seen.insert(node.name_any(), fingerprint) != Some(fingerprint)
            }
        };
        if !changed {
            return Vec::new();
        }
        daemonsets
            .state()
            .iter()
            .map(|d| ObjectRef::from_obj(d.as_ref()))
            .collect()
    }
}

pub async fn run(
    ctx: Arc<Ctx>,
    triggers: impl Stream<Item = ObjectRef<DaemonSet>> + Send + 'static,
    resync: impl Stream<Item = ()> + Send + 'static,
) {
    let store = ctx.daemonsets.clone();
    crate::reconcile_loop::run("daemonset", store, triggers, resync, 8, ctx, reconcile).await;
}

async fn reconcile(ds: Arc<DaemonSet>, ctx: Arc<Ctx>) -> Result<Action, Error> {
    sync(&ds, &ctx, &key_of(&ds)).await
}

fn hash_of(ds: &DaemonSet) -> String {
    let template = ds
        .spec
        .as_ref()
        .map(|s| s.template.clone())
        .unwrap_or_default();
    compute_hash(
        &template,
        ds.status.as_ref().and_then(|s| s.collision_count),
    )
}

async fn sync(ds: &DaemonSet, ctx: &Ctx, key: &str) -> Result<Action, Error> {
    let api_err = |source| Error::Api {
        key: key.to_string(),
        source,
    };
    let sel = ds
        .spec
        .as_ref()
        .map(|s| s.selector.clone())
        .unwrap_or_default();
    let selector = Selector::from_label_selector(&sel).map_err(|e| Error::Selector {
        key: key.to_string(),
        message: e.to_string(),
    })?;
    let ns = ds.namespace().unwrap_or_default();
    let satisfied = ctx.expectations.satisfied(
        key,
        |name| ctx.pods.get(&ObjectRef::new(name).within(&ns)).is_some(),
        |name| {
            ctx.pods
                .get(&ObjectRef::new(name).within(&ns))
                .is_none_or(|p| p.metadata.deletion_timestamp.is_some())
        },
    );
    let mine = owner::claim_pods(
        &ctx.client,
        &ctx.pods,
        &ds.metadata,
        owner::controller_ref(ds),
        &selector,
    )
    .await
    .map_err(api_err)?;
    let hash = hash_of(ds);
    record_revision(ds, ctx, &mine, &hash)
        .await
        .map_err(api_err)?;
    let min_ready = ds
        .spec
        .as_ref()
        .and_then(|s| s.min_ready_seconds)
        .unwrap_or(0);
    let plan = plan::plan(ds, &ctx.nodes.state(), mine, &hash, min_ready);
    if satisfied && ds.metadata.deletion_timestamp.is_none() {
        let mut delete = plan.delete.clone();
        delete.extend(plan::rolling_deletes(ds, &plan, &hash, min_ready));
        apply(ds, ctx, key, &plan.create_on, &delete, &hash)
            .await
            .map_err(api_err)?;
    }
    write_status(ds, ctx, &plan, &hash, min_ready)
        .await
        .map_err(api_err)?;
    if !satisfied || !plan.create_on.is_empty() || !plan.delete.is_empty() {
        return Ok(Action::requeue(Duration::from_secs(1)));
    }
    Ok(Action::await_change())
}

/// The template history as ControllerRevisions `<ds>-<hash>` (what `kubectl rollout
/// history|undo ds` read), keeping `revisionHistoryLimit` unused ones.
async fn record_revision(
    ds: &DaemonSet,
    ctx: &Ctx,
    mine: &[Arc<CachedPod>],
    hash: &str,
) -> Result<(), kube::Error> {
    let spec = ds.spec.clone().unwrap_or_default();
    let owner = revisions::Owner {
        meta: &ds.metadata,
        owner_ref: owner::controller_ref(ds),
        template: &spec.template,
        collision_count: ds.status.as_ref().and_then(|s| s.collision_count),
    };
    let (_, revs) = revisions::ensure(&ctx.client, &ctx.revisions, &owner).await?;
    let name = ds.name_any();
    let live: Vec<String> = mine
        .iter()
        .map(|p| format!("{name}-{}", plan::revision_hash(p)))
        .chain([format!("{name}-{hash}")])
        .collect();
    let live: Vec<&str> = live.iter().map(String::as_str).collect();
    let limit = spec.revision_history_limit.unwrap_or(10).max(0) as usize;
    revisions::truncate(&ctx.client, &revs, &live, limit).await;
    Ok(())
}

async fn apply(
    ds: &DaemonSet,
    ctx: &Ctx,
    key: &str,
    create_on: &[String],
    delete: &[Arc<CachedPod>],
    hash: &str,
) -> Result<(), kube::Error> {
    let api: Api<Pod> = Api::namespaced(ctx.client.clone(), &ds.namespace().unwrap_or_default());
    let note = |kind, reason: &str, message: &str| {
        ctx.recorder.record(
            cairn_events::reference(ds),
            &Note {
                kind,
                reason,
                message,
                action: "Sync",
            },
        )
    };
    // Deletions first: a replaced pod is terminating before its successor appears.
    let names: Vec<String> = delete.iter().map(|p| p.name_any()).collect();
    names.iter().for_each(|n| ctx.expectations.deleted(key, n));
    let dp = DeleteParams::default();
    for (result, name) in join_all(names.iter().map(|n| api.delete(n, &dp)))
        .await
        .into_iter()
        .zip(&names)
    {
        match result {
            Ok(_) => note(
                EventType::Normal,
                "SuccessfulDelete",
                &format!("Deleted pod: {name}"),
            ),
            Err(kube::Error::Api(s)) if s.code == 404 => {}
            Err(e) => return Err(e),
        }
    }
    let pods: Vec<Pod> = create_on
        .iter()
        .map(|n| placement::pod_for(ds, n, hash))
        .collect();
    let pp = PostParams::default();
    for (result, node) in join_all(pods.iter().map(|p| api.create(&pp, p)))
        .await
        .into_iter()
        .zip(create_on)
    {
        match result {
            Ok(p) => {
                ctx.expectations.created(key, &p.name_any());
                note(
                    EventType::Normal,
                    "SuccessfulCreate",
                    &format!("Created pod: {}", p.name_any()),
                );
            }
            Err(e) => {
                note(
                    EventType::Warning,
                    "FailedCreate",
                    &format!("Error creating pod for node {node}: {e}"),
                );
                return Err(e);
            }
        }
    }
    Ok(())
}

async fn write_status(
    ds: &DaemonSet,
    ctx: &Ctx,
    plan: &plan::Plan,
    hash: &str,
    min_ready: i32,
) -> Result<(), kube::Error> {
    let now = k8s_openapi::jiff::Timestamp::now();
    let count = |f: &dyn Fn(&CachedPod) -> bool| plan.kept.values().filter(|p| f(p)).count() as i32;
    let available = count(&|p| pod_state::is_available(p, min_ready, now));
    let desired = plan.desired as i32;
    let old = ds.status.clone().unwrap_or_default();
    let status = DaemonSetStatus {
        current_number_scheduled: plan.kept.len() as i32,
        desired_number_scheduled: desired,
        number_misscheduled: plan.misscheduled as i32,
        number_ready: count(&|p| pod_state::is_ready(p)),
        number_available: Some(available),
        number_unavailable: Some(desired - available),
        updated_number_scheduled: Some(count(&|p| plan::updated(p, hash))),
        observed_generation: ds.metadata.generation,
        collision_count: old.collision_count,
        conditions: old.conditions.clone(),
    };
    if ds.status.as_ref() == Some(&status) {
        return Ok(());
    }
    let api: Api<DaemonSet> =
        Api::namespaced(ctx.client.clone(), &ds.namespace().unwrap_or_default());
    let patch = Patch::Merge(serde_json::json!({ "status": status }));
    match api
        .patch_status(&ds.name_any(), &PatchParams::default(), &patch)
        .await
    {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
        Err(e) => Err(e),
    }
}

// What the controller watches and how events map to its keys (kube-runtime's
// `.owns()`/`.watches()`), with its context: `lib.rs` only lists it.

pub(crate) fn start(client: &Client, inf: &mut Informers) -> Task {
    let own = inf
        .daemonsets
        .subscribe(|d: &DaemonSet| vec![ObjectRef::from_obj(d)]);
    let pods = inf.pods.subscribe(pod_owner);
    let nodes = inf
        .nodes
        .subscribe_with_deletions(node_daemonsets(inf.daemonsets.reader()));
    let ctx = Arc::new(Ctx {
        client: client.clone(),
        pods: inf.pods.reader(),
        nodes: inf.nodes.reader(),
        daemonsets: inf.daemonsets.reader(),
        revisions: inf.revisions.reader(),
        recorder: Recorder::start(client.clone(), "daemonset-controller"),
        expectations: Default::default(),
    });
    let triggers = futures::stream::select_all([own.boxed(), pods.boxed(), nodes.boxed()]);
    Box::pin(run(ctx, triggers, resync_ticks()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::runtime::watcher::Event;

    #[test]
    fn node_heartbeats_do_not_wake_daemonsets() {
        let (store, mut writer) = kube::runtime::reflector::store::<DaemonSet>();
        let ds: DaemonSet = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "agent", "namespace": "kube-system"}}))
        .unwrap();
        writer.apply_watcher_event(&Event::Apply(ds));
        let map = node_daemonsets(store);
        let mut node: Node = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "n1", "labels": {"zone": "a"}},
            "status": {"conditions": [{"type": "Ready", "status": "True"}]}}))
        .unwrap();
        assert_eq!(map(&node, false).len(), 1, "a new node");
        node.status = None;
        assert!(map(&node, false).is_empty(), "a status-only change");
        node.metadata.labels = Some([("zone".to_string(), "b".to_string())].into());
        assert_eq!(map(&node, false).len(), 1, "a label change");
        assert_eq!(map(&node, true).len(), 1, "a deletion");
    }
}
