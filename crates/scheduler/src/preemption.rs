//! DefaultPreemption (a post-filter): when a pod fits nowhere, find the node where
//! evicting the fewest, lowest-priority pods makes it fit. Pure: it returns the node
//! and the victims; the caller nominates the node and deletes the victims.
//!
//! Node-local filters are re-run with the victims removed; inter-pod affinity and
//! topology spread are judged against the cycle's pre-filter state (victims still
//! counted), which can only make preemption more conservative.

use std::collections::BTreeMap;

use crate::algorithm;
use crate::fit_error::format_histogram;
use crate::framework::{CycleState, Profile};
use crate::pod_info::{PodInfo, SharedPod};
use crate::snapshot::{NodeInfo, Snapshot};

pub const NOT_HELPFUL: &str = "Preemption is not helpful for scheduling";
pub const NO_VICTIMS: &str = "No preemption victims found for incoming pod";
/// Upstream stops looking once it has this many candidate nodes.
const MAX_CANDIDATES: usize = 100;

#[derive(Debug, Clone)]
pub struct Preemption {
    pub node: String,
    pub victims: Vec<SharedPod>,
}

fn fits(
    pod: &PodInfo,
    node: &NodeInfo,
    state: &CycleState,
    snap: &Snapshot,
    profile: &Profile,
) -> Result<(), bool> {
    algorithm::run_filters(pod, node, state, snap, profile).map_err(|u| u.unresolvable)
}

/// Victims on one node, or None when evicting every lower-priority pod would not help.
fn victims_on(
    pod: &PodInfo,
    node: &NodeInfo,
    state: &CycleState,
    snap: &Snapshot,
    profile: &Profile,
) -> Option<Vec<SharedPod>> {
    let mut trial = node.clone();
    let mut lower: Vec<SharedPod> = node
        .pods
        .iter()
        .filter(|p| p.priority < pod.priority && !p.terminating)
        .cloned()
        .collect();
    if lower.is_empty() {
        return None;
    }
    for v in &lower {
        trial.remove_pod(&v.uid);
    }
    fits(pod, &trial, state, snap, profile).ok()?;
    // Reprieve as many as possible, most important first.
    lower.sort_by_key(|p| std::cmp::Reverse(p.priority));
    let mut victims = Vec::new();
    for v in lower {
        trial.add_pod(v.clone());
        if fits(pod, &trial, state, snap, profile).is_err() {
            trial.remove_pod(&v.uid);
            victims.push(v);
        }
    }
    Some(victims)
}

/// Picks the node whose victims matter least: lowest highest-priority victim, then the
/// lowest priority sum, then the fewest victims.
pub fn preempt(pod: &PodInfo, snap: &Snapshot, profile: &Profile) -> Result<Preemption, String> {
    if pod.preemption_never {
        return Err("preemption: not eligible due to preemptionPolicy=Never.".into());
    }
    let state = algorithm::pre_filter(pod, snap, profile);
    let mut reasons: BTreeMap<String, usize> = BTreeMap::new();
    let mut candidates: Vec<Preemption> = Vec::new();
    for node in snap.nodes() {
        if candidates.len() >= MAX_CANDIDATES {
            break;
        }
        match fits(pod, node, &state, snap, profile) {
            Ok(()) | Err(false) => {}
            Err(true) => {
                *reasons.entry(NOT_HELPFUL.into()).or_default() += 1;
                continue;
            }
        }
        match victims_on(pod, node, &state, snap, profile) {
            Some(victims) => candidates.push(Preemption {
                node: node.name.clone(),
                victims,
            }),
            None => *reasons.entry(NO_VICTIMS.into()).or_default() += 1,
        }
    }
    let key = |c: &Preemption| {
        let top = c
            .victims
            .iter()
            .map(|v| v.priority)
            .max()
            .unwrap_or(i32::MIN);
        let sum: i64 = c
            .victims
            .iter()
            .map(|v| i64::from(v.priority) + i64::from(i32::MAX) + 1)
            .sum();
        (top, sum, c.victims.len())
    };
    match candidates.into_iter().min_by_key(key) {
        Some(c) => Ok(c),
        None => Err(format!(
            "preemption: 0/{} nodes are available: {}.",
            snap.num_nodes(),
            format_histogram(&reasons)
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{node, pod};

    fn prio(name: &str, cpu: &str, p: i32) -> PodInfo {
        pod(name)
            .cpu(cpu)
            .with(|x| x.spec.as_mut().unwrap().priority = Some(p))
            .info()
    }

    #[test]
    fn evicts_the_fewest_lowest_priority_pods() {
        let mut s = Snapshot::default();
        s.upsert_node(&node("a", "2", "8Gi", &[]));
        s.upsert_node(&node("b", "2", "8Gi", &[]));
        s.add_pod(prio("a-low", "1", 1), "a");
        s.add_pod(prio("a-mid", "1", 5), "a");
        s.add_pod(prio("b-low1", "1", 1), "b");
        s.add_pod(prio("b-low2", "1", 2), "b");
        let profile = Profile::default_profile("default-scheduler");
        let p = prio("high", "1", 10);
        let c = preempt(&p, &s, &profile).unwrap();
        // On a, one victim of priority 1 is enough (a-mid reprieved); on b, b-low1 (1).
        // Both have top priority 1; a's sum 1 vs b's 1; one victim each: first wins.
        assert_eq!(c.victims.len(), 1);
        assert_eq!(c.victims[0].priority, 1);
        let huge = prio("huge", "3", 10);
        assert_eq!(
            preempt(&huge, &s, &profile).unwrap_err(),
            "preemption: 0/2 nodes are available: 2 No preemption victims found for incoming pod."
        );
        let never = pod("n").cpu("1").with(|x| {
            let spec = x.spec.as_mut().unwrap();
            spec.priority = Some(10);
            spec.preemption_policy = Some("Never".into());
        });
        assert!(preempt(&never.info(), &s, &profile)
            .unwrap_err()
            .contains("preemptionPolicy=Never"));
        let equal = prio("eq", "1", 1);
        assert!(
            preempt(&equal, &s, &profile).is_err(),
            "same priority is not preempted"
        );
    }

    #[test]
    fn unresolvable_nodes_are_not_helpful() {
        let mut s = Snapshot::default();
        s.upsert_node(&node("a", "2", "8Gi", &[("disk", "hdd")]));
        s.add_pod(prio("low", "2", 0), "a");
        let p = pod("p")
            .cpu("1")
            .node_selector("disk", "ssd")
            .with(|x| x.spec.as_mut().unwrap().priority = Some(9))
            .info();
        let profile = Profile::default_profile("default-scheduler");
        assert_eq!(
            preempt(&p, &s, &profile).unwrap_err(),
            "preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling."
        );
    }
}
