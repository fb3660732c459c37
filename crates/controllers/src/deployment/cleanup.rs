//! Old ReplicaSets past `revisionHistoryLimit` (default 10) are deleted once empty,
//! lowest revision first (upstream `cleanupDeployment`).

use std::sync::Arc;

use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use kube::api::{Api, DeleteParams};
use kube::ResourceExt;

use super::util;
use super::{key_of, Ctx, Error};

pub async fn old_replicasets(
    d: &Deployment,
    ctx: &Ctx,
    old: &[Arc<ReplicaSet>],
) -> Result<(), Error> {
    let limit = d
        .spec
        .as_ref()
        .and_then(|s| s.revision_history_limit)
        .unwrap_or(10)
        .max(0) as usize;
    let mut candidates: Vec<&Arc<ReplicaSet>> = old
        .iter()
        .filter(|rs| rs.metadata.deletion_timestamp.is_none())
        .collect();
    if candidates.len() <= limit {
        return Ok(());
    }
    let excess = candidates.len() - limit;
    candidates.sort_by_key(|rs| {
        (
            util::revision(rs),
            rs.metadata.creation_timestamp.as_ref().map(|t| t.0),
            rs.name_any(),
        )
    });
    let api: Api<ReplicaSet> =
        Api::namespaced(ctx.client.clone(), &d.namespace().unwrap_or_default());
    for rs in candidates.into_iter().take(excess) {
        let status = rs.status.clone().unwrap_or_default();
        let settled = rs.metadata.generation <= status.observed_generation;
        if status.replicas != 0 || util::spec_replicas(rs) != 0 || !settled {
            continue;
        }
        match api.delete(&rs.name_any(), &DeleteParams::default()).await {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.code == 404 => {}
            Err(source) => {
                return Err(Error::Api {
                    key: key_of(d),
                    source,
                })
            }
        }
    }
    Ok(())
}
