//! PodTopologySpread: DoNotSchedule constraints filter by skew against the least
//! loaded domain; ScheduleAnyway constraints (or the system defaults: hostname skew 3,
//! zone skew 5) score emptier domains higher.

use std::collections::{HashMap, HashSet};

use cairn_semantics::taints::first_untolerated;

use crate::domain_cache::DomainKey;
use crate::pod_info::{PodInfo, SpreadConstraint, SpreadSelector, HOSTNAME_KEY, ZONE_KEY};
use crate::snapshot::{NodeInfo, Snapshot};
use crate::verdict::{Unfit, MAX_NODE_SCORE};

pub const NOT_MATCH: &str = "node(s) didn't match pod topology spread constraints";
pub const MISSING_LABEL: &str =
    "node(s) didn't match pod topology spread constraints (missing required label)";

fn has_all_keys(node: &NodeInfo, cs: &[SpreadConstraint]) -> bool {
    cs.iter().all(|c| node.labels.contains_key(&c.topology_key))
}

/// nodeAffinityPolicy / nodeTaintsPolicy: whether the node's pods count at all.
fn included(c: &SpreadConstraint, pod: &PodInfo, node: &NodeInfo) -> bool {
    (!c.honor_node_affinity || pod.fits_node_selection(&node.name, &node.labels))
        && (!c.honor_taints
            || first_untolerated(&node.taints, &pod.tolerations, &["NoSchedule", "NoExecute"])
                .is_none())
}

fn count_matching(c: &SpreadConstraint, pod: &PodInfo, node: &NodeInfo) -> i64 {
    node.pods
        .iter()
        .filter(|p| c.counts(&pod.namespace, p))
        .count() as i64
}

#[derive(Debug)]
pub struct FilterState {
    constraints: Vec<SpreadConstraint>,
    /// Per constraint: domain value → matching pods; None for the hostname key, whose
    /// domain is the node itself and is counted when that node is filtered.
    counts: Vec<Option<HashMap<String, i64>>>,
    /// Per constraint: the global minimum the skew is measured against.
    min_match: Vec<i64>,
    /// Per constraint: 1 if the pod counts itself.
    self_match: Vec<i64>,
}

