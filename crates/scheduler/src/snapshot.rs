//! The scheduler's view of the cluster: every node with the pods placed on it (bound
//! or assumed) and their summed requests, kept up to date incrementally by the
//! informers and the scheduling loop, which owns it (no locks, no copies per cycle).

use std::collections::HashMap;
use std::sync::Arc;

use cairn_semantics::selector::Labels;
use k8s_openapi::api::core::v1::Node;

use crate::domain_cache::DomainCache;
pub use crate::node_info::NodeInfo;
use crate::pod_info::{PodInfo, SharedPod};

/// All nodes and the pods on them.
#[derive(Debug, Default)]
pub struct Snapshot {
    nodes: Vec<NodeInfo>,
    index: HashMap<String, usize>,
    /// Pod UID → node name, for every placed pod (bound or assumed).
    placed: HashMap<String, String>,
    /// Pods bound to nodes the scheduler has not seen (yet).
    orphans: HashMap<String, Vec<SharedPod>>,
    /// Image name → number of nodes that have it.
    image_nodes: HashMap<String, usize>,
    pub namespaces: HashMap<String, Labels>,
    /// Claims, volumes and classes, for VolumeBinding.
    pub volumes: crate::plugins::volume_binding::VolumeState,
    /// Label key → number of nodes carrying it.
    key_nodes: HashMap<String, usize>,
    /// Hostname label value → nodes carrying it, and how many values are shared.
    hostnames: HashMap<String, usize>,
    shared_hostnames: usize,
    /// Spread constraints' per-domain counts, kept across cycles.
    pub domains: DomainCache,
    /// Placed pods (on nodes or orphaned) with required anti-affinity terms: when none
    /// exist, InterPodAffinity's pre-filter need not visit every node.
    anti_affinity_pods: usize,
    /// Placed pods with any pod (anti-)affinity term, for InterPodAffinity's pre-score.
    affinity_pods: usize,
}

impl Snapshot {
    /// Whether every node has the label key (then no node is left out of a domain count).
    pub fn all_nodes_have(&self, key: &str) -> bool {
        self.key_nodes.get(key) == Some(&self.nodes.len())
    }

    /// Whether no two nodes share a hostname label value, so a hostname domain is one node.
    pub fn hostnames_unique(&self) -> bool {
        self.shared_hostnames == 0
    }

    fn count_keys(&mut self, i: usize, delta: isize) {
        for k in self.nodes[i].labels.keys() {
            let c = self.key_nodes.entry(k.clone()).or_default();
            *c = c.saturating_add_signed(delta);
        }
        if let Some(h) = self.nodes[i].labels.get(crate::pod_info::HOSTNAME_KEY) {
            let c = self.hostnames.entry(h.clone()).or_default();
            let before = *c;
            *c = c.saturating_add_signed(delta);
            // A value is shared while two or more nodes carry it.
            match (before >= 2, *c >= 2) {
                (false, true) => self.shared_hostnames += 1,
                (true, false) => self.shared_hostnames -= 1,
                _ => {}
            }
            if *c == 0 {
                self.hostnames.remove(h);
            }
        }
    }

    pub fn nodes(&self) -> &[NodeInfo] {
        &self.nodes
    }

    pub fn num_nodes(&self) -> usize {
        self.nodes.len()
    }

    pub fn node(&self, name: &str) -> Option<&NodeInfo> {
        self.index.get(name).map(|i| &self.nodes[*i])
    }

    pub fn image_node_count(&self, image: &str) -> usize {
        self.image_nodes.get(image).copied().unwrap_or(0)
    }

    /// The placed pod with this UID.
    pub fn placed_pod(&self, uid: &str) -> Option<&SharedPod> {
        let node = self.node(self.placed.get(uid)?)?;
        node.pods.iter().find(|p| p.uid == uid)
    }

    /// Whether any placed pod has required anti-affinity terms.
    pub fn any_required_anti_affinity(&self) -> bool {
        self.anti_affinity_pods > 0
    }

    /// Whether any placed pod has a pod (anti-)affinity term.
    pub fn any_pod_affinity(&self) -> bool {
        self.affinity_pods > 0
    }

    pub fn node_of(&self, uid: &str) -> Option<&str> {
        self.placed.get(uid).map(String::as_str)
    }

    pub fn upsert_node(&mut self, node: &Node) {
        self.upsert_node_shared(Arc::new(node.clone()));
    }

    /// Adds or updates a node without copying it; returns the allocatable quantities that
    /// did not parse (counted as zero).
    pub fn upsert_node_shared(&mut self, node: Arc<Node>) -> Vec<String> {
        let fresh = NodeInfo::from_shared(node);
        let malformed = fresh.malformed.clone();
        let name = fresh.name.clone();
        match self.index.get(&name) {
            Some(&i) => {
                // Status heartbeats keep the labels: domain counts stay valid.
                if self.nodes[i].labels != fresh.labels {
                    self.domains.clear();
                }
                self.count_images(i, -1);
                self.count_keys(i, -1);
                self.nodes[i].update_from(fresh);
                self.count_images(i, 1);
                self.count_keys(i, 1);
            }
            None => {
                self.domains.clear();
                self.nodes.push(fresh);
                let i = self.nodes.len() - 1;
                self.index.insert(name.clone(), i);
                self.count_images(i, 1);
                self.count_keys(i, 1);
                for p in self.orphans.remove(&name).unwrap_or_default() {
                    self.nodes[i].add_pod(p);
                }
            }
        }
        malformed
    }

    fn count_images(&mut self, i: usize, delta: isize) {
        for img in self.nodes[i].images.keys() {
            let c = self.image_nodes.entry(img.clone()).or_default();
            *c = c.saturating_add_signed(delta);
        }
    }

