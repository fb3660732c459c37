//! Upstream's `localStorageEviction` (LocalStorageCapacityIsolation, on by default):
//! whatever the node's free space, a pod goes at once when an emptyDir outgrows its
//! `sizeLimit`, when the pod's ephemeral storage outgrows its containers' summed
//! ephemeral-storage limits, or when a container's writable layer and logs outgrow its
//! own limit. Checked in that order, pod by pod, every pass before the node's
//! thresholds, with upstream's messages; a pass that evicts for this evicts for nothing
//! else, as upstream's `synchronize` returns early.

use k8s_openapi::api::core::v1::{Pod, PodSpec};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use cairn_semantics::quantity::canonical;

use super::candidates::signed;
use crate::pods::PodManager;
use crate::stats::PodTarget;
use crate::Agent;

/// Evicts every pod over one of its local storage limits; whether any went.
pub fn evict_over_limits(agent: &Agent, pods: &PodManager, targets: &[PodTarget]) -> bool {
    let ledger = agent.ledger.pods();
    let mut any = false;
    for t in targets {
        if agent.eviction.evicted.lock().contains(&t.uid) {
            continue;
        }
        let Some(pod) = ledger.get(&t.uid) else {
            continue;
        };
        let priority = pod.spec.as_ref().and_then(|s| s.priority).unwrap_or(0);
        if !super::candidates::evictable(pod, priority) {
            continue;
        }
        if let Some(message) = violation(pod, t) {
            tracing::info!(pod = %format!("{}/{}", t.namespace, t.name), %message, "evicting");
            agent.eviction.evicted.lock().insert(t.uid.clone());
            pods.evict(&t.uid, message);
            any = true;
        }
    }
    any
}

/// The first local storage limit `pod` is over, as upstream's eviction message.
pub fn violation(pod: &Pod, target: &PodTarget) -> Option<String> {
    let spec = pod.spec.as_ref()?;
    empty_dir(spec, target)
        .or_else(|| pod_limit(spec, target))
        .or_else(|| container_limit(spec, target))
}

fn quantity_bytes(q: &Quantity) -> i64 {
    cairn_semantics::quantity::value(q).unwrap_or(0)
}

/// Upstream's `emptyDirLimitEviction`: a volume's used bytes over its `sizeLimit`.
fn empty_dir(spec: &PodSpec, target: &PodTarget) -> Option<String> {
    spec.volumes.iter().flatten().find_map(|v| {
        let limit = v.empty_dir.as_ref()?.size_limit.as_ref()?;
        let bytes = quantity_bytes(limit);
        let used = target.volumes.iter().find(|s| s.name == v.name)?.used_bytes;
        (bytes > 0 && signed(used) > bytes).then(|| {
            format!(
                "Usage of EmptyDir volume {:?} exceeds the limit {:?}. ",
                v.name,
                canonical(limit)
            )
        })
    })
}

/// Upstream's `podEphemeralStorageLimitEviction`: the pod's ephemeral storage over
/// `PodLimits` (containers' limits summed, init containers' peak, overhead).
fn pod_limit(spec: &PodSpec, target: &PodTarget) -> Option<String> {
    let limit = cairn_semantics::resources::pod_limits(spec).ephemeral_storage;
    if limit <= 0 {
        return None;
    }
    let used = target.ephemeral_usage().map_or(0, |u| signed(u.bytes));
    if used <= limit {
        return None;
    }
    // Go's sum keeps the first limit's format.
    let printed = first_limit(spec).map_or_else(
        || cairn_semantics::quantity::print_binary(limit),
        |q| cairn_semantics::quantity::print_like(limit, q),
    );
    Some(format!(
        "Pod ephemeral local storage usage exceeds the total limit of containers {printed}. "
    ))
}

/// Upstream's `containerEphemeralStorageLimitEviction`: a container's writable layer and
/// logs over its own limit (one filesystem here, so the layer always counts).
fn container_limit(spec: &PodSpec, target: &PodTarget) -> Option<String> {
    target.containers.iter().find_map(|c| {
        let limit = spec
            .containers
            .iter()
            .find(|s| s.name == c.name)
            .and_then(ephemeral_limit)?;
        let bytes = quantity_bytes(limit);
        let used = signed(c.fs.as_ref()?.storage().0);
        (bytes != 0 && used > bytes).then(|| {
            format!(
                "Container {} exceeded its local ephemeral storage limit {:?}. ",
                c.name,
                canonical(limit)
            )
        })
    })
}

fn ephemeral_limit(c: &k8s_openapi::api::core::v1::Container) -> Option<&Quantity> {
    c.resources
        .as_ref()?
        .limits
        .as_ref()?
        .get("ephemeral-storage")
}

