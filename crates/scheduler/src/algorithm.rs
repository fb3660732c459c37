//! One scheduling cycle, pure: pre-filter, filter nodes from a rotating start until
//! enough are feasible, score them, pick the best (random among ties). The extenders'
//! calls slot in between these stages (`scheduling_loop/cycle.rs`).

use std::collections::BTreeMap;

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use crate::fit_error::FitError;
use crate::framework::{CycleState, Profile, Unfit};
use crate::plugins;
use crate::pod_info::PodInfo;
use crate::snapshot::{NodeInfo, Snapshot};

const MIN_FEASIBLE_NODES_TO_FIND: usize = 100;
const MIN_FEASIBLE_NODES_PERCENTAGE: usize = 5;

/// What survives between cycles: where the next search starts, and the tie breaker.
#[derive(Debug)]
pub struct Cursor {
    pub next_start: usize,
    rng: SmallRng,
}

impl Cursor {
    pub fn new(seed: u64) -> Cursor {
        Cursor {
            next_start: 0,
            rng: SmallRng::seed_from_u64(seed),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Placement {
    pub node: String,
    pub evaluated_nodes: usize,
    pub feasible_nodes: usize,
}

/// The nodes a pod may go to, and why the others may not.
pub struct Feasible<'a> {
    pub nodes: Vec<&'a NodeInfo>,
    pub failures: Vec<(&'a NodeInfo, Unfit)>,
}

/// upstream `numFeasibleNodesToFind`: every node below 100, else an adaptive
/// percentage (50 − nodes/125, at least 5) but never fewer than 100 nodes.
pub fn num_feasible_nodes_to_find(percentage: Option<i32>, num_all: usize) -> usize {
    if num_all < MIN_FEASIBLE_NODES_TO_FIND {
        return num_all;
    }
    let pct = match percentage.filter(|p| *p > 0) {
        Some(p) => (p as usize).min(100),
        None => 50usize
            .saturating_sub(num_all / 125)
            .max(MIN_FEASIBLE_NODES_PERCENTAGE),
    };
    (num_all * pct / 100).max(MIN_FEASIBLE_NODES_TO_FIND)
}

/// The cycle state every filter plugin's pre-filter computes for the pod.
pub fn pre_filter(pod: &PodInfo, snap: &Snapshot, profile: &Profile) -> CycleState {
    let mut state = CycleState::default();
    for p in &profile.filters {
        plugins::pre_filter(*p, pod, snap, &mut state);
    }
    state
}

/// The profile's filters on one node, stopping at the first that refuses.
pub fn run_filters(
    pod: &PodInfo,
    node: &NodeInfo,
    state: &CycleState,
    snap: &Snapshot,
    profile: &Profile,
) -> Result<(), Unfit> {
    profile
        .filters
        .iter()
        .try_for_each(|p| plugins::filter(*p, pod, node, state, snap))
}

pub fn find_feasible<'a>(
    pod: &PodInfo,
    snap: &'a Snapshot,
    profile: &Profile,
    state: &CycleState,
    cursor: &mut Cursor,
) -> Feasible<'a> {
    let all = snap.nodes();
    let want = num_feasible_nodes_to_find(profile.percentage_of_nodes_to_score, all.len());
    let mut found = Feasible {
        nodes: Vec::with_capacity(want.min(all.len())),
        failures: Vec::new(),
    };
    let start = cursor.next_start % all.len().max(1);
    let mut processed = 0;
    for i in 0..all.len() {
        if found.nodes.len() >= want {
            break;
        }
        let node = &all[(start + i) % all.len()];
        processed += 1;
        match run_filters(pod, node, state, snap, profile) {
            Ok(()) => found.nodes.push(node),
            Err(unfit) => found.failures.push((node, unfit)),
        }
    }
    cursor.next_start = (start + processed) % all.len().max(1);
    found
}

/// Weighted sum of every score plugin's normalised scores, per feasible node.
pub fn prioritize(
    pod: &PodInfo,
    snap: &Snapshot,
    profile: &Profile,
    nodes: &[&NodeInfo],
    state: &mut CycleState,
) -> Vec<i64> {
    for (p, _) in &profile.scores {
        plugins::pre_score(*p, pod, snap, nodes, profile, state);
    }
    let mut totals = vec![0i64; nodes.len()];
    let mut scores = vec![0i64; nodes.len()];
    for (p, weight) in &profile.scores {
        if state.skip_score.contains(p) {
            continue;
        }
        for (s, n) in scores.iter_mut().zip(nodes) {
            *s = plugins::score(*p, pod, n, snap, profile, state);
        }
        plugins::normalize(*p, &mut scores, nodes, state);
        for (t, s) in totals.iter_mut().zip(&scores) {
            *t += s * weight;
        }
    }
    totals
}

/// The index of the highest score; ties broken uniformly at random (reservoir sampling).
pub fn select_host(totals: &[i64], cursor: &mut Cursor) -> usize {
    let mut best = 0;
    let mut ties = 0u32;
    for (i, s) in totals.iter().enumerate() {
        if *s > totals[best] {
            best = i;
            ties = 1;
        } else if *s == totals[best] {
            ties += 1;
            if cursor.rng.random_range(0..ties) == 0 {
                best = i;
            }
        }
    }
    best
}

/// Reason → number of nodes refused for it.
fn histogram(failures: &[(&NodeInfo, Unfit)]) -> BTreeMap<String, usize> {
    let mut reasons = BTreeMap::new();
    for (_, u) in failures {
        for r in &u.reasons {
            *reasons.entry(r.clone()).or_default() += 1;
        }
    }
    reasons
}

/// One attempt between its filter and its pick: the feasible nodes and why the others
/// were refused. The one pipeline is [`filter`] → (extenders narrow,
/// `scheduling_loop/cycle.rs`) → [`Candidates::scores`] → (extenders add scores) →
/// [`Candidates::pick`]; [`schedule`] is it without extenders.
pub struct Candidates<'a> {
    pub nodes: Vec<&'a NodeInfo>,
    reasons: BTreeMap<String, usize>,
    evaluated: usize,
    state: CycleState,
}

