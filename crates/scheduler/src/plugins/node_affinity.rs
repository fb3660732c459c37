//! NodeAffinity: nodeSelector and required terms filter, preferred terms score.

use crate::node_info::NodeInfo;
use crate::plugins::default_normalize;
use crate::pod_info::PodInfo;
use crate::verdict::Unfit;

pub const MISMATCH: &str = "node(s) didn't match Pod's node affinity/selector";

pub fn filter(pod: &PodInfo, node: &NodeInfo) -> Result<(), Unfit> {
    if pod.fits_node_selection(&node.name, &node.labels) {
        Ok(())
    } else {
        Err(Unfit::unresolvable(MISMATCH))
    }
}

/// Sum of the weights of the preferred terms the node matches.
pub fn score(pod: &PodInfo, node: &NodeInfo) -> i64 {
    pod.preferred_node_affinity
        .iter()
        .filter(|(_, t)| t.matches(&node.name, &node.labels))
        .map(|(w, _)| *w)
        .sum()
}

pub fn normalize(scores: &mut [i64]) {
    default_normalize(scores, false);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{node, pod};
    use k8s_openapi::api::core::v1::{
        NodeAffinity, NodeSelector, NodeSelectorRequirement, NodeSelectorTerm,
        PreferredSchedulingTerm,
    };

    fn term(key: &str, op: &str, values: &[&str]) -> NodeSelectorTerm {
        NodeSelectorTerm {
            match_expressions: Some(vec![NodeSelectorRequirement {
                key: key.into(),
                operator: op.into(),
                values: Some(values.iter().map(|s| s.to_string()).collect()),
            }]),
            match_fields: None,
        }
    }

    #[test]
    fn selector_and_required_terms() {
        let a = NodeInfo::from_node(&node("a", "1", "1Gi", &[("zone", "z1")]));
        let b = NodeInfo::from_node(&node("b", "1", "1Gi", &[("zone", "z2")]));
        let p = pod("p").node_selector("zone", "z1").info();
        assert!(filter(&p, &a).is_ok());
        assert_eq!(filter(&p, &b).unwrap_err().reasons, [MISMATCH]);
        let req = pod("q")
            .affinity(|a| {
                a.node_affinity = Some(NodeAffinity {
                    required_during_scheduling_ignored_during_execution: Some(NodeSelector {
                        node_selector_terms: vec![term("zone", "NotIn", &["z1"])],
                    }),
                    ..Default::default()
                })
            })
            .info();
        assert!(filter(&req, &a).is_err() && filter(&req, &b).is_ok());
    }

    #[test]
    fn preferred_terms_score_by_weight() {
        let a = NodeInfo::from_node(&node("a", "1", "1Gi", &[("zone", "z1")]));
        let b = NodeInfo::from_node(&node("b", "1", "1Gi", &[("zone", "z2")]));
        let p = pod("p")
            .affinity(|a| {
                a.node_affinity = Some(NodeAffinity {
                    preferred_during_scheduling_ignored_during_execution: Some(vec![
                        PreferredSchedulingTerm {
                            weight: 30,
                            preference: term("zone", "In", &["z2"]),
                        },
                    ]),
                    ..Default::default()
                })
            })
            .info();
        let mut s = [score(&p, &a), score(&p, &b)];
        assert_eq!(s, [0, 30]);
        normalize(&mut s);
        assert_eq!(s, [0, 100]);
    }
}
