//! Creating and deleting pods toward `spec.replicas` (upstream `manageReplicas`):
//! creates in slow-start batches (1, 2, 4, ...) that stop at the first error, deletes
//! the pods upstream's ranking puts first, at most [`BURST_REPLICAS`] per sync.

use std::sync::Arc;

use cairn_events::{EventType, Note};
use cairn_semantics::pod_state::{self, PodView, Ranked};
use futures::future::join_all;
use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::api::{Api, DeleteParams, PostParams};
use kube::ResourceExt;

use super::{Ctx, BURST_REPLICAS};
use crate::cached_pod::CachedPod;

/// Why a sync could not reach its replica count.
pub struct ManageError {
    /// `FailedCreate` or `FailedDelete`.
    pub reason: &'static str,
    pub source: kube::Error,
}

pub async fn manage_replicas(
    rs: &ReplicaSet,
    ctx: &Ctx,
    key: &str,
    mine: &[Arc<CachedPod>],
) -> Result<(), ManageError> {
    let want = rs
        .spec
        .as_ref()
        .and_then(|s| s.replicas)
        .unwrap_or(1)
        .max(0) as usize;
    if mine.len() < want {
        let n = (want - mine.len()).min(BURST_REPLICAS);
        create_pods(rs, ctx, key, n)
            .await
            .map_err(|source| ManageError {
                reason: "FailedCreate",
                source,
            })
    } else if mine.len() > want {
        let n = (mine.len() - want).min(BURST_REPLICAS);
        delete_pods(rs, ctx, key, mine, n)
            .await
            .map_err(|source| ManageError {
                reason: "FailedDelete",
                source,
            })
    } else {
        Ok(())
    }
}

/// A new pod from the ReplicaSet's template (upstream `GetPodFromTemplate`).
pub fn pod_from_template(rs: &ReplicaSet, owner_ref: OwnerReference) -> Pod {
    let template = rs
        .spec
        .as_ref()
        .and_then(|s| s.template.clone())
        .unwrap_or_default();
    let meta = template.metadata.unwrap_or_default();
    Pod {
        metadata: ObjectMeta {
            generate_name: Some(format!("{}-", rs.name_any())),
            namespace: rs.namespace(),
            labels: meta.labels,
            annotations: meta.annotations,
            finalizers: meta.finalizers,
            owner_references: Some(vec![owner_ref]),
            ..Default::default()
        },
        spec: template.spec,
        status: None,
    }
}

async fn create_pods(rs: &ReplicaSet, ctx: &Ctx, key: &str, n: usize) -> Result<(), kube::Error> {
    let ns = rs.namespace().unwrap_or_default();
    let api: Api<Pod> = Api::namespaced(ctx.client.clone(), &ns);
    let pod = pod_from_template(rs, ctx.flavor.owner_ref(rs));
    let pp = PostParams::default();
    crate::slow_start::in_batches(n, |_| async {
        match api.create(&pp, &pod).await {
            Ok(created) => {
                let name = created.name_any();
                ctx.expectations.created(key, &name);
                let message = format!("Created pod: {name}");
                note(ctx, rs, EventType::Normal, "SuccessfulCreate", &message);
                Ok(())
            }
            // The namespace is going away: nothing to create, nothing to report.
            Err(e) if crate::slow_start::namespace_terminating(&e) => Ok(()),
            Err(e) => {
                let message = format!("Error creating: {e}");
                note(ctx, rs, EventType::Warning, "FailedCreate", &message);
                Err(e)
            }
        }
    })
    .await
}

/// The `n` pods to delete first: upstream's ranking, where a pod's rank is how many
/// active pods of this ReplicaSet share its node.
fn victims(mine: &[Arc<CachedPod>], n: usize) -> Vec<Arc<CachedPod>> {
    if n >= mine.len() {
        return mine.to_vec();
    }
    let mut per_node = std::collections::HashMap::<&str, usize>::new();
    for p in mine {
        *per_node.entry(p.node_name()).or_default() += 1;
    }
    let mut ranked: Vec<Ranked<CachedPod>> = mine
        .iter()
        .map(|p| Ranked {
            pod: p.as_ref(),
            colocated: per_node.get(p.node_name()).copied().unwrap_or(0),
        })
        .collect();
    let now = k8s_openapi::jiff::Timestamp::now();
    ranked.sort_by(|a, b| pod_state::deletion_order(a, b, now));
    let chosen: Vec<&str> = ranked
        .iter()
        .take(n)
        .filter_map(|r| r.pod.metadata.uid.as_deref())
        .collect();
    mine.iter()
        .filter(|p| {
            p.metadata
                .uid
                .as_deref()
                .is_some_and(|u| chosen.contains(&u))
        })
        .cloned()
        .collect()
}

async fn delete_pods(
    rs: &ReplicaSet,
    ctx: &Ctx,
    key: &str,
    mine: &[Arc<CachedPod>],
    n: usize,
) -> Result<(), kube::Error> {
    let ns = rs.namespace().unwrap_or_default();
    let api: Api<Pod> = Api::namespaced(ctx.client.clone(), &ns);
    let chosen = victims(mine, n);
    for p in &chosen {
        ctx.expectations.deleted(key, &p.name_any());
    }
    let dp = DeleteParams::default();
    let names: Vec<String> = chosen.iter().map(|p| p.name_any()).collect();
    let results = join_all(names.iter().map(|name| api.delete(name, &dp))).await;
    let mut first_error = None;
    for (name, r) in names.iter().zip(results) {
        match r {
            Ok(_) => note(
                ctx,
                rs,
                EventType::Normal,
                "SuccessfulDelete",
                &format!("Deleted pod: {name}"),
            ),
            Err(kube::Error::Api(s)) if s.code == 404 => {}
            Err(e) => {
                note(
                    ctx,
                    rs,
                    EventType::Warning,
                    "FailedDelete",
                    &format!("Error deleting: {e}"),
                );
                first_error.get_or_insert(e);
            }
        }
    }
    first_error.map_or(Ok(()), Err)
}

fn note(ctx: &Ctx, rs: &ReplicaSet, kind: EventType, reason: &str, message: &str) {
    ctx.recorder.record(
        ctx.flavor.reference(rs),
        &Note {
            kind,
            reason,
            message,
            action: if reason.contains("Delete") {
                "Delete"
            } else {
                "Create"
            },
        },
    );
}
