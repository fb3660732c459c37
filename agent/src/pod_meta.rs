//! Facts read off a pod that several parts of the agent need — its uid, whether it is a
//! static or mirror pod, its requests, its cgroup parent. A leaf: it imports no other
//! module of the agent but the quantity parser, so the pod worker, the node loop, the QoS
//! manager and the static-pod source can all use it without depending on each other.

use k8s_openapi::api::core::v1::{Container, EphemeralContainer, Pod};

pub const MIRROR_ANNOTATION: &str = "kubernetes.io/config.mirror";
pub const SOURCE_ANNOTATION: &str = "kubernetes.io/config.source";

pub fn uid_of(pod: &Pod) -> String {
    pod.metadata.uid.clone().unwrap_or_default()
}

/// The name the API knows the pod by (a static pod's is `<name>-<node>`, set at load).
pub fn api_name(pod: &Pod) -> String {
    pod.metadata.name.clone().unwrap_or_default()
}

pub fn is_mirror(pod: &Pod) -> bool {
    pod.metadata
        .annotations
        .as_ref()
        .is_some_and(|a| a.contains_key(MIRROR_ANNOTATION))
}

pub fn is_static(pod: &Pod) -> bool {
    pod.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(SOURCE_ANNOTATION))
        .is_some_and(|s| s == "file")
}

/// The pod's cpu (millicores) and memory (bytes) requests, limits standing in for unset ones.
pub fn requests(pod: &Pod) -> (u64, i64) {
    let mut cpu = 0;
    let mut mem = 0;
    for c in pod.spec.iter().flat_map(|s| s.containers.iter()) {
        let r = c.resources.as_ref();
        let get = |name: &str| {
            r.and_then(|r| {
                r.requests
                    .as_ref()
                    .and_then(|m| m.get(name))
                    .or(r.limits.as_ref().and_then(|m| m.get(name)))
            })
            .map(|q| q.0.clone())
        };
        cpu += get("cpu")
            .and_then(|q| crate::quantity::millicores(&q))
            .unwrap_or(0);
        mem += get("memory")
            .and_then(|q| crate::quantity::bytes(&q))
            .unwrap_or(0);
    }
    (cpu, mem)
}

/// The pod's QoS class name (`Guaranteed`, `Burstable`, `BestEffort`).
pub fn qos_class(pod: &Pod) -> &'static str {
    match &pod.spec {
        Some(spec) => cairn_semantics::qos::qos_class(spec).as_str(),
        None => "BestEffort",
    }
}

/// The pod's cgroup under `<cgroup_root>/kubepods`, by QoS class.
pub fn cgroup_parent(cgroup_root: &str, pod: &Pod) -> String {
    let uid = uid_of(pod);
    let root = cgroup_root.trim_end_matches('/');
    match qos_class(pod) {
        "Guaranteed" => format!("{root}/kubepods/pod{uid}"),
        "Burstable" => format!("{root}/kubepods/burstable/pod{uid}"),
        _ => format!("{root}/kubepods/besteffort/pod{uid}"),
    }
}

/// An ephemeral container as a regular one: the same fields, minus the target.
pub fn ephemeral_as_container(ec: &EphemeralContainer) -> Option<Container> {
    let mut v = serde_json::to_value(ec).ok()?;
    if let Some(m) = v.as_object_mut() {
        m.remove("targetContainerName");
    }
    serde_json::from_value(v).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn converts_without_the_target() {
        let ec: EphemeralContainer = serde_json::from_value(serde_json::json!({
            "name": "debugger",
            "image": "busybox",
            "command": ["sh"],
            "stdin": true,
            "tty": true,
            "targetContainerName": "web",
        }))
        .unwrap();
        let c = ephemeral_as_container(&ec).unwrap();
        assert_eq!(c.name, "debugger");
        assert_eq!(c.image.as_deref(), Some("busybox"));
        assert_eq!(c.tty, Some(true));
    }
}
