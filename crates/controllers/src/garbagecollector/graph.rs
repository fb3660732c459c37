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

/// A uid as a key: a UUID's 128 bits (every uid the API server assigns), else a 128-bit
/// FNV-1a hash of the text, whose text is kept aside. The graph holds every object of the
/// cluster, so it keeps no per-object strings it can avoid.
pub type Key = u128;

pub fn key_of(uid: &str) -> (Key, bool) {
    let hex: String = uid.chars().filter(|c| *c != '-').collect();
    if hex.len() == 32 && uid.len() == 36 {
        if let Ok(k) = u128::from_str_radix(&hex, 16) {
            return (k, true);
        }
    }
    let mut h: u128 = 0x6c62_272e_07bb_0142_62b8_2175_6295_c58d;
    for b in uid.bytes() {
        h ^= u128::from(b);
        h = h.wrapping_mul(0x0000_0000_0100_0000_0000_0000_0000_013B);
    }
    (h, false)
}

fn uuid_text(k: Key) -> String {
    let h = format!("{k:032x}");
    format!(
        "{}-{}-{}-{}-{}",
        &h[..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..]
    )
}

struct StoredOwner {
    uid: Key,
    /// Index into the graph's (apiVersion, kind) table.
    kind: u16,
    name: Box<str>,
    block: bool,
}

struct Stored {
    resource: u16,
    /// Index into the graph's namespace table (0: cluster-scoped).
    namespace: u32,
    name: Box<str>,
    owners: Box<[StoredOwner]>,
    deleting: bool,
    orphan: bool,
    foreground: bool,
}

/// Small tables of the strings many objects share.
#[derive(Default)]
struct Interned {
    namespaces: Vec<String>,
    namespace_ids: HashMap<String, u32>,
    kinds: Vec<(String, String)>,
    kind_ids: HashMap<(String, String), u16>,
}

impl Interned {
    fn namespace(&mut self, ns: Option<&str>) -> u32 {
        let Some(ns) = ns else {
            return 0;
        };
        if let Some(id) = self.namespace_ids.get(ns) {
            return *id;
        }
        self.namespaces.push(ns.to_string());
        let id = self.namespaces.len() as u32;
        self.namespace_ids.insert(ns.to_string(), id);
        id
    }

    fn kind(&mut self, api_version: &str, kind: &str) -> u16 {
        let k = (api_version.to_string(), kind.to_string());
        if let Some(id) = self.kind_ids.get(&k) {
            return *id;
        }
        self.kinds.push(k.clone());
        let id = (self.kinds.len() - 1) as u16;
        self.kind_ids.insert(k, id);
        id
    }
}

#[derive(Default)]
pub struct Graph {
    nodes: HashMap<Key, Stored>,
    dependents: HashMap<Key, HashSet<Key>>,
    /// Texts of uids that are not UUIDs.
    odd_uids: HashMap<Key, String>,
    interned: Interned,
}

impl Graph {
    fn key(&mut self, uid: &str) -> Key {
        let (k, uuid) = key_of(uid);
        if !uuid {
            self.odd_uids.entry(k).or_insert_with(|| uid.to_string());
        }
        k
    }

    fn text(&self, k: Key) -> String {
        self.odd_uids
            .get(&k)
            .cloned()
            .unwrap_or_else(|| uuid_text(k))
    }

    fn store(&mut self, n: &Node) -> Stored {
        let owners = n
            .owners
            .iter()
            .map(|o| StoredOwner {
                uid: self.key(&o.uid),
                kind: self.interned.kind(&o.api_version, &o.kind),
                name: o.name.as_str().into(),
                block: o.block,
            })
            .collect();
        Stored {
            resource: n.resource as u16,
            namespace: self.interned.namespace(n.namespace.as_deref()),
            name: n.name.as_str().into(),
            owners,
            deleting: n.deleting,
            orphan: n.orphan,
            foreground: n.foreground,
        }
    }

    fn view(&self, s: &Stored) -> Node {
        let namespace =
            (s.namespace > 0).then(|| self.interned.namespaces[s.namespace as usize - 1].clone());
        Node {
            resource: usize::from(s.resource),
            namespace,
            name: s.name.to_string(),
            owners: s
                .owners
                .iter()
                .map(|o| {
                    let (api_version, kind) = self.interned.kinds[usize::from(o.kind)].clone();
                    Owner {
                        uid: self.text(o.uid),
                        api_version,
                        kind,
                        name: o.name.to_string(),
                        block: o.block,
                    }
                })
                .collect(),
            deleting: s.deleting,
            orphan: s.orphan,
            foreground: s.foreground,
        }
    }