/// Counts per domain for a non-hostname key. Domains are few, so the values are found
/// in a short list borrowed from the snapshot and only owned at the end.
fn domain_counts<'a>(
    c: &SpreadConstraint,
    pod: &PodInfo,
    eligible: &[&'a NodeInfo],
) -> HashMap<String, i64> {
    let mut found: Vec<(&'a str, i64)> = Vec::new();
    for node in eligible.iter().filter(|n| included(c, pod, n)) {
        let v = node.labels.get(&c.topology_key).map_or("", String::as_str);
        let n = if node.pods.is_empty() {
            0
        } else {
            count_matching(c, pod, node)
        };
        match found.iter_mut().find(|(d, _)| *d == v) {
            Some((_, count)) => *count += n,
            None => found.push((v, n)),
        }
    }
    found.into_iter().map(|(d, n)| (d.to_string(), n)).collect()
}

/// The hostname key's global minimum: stops at the first eligible node with none
/// (nothing is lower), unless minDomains needs the number of domains.
fn hostname_min(c: &SpreadConstraint, pod: &PodInfo, eligible: &[&NodeInfo]) -> i64 {
    let mut min = i64::MAX;
    let mut domains = 0i64;
    for node in eligible.iter().filter(|n| included(c, pod, n)) {
        domains += 1;
        min = min.min(count_matching(c, pod, node));
        if min == 0 && c.min_domains.is_none() {
            return 0;
        }
    }
    if c.min_domains.is_some_and(|m| domains < i64::from(m)) || min == i64::MAX {
        0
    } else {
        min
    }
}

fn min_match(domains: &HashMap<String, i64>, c: &SpreadConstraint) -> i64 {
    if let Some(min_domains) = c.min_domains {
        if (domains.len() as i64) < i64::from(min_domains) {
            return 0;
        }
    }
    domains.values().copied().min().unwrap_or(0)
}

/// Whether a constraint's counts may come from the snapshot's domain cache: every
/// node carries the keys and no pod-specific node inclusion policy applies.
fn cacheable(c: &SpreadConstraint, pod: &PodInfo, all_keyed: bool) -> bool {
    let selects_nodes = !pod.node_selector.is_empty() || pod.required_node_affinity.is_some();
    all_keyed && !c.honor_taints && !(c.honor_node_affinity && selects_nodes)
}

fn cache_key(c: &SpreadConstraint, pod: &PodInfo) -> DomainKey {
    DomainKey {
        namespace: pod.namespace.clone(),
        selector: c.selector.clone(),
        topology_key: c.topology_key.clone(),
    }
}

pub fn pre_filter(pod: &PodInfo, snap: &Snapshot) -> Option<FilterState> {
    let constraints: Vec<SpreadConstraint> =
        pod.spread.iter().filter(|c| c.hard).cloned().collect();
    if constraints.is_empty() {
        return None;
    }
    let all_keyed = constraints
        .iter()
        .all(|c| snap.all_nodes_have(&c.topology_key));
    let mut eligible: Vec<&NodeInfo> = Vec::new();
    if !constraints.iter().all(|c| cacheable(c, pod, all_keyed)) {
        eligible = snap
            .nodes()
            .iter()
            .filter(|n| has_all_keys(n, &constraints))
            .collect();
    }
    let mut counts = Vec::with_capacity(constraints.len());
    let mut mins = Vec::with_capacity(constraints.len());
    for c in &constraints {
        let cached = cacheable(c, pod, all_keyed);
        let hostname = c.topology_key == HOSTNAME_KEY;
        if cached {
            let key = cache_key(c, pod);
            let (d, min) = snap.domains.with(&key, snap.nodes(), |d| {
                let min = min_match(d, c);
                (if hostname { None } else { Some(d.clone()) }, min)
            });
            mins.push(min);
            counts.push(d);
        } else if hostname {
            mins.push(hostname_min(c, pod, &eligible));
            counts.push(None);
        } else {
            let d = domain_counts(c, pod, &eligible);
            mins.push(min_match(&d, c));
            counts.push(Some(d));
        }
    }
    let self_match = constraints
        .iter()
        .map(|c| match &c.selector {
            SpreadSelector::Labels(sel) => i64::from(sel.matches(&pod.labels)),
            SpreadSelector::SameOwner(_) => 1,
        })
        .collect();
    Some(FilterState {
        constraints,
        counts,
        min_match: mins,
        self_match,
    })
}

pub fn filter(pod: &PodInfo, node: &NodeInfo, s: &FilterState) -> Result<(), Unfit> {
    for (i, c) in s.constraints.iter().enumerate() {
        let Some(v) = node.labels.get(&c.topology_key) else {
            return Err(Unfit::unresolvable(MISSING_LABEL));
        };
        let self_match = s.self_match[i];
        let existing = match &s.counts[i] {
            Some(domains) => domains.get(v).copied().unwrap_or(0),
            None => count_matching(c, pod, node),
        };
        if existing + self_match - s.min_match[i] > i64::from(c.max_skew) {
            return Err(Unfit::new(NOT_MATCH));
        }
    }
    Ok(())
}

#[derive(Debug)]
pub struct ScoreState {
    constraints: Vec<SpreadConstraint>,
    pair_counts: Vec<HashMap<String, i64>>,
    weights: Vec<f64>,
    ignored: HashSet<String>,
}

/// The constraints scoring uses: the pod's ScheduleAnyway ones, or, for a pod with no
/// constraints at all that a controller owns, the system defaults over its siblings.
fn soft_constraints(pod: &PodInfo, system_defaults: bool) -> (Vec<SpreadConstraint>, bool) {
    if !pod.spread.is_empty() {
        return (
            pod.spread.iter().filter(|c| !c.hard).cloned().collect(),
            false,
        );
    }
    let Some(owner) = pod.owner_uid.clone().filter(|_| system_defaults) else {
        return (Vec::new(), false);
    };
    let make = |key: &str, skew| SpreadConstraint {
        max_skew: skew,
        topology_key: key.into(),
        hard: false,
        selector: SpreadSelector::SameOwner(owner.clone()),
        min_domains: None,
        honor_node_affinity: true,
        honor_taints: false,
    };
    (vec![make(HOSTNAME_KEY, 3), make(ZONE_KEY, 5)], true)
}

pub fn pre_score(
    pod: &PodInfo,
    snap: &Snapshot,
    feasible: &[&NodeInfo],
    system_defaults: bool,
) -> Option<ScoreState> {
    let (constraints, defaulted) = soft_constraints(pod, system_defaults);
    if constraints.is_empty() {
        return None;
    }
    let mut pair_counts = vec![HashMap::new(); constraints.len()];
    let mut ignored = HashSet::new();
    for node in feasible {
        if !defaulted && !has_all_keys(node, &constraints) {
            ignored.insert(node.name.clone());
            continue;
        }
        for (i, c) in constraints
            .iter()
            .enumerate()
            .filter(|(_, c)| c.topology_key != HOSTNAME_KEY)
        {
            let v = node
                .labels
                .get(&c.topology_key)
                .cloned()
                .unwrap_or_default();
            pair_counts[i].entry(v).or_insert(0i64);
        }
    }
    let weights = constraints
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let size = if c.topology_key == HOSTNAME_KEY {
                feasible.len() - ignored.len()
            } else {
                pair_counts[i].len()
            };
            ((size + 2) as f64).ln()
        })
        .collect();
    for node in snap.nodes() {
        if !defaulted && !has_all_keys(node, &constraints) {
            continue;
        }
        for (i, c) in constraints.iter().enumerate() {
            if c.topology_key == HOSTNAME_KEY || !included(c, pod, node) {
                continue;
            }
            let v = node
                .labels
                .get(&c.topology_key)
                .map(String::as_str)
                .unwrap_or("");
            if let Some(count) = pair_counts[i].get_mut(v) {
                *count += count_matching(c, pod, node);
            }
        }
    }
    Some(ScoreState {
        constraints,
        pair_counts,
        weights,
        ignored,
    })
}

