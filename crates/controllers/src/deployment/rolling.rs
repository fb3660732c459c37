//! Rollouts: RollingUpdate (surge the new ReplicaSet, scale old ones down while at most
//! maxUnavailable pods are missing) and Recreate (old pods gone first), upstream
//! `rolling.go` / `recreate.go`.

use std::sync::Arc;

use cairn_semantics::pod_state;
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use kube::runtime::controller::Action;
use kube::ResourceExt;

use super::util::{self, spec_replicas};
use super::{cleanup, replicasets, status, Ctx, Error};

fn active(old: &[Arc<ReplicaSet>]) -> Vec<Arc<ReplicaSet>> {
    old.iter()
        .filter(|rs| spec_replicas(rs) > 0)
        .cloned()
        .collect()
}

pub async fn rollout_rolling(
    d: &Deployment,
    ctx: &Ctx,
    all: &[Arc<ReplicaSet>],
) -> Result<Action, Error> {
    let new = replicasets::new_rs(d, ctx, all, true).await?;
    let (_, old) = util::split(d, all);
    let mut all_now: Vec<Arc<ReplicaSet>> = old.clone();
    if let Some(n) = &new {
        all_now.push(n.clone());
    }
    if let Some(n) = &new {
        let desired = util::desired(d);
        let target = if spec_replicas(n) > desired {
            desired
        } else {
            util::new_rs_replicas(d, &all_now, Some(n))
        };
        if target != spec_replicas(n) && replicasets::scale(d, ctx, n, target).await? {
            return status::sync_rollout_status(d, ctx, &all_now, new.as_deref()).await;
        }
    }
    if reconcile_old(d, ctx, &all_now, &active(&old), new.as_deref()).await? {
        return status::sync_rollout_status(d, ctx, &all_now, new.as_deref()).await;
    }
    if status::complete(d, &all_now, new.as_deref()) {
        cleanup::old_replicasets(d, ctx, &old).await?;
    }
    status::sync_rollout_status(d, ctx, &all_now, new.as_deref()).await
}

/// Scales old ReplicaSets down as far as availability allows (see [`old_sizes`]).
async fn reconcile_old(
    d: &Deployment,
    ctx: &Ctx,
    all: &[Arc<ReplicaSet>],
    old: &[Arc<ReplicaSet>],
    new: Option<&ReplicaSet>,
) -> Result<bool, Error> {
    let sizes = old_sizes(d, all, old, new);
    let mut scaled = false;
    for (rs, size) in old.iter().zip(sizes) {
        if size != spec_replicas(rs) {
            replicasets::scale(d, ctx, rs, size).await?;
            scaled = true;
        }
    }
    Ok(scaled)
}

/// The old ReplicaSets' next sizes: first their unavailable pods go, then available
/// ones down to `replicas - maxUnavailable` available in total (upstream
/// `reconcileOldReplicaSets`).
///
/// A ReplicaSet's status is written from the pods it saw *before* its last scale-down,
/// so right after one it may still report more available pods than its spec keeps.
/// Counting at most `spec.replicas` per ReplicaSet keeps that stale figure from
/// buying a second scale-down that would break the availability floor.
pub fn old_sizes(
    d: &Deployment,
    all: &[Arc<ReplicaSet>],
    old: &[Arc<ReplicaSet>],
    new: Option<&ReplicaSet>,
) -> Vec<i32> {
    let mut sizes: Vec<i32> = old.iter().map(|rs| spec_replicas(rs)).collect();
    if sizes.iter().sum::<i32>() == 0 {
        return sizes;
    }
    let available_of = |rs: &ReplicaSet| util::available(rs).min(spec_replicas(rs));
    let all_pods: i32 = all.iter().map(|rs| spec_replicas(rs)).sum();
    let min_available = util::desired(d) - util::max_unavailable(d);
    let new_unavailable = new.map(|n| spec_replicas(n) - available_of(n)).unwrap_or(0);
    let max_scaled_down = all_pods - min_available - new_unavailable;
    if max_scaled_down <= 0 {
        return sizes;
    }
    let mut cleaned = 0;
    for (rs, size) in old.iter().zip(sizes.iter_mut()) {
        let unavailable = *size - available_of(rs);
        if cleaned >= max_scaled_down || *size == 0 || unavailable <= 0 {
            continue;
        }
        let k = (max_scaled_down - cleaned).min(unavailable);
        *size -= k;
        cleaned += k;
    }
    let available: i32 = all.iter().map(|rs| available_of(rs)).sum();
    let mut budget = (available - min_available).max(0);
    for size in sizes.iter_mut() {
        let k = (*size).min(budget);
        *size -= k;
        budget -= k;
    }
    sizes
}