    pub fn get(&self, uid: &str) -> Option<Node> {
        self.nodes.get(&key_of(uid).0).map(|s| self.view(s))
    }

    pub fn contains(&self, uid: &str) -> bool {
        self.nodes.contains_key(&key_of(uid).0)
    }

    /// Whether `uid` is being deleted in the foreground.
    pub fn waits_for_dependents(&self, uid: &str) -> bool {
        self.nodes
            .get(&key_of(uid).0)
            .is_some_and(|n| n.deleting && n.foreground)
    }

    pub fn dependents(&self, uid: &str) -> Vec<String> {
        self.dependents_of(key_of(uid).0)
    }

    fn dependents_of(&self, k: Key) -> Vec<String> {
        self.dependents
            .get(&k)
            .map(|d| d.iter().map(|k| self.text(*k)).collect())
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
        let k = self.key(uid);
        let stored = node.as_ref().map(|n| self.store(n));
        let old = match stored {
            Some(s) => self.nodes.insert(k, s),
            None => self.nodes.remove(&k),
        };
        for o in old.iter().flat_map(|n| n.owners.iter()) {
            if let Some(d) = self.dependents.get_mut(&o.uid) {
                d.remove(&k);
                if d.is_empty() {
                    self.dependents.remove(&o.uid);
                }
            }
        }
        let mut work = Vec::new();
        let Some(n) = self.nodes.get(&k) else {
            // Its dependents may be orphans now; an owner waiting on it may be done.
            work.extend(self.dependents_of(k).into_iter().map(Work::Dependent));
            for o in old.iter().flat_map(|n| n.owners.iter()) {
                if self
                    .nodes
                    .get(&o.uid)
                    .is_some_and(|n| n.deleting && n.foreground)
                {
                    work.push(Work::Foreground(self.text(o.uid)));
                }
            }
            return work;
        };
        let owner_keys: Vec<Key> = n.owners.iter().map(|o| o.uid).collect();
        let dangling = owner_keys.iter().any(|o| !self.nodes.contains_key(o));
        let (orphan, foreground) = (n.deleting && n.orphan, n.deleting && n.foreground);
        for o in owner_keys {
            self.dependents.entry(o).or_default().insert(k);
        }
        if dangling {
            work.push(Work::Dependent(uid.to_string()));
        }
        if orphan {
            work.push(Work::Orphan(uid.to_string()));
        }
        if foreground {
            work.push(Work::Foreground(uid.to_string()));
        }
        work
    }

    /// After a re-list of resource `resource`: its objects not `seen` are gone.
    pub fn remove_unseen(&mut self, resource: usize, seen: &HashSet<Key>) -> Vec<Work> {
        let gone: Vec<String> = self
            .nodes
            .iter()
            .filter(|(k, n)| usize::from(n.resource) == resource && !seen.contains(k))
            .map(|(k, _)| self.text(*k))
            .collect();
        gone.into_iter()
            .flat_map(|uid| self.apply(&uid, None))
            .collect()
    }

    /// What the first full list calls for: dangling dependents and owners deleted with
    /// a propagation finalizer.
    pub fn initial_work(&self) -> Vec<Work> {
        let mut work = Vec::new();
        for (k, n) in &self.nodes {
            if n.owners.iter().any(|o| !self.nodes.contains_key(&o.uid)) {
                work.push(Work::Dependent(self.text(*k)));
            }
            if n.deleting && n.orphan {
                work.push(Work::Orphan(self.text(*k)));
            }
            if n.deleting && n.foreground {
                work.push(Work::Foreground(self.text(*k)));
            }
        }
        work
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
        let initial = g.initial_work();
        assert!(
            initial.contains(&Work::Dependent("pod".into())),
            "{initial:?}"
        );
        assert!(
            initial.contains(&Work::Foreground("deploy".into())),
            "{initial:?}"
        );
        g.apply("pod", None);
        assert!(g.dependents("rs").is_empty());
        assert_eq!(g.len(), 1);
    }

    #[test]
    fn uuids_are_kept_as_128_bits() {
        let uid = "0cfc3c2e-6b8a-4b4e-9d2a-3f1b2c4d5e6f";
        let (k, uuid) = key_of(uid);
        assert!(uuid);
        assert_eq!(uuid_text(k), uid);
        let mut g = Graph::default();
        g.apply(
            uid,
            Some(node(
                &["9a7b3c2e-6b8a-4b4e-9d2a-3f1b2c4d5e6f"],
                false,
                false,
            )),
        );
        assert_eq!(
            g.get(uid).unwrap().owners[0].uid,
            "9a7b3c2e-6b8a-4b4e-9d2a-3f1b2c4d5e6f"
        );
        assert!(g.odd_uids.is_empty());
    }
}
