//! What other objects charge (upstream's service, claim and object-count evaluators),
//! and the standard quota resource names validation accepts.

use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Service};

use super::usage::Usage;
use crate::quantity;

/// Resource names a quota may name without a `/` (upstream `standardQuotaResources`).
const STANDARD: [&str; 19] = [
    "cpu",
    "memory",
    "ephemeral-storage",
    "requests.cpu",
    "requests.memory",
    "requests.storage",
    "requests.ephemeral-storage",
    "limits.cpu",
    "limits.memory",
    "limits.ephemeral-storage",
    "pods",
    "services",
    "replicationcontrollers",
    "resourcequotas",
    "secrets",
    "persistentvolumeclaims",
    "configmaps",
    "services.nodeports",
    "services.loadbalancers",
];

/// Counted resources that must be whole numbers.
const INTEGER: [&str; 9] = [
    "pods",
    "services",
    "replicationcontrollers",
    "resourcequotas",
    "secrets",
    "persistentvolumeclaims",
    "configmaps",
    "services.nodeports",
    "services.loadbalancers",
];

const STORAGE_CLASS_SUFFIX: &str = ".storageclass.storage.k8s.io/";

/// Whether a name without a `/` is a standard quota resource (hugepages included).
pub fn is_standard_quota_resource(name: &str) -> bool {
    STANDARD.contains(&name)
        || name.starts_with("hugepages-")
        || name.starts_with("requests.hugepages-")
}

/// Whether amounts of `name` must be whole numbers.
pub fn is_integer_resource(name: &str) -> bool {
    INTEGER.contains(&name) || name.starts_with("count/")
}

/// `count/<plural>` for the core group, `count/<plural>.<group>` otherwise.
pub fn count_name(group: &str, plural: &str) -> String {
    if group.is_empty() {
        format!("count/{plural}")
    } else {
        format!("count/{plural}.{group}")
    }
}

/// The legacy count name of core kinds quotas counted before `count/` existed.
pub fn legacy_count_name(group: &str, plural: &str) -> Option<&'static str> {
    if !group.is_empty() {
        return None;
    }
    INTEGER[..7].iter().copied().find(|n| *n == plural)
}

/// What any object charges: its `count/` name and, for core kinds, its legacy name.
pub fn object_usage(group: &str, plural: &str) -> Usage {
    let mut u = Usage::default();
    u.add_units(&count_name(group, plural), 1);
    if let Some(legacy) = legacy_count_name(group, plural) {
        u.add_units(legacy, 1);
    }
    u
}

/// A Service: one `services`, its node ports and whether it is a load balancer.
pub fn service_usage(svc: &Service) -> Usage {
    let mut u = object_usage("", "services");
    let spec = svc.spec.clone().unwrap_or_default();
    let ports = spec.ports.unwrap_or_default();
    match spec.type_.as_deref() {
        Some("NodePort") => u.add_units("services.nodeports", ports.len() as i64),
        Some("LoadBalancer") => {
            u.add_units("services.loadbalancers", 1);
            let node_ports = if spec.allocate_load_balancer_node_ports == Some(false) {
                ports
                    .iter()
                    .filter(|p| p.node_port.is_some_and(|n| n != 0))
                    .count()
            } else {
                ports.len()
            };
            u.add_units("services.nodeports", node_ports as i64);
        }
        _ => {}
    }
    u
}

/// A claim: one `persistentvolumeclaims` and its storage, in total and per class.
pub fn claim_usage(pvc: &PersistentVolumeClaim) -> Usage {
    let mut u = object_usage("", "persistentvolumeclaims");
    let spec = pvc.spec.clone().unwrap_or_default();
    let class = spec.storage_class_name.clone().or_else(|| {
        pvc.metadata
            .annotations
            .as_ref()?
            .get("volume.beta.kubernetes.io/storage-class")
            .cloned()
    });
    if let Some(class) = class.as_deref().filter(|c| !c.is_empty()) {
        u.add_units(
            &format!("{class}{STORAGE_CLASS_SUFFIX}persistentvolumeclaims"),
            1,
        );
    }
    let requested = spec
        .resources
        .and_then(|r| r.requests)
        .and_then(|r| r.get("storage").cloned());
    // An expansion in progress is charged at the larger of request and allocation.
    let allocated = pvc
        .status
        .as_ref()
        .and_then(|s| s.allocated_resources.as_ref())
        .and_then(|a| a.get("storage").cloned());
    let bytes = [requested, allocated]
        .iter()
        .flatten()
        .filter_map(|q| quantity::value(q).ok())
        .max();
    if let Some(bytes) = bytes {
        let milli = i128::from(bytes) * 1000;
        u.add_to("requests.storage", milli);
        if let Some(class) = class.as_deref().filter(|c| !c.is_empty()) {
            u.add_to(
                &format!("{class}{STORAGE_CLASS_SUFFIX}requests.storage"),
                milli,
            );
        }
    }
    u
}
