//! The StatefulSet controller (upstream `pkg/controller/statefulset`): pods with stable
//! names `<set>-<ordinal>` and claims `<claim>-<set>-<ordinal>`, created in order
//! (OrderedReady) or all at once (Parallel), removed from the highest ordinal, rolled to
//! new templates by descending ordinal down to `partition`; template history kept as
//! ControllerRevisions ([`crate::revisions`]).

mod identity;
mod plan;
mod status;

use crate::wiring::{resync_ticks, Informers, Task};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use cairn_events::{EventType, Recorder};
use cairn_semantics::pod_state::PodView;
use futures::Stream;
use k8s_openapi::api::apps::v1::{ControllerRevision, StatefulSet};
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::runtime::controller::Action;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Client, ResourceExt};
use thiserror::Error;

use crate::cached_pod::CachedPod;
use crate::owner;
use crate::reconcile_loop;
use crate::revisions;
use plan::Step;

#[derive(Debug, Error)]
pub enum Error {
    #[error("statefulset {key}: {source}")]
    Api {
        key: String,
        #[source]
        source: kube::Error,
    },
}

pub struct Ctx {
    pub client: Client,
    pub pods: Store<CachedPod>,
    pub statefulsets: Store<StatefulSet>,
    pub revisions: Store<ControllerRevision>,
    pub recorder: Recorder,
}

pub fn pod_owner(pod: &CachedPod) -> Vec<ObjectRef<StatefulSet>> {
    owner::controller_key(&pod.metadata)
}

pub async fn run(
    ctx: Arc<Ctx>,
    triggers: impl Stream<Item = ObjectRef<StatefulSet>> + Send + 'static,
    resync: impl Stream<Item = ()> + Send + 'static,
) {
    let store = ctx.statefulsets.clone();
    reconcile_loop::run("statefulset", store, triggers, resync, 16, ctx, reconcile).await;
}

async fn reconcile(set: Arc<StatefulSet>, ctx: Arc<Ctx>) -> Result<Action, Error> {
    let key = reconcile_loop::key_of(set.as_ref());
    sync(&set, &ctx, &key).await
}

fn note(ctx: &Ctx, set: &StatefulSet, kind: EventType, reason: &str, message: &str) {
    reconcile_loop::note(&ctx.recorder, set, kind, reason, message);
}

/// The set's pods by ordinal, and those outside `[start, start + replicas)`.
fn pods_of(
    ctx: &Ctx,
    set: &StatefulSet,
    start: i32,
    replicas: i32,
) -> (BTreeMap<i32, Arc<CachedPod>>, Vec<Arc<CachedPod>>) {
    let (ns, uid) = (set.namespace(), set.uid().unwrap_or_default());
    let mut valid = BTreeMap::new();
    let mut condemned = Vec::new();
    let prefix = format!("{}-", set.name_any());
    for p in ctx.pods.state() {
        if p.metadata.namespace != ns
            || owner::controller_of(&p.metadata).is_none_or(|r| r.uid != uid)
        {
            continue;
        }
        let ordinal = p
            .metadata
            .name
            .as_deref()
            .and_then(|n| n.strip_prefix(&prefix))
            .and_then(|o| o.parse::<i32>().ok());
        match ordinal {
            Some(o) if (start..start + replicas).contains(&o) => {
                valid.insert(o, p);
            }
            _ => condemned.push(p),
        }
    }
    (valid, condemned)
}

