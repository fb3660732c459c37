//! NodePorts: a hostPort already used on the node (same protocol, overlapping address).

use crate::node_info::NodeInfo;
use crate::pod_info::PodInfo;
use crate::verdict::Unfit;

pub fn filter(pod: &PodInfo, node: &NodeInfo) -> Result<(), Unfit> {
    let clash = pod
        .host_ports
        .iter()
        .any(|want| node.used_ports.iter().any(|used| used.conflicts(want)));
    if clash {
        Err(Unfit::new(
            "node(s) didn't have free ports for the requested pod ports",
        ))
    } else {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::snapshot::Snapshot;
    use crate::testing::{node, pod};

    #[test]
    fn used_host_ports_conflict() {
        let mut s = Snapshot::default();
        s.upsert_node(&node("n", "1", "1Gi", &[]));
        s.add_pod(pod("a").host_port(8080).info(), "n");
        let n = s.node("n").unwrap();
        assert!(filter(&pod("b").host_port(8080).info(), n).is_err());
        assert!(filter(&pod("c").host_port(8081).info(), n).is_ok());
        s.remove_pod("uid-a");
        assert!(filter(&pod("b").host_port(8080).info(), s.node("n").unwrap()).is_ok());
    }
}
