//! Matching-pod counts per topology domain, kept across cycles for the (namespace,
//! selector, topology key) triples spread constraints ask about, and updated as pods
//! are placed and removed. Without it every cycle of a spread pod walks every node
//! and pod; with it a cycle reads a handful of numbers. Node changes drop the cache
//! (domains may have moved); entries are rebuilt on the next request.

use std::collections::HashMap;

use parking_lot::Mutex;

use crate::node_info::NodeInfo;
use crate::pod_info::{PodInfo, SpreadSelector};

/// At most this many triples are kept; past it the cache starts over.
const MAX_ENTRIES: usize = 64;

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct DomainKey {
    pub namespace: String,
    pub selector: SpreadSelector,
    pub topology_key: String,
}

impl DomainKey {
    fn counts(&self, p: &PodInfo) -> bool {
        p.namespace == self.namespace
            && !p.terminating
            && match &self.selector {
                SpreadSelector::Labels(s) => s.matches(&p.labels),
                SpreadSelector::SameOwner(uid) => p.owner_uid.as_deref() == Some(uid.as_str()),
            }
    }
}

/// Domain value → matching pods, over every node that has the topology key.
pub type DomainCounts = HashMap<String, i64>;

#[derive(Debug, Default)]
pub struct DomainCache {
    entries: Mutex<HashMap<DomainKey, DomainCounts>>,
}

impl DomainCache {
    /// Runs `f` on the counts for `key`, built from `nodes` if not cached.
    pub fn with<R>(
        &self,
        key: &DomainKey,
        nodes: &[NodeInfo],
        f: impl FnOnce(&DomainCounts) -> R,
    ) -> R {
        let mut entries = self.entries.lock();
        if let Some(c) = entries.get(key) {
            return f(c);
        }
        let mut counts = DomainCounts::new();
        for node in nodes {
            if let Some(v) = node.labels.get(&key.topology_key) {
                let n = node.pods.iter().filter(|p| key.counts(p)).count() as i64;
                *counts.entry(v.clone()).or_default() += n;
            }
        }
        if entries.len() >= MAX_ENTRIES {
            entries.clear();
        }
        let r = f(&counts);
        entries.insert(key.clone(), counts);
        r
    }

    /// A pod was placed on (`delta` 1) or removed from (-1) a node.
    pub fn pod_changed(&self, p: &PodInfo, node: &NodeInfo, delta: i64) {
        let mut entries = self.entries.lock();
        for (key, counts) in entries.iter_mut() {
            if let Some(v) = node.labels.get(&key.topology_key) {
                if key.counts(p) {
                    *counts.entry(v.clone()).or_default() += delta;
                }
            }
        }
    }

    pub fn clear(&self) {
        self.entries.lock().clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::snapshot::Snapshot;
    use crate::testing::{node, pod};
    use cairn_semantics::selector::Selector;

    #[test]
    fn counts_follow_pods_and_match_a_fresh_build() {
        let mut s = Snapshot::default();
        s.upsert_node(&node("a", "4", "8Gi", &[("zone", "z1")]));
        s.upsert_node(&node("b", "4", "8Gi", &[("zone", "z2")]));
        let key = DomainKey {
            namespace: "default".into(),
            selector: SpreadSelector::Labels(Selector::from_map(
                &[("app".to_string(), "web".to_string())].into(),
            )),
            topology_key: "zone".into(),
        };
        let read = |s: &Snapshot| s.domains.with(&key, s.nodes(), |d| d.clone());
        assert_eq!(
            read(&s),
            [("z1".to_string(), 0), ("z2".to_string(), 0)].into()
        );
        s.add_pod(pod("w1").label("app", "web").info(), "a");
        s.add_pod(pod("w2").label("app", "web").info(), "a");
        s.add_pod(pod("x").label("app", "db").info(), "b");
        s.add_pod(
            pod("other-ns")
                .label("app", "web")
                .namespace("kube-system")
                .info(),
            "b",
        );
        s.remove_pod("uid-w2");
        // Relabelled: no longer counted.
        s.add_pod(pod("w1").label("app", "cache").info(), "a");
        s.add_pod(pod("w3").label("app", "web").info(), "b");
        // A status-only node update keeps the cache; it must still be right afterwards.
        s.upsert_node(&node("a", "8", "16Gi", &[("zone", "z1")]));
        let cached = read(&s);
        s.domains.clear();
        assert_eq!(cached, read(&s));
        assert_eq!(cached["z1"], 0);
        assert_eq!(cached["z2"], 1);
        assert!(s.all_nodes_have("zone"));
        s.upsert_node(&node("c", "4", "8Gi", &[]));
        assert!(!s.all_nodes_have("zone"));
    }
}