async fn sync(set: &StatefulSet, ctx: &Ctx, key: &str) -> Result<Action, Error> {
    let api_err = |source| Error::Api {
        key: key.to_string(),
        source,
    };
    let spec = set.spec.clone().unwrap_or_default();
    let st = set.status.clone().unwrap_or_default();
    let owner = revisions::Owner {
        meta: &set.metadata,
        owner_ref: owner::controller_ref(set),
        template: &spec.template,
        collision_count: st.collision_count,
    };
    let (update_rev, revs) = revisions::ensure(&ctx.client, &ctx.revisions, &owner)
        .await
        .map_err(api_err)?;
    let update_name = update_rev.metadata.name.clone().unwrap_or_default();
    let current_name = st
        .current_revision
        .clone()
        .filter(|c| revs.iter().any(|r| r.metadata.name.as_deref() == Some(c)))
        .unwrap_or_else(|| update_name.clone());
    let start = spec.ordinals.as_ref().and_then(|o| o.start).unwrap_or(0);
    let replicas = spec.replicas.unwrap_or(1).max(0);
    let (valid, condemned) = pods_of(ctx, set, start, replicas);
    let strategy = spec.update_strategy.clone().unwrap_or_default();
    let view = plan::View {
        start,
        replicas,
        parallel: spec.pod_management_policy.as_deref() == Some("Parallel"),
        partition: (strategy.type_.as_deref() != Some("OnDelete")).then(|| {
            strategy
                .rolling_update
                .and_then(|r| r.partition)
                .unwrap_or(0)
        }),
        update_revision: &update_name,
        min_ready_seconds: spec.min_ready_seconds.unwrap_or(0),
        now: Timestamp::now(),
    };
    if set.metadata.deletion_timestamp.is_none() {
        let steps = plan::plan(&view, &valid, &condemned);
        let current_template = revs
            .iter()
            .find(|r| r.metadata.name.as_deref() == Some(current_name.as_str()))
            .and_then(|r| revisions::template_of(r));
        for step in steps {
            execute(
                set,
                ctx,
                step,
                &update_name,
                &current_name,
                current_template.as_ref(),
            )
            .await
            .map_err(api_err)?;
        }
    }
    let new_status = status::calculate(set, &view, &valid, &condemned, &current_name, &update_name);
    status::write(set, ctx, key, &new_status).await?;
    let live: Vec<&str> = valid
        .values()
        .chain(condemned.iter())
        .map(|p| plan::revision_of(p))
        .chain([current_name.as_str(), update_name.as_str()])
        .collect();
    let limit = spec.revision_history_limit.unwrap_or(10).max(0) as usize;
    revisions::truncate(&ctx.client, &revs, &live, limit).await;
    let waiting_available = view.min_ready_seconds > 0
        && valid
            .values()
            .any(|p| p.phase() == "Running" && !plan::healthy(&view, p));
    Ok(if waiting_available {
        Action::requeue(Duration::from_secs(1))
    } else {
        Action::await_change()
    })
}

async fn execute(
    set: &StatefulSet,
    ctx: &Ctx,
    step: Step,
    update_rev: &str,
    current_rev: &str,
    current_template: Option<&k8s_openapi::api::core::v1::PodTemplateSpec>,
) -> Result<(), kube::Error> {
    let ns = set.namespace().unwrap_or_default();
    let pods: Api<Pod> = Api::namespaced(ctx.client.clone(), &ns);
    let set_name = set.name_any();
    match step {
        Step::Create { ordinal, update } => {
            create_claims(set, ctx, ordinal).await?;
            let spec = set.spec.clone().unwrap_or_default();
            let (template, rev) = match (update, current_template) {
                (false, Some(t)) => (t.clone(), current_rev),
                _ => (spec.template, update_rev),
            };
            let pod = identity::new_pod(set, &template, rev, ordinal);
            let name = identity::pod_name(set, ordinal);
            match pods.create(&PostParams::default(), &pod).await {
                Ok(_) => note(
                    ctx,
                    set,
                    EventType::Normal,
                    "SuccessfulCreate",
                    &format!("create Pod {name} in StatefulSet {set_name} successful"),
                ),
                Err(kube::Error::Api(s)) if s.code == 409 => {}
                Err(e) => {
                    note(
                        ctx,
                        set,
                        EventType::Warning,
                        "FailedCreate",
                        &format!("create Pod {name} in StatefulSet {set_name} failed error: {e}"),
                    );
                    return Err(e);
                }
            }
        }
        Step::Delete(pod) => {
            let name = pod.name_any();
            release_claims_with_pod(set, ctx, &pod).await?;
            match pods.delete(&name, &DeleteParams::default()).await {
                Ok(_) => note(
                    ctx,
                    set,
                    EventType::Normal,
                    "SuccessfulDelete",
                    &format!("delete Pod {name} in StatefulSet {set_name} successful"),
                ),
                Err(kube::Error::Api(s)) if s.code == 404 => {}
                Err(e) => return Err(e),
            }
        }
    }
    Ok(())
}

