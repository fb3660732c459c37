//! InterPodAffinity: required pod affinity / anti-affinity (both the incoming pod's and
//! the existing pods' anti-affinity) filter; preferred terms and existing pods' terms
//! score, per topology domain.

use std::collections::HashMap;

use cairn_semantics::selector::Labels;

use crate::pod_info::{AffinityTerm, PodInfo, HOSTNAME_KEY};
use crate::snapshot::{NodeInfo, Snapshot};
use crate::verdict::Unfit;

/// Topology key → value → count; looked up by `&str` without allocating.
#[derive(Debug, Default)]
pub struct DomainCounts(HashMap<String, HashMap<String, i64>>);

impl DomainCounts {
    fn bump(&mut self, node: &NodeInfo, key: &str, by: i64) {
        let Some(v) = node.labels.get(key) else {
            return;
        };
        let values = match self.0.get_mut(key) {
            Some(values) => values,
            None => self.0.entry(key.to_string()).or_default(),
        };
        match values.get_mut(v.as_str()) {
            Some(c) => *c += by,
            None => {
                values.insert(v.clone(), by);
            }
        }
    }

    fn get(&self, key: &str, value: &str) -> i64 {
        self.0
            .get(key)
            .and_then(|m| m.get(value))
            .copied()
            .unwrap_or(0)
    }

    fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

pub const EXISTING_ANTI: &str = "node(s) didn't satisfy existing pods anti-affinity rules";
pub const AFFINITY: &str = "node(s) didn't match pod affinity rules";
pub const ANTI: &str = "node(s) didn't match pod anti-affinity rules";

#[derive(Debug, Default)]
pub struct FilterState {
    /// Hostname anti-affinity terms are checked per node in the filter.
    per_node_hostname: bool,
    existing_anti: DomainCounts,
    affinity: DomainCounts,
    anti: DomainCounts,
}

fn matches_all(terms: &[AffinityTerm], p: &PodInfo, snap: &Snapshot) -> bool {
    let ns = snap.namespaces.get(&p.namespace);
    terms.iter().all(|t| t.matches(p, ns))
}

/// Whether a term is checked on the filtered node itself instead of being counted over
/// the cluster first: hostname terms, when every node's hostname label is its own.
fn per_node(t: &AffinityTerm, lazy: bool) -> bool {
    lazy && t.topology_key == HOSTNAME_KEY
}

/// Counts, per topology domain, the pods the filter asks about. None: nothing to check.
pub fn pre_filter(pod: &PodInfo, snap: &Snapshot) -> Option<FilterState> {
    let lazy = snap.hostnames_unique();
    let mut s = FilterState {
        per_node_hostname: lazy,
        ..FilterState::default()
    };
    let own_ns = snap.namespaces.get(&pod.namespace);
    let incoming_affinity = !pod.required_affinity.is_empty();
    let incoming_anti = pod
        .required_anti_affinity
        .iter()
        .any(|t| !per_node(t, lazy));
    let mut any_anti = false;
    if !incoming_affinity && !incoming_anti && !snap.any_required_anti_affinity() {
        return (!pod.required_anti_affinity.is_empty()).then_some(s);
    }
    for node in snap.nodes() {
        if node.pods_with_required_anti_affinity > 0 {
            any_anti = true;
            for e in node
                .pods
                .iter()
                .filter(|e| !e.required_anti_affinity.is_empty())
            {
                for t in e
                    .required_anti_affinity
                    .iter()
                    .filter(|t| !per_node(t, lazy))
                {
                    if t.matches(pod, own_ns) {
                        s.existing_anti.bump(node, &t.topology_key, 1);
                    }
                }
            }
        }
        if !incoming_affinity && !incoming_anti {
            continue;
        }
        for e in &node.pods {
            if incoming_affinity && matches_all(&pod.required_affinity, e, snap) {
                for t in &pod.required_affinity {
                    s.affinity.bump(node, &t.topology_key, 1);
                }
            }
            let ens = snap.namespaces.get(&e.namespace);
            for t in pod
                .required_anti_affinity
                .iter()
                .filter(|t| !per_node(t, lazy))
            {
                if t.matches(e, ens) {
                    s.anti.bump(node, &t.topology_key, 1);
                }
            }
        }
    }
    let incoming = incoming_affinity || !pod.required_anti_affinity.is_empty();
    (incoming || any_anti).then_some(s)
}

/// The hostname terms of [`per_node`]: an existing pod on this node whose anti-affinity
/// matches the incoming pod, or one the incoming pod's anti-affinity matches.
fn per_node_conflict(pod: &PodInfo, node: &NodeInfo, snap: &Snapshot) -> Option<&'static str> {
    let own_ns = snap.namespaces.get(&pod.namespace);
    for e in &node.pods {
        let existing = e
            .required_anti_affinity
            .iter()
            .any(|t| t.topology_key == HOSTNAME_KEY && t.matches(pod, own_ns));
        if existing {
            return Some(EXISTING_ANTI);
        }
    }
    for t in pod
        .required_anti_affinity
        .iter()
        .filter(|t| t.topology_key == HOSTNAME_KEY)
    {
        if node
            .pods
            .iter()
            .any(|e| t.matches(e, snap.namespaces.get(&e.namespace)))
        {
            return Some(ANTI);
        }
    }
    None
}