pub fn score(pod: &PodInfo, node: &NodeInfo, s: &ScoreState) -> i64 {
    if s.ignored.contains(&node.name) {
        return 0;
    }
    let mut total = 0.0;
    for (i, c) in s.constraints.iter().enumerate() {
        let Some(v) = node.labels.get(&c.topology_key) else {
            continue;
        };
        let count = if c.topology_key == HOSTNAME_KEY {
            count_matching(c, pod, node)
        } else {
            s.pair_counts[i].get(v).copied().unwrap_or(0)
        };
        total += count as f64 * s.weights[i] + f64::from(c.max_skew - 1);
    }
    total.round() as i64
}

/// Fewer matching pods is better: inverted against the range; ignored nodes get 0.
pub fn normalize(scores: &mut [i64], nodes: &[&NodeInfo], s: &ScoreState) {
    let valid = |i: usize| !s.ignored.contains(&nodes[i].name);
    let (mut min, mut max) = (i64::MAX, 0i64);
    for (_, v) in scores.iter().enumerate().filter(|(i, _)| valid(*i)) {
        min = min.min(*v);
        max = max.max(*v);
    }
    for (i, v) in scores.iter_mut().enumerate() {
        *v = if !valid(i) {
            0
        } else if max == 0 {
            MAX_NODE_SCORE
        } else {
            MAX_NODE_SCORE * (max + min - *v) / max
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{node, pod};

    fn zones(pods: &[(&str, &str)]) -> Snapshot {
        let mut s = Snapshot::default();
        s.upsert_node(&node("a", "4", "8Gi", &[("zone", "z1")]));
        s.upsert_node(&node("b", "4", "8Gi", &[("zone", "z2")]));
        s.upsert_node(&node("c", "4", "8Gi", &[]));
        for (name, n) in pods {
            s.add_pod(pod(name).label("app", "web").info(), n);
        }
        s
    }

    fn run(p: &PodInfo, s: &Snapshot, n: &str) -> Result<(), Unfit> {
        filter(p, s.node(n).unwrap(), &pre_filter(p, s).unwrap())
    }

    #[test]
    fn max_skew_against_the_emptiest_domain() {
        let s = zones(&[("w1", "a")]);
        let p = pod("p")
            .label("app", "web")
            .spread("zone", 1, true, "app", "web")
            .info();
        assert_eq!(
            run(&p, &s, "a").unwrap_err().reasons,
            [NOT_MATCH],
            "skew would be 2"
        );
        assert!(run(&p, &s, "b").is_ok());
        assert_eq!(run(&p, &s, "c").unwrap_err().reasons, [MISSING_LABEL]);
        let loose = pod("p")
            .label("app", "web")
            .spread("zone", 2, true, "app", "web")
            .info();
        assert!(run(&loose, &s, "a").is_ok());
    }

    #[test]
    fn empty_domains_and_min_domains() {
        let s = zones(&[]);
        let p = pod("p")
            .label("app", "web")
            .spread("zone", 1, true, "app", "web")
            .info();
        assert!(run(&p, &s, "a").is_ok(), "all domains empty");
        // A pod not matching its own selector adds nothing to the skew.
        let other = pod("p").spread("zone", 1, true, "app", "web").info();
        assert!(run(&other, &zones(&[("w1", "a")]), "a").is_ok());
        // minDomains 3 with 2 domains: the global minimum counts as 0.
        let strict = pod("p")
            .label("app", "web")
            .spread("zone", 1, true, "app", "web")
            .with(|p| {
                p.spec
                    .as_mut()
                    .unwrap()
                    .topology_spread_constraints
                    .as_mut()
                    .unwrap()[0]
                    .min_domains = Some(3)
            })
            .info();
        let s2 = zones(&[("w1", "a"), ("w2", "b")]);
        assert!(run(&strict, &s2, "a").is_err(), "1 + 1 - 0 > 1");
        let relaxed = pod("p")
            .label("app", "web")
            .spread("zone", 1, true, "app", "web")
            .info();
        assert!(run(&relaxed, &s2, "a").is_ok(), "1 + 1 - 1 <= 1");
    }

    #[test]
    fn soft_constraints_prefer_emptier_domains() {
        let s = zones(&[("w1", "a"), ("w2", "a")]);
        let p = pod("p")
            .label("app", "web")
            .spread("zone", 1, false, "app", "web")
            .info();
        let nodes: Vec<&NodeInfo> = ["a", "b", "c"].iter().map(|n| s.node(n).unwrap()).collect();
        let st = pre_score(&p, &s, &nodes, true).unwrap();
        let mut scores: Vec<i64> = nodes.iter().map(|n| score(&p, n, &st)).collect();
        normalize(&mut scores, &nodes, &st);
        assert!(scores[1] > scores[0], "{scores:?}");
        assert_eq!(scores[2], 0, "node without the key is ignored");
    }
}
