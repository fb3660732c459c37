//! NodeUnschedulable and NodeName.

use k8s_openapi::api::core::v1::Taint;

use crate::node_info::NodeInfo;
use crate::pod_info::PodInfo;
use crate::verdict::Unfit;

pub const UNSCHEDULABLE_TAINT: &str = "node.kubernetes.io/unschedulable";

/// A cordoned node takes only pods tolerating its `unschedulable:NoSchedule` taint.
pub fn unschedulable(pod: &PodInfo, node: &NodeInfo) -> Result<(), Unfit> {
    if !node.unschedulable {
        return Ok(());
    }
    let taint = Taint {
        key: UNSCHEDULABLE_TAINT.into(),
        effect: "NoSchedule".into(),
        value: None,
        time_added: None,
    };
    if cairn_semantics::taints::tolerated_by(&pod.tolerations, &taint) {
        return Ok(());
    }
    Err(Unfit::unresolvable("node(s) were unschedulable"))
}

pub fn node_name(pod: &PodInfo, node: &NodeInfo) -> Result<(), Unfit> {
    match &pod.node_name {
        Some(n) if *n != node.name => Err(Unfit::unresolvable(
            "node(s) didn't match the requested node name",
        )),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{node, pod};

    #[test]
    fn cordoned_nodes_refuse_unless_tolerated() {
        let mut n = NodeInfo::from_node(&node("n", "1", "1Gi", &[]));
        assert!(unschedulable(&pod("p").info(), &n).is_ok());
        n.unschedulable = true;
        let err = unschedulable(&pod("p").info(), &n).unwrap_err();
        assert_eq!(err.reasons, ["node(s) were unschedulable"]);
        let tolerant = pod("p").tolerate(UNSCHEDULABLE_TAINT, "NoSchedule").info();
        assert!(unschedulable(&tolerant, &n).is_ok());
    }
}
