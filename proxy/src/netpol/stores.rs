//! The API objects policy is computed from, followed by reflectors, and the node's
//! desired state from them.

use std::collections::BTreeMap;

use cairn_netpol::nft::Desired;
use cairn_netpol::{for_node, Cluster, CompiledPolicy, Namespace, Pod, PodKey, PodPolicy};
use ipnetwork::IpNetwork;
use k8s_openapi::api::core::v1::{
    Container, Namespace as K8sNamespace, Node, Pod as K8sPod, PodSpec, PodStatus,
};
use k8s_openapi::api::networking::v1::NetworkPolicy;
use kube::runtime::reflector::Store;
use tracing::warn;

use crate::follow::{trim_meta, Trim};

/// The stores the policy is computed from: policies, pods, namespaces, and this node
/// (its pod ranges, for the guard).
pub(super) struct Stores {
    pub(super) policies: Store<NetworkPolicy>,
    pub(super) pods: Store<K8sPod>,
    pub(super) namespaces: Store<K8sNamespace>,
    pub(super) node: Store<Node>,
}

impl Trim for K8sPod {
    /// Keeps what `cairn_netpol::Pod::from_k8s` reads: labels, node, host network, the
    /// containers' ports (named ports), phase and addresses.
    fn trim(&mut self) {
        trim_meta(&mut self.metadata);
        if let Some(spec) = self.spec.as_mut() {
            let containers = std::mem::take(&mut spec.containers);
            *spec = PodSpec {
                node_name: spec.node_name.take(),
                host_network: spec.host_network,
                containers: containers
                    .into_iter()
                    .map(|c| Container {
                        name: c.name,
                        ports: c.ports,
                        ..Container::default()
                    })
                    .collect(),
                ..PodSpec::default()
            };
        }
        if let Some(status) = self.status.as_mut() {
            *status = PodStatus {
                phase: status.phase.take(),
                pod_ip: status.pod_ip.take(),
                pod_ips: status.pod_ips.take(),
                ..PodStatus::default()
            };
        }
    }
}

impl Trim for Node {
    /// Keeps the spec (its pod ranges); the status holds the node's image list.
    fn trim(&mut self) {
        trim_meta(&mut self.metadata);
        self.status = None;
    }
}

impl Trim for K8sNamespace {
    fn trim(&mut self) {
        trim_meta(&mut self.metadata);
    }
}

impl Trim for NetworkPolicy {
    fn trim(&mut self) {
        trim_meta(&mut self.metadata);
    }
}

impl Stores {
    /// The node's pods' policies and desired state from what the stores hold now. A policy that cannot be
    /// read (the API refuses those) is left out and logged.
    pub(super) fn desired(&self, node: &str) -> (BTreeMap<PodKey, PodPolicy>, Desired) {
        let mut policies: Vec<CompiledPolicy> = self
            .policies
            .state()
            .iter()
            .filter_map(|p| match CompiledPolicy::compile(p) {
                Ok(c) => Some(c),
                Err(e) => {
                    warn!(error = %e, "NetworkPolicy left out");
                    None
                }
            })
            .collect();
        // The store's order changes on relists; rules in a stable order keep chains as
        // they are.
        policies.sort_by(|a, b| a.key.cmp(&b.key));
        let mut cluster = Cluster::default();
        for ns in self.namespaces.state() {
            cluster.add_namespace(Namespace::from_k8s(&ns));
        }
        for pod in self.pods.state() {
            cluster.add_pod(Pod::from_k8s(&pod));
        }
        // No policy, no guard: a cluster without policies never waits for this node.
        let guarded = match policies.is_empty() {
            true => Vec::new(),
            false => self.pod_cidrs(),
        };
        let pods = for_node(&policies, &cluster, node);
        let desired = Desired::from_pods(pods.values()).guarding(&guarded);
        (pods, desired)
    }

    /// The node's pod ranges (`spec.podCIDRs`, or `spec.podCIDR` alone).
    fn pod_cidrs(&self) -> Vec<IpNetwork> {
        let nodes = self.node.state();
        let Some(spec) = nodes.first().and_then(|n| n.spec.as_ref()) else {
            return Vec::new();
        };
        let listed = spec.pod_cidrs.iter().flatten();
        listed
            .chain(spec.pod_cidr.iter())
            .filter_map(|c| c.parse().ok())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use serde_json::json;

    use super::*;

    #[test]
    fn a_trimmed_pod_reads_the_same_to_policy_and_keeps_little_else() {
        let full: K8sPod = serde_json::from_value(json!({
            "metadata": {"name": "web", "namespace": "x", "labels": {"app": "web"},
                "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "x".repeat(2000)},
                "managedFields": [{"manager": "kubectl", "operation": "Apply"}]},
            "spec": {"nodeName": "node-1", "hostNetwork": false, "containers": [{
                "name": "web", "image": "httpd", "command": ["httpd", "-f"],
                "env": [{"name": "A", "value": "y".repeat(2000)}],
                "ports": [{"name": "http", "containerPort": 80}, {"name": "dns", "containerPort": 53, "protocol": "UDP"}]}],
                "volumes": [{"name": "data", "emptyDir": {}}]},
            "status": {"phase": "Running", "podIP": "10.244.1.5", "podIPs": [{"ip": "10.244.1.5"}],
                "conditions": [{"type": "Ready", "status": "True"}], "hostIP": "198.18.0.2"}
        }))
        .unwrap();
        let mut trimmed = full.clone();
        trimmed.trim();
        assert_eq!(Pod::from_k8s(&trimmed), Pod::from_k8s(&full));
        let size = |p: &K8sPod| serde_json::to_string(p).unwrap().len();
        assert!(
            size(&trimmed) < 400,
            "{}",
            serde_json::to_string(&trimmed).unwrap()
        );
        assert!(size(&full) > 4000);
    }
}