pub fn filter(
    pod: &PodInfo,
    node: &NodeInfo,
    s: &FilterState,
    snap: &Snapshot,
) -> Result<(), Unfit> {
    if !s.existing_anti.is_empty()
        && node
            .labels
            .iter()
            .any(|(k, v)| s.existing_anti.get(k, v) > 0)
    {
        return Err(Unfit::new(EXISTING_ANTI));
    }
    let lazy_conflict = if s.per_node_hostname && node.labels.contains_key(HOSTNAME_KEY) {
        per_node_conflict(pod, node, snap)
    } else {
        None
    };
    if lazy_conflict == Some(EXISTING_ANTI) {
        return Err(Unfit::new(EXISTING_ANTI));
    }
    let mut all_exist = true;
    for t in &pod.required_affinity {
        let Some(v) = node.labels.get(&t.topology_key) else {
            return Err(Unfit::unresolvable(AFFINITY));
        };
        if s.affinity.get(&t.topology_key, v) <= 0 {
            all_exist = false;
        }
    }
    // The first pod of a group with affinity to itself may go anywhere its topology
    // labels exist, or such groups could never start.
    let first_of_group = s.affinity.is_empty() && matches_all(&pod.required_affinity, pod, snap);
    if !all_exist && !first_of_group {
        return Err(Unfit::unresolvable(AFFINITY));
    }
    if let Some(reason) = lazy_conflict {
        return Err(Unfit::new(reason));
    }
    for t in pod
        .required_anti_affinity
        .iter()
        .filter(|t| !per_node(t, s.per_node_hostname))
    {
        if let Some(v) = node.labels.get(&t.topology_key) {
            if s.anti.get(&t.topology_key, v) > 0 {
                return Err(Unfit::new(ANTI));
            }
        }
    }
    Ok(())
}

/// Topology key → value → summed term weights.
#[derive(Debug, Default)]
pub struct ScoreState {
    scores: HashMap<String, HashMap<String, i64>>,
}

impl ScoreState {
    /// Adds `sign` × each term's weight for the terms that match `target`.
    fn add_matching(
        &mut self,
        terms: &[AffinityTerm],
        target: &PodInfo,
        ns_labels: Option<&Labels>,
        sign: i64,
        node: &NodeInfo,
    ) {
        for t in terms.iter().filter(|t| t.matches(target, ns_labels)) {
            self.add(t, sign * t.weight, node);
        }
    }

    fn add(&mut self, t: &AffinityTerm, weight: i64, node: &NodeInfo) {
        if let Some(v) = node.labels.get(&t.topology_key) {
            *self
                .scores
                .entry(t.topology_key.clone())
                .or_default()
                .entry(v.clone())
                .or_default() += weight;
        }
    }
}

/// None: no pod anywhere has a term that could apply.
pub fn pre_score(pod: &PodInfo, snap: &Snapshot, hard_weight: i64) -> Option<ScoreState> {
    let has_preferred =
        !pod.preferred_affinity.is_empty() || !pod.preferred_anti_affinity.is_empty();
    let own_ns = snap.namespaces.get(&pod.namespace);
    let mut s = ScoreState::default();
    if !has_preferred && !snap.any_pod_affinity() {
        return None;
    }
    for node in snap.nodes() {
        if !has_preferred && node.pods_with_affinity == 0 {
            continue;
        }
        for e in &node.pods {
            if has_preferred {
                let ens = snap.namespaces.get(&e.namespace);
                s.add_matching(&pod.preferred_affinity, e, ens, 1, node);
                s.add_matching(&pod.preferred_anti_affinity, e, ens, -1, node);
            }
            if !e.has_affinity() {
                continue;
            }
            if hard_weight > 0 {
                for t in e
                    .required_affinity
                    .iter()
                    .filter(|t| t.matches(pod, own_ns))
                {
                    s.add(t, hard_weight, node);
                }
            }
            s.add_matching(&e.preferred_affinity, pod, own_ns, 1, node);
            s.add_matching(&e.preferred_anti_affinity, pod, own_ns, -1, node);
        }
    }
    (!s.scores.is_empty()).then_some(s)
}

pub fn score(node: &NodeInfo, s: &ScoreState) -> i64 {
    s.scores
        .iter()
        .filter_map(|(k, values)| values.get(node.labels.get(k)?))
        .sum()
}