    /// Removes a node; its pods wait as orphans in case it comes back.
    pub fn remove_node(&mut self, name: &str) {
        let Some(i) = self.index.remove(name) else {
            return;
        };
        self.domains.clear();
        self.count_images(i, -1);
        self.count_keys(i, -1);
        let gone = self.nodes.swap_remove(i);
        if i < self.nodes.len() {
            self.index.insert(self.nodes[i].name.clone(), i);
        }
        if !gone.pods.is_empty() {
            self.orphans.insert(gone.name, gone.pods);
        }
    }

    /// Places (or re-places) a pod on a node: bound pods from the informer and
    /// assumed pods from the scheduling cycle alike.
    pub fn add_pod(&mut self, pod: PodInfo, node: &str) {
        self.remove_pod(&pod.uid);
        let uid = pod.uid.clone();
        let shared = Arc::new(pod);
        if !shared.required_anti_affinity.is_empty() {
            self.anti_affinity_pods += 1;
        }
        if shared.has_affinity() {
            self.affinity_pods += 1;
        }
        match self.index.get(node) {
            Some(&i) => {
                self.domains.pod_changed(&shared, &self.nodes[i], 1);
                self.nodes[i].add_pod(shared);
            }
            None => self
                .orphans
                .entry(node.to_string())
                .or_default()
                .push(shared),
        }
        self.placed.insert(uid, node.to_string());
    }

    pub fn remove_pod(&mut self, uid: &str) -> Option<SharedPod> {
        let removed = self.take_pod(uid)?;
        if !removed.required_anti_affinity.is_empty() {
            self.anti_affinity_pods -= 1;
        }
        if removed.has_affinity() {
            self.affinity_pods -= 1;
        }
        Some(removed)
    }

    fn take_pod(&mut self, uid: &str) -> Option<SharedPod> {
        let node = self.placed.remove(uid)?;
        match self.index.get(&node) {
            Some(&i) => {
                let p = self.nodes[i].remove_pod(uid)?;
                self.domains.pod_changed(&p, &self.nodes[i], -1);
                Some(p)
            }
            None => {
                let list = self.orphans.get_mut(&node)?;
                let j = list.iter().position(|p| p.uid == uid)?;
                let p = list.swap_remove(j);
                if list.is_empty() {
                    self.orphans.remove(&node);
                }
                Some(p)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{node, pod};

    #[test]
    fn affinity_counts_follow_pods_across_nodes_and_orphans() {
        let mut s = Snapshot::default();
        s.upsert_node(&node("n1", "4", "8Gi", &[]));
        s.add_pod(pod("plain").info(), "n1");
        assert!(!s.any_required_anti_affinity() && !s.any_pod_affinity());
        s.add_pod(pod("anti").anti_affinity("app", "web", "zone").info(), "n1");
        // Re-placing the same pod does not count it twice.
        s.add_pod(
            pod("anti").anti_affinity("app", "web", "zone").info(),
            "gone",
        );
        assert!(s.any_required_anti_affinity() && s.any_pod_affinity());
        s.remove_node("n1");
        assert!(s.any_required_anti_affinity(), "orphaned pods still count");
        assert!(s.remove_pod("uid-anti").is_some());
        assert!(!s.any_required_anti_affinity() && !s.any_pod_affinity());
        assert!(s.remove_pod("uid-anti").is_none());
        assert!(!s.any_required_anti_affinity());
    }

    #[test]
    fn malformed_allocatable_counts_as_zero_and_is_reported() {
        let mut n = node("bad", "4", "8Gi", &[]);
        let alloc = n.status.as_mut().unwrap().allocatable.as_mut().unwrap();
        alloc.insert(
            "cpu".into(),
            k8s_openapi::apimachinery::pkg::api::resource::Quantity("lots".into()),
        );
        let info = NodeInfo::from_node(&n);
        assert_eq!(info.malformed, ["cpu"]);
        assert_eq!(info.allocatable.milli_cpu, 0);
        assert_eq!(info.allocatable.memory, 8 << 30);
        let mut s = Snapshot::default();
        s.upsert_node(&n);
        let p = pod("p").cpu("100m").info();
        let err = crate::plugins::node_resources::filter(&p, s.node("bad").unwrap()).unwrap_err();
        assert_eq!(err.reasons, ["Insufficient cpu"]);
    }

    #[test]
    fn requests_follow_pods_and_nodes() {
        let mut s = Snapshot::default();
        s.upsert_node(&node("n1", "4", "8Gi", &[]));
        s.add_pod(pod("a").cpu("1").info(), "n1");
        s.add_pod(pod("b").cpu("500m").info(), "n2");
        assert_eq!(s.node("n1").unwrap().requested.milli_cpu, 1000);
        s.upsert_node(&node("n2", "2", "1Gi", &[]));
        assert_eq!(
            s.node("n2").unwrap().requested.milli_cpu,
            500,
            "orphan adopted"
        );
        // Re-adding the same uid moves it rather than counting it twice.
        s.add_pod(pod("a").cpu("1").info(), "n2");
        assert_eq!(s.node("n1").unwrap().requested.milli_cpu, 0);
        assert_eq!(s.node("n2").unwrap().requested.milli_cpu, 1500);
        s.upsert_node(&node("n2", "8", "1Gi", &[]));
        assert_eq!(s.node("n2").unwrap().pods.len(), 2, "update keeps pods");
        s.remove_node("n1");
        assert_eq!(s.num_nodes(), 1);
        assert_eq!(s.node("n2").unwrap().name, "n2");
        assert!(s.remove_pod("uid-b").is_some());
        assert_eq!(s.node("n2").unwrap().requested.milli_cpu, 1000);
    }
}
