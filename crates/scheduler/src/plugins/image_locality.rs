//! ImageLocality: nodes that already have the pod's images score higher, scaled by how
//! many nodes have them (so one node holding an image does not attract every pod).

use crate::pod_info::PodInfo;
use crate::snapshot::{NodeInfo, Snapshot};
use crate::verdict::MAX_NODE_SCORE;

const MB: i64 = 1024 * 1024;
const MIN_THRESHOLD: i64 = 23 * MB;
const MAX_CONTAINER_THRESHOLD: i64 = 1000 * MB;

pub fn score(pod: &PodInfo, node: &NodeInfo, snap: &Snapshot) -> i64 {
    let total = snap.num_nodes().max(1) as f64;
    let sum: i64 = pod
        .images
        .iter()
        .filter_map(|img| {
            let size = node.images.get(img)?;
            let spread = snap.image_node_count(img) as f64 / total;
            Some((*size as f64 * spread) as i64)
        })
        .sum();
    let max = MAX_CONTAINER_THRESHOLD * pod.images.len().max(1) as i64;
    let clamped = sum.clamp(MIN_THRESHOLD, max);
    MAX_NODE_SCORE * (clamped - MIN_THRESHOLD) / (max - MIN_THRESHOLD)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{node, pod};
    use k8s_openapi::api::core::v1::ContainerImage;

    #[test]
    fn image_present_scores_by_size_and_spread() {
        let mut s = Snapshot::default();
        let mut with = node("a", "1", "1Gi", &[]);
        with.status.as_mut().unwrap().images = Some(vec![ContainerImage {
            names: Some(vec!["docker.io/library/busybox:latest".into()]),
            size_bytes: Some(523 * MB),
        }]);
        s.upsert_node(&with);
        s.upsert_node(&node("b", "1", "1Gi", &[]));
        let p = pod("p").info();
        // 523 MiB × 1/2 nodes = 261 MiB → 100 × (261-23)/(1000-23) = 24.
        assert_eq!(score(&p, s.node("a").unwrap(), &s), 24);
        assert_eq!(score(&p, s.node("b").unwrap(), &s), 0);
    }
}