pub fn normalize(scores: &mut [i64]) {
    let (min, max) = scores
        .iter()
        .fold((i64::MAX, i64::MIN), |(lo, hi), s| (lo.min(*s), hi.max(*s)));
    let diff = max - min;
    for s in scores.iter_mut() {
        *s = if diff > 0 { 100 * (*s - min) / diff } else { 0 };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pod_info::HOSTNAME_KEY;
    use crate::testing::{node, pod, selector};
    use k8s_openapi::api::core::v1::{PodAffinity, PodAffinityTerm, WeightedPodAffinityTerm};

    fn cluster() -> Snapshot {
        let mut s = Snapshot::default();
        s.upsert_node(&node("a", "4", "8Gi", &[("zone", "z1")]));
        s.upsert_node(&node("b", "4", "8Gi", &[("zone", "z1")]));
        s.upsert_node(&node("c", "4", "8Gi", &[("zone", "z2")]));
        s.upsert_node(&node("d", "4", "8Gi", &[]));
        s
    }

    fn run(p: &PodInfo, s: &Snapshot, n: &str) -> Result<(), Unfit> {
        match pre_filter(p, s) {
            Some(st) => filter(p, s.node(n).unwrap(), &st, s),
            None => Ok(()),
        }
    }

    fn affinity_to(k: &str, v: &str, key: &str) -> crate::testing::PodBuilder {
        pod("p").label("app", "web").affinity(|a| {
            a.pod_affinity = Some(PodAffinity {
                required_during_scheduling_ignored_during_execution: Some(vec![PodAffinityTerm {
                    label_selector: Some(selector(&[(k, v)])),
                    topology_key: key.into(),
                    ..Default::default()
                }]),
                ..Default::default()
            })
        })
    }

    #[test]
    fn anti_affinity_both_ways() {
        let mut s = cluster();
        s.add_pod(pod("db").label("app", "db").info(), "a");
        let p = pod("p").anti_affinity("app", "db", "zone").info();
        assert_eq!(
            run(&p, &s, "b").unwrap_err().reasons,
            [ANTI],
            "same zone as db"
        );
        assert!(run(&p, &s, "c").is_ok());
        assert!(
            run(&p, &s, "d").is_ok(),
            "no topology label: anti-affinity passes"
        );
        // An existing pod's anti-affinity keeps matching pods out of its domain.
        s.add_pod(
            pod("lonely")
                .anti_affinity("app", "web", HOSTNAME_KEY)
                .info(),
            "c",
        );
        let web = pod("w").label("app", "web").info();
        assert_eq!(run(&web, &s, "c").unwrap_err().reasons, [EXISTING_ANTI]);
        assert!(run(&web, &s, "b").is_ok());
    }

    #[test]
    fn shared_hostname_values_are_one_domain() {
        let mut s = Snapshot::default();
        // Two nodes claiming the same hostname label: counted as one domain (eager path).
        s.upsert_node(&node("a", "4", "8Gi", &[]));
        s.upsert_node(&node("b", "4", "8Gi", &[(HOSTNAME_KEY, "a")]));
        assert!(!s.hostnames_unique());
        s.add_pod(pod("db").label("app", "db").info(), "a");
        let p = pod("p").anti_affinity("app", "db", HOSTNAME_KEY).info();
        assert_eq!(run(&p, &s, "b").unwrap_err().reasons, [ANTI]);
        s.remove_node("b");
        assert!(s.hostnames_unique());
        assert_eq!(
            run(&p, &s, "a").unwrap_err().reasons,
            [ANTI],
            "per-node path"
        );
    }

    #[test]
    fn affinity_needs_a_match_except_for_the_first_of_a_group() {
        let mut s = cluster();
        let p = affinity_to("app", "web", "zone").info();
        assert!(run(&p, &s, "a").is_ok(), "first pod of a self-affine group");
        assert_eq!(
            run(&p, &s, "d").unwrap_err().reasons,
            [AFFINITY],
            "missing label"
        );
        s.add_pod(pod("w1").label("app", "web").info(), "c");
        assert!(run(&p, &s, "c").is_ok());
        assert_eq!(run(&p, &s, "a").unwrap_err().reasons, [AFFINITY]);
        let other = affinity_to("app", "cache", "zone").info();
        assert!(
            run(&other, &s, "a").is_err(),
            "no cache pod and not self-matching"
        );
    }

    #[test]
    fn preferred_terms_score_domains() {
        let mut s = cluster();
        s.add_pod(pod("db").label("app", "db").info(), "a");
        let p = pod("p")
            .affinity(|a| {
                a.pod_affinity = Some(PodAffinity {
                    preferred_during_scheduling_ignored_during_execution: Some(vec![
                        WeightedPodAffinityTerm {
                            weight: 10,
                            pod_affinity_term: PodAffinityTerm {
                                label_selector: Some(selector(&[("app", "db")])),
                                topology_key: "zone".into(),
                                ..Default::default()
                            },
                        },
                    ]),
                    ..Default::default()
                })
            })
            .info();
        let st = pre_score(&p, &s, 1).unwrap();
        let mut scores: Vec<i64> = ["a", "b", "c", "d"]
            .iter()
            .map(|n| score(s.node(n).unwrap(), &st))
            .collect();
        assert_eq!(scores, [10, 10, 0, 0]);
        normalize(&mut scores);
        assert_eq!(scores, [100, 100, 0, 0]);
        assert!(pre_score(&pod("q").info(), &s, 1).is_none());
    }
}