/// Creates the pod's claims that do not exist yet (before the pod, as upstream).
async fn create_claims(set: &StatefulSet, ctx: &Ctx, ordinal: i32) -> Result<(), kube::Error> {
    let api: Api<PersistentVolumeClaim> =
        Api::namespaced(ctx.client.clone(), &set.namespace().unwrap_or_default());
    for claim in identity::claims(set, ordinal) {
        let name = claim.metadata.name.clone().unwrap_or_default();
        match api.create(&PostParams::default(), &claim).await {
            Ok(_) => note(
                ctx,
                set,
                EventType::Normal,
                "SuccessfulCreate",
                &format!(
                    "create Claim {name} Pod {} in StatefulSet {} success",
                    identity::pod_name(set, ordinal),
                    set.name_any()
                ),
            ),
            Err(kube::Error::Api(s)) if s.code == 409 => {}
            Err(e) => {
                note(
                    ctx,
                    set,
                    EventType::Warning,
                    "FailedCreate",
                    &format!(
                        "create Claim {name} for Pod {} in StatefulSet {} failed error: {e}",
                        identity::pod_name(set, ordinal),
                        set.name_any()
                    ),
                );
                return Err(e);
            }
        }
    }
    Ok(())
}

/// `whenScaled: Delete`: a pod removed by scale-down takes its claims with it (they get
/// the pod as their only owner, and the garbage collector does the rest).
async fn release_claims_with_pod(
    set: &StatefulSet,
    ctx: &Ctx,
    pod: &CachedPod,
) -> Result<(), kube::Error> {
    let spec = set.spec.clone().unwrap_or_default();
    let when_scaled = spec
        .persistent_volume_claim_retention_policy
        .and_then(|p| p.when_scaled);
    let replicas = spec.replicas.unwrap_or(1);
    let start = spec.ordinals.and_then(|o| o.start).unwrap_or(0);
    let condemned = plan::ordinal_of_pod(pod).is_none_or(|o| o >= start + replicas || o < start);
    if when_scaled.as_deref() != Some("Delete") || !condemned {
        return Ok(());
    }
    let Some(ordinal) = plan::ordinal_of_pod(pod) else {
        return Ok(());
    };
    let api: Api<PersistentVolumeClaim> =
        Api::namespaced(ctx.client.clone(), &set.namespace().unwrap_or_default());
    let pod_ref = owner::controller_ref_as("v1", "Pod", &pod.metadata);
    let patch = Patch::Merge(serde_json::json!({"metadata": {"ownerReferences": [pod_ref]}}));
    for claim in identity::claims(set, ordinal) {
        let name = claim.metadata.name.unwrap_or_default();
        match api.patch(&name, &PatchParams::default(), &patch).await {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.code == 404 => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

// What the controller watches and how events map to its keys (kube-runtime's
// `.owns()`/`.watches()`), with its context: `lib.rs` only lists it.

pub(crate) fn start(client: &Client, inf: &mut Informers) -> Task {
    let own = inf
        .statefulsets
        .subscribe(|s: &StatefulSet| vec![ObjectRef::from_obj(s)]);
    let pods = inf.pods.subscribe_with_deletions(|p, _| pod_owner(p));
    let ctx = Arc::new(Ctx {
        client: client.clone(),
        pods: inf.pods.reader(),
        statefulsets: inf.statefulsets.reader(),
        revisions: inf.revisions.reader(),
        recorder: Recorder::start(client.clone(), "statefulset-controller"),
    });
    Box::pin(run(ctx, futures::stream::select(own, pods), resync_ticks()))
}