/// Pre-filter, then the filters from the rotating start until enough nodes fit.
pub fn filter<'a>(
    pod: &PodInfo,
    snap: &'a Snapshot,
    profile: &Profile,
    cursor: &mut Cursor,
) -> Result<Candidates<'a>, FitError> {
    if snap.num_nodes() == 0 {
        return Err(FitError::NoNodes);
    }
    let state = pre_filter(pod, snap, profile);
    let found = find_feasible(pod, snap, profile, &state, cursor);
    Ok(Candidates {
        evaluated: found.nodes.len() + found.failures.len(),
        reasons: histogram(&found.failures),
        nodes: found.nodes,
        state,
    })
}

impl Candidates<'_> {
    /// Keeps the nodes `keep` accepts, counting the reasons given for the others.
    pub fn narrow(
        &mut self,
        keep: impl Fn(&NodeInfo) -> bool,
        reasons: impl IntoIterator<Item = String>,
    ) {
        self.nodes.retain(|n| keep(n));
        for reason in reasons {
            *self.reasons.entry(reason).or_default() += 1;
        }
    }

    /// Why the pod fits nowhere, once no node is left.
    pub fn none_left(&self, snap: &Snapshot) -> Result<(), FitError> {
        if self.nodes.is_empty() {
            return Err(FitError::unfit(snap.num_nodes(), self.reasons.clone()));
        }
        Ok(())
    }

    /// The score plugins' totals per node; a single node is not scored (upstream).
    pub fn scores(&mut self, pod: &PodInfo, snap: &Snapshot, profile: &Profile) -> Vec<i64> {
        if self.nodes.len() <= 1 {
            return vec![0; self.nodes.len()];
        }
        prioritize(pod, snap, profile, &self.nodes, &mut self.state)
    }

    /// The best-scored node (random among ties); call after [`Candidates::none_left`].
    pub fn pick(self, totals: &[i64], cursor: &mut Cursor) -> Placement {
        let chosen = if self.nodes.len() == 1 {
            0
        } else {
            select_host(totals, cursor)
        };
        Placement {
            node: self.nodes[chosen].name.clone(),
            evaluated_nodes: self.evaluated,
            feasible_nodes: self.nodes.len(),
        }
    }
}

