//! A Deployment's ReplicaSets: claiming them, finding or creating the one for the
//! current template, and scaling one (with the replica annotations kept current).

use std::sync::Arc;

use cairn_events::EventType;
use cairn_semantics::selector::Selector;
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet, ReplicaSetSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::ResourceExt;
use serde_json::json;

use super::util::{self, HASH_LABEL};
use super::{key_of, Ctx, Error};
use crate::owner::{self, Claim};

fn api_error(d: &Deployment) -> impl Fn(kube::Error) -> Error + '_ {
    move |source| Error::Api {
        key: key_of(d),
        source,
    }
}

/// The ReplicaSets this Deployment controls after adopting and releasing.
pub async fn claim(
    d: &Deployment,
    ctx: &Ctx,
    selector: &Selector,
) -> Result<Vec<Arc<ReplicaSet>>, Error> {
    let ns = d.namespace().unwrap_or_default();
    let uid = d.uid().unwrap_or_default();
    let deleting = d.metadata.deletion_timestamp.is_some();
    let api: Api<ReplicaSet> = Api::namespaced(ctx.client.clone(), &ns);
    let mut mine = Vec::new();
    let mut may_adopt: Option<bool> = None;
    for rs in ctx.replicasets.state() {
        if rs.namespace().as_deref() != Some(ns.as_str()) {
            continue;
        }
        match owner::classify(&uid, deleting, selector, &rs.metadata) {
            Claim::Mine => mine.push(rs),
            Claim::Adopt => {
                if may_adopt.is_none() {
                    let alive =
                        owner::owner_alive(&ctx.client, &owner::controller_ref(d), &ns).await;
                    may_adopt = Some(alive.map_err(api_error(d))?);
                }
                if may_adopt != Some(true) {
                    continue;
                }
                match owner::adopt(&api, &rs.metadata, owner::controller_ref(d)).await {
                    Ok(adopted) => mine.push(Arc::new(adopted)),
                    Err(kube::Error::Api(s)) if s.code == 404 => {}
                    Err(e) => return Err(api_error(d)(e)),
                }
            }
            Claim::Release => match owner::release(&api, &rs.metadata, &uid).await {
                Ok(_) | Err(kube::Error::Api(_)) => {}
                Err(e) => return Err(api_error(d)(e)),
            },
            Claim::Ignore => {}
        }
    }
    // Oldest first, as upstream sorts them.
    mine.sort_by(|a, b| {
        (
            a.metadata.creation_timestamp.as_ref().map(|t| t.0),
            a.name_any(),
        )
            .cmp(&(
                b.metadata.creation_timestamp.as_ref().map(|t| t.0),
                b.name_any(),
            ))
    });
    Ok(mine)
}

fn annotations_for(d: &Deployment, revision: i64) -> std::collections::BTreeMap<String, String> {
    let mut a = util::copied_annotations(d);
    a.insert(util::REVISION.into(), revision.to_string());
    a.insert(util::DESIRED_REPLICAS.into(), util::desired(d).to_string());
    a.insert(
        util::MAX_REPLICAS.into(),
        (util::desired(d) + util::max_surge(d)).to_string(),
    );
    a
}

fn new_replicaset(d: &Deployment, hash: &str, revision: i64, replicas: i32) -> ReplicaSet {
    let mut t = util::template(d);
    let meta = t.metadata.get_or_insert_with(Default::default);
    meta.labels
        .get_or_insert_with(Default::default)
        .insert(HASH_LABEL.into(), hash.into());
    let labels = meta.labels.clone();
    let mut selector: LabelSelector = d
        .spec
        .as_ref()
        .map(|s| s.selector.clone())
        .unwrap_or_default();
    selector
        .match_labels
        .get_or_insert_with(Default::default)
        .insert(HASH_LABEL.into(), hash.into());
    ReplicaSet {
        metadata: ObjectMeta {
            name: Some(format!("{}-{hash}", d.name_any())),
            namespace: d.namespace(),
            labels,
            annotations: Some(annotations_for(d, revision)),
            owner_references: Some(vec![owner::controller_ref(d)]),
            ..Default::default()
        },
        spec: Some(ReplicaSetSpec {
            replicas: Some(replicas),
            min_ready_seconds: d.spec.as_ref().and_then(|s| s.min_ready_seconds),
            selector,
            template: Some(t),
        }),
        status: None,
    }
}

/// The next revision: one past the old ReplicaSets' highest.
pub fn next_revision(old: &[Arc<ReplicaSet>]) -> i64 {
    old.iter().map(|rs| util::revision(rs)).max().unwrap_or(0) + 1
}

