//! A paused Deployment, or one whose replica count changed: resize its ReplicaSets
//! without rolling, proportionally to their sizes when several are active mid-rollout
//! (upstream `sync()` / `scale()`).

use std::sync::Arc;

use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use kube::runtime::controller::Action;

use super::util::{self, spec_replicas};
use super::{cleanup, replicasets, status, Ctx, Error};

pub async fn sync(
    d: &Deployment,
    ctx: &Ctx,
    all: &[Arc<ReplicaSet>],
    paused: bool,
) -> Result<Action, Error> {
    let new = replicasets::new_rs(d, ctx, all, false).await?;
    let (_, old) = util::split(d, all);
    let mut all_now = old.clone();
    if let Some(n) = &new {
        all_now.push(n.clone());
    }
    for (rs, size) in proportional_sizes(d, &all_now, new.as_deref()) {
        replicasets::scale(d, ctx, &rs, size).await?;
    }
    if paused {
        cleanup::old_replicasets(d, ctx, &old).await?;
    }
    status::sync_rollout_status(d, ctx, &all_now, new.as_deref()).await
}

/// The sizes the active ReplicaSets should have for the Deployment's replica count.
pub fn proportional_sizes(
    d: &Deployment,
    all: &[Arc<ReplicaSet>],
    new: Option<&ReplicaSet>,
) -> Vec<(Arc<ReplicaSet>, i32)> {
    let desired = util::desired(d);
    let mut active: Vec<Arc<ReplicaSet>> = all
        .iter()
        .filter(|rs| spec_replicas(rs) > 0)
        .cloned()
        .collect();
    let only = match active.len() {
        0 => new
            .and_then(|n| all.iter().find(|rs| rs.metadata.uid == n.metadata.uid))
            .or_else(|| all.last())
            .cloned(),
        1 => active.first().cloned(),
        _ => None,
    };
    if let Some(rs) = only {
        return vec![(rs, desired)];
    }
    if saturated(d, new) {
        let new_uid = new.and_then(|n| n.metadata.uid.clone());
        return active
            .into_iter()
            .filter(|rs| rs.metadata.uid != new_uid)
            .map(|rs| (rs, 0))
            .collect();
    }
    if util::is_recreate(d) {
        return Vec::new();
    }
    let allowed = if desired > 0 {
        desired + util::max_surge(d)
    } else {
        0
    };
    let to_add = allowed - active.iter().map(|rs| spec_replicas(rs)).sum::<i32>();
    let created = |rs: &ReplicaSet| {
        (
            rs.metadata.creation_timestamp.as_ref().map(|t| t.0),
            rs.metadata.name.clone(),
        )
    };
    active.sort_by(|a, b| {
        let bigger = spec_replicas(b).cmp(&spec_replicas(a));
        let age = if to_add > 0 {
            created(b).cmp(&created(a))
        } else {
            created(a).cmp(&created(b))
        };
        bigger.then(age)
    });
    let mut added = 0;
    let mut sizes: Vec<i32> = Vec::with_capacity(active.len());
    for rs in &active {
        let p = if to_add != 0 {
            proportion(rs, d, to_add, added)
        } else {
            0
        };
        added += p;
        sizes.push(spec_replicas(rs) + p);
    }
    if let Some(first) = sizes.first_mut() {
        *first = (*first + to_add - added).max(0);
    }
    active.into_iter().zip(sizes).collect()
}

fn saturated(d: &Deployment, new: Option<&ReplicaSet>) -> bool {
    let Some(n) = new else { return false };
    let desired = util::desired(d);
    spec_replicas(n) == desired
        && util::annotated_replicas(n, util::DESIRED_REPLICAS) == Some(desired)
        && util::available(n) == desired
}

fn proportion(rs: &ReplicaSet, d: &Deployment, to_add: i32, added: i32) -> i32 {
    if spec_replicas(rs) == 0 || to_add == 0 || to_add == added {
        return 0;
    }
    let frac = fraction(rs, d);
    let allowed = to_add - added;
    if to_add > 0 {
        frac.min(allowed)
    } else {
        frac.max(allowed)
    }
}

fn fraction(rs: &ReplicaSet, d: &Deployment) -> i32 {
    let size = spec_replicas(rs);
    if util::desired(d) == 0 {
        return -size;
    }
    let target = f64::from(util::desired(d) + util::max_surge(d));
    let annotated = util::annotated_replicas(rs, util::MAX_REPLICAS).unwrap_or_else(|| {
        d.status
            .as_ref()
            .map(|s| s.replicas.unwrap_or(0))
            .unwrap_or(0)
    });
    if annotated == 0 {
        return 0;
    }
    (f64::from(size) * target / f64::from(annotated)).round() as i32 - size
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::apps::v1::{DeploymentSpec, ReplicaSetSpec};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};

    fn rs(name: &str, replicas: i32, max: i32, age: i64) -> Arc<ReplicaSet> {
        Arc::new(ReplicaSet {
            metadata: ObjectMeta {
                name: Some(name.into()),
                uid: Some(name.into()),
                creation_timestamp: Some(Time(
                    k8s_openapi::jiff::Timestamp::from_second(age).unwrap(),
                )),
                annotations: Some([(util::MAX_REPLICAS.to_string(), max.to_string())].into()),
                ..Default::default()
            },
            spec: Some(ReplicaSetSpec {
                replicas: Some(replicas),
                ..Default::default()
            }),
            status: None,
        })
    }

    #[test]
    fn scaling_mid_rollout_is_proportional() {
        // 10 replicas with maxSurge 3 (25 % rounded up) mid-rollout: old 8, new 5 (13).
        // Scaled to 20 (max 25): the 12 extra go 8:5.
        let d = Deployment {
            spec: Some(DeploymentSpec {
                replicas: Some(20),
                ..Default::default()
            }),
            ..Default::default()
        };
        let old = rs("old", 8, 13, 1);
        let new = rs("new", 5, 13, 2);
        let sizes = proportional_sizes(&d, &[old, new.clone()], Some(&new));
        let got: Vec<(String, i32)> = sizes
            .iter()
            .map(|(r, n)| (r.metadata.name.clone().unwrap(), *n))
            .collect();
        assert_eq!(got, [("old".to_string(), 15), ("new".to_string(), 10)]);
        assert_eq!(got.iter().map(|(_, n)| n).sum::<i32>(), 25);
    }
}