/// Picks a node for the pod, or says why none fits: the pipeline without extenders.
pub fn schedule(
    pod: &PodInfo,
    snap: &Snapshot,
    profile: &Profile,
    cursor: &mut Cursor,
) -> Result<Placement, FitError> {
    let mut candidates = filter(pod, snap, profile, cursor)?;
    candidates.none_left(snap)?;
    let totals = candidates.scores(pod, snap, profile);
    Ok(candidates.pick(&totals, cursor))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{node, pod};

    #[test]
    fn adaptive_percentage() {
        assert_eq!(num_feasible_nodes_to_find(None, 50), 50);
        assert_eq!(num_feasible_nodes_to_find(None, 100), 100);
        assert_eq!(num_feasible_nodes_to_find(None, 1000), 420);
        assert_eq!(num_feasible_nodes_to_find(None, 5000), 500);
        assert_eq!(num_feasible_nodes_to_find(None, 6000), 300);
        assert_eq!(num_feasible_nodes_to_find(Some(100), 5000), 5000);
        assert_eq!(num_feasible_nodes_to_find(Some(1), 5000), 100);
    }

    #[test]
    fn spreads_equal_pods_and_rotates_the_start() {
        let mut s = Snapshot::default();
        for n in ["a", "b", "c"] {
            s.upsert_node(&node(n, "4", "8Gi", &[]));
        }
        let profile = Profile::default_profile("default-scheduler");
        let mut cursor = Cursor::new(7);
        for i in 0..6 {
            let p = pod(&format!("p{i}")).cpu("1").info();
            let placed = schedule(&p, &s, &profile, &mut cursor).unwrap();
            s.add_pod(p, &placed.node);
        }
        for n in ["a", "b", "c"] {
            assert_eq!(s.node(n).unwrap().pods.len(), 2, "least allocated spreads");
        }
    }

    #[test]
    fn ties_are_broken_at_random() {
        let mut s = Snapshot::default();
        for n in ["a", "b", "c", "d"] {
            s.upsert_node(&node(n, "4", "8Gi", &[]));
        }
        let profile = Profile::default_profile("default-scheduler");
        let mut cursor = Cursor::new(1);
        let mut seen = std::collections::HashSet::new();
        for _ in 0..64 {
            seen.insert(
                schedule(&pod("p").info(), &s, &profile, &mut cursor)
                    .unwrap()
                    .node,
            );
        }
        assert_eq!(seen.len(), 4);
    }

    #[test]
    fn nothing_fits_says_why_per_node() {
        let mut s = Snapshot::default();
        s.upsert_node(&node("small", "1", "1Gi", &[("disk", "ssd")]));
        s.upsert_node(&node("x", "8", "8Gi", &[]));
        s.upsert_node(&node("y", "8", "8Gi", &[]));
        let p = pod("p").cpu("2").node_selector("disk", "ssd").info();
        let profile = Profile::default_profile("default-scheduler");
        let err = schedule(&p, &s, &profile, &mut Cursor::new(0)).unwrap_err();
        assert_eq!(
            err.to_string(),
            "0/3 nodes are available: 1 Insufficient cpu, 2 node(s) didn't match Pod's node affinity/selector."
        );
        assert_eq!(
            schedule(&p, &Snapshot::default(), &profile, &mut Cursor::new(0)),
            Err(FitError::NoNodes)
        );
    }
}
