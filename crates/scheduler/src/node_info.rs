//! One node as the scheduler sees it: its labels, taints, allocatable resources and the
//! pods placed on it (bound or assumed) with their summed requests.

use std::collections::HashMap;
use std::sync::Arc;

use cairn_semantics::selector::Labels;
use cairn_semantics::Resources;
use k8s_openapi::api::core::v1::{Node, Taint};

use crate::pod_info::{normalize_image, HostPort, SharedPod};

#[derive(Debug, Clone, Default)]
pub struct NodeInfo {
    /// The API object, for extenders that want whole nodes.
    pub node: Arc<Node>,
    pub name: String,
    pub labels: Labels,
    pub taints: Vec<Taint>,
    pub unschedulable: bool,
    pub allocatable: Resources,
    /// Sum of the pods' requests.
    pub requested: Resources,
    /// Same with scoring defaults for containers without requests.
    pub non_zero_requested: Resources,
    pub pods: Vec<SharedPod>,
    pub used_ports: Vec<HostPort>,
    /// Normalised image name → size in bytes.
    pub images: HashMap<String, i64>,
    pub pods_with_affinity: usize,
    pub pods_with_required_anti_affinity: usize,
    /// Capacity quantities that did not parse (kept to report, counted as zero).
    pub malformed: Vec<String>,
}

impl NodeInfo {
    pub fn from_node(node: &Node) -> NodeInfo {
        Self::from_shared(Arc::new(node.clone()))
    }

    /// Takes the node without copying it (the informer hands it over).
    pub fn from_shared(node: Arc<Node>) -> NodeInfo {
        let spec = node.spec.as_ref();
        let status = node.status.as_ref();
        let list = status.and_then(|s| s.allocatable.as_ref().or(s.capacity.as_ref()));
        let (allocatable, malformed) =
            Resources::from_list_lossy(list.unwrap_or(&Default::default()));
        let mut images = HashMap::new();
        for img in status.and_then(|s| s.images.as_ref()).into_iter().flatten() {
            for n in img.names.iter().flatten() {
                images.insert(normalize_image(n), img.size_bytes.unwrap_or(0));
            }
        }
        NodeInfo {
            name: node.metadata.name.clone().unwrap_or_default(),
            labels: node.metadata.labels.clone().unwrap_or_default(),
            taints: spec.and_then(|s| s.taints.clone()).unwrap_or_default(),
            unschedulable: spec.and_then(|s| s.unschedulable).unwrap_or(false),
            allocatable,
            images,
            malformed,
            node,
            ..Default::default()
        }
    }

    pub(crate) fn add_pod(&mut self, p: SharedPod) {
        self.requested.add(&p.requests);
        self.non_zero_requested.add(&p.non_zero_requests);
        self.used_ports.extend(p.host_ports.iter().cloned());
        if p.has_affinity() {
            self.pods_with_affinity += 1;
        }
        if !p.required_anti_affinity.is_empty() {
            self.pods_with_required_anti_affinity += 1;
        }
        self.pods.push(p);
    }

    pub(crate) fn remove_pod(&mut self, uid: &str) -> Option<SharedPod> {
        let i = self.pods.iter().position(|p| p.uid == uid)?;
        let p = self.pods.swap_remove(i);
        self.requested.sub(&p.requests);
        self.non_zero_requested.sub(&p.non_zero_requests);
        for hp in &p.host_ports {
            if let Some(j) = self.used_ports.iter().position(|u| u == hp) {
                self.used_ports.swap_remove(j);
            }
        }
        if p.has_affinity() {
            self.pods_with_affinity -= 1;
        }
        if !p.required_anti_affinity.is_empty() {
            self.pods_with_required_anti_affinity -= 1;
        }
        Some(p)
    }

    /// Takes the new node object's facts, keeping the pods.
    pub(crate) fn update_from(&mut self, fresh: NodeInfo) {
        let pods = std::mem::take(&mut self.pods);
        *self = fresh;
        for p in pods {
            self.add_pod(p);
        }
    }
}