fn first_limit(spec: &PodSpec) -> Option<&Quantity> {
    spec.containers
        .iter()
        .chain(spec.init_containers.iter().flatten())
        .find_map(ephemeral_limit)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::stats::fs::{ContainerFs, VolumeFs};
    use crate::stats::ContainerTarget;
    use cairn_runtime::LayerUsage;
    use serde_json::json;
    use std::time::SystemTime;

    const MIB: u64 = 1 << 20;

    fn pod(spec: serde_json::Value) -> Pod {
        serde_json::from_value(json!({"metadata": {"name": "p"}, "spec": spec})).unwrap()
    }

    fn container(name: &str, layer: u64, logs: u64) -> ContainerTarget {
        ContainerTarget {
            name: name.into(),
            id: format!("id-{name}"),
            image: "busybox".into(),
            cgroup: format!("/pod/{name}"),
            started_at: None,
            fs: Some(ContainerFs {
                time: SystemTime::now(),
                rootfs: Some(LayerUsage {
                    bytes: layer,
                    inodes: 1,
                }),
                logs: Some((logs, 1)),
            }),
        }
    }

    fn volume(name: &str, used: u64) -> VolumeFs {
        VolumeFs {
            name: name.into(),
            time: SystemTime::now(),
            used_bytes: used,
            inodes_used: 1,
            filesystem: None,
            local_ephemeral: true,
        }
    }

    fn target(containers: Vec<ContainerTarget>, volumes: Vec<VolumeFs>) -> PodTarget {
        PodTarget {
            name: "p".into(),
            namespace: "default".into(),
            uid: "u".into(),
            cgroup: "/pod".into(),
            start_time: None,
            containers,
            volumes,
        }
    }

    fn limited(name: &str, limit: &str) -> serde_json::Value {
        json!({"name": name, "resources": {"limits": {"ephemeral-storage": limit}}})
    }

    #[test]
    fn an_empty_dir_over_its_size_limit_is_named_first() {
        let p = pod(json!({
            "containers": [limited("a", "64Mi")],
            "volumes": [{"name": "cache", "emptyDir": {"sizeLimit": "4096Ki"}}],
        }));
        let t = target(
            vec![container("a", 2 * MIB, 0)],
            vec![volume("cache", 5 * MIB)],
        );
        assert_eq!(
            violation(&p, &t).unwrap(),
            "Usage of EmptyDir volume \"cache\" exceeds the limit \"4Mi\". "
        );
        let within = target(vec![container("a", 0, 0)], vec![volume("cache", 4 * MIB)]);
        assert_eq!(violation(&p, &within), None, "at the limit is within it");
    }

    #[test]
    fn the_pod_total_counts_volumes_against_summed_limits() {
        let p = pod(json!({
            "containers": [limited("a", "2Mi"), limited("b", "2Mi"), {"name": "c"}],
            "volumes": [{"name": "shared", "emptyDir": {}}],
        }));
        let t = target(
            vec![container("a", MIB, 0), container("b", MIB, 0)],
            vec![volume("shared", 3 * MIB)],
        );
        assert_eq!(
            violation(&p, &t).unwrap(),
            "Pod ephemeral local storage usage exceeds the total limit of containers 4Mi. "
        );
        let decimal = pod(json!({"containers": [limited("a", "2M"), limited("b", "2M")]}));
        let t = target(vec![container("a", 5_000_000, 0)], vec![]);
        assert_eq!(
            violation(&decimal, &t).unwrap(),
            "Pod ephemeral local storage usage exceeds the total limit of containers 4M. "
        );
    }

    #[test]
    fn a_container_over_its_own_limit_counts_layer_and_logs() {
        // The pod's total (3 MiB) is within the summed 6 MiB; container a is not.
        let p = pod(json!({"containers": [limited("a", "1Mi"), limited("b", "5Mi")]}));
        let t = target(
            vec![container("a", MIB, MIB), container("b", MIB, 0)],
            vec![],
        );
        assert_eq!(
            violation(&p, &t).unwrap(),
            "Container a exceeded its local ephemeral storage limit \"1Mi\". "
        );
    }

    #[test]
    fn pods_without_limits_or_readings_are_left_alone() {
        let p = pod(json!({
            "containers": [{"name": "a"}],
            "volumes": [{"name": "cache", "emptyDir": {}}],
        }));
        let t = target(
            vec![container("a", 900 * MIB, 0)],
            vec![volume("cache", 900 * MIB)],
        );
        assert_eq!(violation(&p, &t), None);
        let unread = pod(json!({"containers": [limited("a", "1Mi")]}));
        let mut c = container("a", 0, 0);
        c.fs = None;
        assert_eq!(violation(&unread, &target(vec![c], vec![])), None);
    }
}
