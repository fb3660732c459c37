//! TaintToleration: NoSchedule/NoExecute taints filter, PreferNoSchedule taints score.

use cairn_semantics::taints::{first_untolerated, tolerated_by};
use k8s_openapi::api::core::v1::Toleration;

use crate::node_info::NodeInfo;
use crate::plugins::default_normalize;
use crate::pod_info::PodInfo;
use crate::verdict::Unfit;

pub fn filter(pod: &PodInfo, node: &NodeInfo) -> Result<(), Unfit> {
    match first_untolerated(&node.taints, &pod.tolerations, &["NoSchedule", "NoExecute"]) {
        None => Ok(()),
        Some(t) => Err(Unfit::unresolvable(format!(
            "node(s) had untolerated taint {{{}: {}}}",
            t.key,
            t.value.as_deref().unwrap_or("")
        ))),
    }
}

/// The number of PreferNoSchedule taints the pod does not tolerate (fewer is better).
pub fn score(pod: &PodInfo, node: &NodeInfo) -> i64 {
    let tolerations: Vec<Toleration> = pod
        .tolerations
        .iter()
        .filter(|t| {
            matches!(
                t.effect.as_deref(),
                None | Some("") | Some("PreferNoSchedule")
            )
        })
        .cloned()
        .collect();
    node.taints
        .iter()
        .filter(|t| t.effect == "PreferNoSchedule" && !tolerated_by(&tolerations, t))
        .count() as i64
}

pub fn normalize(scores: &mut [i64]) {
    default_normalize(scores, true);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{node, pod, taint};

    #[test]
    fn filter_and_score() {
        let n = NodeInfo::from_node(&taint(node("n", "1", "1Gi", &[]), "gpu", "NoSchedule"));
        let err = filter(&pod("p").info(), &n).unwrap_err();
        assert_eq!(err.reasons, ["node(s) had untolerated taint {gpu: }"]);
        assert!(filter(&pod("p").tolerate("gpu", "NoSchedule").info(), &n).is_ok());
        let soft = NodeInfo::from_node(&taint(node("m", "1", "1Gi", &[]), "x", "PreferNoSchedule"));
        assert!(filter(&pod("p").info(), &soft).is_ok());
        let mut scores = [score(&pod("p").info(), &soft), score(&pod("p").info(), &n)];
        assert_eq!(scores, [1, 0]);
        normalize(&mut scores);
        assert_eq!(scores, [0, 100]);
    }
}
