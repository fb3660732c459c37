//! One DaemonSet sync's plan: per eligible node the daemon pod that counts, what to
//! create and what to delete, including the rolling update (upstream `update.go`): with
//! `maxSurge` a node gets its new pod before the old one goes (at most maxSurge nodes at
//! a time); otherwise old pods go while at most `maxUnavailable` nodes lack an
//! available pod.

use std::collections::BTreeMap;
use std::sync::Arc;

use cairn_semantics::pod_state;
use k8s_openapi::api::apps::v1::{DaemonSet, RollingUpdateDaemonSet};
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::ResourceExt;

use super::placement::{self, HASH_LABEL};
use crate::cached_pod::CachedPod;

#[derive(Default)]
pub struct Plan {
    /// Per eligible node, the pod that counts: its updated pod if it has one, else its oldest.
    pub kept: BTreeMap<String, Arc<CachedPod>>,
    pub desired: usize,
    pub misscheduled: usize,
    pub create_on: Vec<String>,
    pub delete: Vec<Arc<CachedPod>>,
}

fn node_of(p: &CachedPod) -> String {
    p.node_name
        .clone()
        .or_else(|| p.pinned_node.clone())
        .unwrap_or_default()
}

/// The template hash the pod was made from.
pub fn revision_hash(p: &CachedPod) -> &str {
    p.metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(HASH_LABEL))
        .map_or("", String::as_str)
}

pub fn updated(p: &CachedPod, hash: &str) -> bool {
    revision_hash(p) == hash
}

fn rolling(ds: &DaemonSet) -> Option<RollingUpdateDaemonSet> {
    let strategy = ds.spec.as_ref()?.update_strategy.as_ref();
    if strategy.and_then(|s| s.type_.as_deref()) == Some("OnDelete") {
        return None;
    }
    Some(
        strategy
            .and_then(|s| s.rolling_update.clone())
            .unwrap_or_default(),
    )
}

/// An int or a percentage of `total`, rounded up (upstream scales DaemonSet values up).
fn scaled(v: Option<&IntOrString>, total: usize, default: usize) -> usize {
    match v {
        None => default,
        Some(IntOrString::Int(i)) => (*i).max(0) as usize,
        Some(IntOrString::String(s)) => {
            let pct: usize = s.trim_end_matches('%').parse().unwrap_or(0);
            (pct * total).div_ceil(100)
        }
    }
}

/// maxSurge when the DaemonSet rolls by surging (RollingUpdate with maxSurge > 0).
fn max_surge(ds: &DaemonSet, desired: usize) -> usize {
    rolling(ds).map_or(0, |r| scaled(r.max_surge.as_ref(), desired, 0))
}

fn by_creation(pods: &mut [Arc<CachedPod>]) {
    pods.sort_by_key(|p| {
        (
            p.metadata.creation_timestamp.as_ref().map(|t| t.0),
            p.metadata.name.clone(),
        )
    });
}

pub fn plan(
    ds: &DaemonSet,
    nodes: &[Arc<Node>],
    mine: Vec<Arc<CachedPod>>,
    hash: &str,
    min_ready: i32,
) -> Plan {
    let mut by_node: BTreeMap<String, Vec<Arc<CachedPod>>> = BTreeMap::new();
    for p in mine {
        by_node.entry(node_of(&p)).or_default().push(p);
    }
    let eligible: Vec<(&Arc<Node>, bool)> = nodes
        .iter()
        .map(|n| (n, placement::should_run(ds, n)))
        .collect();
    let desired = eligible.iter().filter(|(_, ok)| *ok).count();
    let surge = max_surge(ds, desired);
    let now = k8s_openapi::jiff::Timestamp::now();
    let mut plan = Plan {
        desired,
        ..Plan::default()
    };
    let mut old_only = Vec::new();
    let mut surging = 0;
    for (node, ok) in eligible {
        let name = node.name_any();
        let pods = by_node.remove(&name).unwrap_or_default();
        if !ok {
            plan.misscheduled += usize::from(!pods.is_empty());
            plan.delete.extend(pods);
            continue;
        }
        let (mut new, mut old): (Vec<_>, Vec<_>) = pods.into_iter().partition(|p| updated(p, hash));
        by_creation(&mut new);
        by_creation(&mut old);
        let mut new = new.into_iter();
        match new.next() {
            Some(n) => {
                plan.delete.extend(new);
                // Surging: the old pod stays until the new one is available.
                let keep_old = surge > 0
                    && !old.is_empty()
                    && !pod_state::is_available(n.as_ref(), min_ready, now);
                if keep_old {
                    surging += 1;
                    plan.delete.extend(old.drain(1..));
                } else {
                    plan.delete.extend(old);
                }
                plan.kept.insert(name, n);
            }
            None if old.is_empty() => plan.create_on.push(name),
            None => {
                let mut old = old.into_iter();
                if let Some(oldest) = old.next() {
                    plan.kept.insert(name.clone(), oldest);
                }
                plan.delete.extend(old);
                old_only.push(name);
            }
        }
    }
    // Surge: new pods beside the old ones, at most maxSurge nodes at a time.
    plan.create_on
        .extend(old_only.into_iter().take(surge.saturating_sub(surging)));
    // Pods for nodes that are gone.
    plan.delete.extend(by_node.into_values().flatten());
    plan
}

/// Without surge: old pods that are not available go at once; available ones as long as
/// no more than `maxUnavailable` nodes lack an available pod.
pub fn rolling_deletes(
    ds: &DaemonSet,
    plan: &Plan,
    hash: &str,
    min_ready: i32,
) -> Vec<Arc<CachedPod>> {
    let Some(r) = rolling(ds) else {
        return Vec::new();
    };
    if max_surge(ds, plan.desired) > 0 {
        return Vec::new();
    }
    let max = scaled(r.max_unavailable.as_ref(), plan.desired, 1);
    let now = k8s_openapi::jiff::Timestamp::now();
    let available = |p: &CachedPod| pod_state::is_available(p, min_ready, now);
    let available_nodes = plan.kept.values().filter(|p| available(p)).count();
    let mut budget = max.saturating_sub(plan.desired.saturating_sub(available_nodes));
    let mut out = Vec::new();
    for p in plan.kept.values().filter(|p| !updated(p, hash)) {
        if !available(p) {
            out.push(p.clone());
        } else if budget > 0 {
            budget -= 1;
            out.push(p.clone());
        }
    }
    out
}
