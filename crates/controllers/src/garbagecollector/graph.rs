//! The ownership graph the garbage collector keeps (upstream `GraphBuilder`): every
//! object's owners, the reverse index from an owner to its dependents, and the work each
//! change implies. Pure: fed by the watches, read by the workers.

use std::collections::{HashMap, HashSet};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

pub const ORPHAN: &str = "orphan";
pub const FOREGROUND: &str = "foregroundDeletion";

/// An owner reference, as much of it as the collector reads.
#[derive(Debug, Clone, PartialEq)]
pub struct Owner {
    pub uid: String,
    pub api_version: String,
    pub kind: String,
    pub name: String,
    pub block: bool,
}

/// One object of any resource.
#[derive(Debug, Clone, PartialEq)]
pub struct Node {
    /// Index of its resource in the collector's resource list.
    pub resource: usize,
    pub namespace: Option<String>,
    pub name: String,
    pub owners: Vec<Owner>,
    pub deleting: bool,
    pub orphan: bool,
    pub foreground: bool,
}

impl Node {
    pub fn from_meta(resource: usize, meta: &ObjectMeta) -> Node {
        let finalizers = meta.finalizers.as_deref().unwrap_or_default();
        Node {
            resource,
            namespace: meta.namespace.clone(),
            name: meta.name.clone().unwrap_or_default(),
            owners: meta
                .owner_references
                .iter()
                .flatten()
                .map(|r| Owner {
                    uid: r.uid.clone(),
                    api_version: r.api_version.clone(),
                    kind: r.kind.clone(),
                    name: r.name.clone(),
                    block: r.block_owner_deletion == Some(true),
                })
                .collect(),
            deleting: meta.deletion_timestamp.is_some(),
            orphan: finalizers.iter().any(|f| f == ORPHAN),
            foreground: finalizers.iter().any(|f| f == FOREGROUND),
        }
    }
}

/// What a worker must look at.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Work {
    /// A dependent some of whose owners may be gone: delete it, or drop dangling refs.
    Dependent(String),
    /// An owner deleted with `orphan`: release its dependents, then its finalizer.
    Orphan(String),
    /// An owner deleted with `foregroundDeletion`: delete dependents, then the finalizer.
    Foreground(String),
}

#[derive(Default)]
pub struct Graph {
    nodes: HashMap<String, Node>,
    dependents: HashMap<String, HashSet<String>>,
}

impl Graph {
    pub fn get(&self, uid: &str) -> Option<&Node> {
        self.nodes.get(uid)
    }

    pub fn contains(&self, uid: &str) -> bool {
        self.nodes.contains_key(uid)
    }

    pub fn dependents(&self, uid: &str) -> Vec<String> {
        self.dependents
            .get(uid)
            .map(|d| d.iter().cloned().collect())
            .unwrap_or_default()
    }

    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// Records `node` (or its removal) under `uid`; the work that follows.
    pub fn apply(&mut self, uid: &str, node: Option<Node>) -> Vec<Work> {
        let old = match &node {
            Some(n) => self.nodes.insert(uid.to_string(), n.clone()),
            None => self.nodes.remove(uid),
        };
        for o in old.iter().flat_map(|n| &n.owners) {
            if let Some(d) = self.dependents.get_mut(&o.uid) {
                d.remove(uid);
                if d.is_empty() {
                    self.dependents.remove(&o.uid);
                }
            }
        }
        let mut work = Vec::new();
        match &node {
            Some(n) => {
                for o in &n.owners {
                    self.dependents
                        .entry(o.uid.clone())
                        .or_default()
                        .insert(uid.to_string());
                }
                if n.owners.iter().any(|o| !self.nodes.contains_key(&o.uid)) {
                    work.push(Work::Dependent(uid.to_string()));
                }
                if n.deleting && n.orphan {
                    work.push(Work::Orphan(uid.to_string()));
                }
                if n.deleting && n.foreground {
                    work.push(Work::Foreground(uid.to_string()));
                }
            }
            None => {
                // Its dependents may be orphans now; an owner waiting on it may be done.
                work.extend(self.dependents(uid).into_iter().map(Work::Dependent));
                for o in old.iter().flat_map(|n| &n.owners) {
                    if self
                        .nodes
                        .get(&o.uid)
                        .is_some_and(|n| n.deleting && n.foreground)
                    {
                        work.push(Work::Foreground(o.uid.clone()));
                    }
                }
            }
        }
        work
    }

    /// What the first full list calls for: dangling dependents and owners deleted with
    /// a propagation finalizer.
    pub fn initial_work(&self) -> Vec<Work> {
        let mut work = self.dangling();
        for (uid, n) in self.nodes.iter().filter(|(_, n)| n.deleting) {
            if n.orphan {
                work.push(Work::Orphan(uid.clone()));
            }
            if n.foreground {
                work.push(Work::Foreground(uid.clone()));
            }
        }
        work
    }

    /// Every dependent with an owner missing from the graph (after the first full list).
    pub fn dangling(&self) -> Vec<Work> {
        self.nodes
            .iter()
            .filter(|(_, n)| n.owners.iter().any(|o| !self.nodes.contains_key(&o.uid)))
            .map(|(uid, _)| Work::Dependent(uid.clone()))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(owners: &[&str], deleting: bool, foreground: bool) -> Node {
        Node {
            resource: 0,
            namespace: Some("ns".into()),
            name: "x".into(),
            owners: owners
                .iter()
                .map(|u| Owner {
                    uid: u.to_string(),
                    api_version: "apps/v1".into(),
                    kind: "ReplicaSet".into(),
                    name: "rs".into(),
                    block: true,
                })
                .collect(),
            deleting,
            orphan: false,
            foreground,
        }
    }

    #[test]
    fn owner_removal_reaches_dependents_and_waiting_owners() {
        let mut g = Graph::default();
        assert!(g
            .apply("deploy", Some(node(&[], true, true)))
            .contains(&Work::Foreground("deploy".into())));
        assert!(g
            .apply("rs", Some(node(&["deploy"], false, false)))
            .is_empty());
        g.apply("pod", Some(node(&["rs"], false, false)));
        assert_eq!(g.dependents("rs"), vec!["pod".to_string()]);
        let work = g.apply("rs", None);
        assert!(work.contains(&Work::Dependent("pod".into())));
        assert!(work.contains(&Work::Foreground("deploy".into())));
        assert_eq!(g.dangling(), vec![Work::Dependent("pod".into())]);
        g.apply("pod", None);
        assert!(g.dependents("rs").is_empty());
        assert_eq!(g.len(), 1);
    }
}