/// Whether pods of other templates still run (Recreate starts new ones only after).
fn old_pods_running(
    d: &Deployment,
    ctx: &Ctx,
    old: &[Arc<ReplicaSet>],
    new: Option<&ReplicaSet>,
) -> bool {
    if old.iter().any(|rs| util::status_of(rs).0 > 0) {
        return true;
    }
    let ns = d.namespace();
    let old_uids: Vec<Option<String>> = old.iter().map(|rs| rs.uid()).collect();
    let new_uid = new.and_then(|n| n.uid());
    ctx.pods.state().iter().any(|p| {
        let owner = crate::owner::controller_of(&p.metadata).map(|r| Some(r.uid.clone()));
        p.namespace() == ns
            && owner
                .as_ref()
                .is_some_and(|o| old_uids.contains(o) && *o != new_uid)
            && !pod_state::is_terminal(p.as_ref())
    })
}

pub async fn rollout_recreate(
    d: &Deployment,
    ctx: &Ctx,
    all: &[Arc<ReplicaSet>],
) -> Result<Action, Error> {
    let new = replicasets::new_rs(d, ctx, all, false).await?;
    let (_, old) = util::split(d, all);
    let mut scaled = false;
    for rs in active(&old) {
        scaled |= replicasets::scale(d, ctx, &rs, 0).await?;
    }
    if scaled || old_pods_running(d, ctx, &old, new.as_deref()) {
        return status::sync_rollout_status(d, ctx, all, new.as_deref()).await;
    }
    let new = match new {
        Some(n) => n,
        None => match replicasets::new_rs(d, ctx, all, true).await? {
            Some(n) => n,
            None => return status::sync_rollout_status(d, ctx, all, None).await,
        },
    };
    replicasets::scale(d, ctx, &new, util::desired(d)).await?;
    let mut all_now = old.clone();
    all_now.push(new.clone());
    if status::complete(d, &all_now, Some(&new)) {
        cleanup::old_replicasets(d, ctx, &old).await?;
    }
    status::sync_rollout_status(d, ctx, &all_now, Some(&new)).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::apps::v1::{ReplicaSetSpec, ReplicaSetStatus};
    use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

    fn deploy(replicas: i32, surge: i32, unavailable: i32) -> Deployment {
        util::tests::deploy(
            replicas,
            IntOrString::Int(surge),
            IntOrString::Int(unavailable),
        )
    }

    fn rs(spec: i32, available: i32) -> Arc<ReplicaSet> {
        Arc::new(ReplicaSet {
            spec: Some(ReplicaSetSpec {
                replicas: Some(spec),
                ..Default::default()
            }),
            status: Some(ReplicaSetStatus {
                replicas: available.max(spec),
                available_replicas: Some(available),
                ..Default::default()
            }),
            ..Default::default()
        })
    }

    #[test]
    fn old_pods_go_only_while_the_floor_holds() {
        let d = deploy(4, 1, 1);
        // Surge step: 4 old available + 1 new not yet available: one old pod may go.
        let (old, new) = (rs(4, 4), rs(1, 0));
        let all = [old.clone(), new.clone()];
        assert_eq!(old_sizes(&d, &all, &[old], Some(&new)), vec![3]);
        // Unavailable old pods go first, and only as many as the surge leaves room for.
        let (old, new) = (rs(4, 2), rs(1, 1));
        let all = [old.clone(), new.clone()];
        assert_eq!(old_sizes(&d, &all, &[old], Some(&new)), vec![2]);
    }

    #[test]
    fn a_stale_status_after_a_scale_down_buys_no_second_one() {
        let d = deploy(4, 1, 1);
        // The old ReplicaSet went 4 -> 3 but its status still says 4 available; the new
        // one has 1 of 2 available. Truly available: 3 + 1 = 4, floor 3: one more may go.
        let (old, new) = (rs(3, 4), rs(2, 1));
        let all = [old.clone(), new.clone()];
        assert_eq!(old_sizes(&d, &all, &[old], Some(&new)), vec![2]);
    }
}