/// Brings an existing new ReplicaSet's revision and annotations up to date; returns it
/// as stored afterwards.
async fn refresh(
    d: &Deployment,
    ctx: &Ctx,
    rs: Arc<ReplicaSet>,
    revision: i64,
) -> Result<Arc<ReplicaSet>, Error> {
    let mut want = util::copied_annotations(d);
    let current = util::revision(&rs);
    if current < revision {
        want.insert(util::REVISION.into(), revision.to_string());
        let history = rs
            .annotations()
            .get(util::REVISION_HISTORY)
            .cloned()
            .unwrap_or_default();
        let history = if history.is_empty() {
            current.to_string()
        } else {
            format!("{history},{current}")
        };
        want.insert(util::REVISION_HISTORY.into(), history);
    }
    let min_ready = d.spec.as_ref().and_then(|s| s.min_ready_seconds);
    let stale_annotations = want.iter().any(|(k, v)| rs.annotations().get(k) != Some(v));
    let stale_min_ready = rs.spec.as_ref().and_then(|s| s.min_ready_seconds) != min_ready;
    if !stale_annotations && !stale_min_ready {
        return Ok(rs);
    }
    let api: Api<ReplicaSet> =
        Api::namespaced(ctx.client.clone(), &rs.namespace().unwrap_or_default());
    let patch = json!({"metadata": {"annotations": want, "resourceVersion": rs.resource_version()},
        "spec": {"minReadySeconds": min_ready}});
    let updated = api
        .patch(
            &rs.name_any(),
            &PatchParams::default(),
            &Patch::Merge(patch),
        )
        .await
        .map_err(api_error(d))?;
    Ok(Arc::new(updated))
}

/// The ReplicaSet of the current template: found (and refreshed), or created when
/// `create` says a rollout may start it now.
pub async fn new_rs(
    d: &Deployment,
    ctx: &Ctx,
    all: &[Arc<ReplicaSet>],
    create: bool,
) -> Result<Option<Arc<ReplicaSet>>, Error> {
    let (existing, old) = util::split(d, all);
    let revision = next_revision(&old);
    if let Some(rs) = existing {
        return refresh(d, ctx, rs, revision).await.map(Some);
    }
    if !create {
        return Ok(None);
    }
    let collision = d.status.as_ref().and_then(|s| s.collision_count);
    let hash = util::compute_hash(&util::template(d), collision);
    let replicas = util::new_rs_replicas(d, all, None);
    let rs = new_replicaset(d, &hash, revision, replicas);
    let api: Api<ReplicaSet> =
        Api::namespaced(ctx.client.clone(), &d.namespace().unwrap_or_default());
    match api.create(&PostParams::default(), &rs).await {
        Ok(created) => {
            if replicas > 0 {
                let msg = format!("Scaled up replica set {} to {replicas}", created.name_any());
                ctx.note(d, EventType::Normal, "ScalingReplicaSet", &msg);
            }
            Ok(Some(Arc::new(created)))
        }
        Err(kube::Error::Api(s)) if s.code == 409 => {
            // A ReplicaSet of that name exists but is not ours or not this template: the
            // next hash (with collisionCount bumped) will differ.
            super::status::bump_collision_count(d, ctx).await?;
            Err(api_error(d)(kube::Error::Api(s)))
        }
        Err(e) => {
            let msg = format!(
                "Failed to create new replica set \"{}\": {e}",
                rs.name_any()
            );
            ctx.note(d, EventType::Warning, "FailedCreate", &msg);
            Err(api_error(d)(e))
        }
    }
}

/// Scales `rs` to `replicas`, refreshing its desired/max annotations; returns whether
/// anything was written.
pub async fn scale(
    d: &Deployment,
    ctx: &Ctx,
    rs: &ReplicaSet,
    replicas: i32,
) -> Result<bool, Error> {
    let desired = util::desired(d).to_string();
    let max = (util::desired(d) + util::max_surge(d)).to_string();
    let old = util::spec_replicas(rs);
    let same = old == replicas
        && rs.annotations().get(util::DESIRED_REPLICAS) == Some(&desired)
        && rs.annotations().get(util::MAX_REPLICAS) == Some(&max);
    if same {
        return Ok(false);
    }
    let api: Api<ReplicaSet> =
        Api::namespaced(ctx.client.clone(), &rs.namespace().unwrap_or_default());
    let patch = json!({"metadata": {"annotations": {util::DESIRED_REPLICAS: desired, util::MAX_REPLICAS: max},
        "resourceVersion": rs.resource_version()}, "spec": {"replicas": replicas}});
    api.patch(
        &rs.name_any(),
        &PatchParams::default(),
        &Patch::Merge(patch),
    )
    .await
    .map_err(api_error(d))?;
    if old != replicas {
        let dir = if replicas > old { "up" } else { "down" };
        let msg = format!(
            "Scaled {dir} replica set {} to {replicas} from {old}",
            rs.name_any()
        );
        ctx.note(d, EventType::Normal, "ScalingReplicaSet", &msg);
    }
    Ok(true)
}
