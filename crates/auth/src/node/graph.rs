//! Which objects a node may read: upstream's node-authorizer graph
//! (`plugin/pkg/auth/authorizer/node/graph.go`) flattened into reference-counted
//! hash maps. A pod bound to a node links the node to the pod itself, its
//! ServiceAccount and the Secrets, ConfigMaps and PersistentVolumeClaims it names; a
//! PVC's `spec.volumeName` links on to its PersistentVolume.
//!
//! Upstream walks a graph on each lookup; here every pod adds one count per
//! (object, node) pair it references, so a lookup is a few hash probes and an update
//! costs the pod's references.

use std::collections::{BTreeSet, HashMap, HashSet};

use k8s_openapi::api::core::v1::{
    Container, EnvFromSource, EnvVar, EphemeralContainer, PersistentVolumeClaim, Pod, PodSpec,
    Volume,
};

/// Upstream's `kubernetes.io/config.mirror`: a static pod's API mirror, which upstream
/// never lets reach other objects (a node creates those pods itself).
pub const MIRROR_POD_ANNOTATION: &str = "kubernetes.io/config.mirror";

/// The kinds of object [`NodeGraph::related`] answers for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kind {
    Secret,
    ConfigMap,
    PersistentVolumeClaim,
    PersistentVolume,
    ServiceAccount,
    Pod,
}

/// namespace → name → value; nested so lookups take `&str` without allocating.
#[derive(Debug, Clone)]
struct ByName<V>(HashMap<String, HashMap<String, V>>);

impl<V> Default for ByName<V> {
    fn default() -> Self {
        ByName(HashMap::new())
    }
}

impl<V> ByName<V> {
    fn get(&self, ns: &str, name: &str) -> Option<&V> {
        self.0.get(ns).and_then(|m| m.get(name))
    }

    fn get_mut(&mut self, ns: &str, name: &str) -> Option<&mut V> {
        self.0.get_mut(ns).and_then(|m| m.get_mut(name))
    }

    fn insert(&mut self, ns: &str, name: &str, v: V) {
        self.0
            .entry(ns.to_string())
            .or_default()
            .insert(name.to_string(), v);
    }

    fn remove(&mut self, ns: &str, name: &str) -> Option<V> {
        let inner = self.0.get_mut(ns)?;
        let v = inner.remove(name);
        if inner.is_empty() {
            self.0.remove(ns);
        }
        v
    }

    fn len(&self) -> usize {
        self.0.values().map(HashMap::len).sum()
    }
}

/// What one indexed pod contributed, so its removal undoes exactly that.
#[derive(Debug, Clone)]
struct PodEntry {
    node: String,
    refs: Vec<(Kind, String)>,
}

/// Node name → number of bound pods referencing one object.
type Counts = HashMap<String, u32>;

/// The index the Node authorizer asks. Feed it every pod and PVC event.
#[derive(Debug, Clone, Default)]
pub struct NodeGraph {
    pods: ByName<PodEntry>,
    /// Secrets, ConfigMaps, PVCs and ServiceAccounts by kind.
    refs: HashMap<Kind, ByName<Counts>>,
    /// PVC → its `spec.volumeName`.
    claims: ByName<String>,
    /// PV name → the claims naming it (normally one).
    volumes: HashMap<String, HashSet<(String, String)>>,
}

impl NodeGraph {
    pub fn new() -> NodeGraph {
        NodeGraph::default()
    }

    /// Indexes a pod (add or update). Unbound pods are dropped: they reach no node.
    pub fn upsert_pod(&mut self, pod: &Pod) {
        let ns = pod.metadata.namespace.as_deref().unwrap_or_default();
        let Some(name) = pod.metadata.name.as_deref() else {
            return;
        };
        self.remove_pod(ns, name);
        let Some(spec) = pod.spec.as_ref() else {
            return;
        };
        let node = spec.node_name.as_deref().unwrap_or_default();
        if node.is_empty() {
            return;
        }
        let mirror = pod
            .metadata
            .annotations
            .as_ref()
            .is_some_and(|a| a.contains_key(MIRROR_POD_ANNOTATION));
        // Defence in depth, as upstream: a mirror pod is the node's own creation and
        // must not grant it anything but the pod.
        let refs = if mirror {
            Vec::new()
        } else {
            pod_references(name, spec)
        };
        for (kind, obj) in &refs {
            let counts = self.refs.entry(*kind).or_default();
            if let Some(c) = counts.get_mut(ns, obj) {
                *c.entry(node.to_string()).or_default() += 1;
            } else {
                counts.insert(ns, obj, HashMap::from([(node.to_string(), 1)]));
            }
        }
        let entry = PodEntry {
            node: node.to_string(),
            refs,
        };
        self.pods.insert(ns, name, entry);
    }

    /// Forgets a pod and the references it held.
    pub fn remove_pod(&mut self, namespace: &str, name: &str) {
        let Some(entry) = self.pods.remove(namespace, name) else {
            return;
        };
        for (kind, obj) in &entry.refs {
            let Some(counts) = self.refs.get_mut(kind) else {
                continue;
            };
            let Some(c) = counts.get_mut(namespace, obj) else {
                continue;
            };
            if let Some(n) = c.get_mut(&entry.node) {
                *n = n.saturating_sub(1);
                if *n == 0 {
                    c.remove(&entry.node);
                }
            }
            if c.is_empty() {
                counts.remove(namespace, obj);
            }
        }
    }

    /// Indexes a PVC's bound volume (add or update).
    pub fn upsert_pvc(&mut self, pvc: &PersistentVolumeClaim) {
        let ns = pvc.metadata.namespace.as_deref().unwrap_or_default();
        let Some(name) = pvc.metadata.name.as_deref() else {
            return;
        };
        self.remove_pvc(ns, name);
        let volume = pvc
            .spec
            .as_ref()
            .and_then(|s| s.volume_name.as_deref())
            .unwrap_or_default();
        if volume.is_empty() {
            return;
        }
        self.claims.insert(ns, name, volume.to_string());
        self.volumes
            .entry(volume.to_string())
            .or_default()
            .insert((ns.to_string(), name.to_string()));
    }

    /// Forgets a PVC's volume binding.
    pub fn remove_pvc(&mut self, namespace: &str, name: &str) {
        let Some(volume) = self.claims.remove(namespace, name) else {
            return;
        };
        if let Some(set) = self.volumes.get_mut(&volume) {
            set.remove(&(namespace.to_string(), name.to_string()));
            if set.is_empty() {
                self.volumes.remove(&volume);
            }
        }
    }

    /// Whether a pod bound to `node` reaches the object. `namespace` is ignored for
    /// PersistentVolumes (cluster-scoped).
    pub fn related(&self, node: &str, kind: Kind, namespace: &str, name: &str) -> bool {
        match kind {
            Kind::Pod => self
                .pods
                .get(namespace, name)
                .is_some_and(|p| p.node == node),
            Kind::PersistentVolume => self.volumes.get(name).is_some_and(|claims| {
                claims
                    .iter()
                    .any(|(ns, c)| self.related(node, Kind::PersistentVolumeClaim, ns, c))
            }),
            _ => self
                .refs
                .get(&kind)
                .and_then(|m| m.get(namespace, name))
                .is_some_and(|c| c.contains_key(node)),
        }
    }

    /// Forgets every pod and what they referenced (before a refill from a list).
    pub fn clear_pods(&mut self) {
        self.pods = ByName::default();
        self.refs.clear();
    }

    /// Forgets every claim's volume binding (before a refill from a list).
    pub fn clear_claims(&mut self) {
        self.claims = ByName::default();
        self.volumes.clear();
    }

    /// Number of indexed (bound) pods.
    pub fn pod_count(&self) -> usize {
        self.pods.len()
    }
}

/// Everything a non-mirror pod lets its node read, deduplicated.
fn pod_references(pod_name: &str, spec: &PodSpec) -> Vec<(Kind, String)> {
    let mut out = BTreeSet::new();
    let sa = spec
        .service_account_name
        .as_deref()
        .filter(|s| !s.is_empty())
        .unwrap_or("default");
    out.insert((Kind::ServiceAccount, sa.to_string()));
    visit_secret_names(spec, &mut |n| {
        out.insert((Kind::Secret, n.to_string()));
    });
    visit_configmap_names(spec, &mut |n| {
        out.insert((Kind::ConfigMap, n.to_string()));
    });
    for v in spec.volumes.iter().flatten() {
        if let Some(claim) = claim_name(pod_name, v) {
            out.insert((Kind::PersistentVolumeClaim, claim));
        }
    }
    out.into_iter().filter(|(_, n)| !n.is_empty()).collect()
}

/// The PVC a volume mounts: named, or `<pod>-<volume>` for a generic ephemeral one.
fn claim_name(pod_name: &str, v: &Volume) -> Option<String> {
    if let Some(pvc) = &v.persistent_volume_claim {
        return Some(pvc.claim_name.clone());
    }
    v.ephemeral
        .as_ref()
        .map(|_| format!("{pod_name}-{}", v.name))
}

/// Env and envFrom of one container of any sort.
struct EnvOf<'a> {
    env: Option<&'a Vec<EnvVar>>,
    env_from: Option<&'a Vec<EnvFromSource>>,
}

fn env_of(c: &Container) -> EnvOf<'_> {
    EnvOf {
        env: c.env.as_ref(),
        env_from: c.env_from.as_ref(),
    }
}

fn env_of_ephemeral(c: &EphemeralContainer) -> EnvOf<'_> {
    EnvOf {
        env: c.env.as_ref(),
        env_from: c.env_from.as_ref(),
    }
}

/// Init, regular and ephemeral containers, as upstream's `AllContainers`.
fn all_envs(spec: &PodSpec) -> impl Iterator<Item = EnvOf<'_>> {
    let init = spec.init_containers.iter().flatten().map(env_of);
    let eph = spec.ephemeral_containers.iter().flatten();
    init.chain(spec.containers.iter().map(env_of))
        .chain(eph.map(env_of_ephemeral))
}

/// Upstream's `VisitPodSecretNames` over all containers: image pull secrets,
/// env/envFrom, and every volume source that names a secret.
pub fn visit_secret_names(spec: &PodSpec, f: &mut dyn FnMut(&str)) {
    for s in spec.image_pull_secrets.iter().flatten() {
        f(&s.name);
    }
    for c in all_envs(spec) {
        for e in c.env_from.into_iter().flatten() {
            if let Some(s) = &e.secret_ref {
                f(&s.name);
            }
        }
        for e in c.env.into_iter().flatten() {
            if let Some(s) = e
                .value_from
                .as_ref()
                .and_then(|v| v.secret_key_ref.as_ref())
            {
                f(&s.name);
            }
        }
    }
    for v in spec.volumes.iter().flatten() {
        volume_secret_names(v, f);
    }
}

fn volume_secret_names(v: &Volume, f: &mut dyn FnMut(&str)) {
    if let Some(s) = &v.secret {
        f(s.secret_name.as_deref().unwrap_or_default());
    }
    if let Some(s) = &v.azure_file {
        f(&s.secret_name);
    }
    if let Some(s) = &v.scale_io {
        f(&s.secret_ref.name);
    }
    let refs = [
        v.cephfs.as_ref().and_then(|s| s.secret_ref.as_ref()),
        v.cinder.as_ref().and_then(|s| s.secret_ref.as_ref()),
        v.flex_volume.as_ref().and_then(|s| s.secret_ref.as_ref()),
        v.rbd.as_ref().and_then(|s| s.secret_ref.as_ref()),
        v.iscsi.as_ref().and_then(|s| s.secret_ref.as_ref()),
        v.storageos.as_ref().and_then(|s| s.secret_ref.as_ref()),
        v.csi
            .as_ref()
            .and_then(|s| s.node_publish_secret_ref.as_ref()),
    ];
    for r in refs.into_iter().flatten() {
        f(&r.name);
    }
    let sources = v.projected.as_ref().and_then(|p| p.sources.as_ref());
    for src in sources.into_iter().flatten() {
        if let Some(s) = &src.secret {
            f(&s.name);
        }
    }
}

/// Upstream's `VisitPodConfigmapNames` over all containers: env/envFrom,
/// configMap volumes and projected configMap sources.
pub fn visit_configmap_names(spec: &PodSpec, f: &mut dyn FnMut(&str)) {
    for c in all_envs(spec) {
        for e in c.env_from.into_iter().flatten() {
            if let Some(s) = &e.config_map_ref {
                f(&s.name);
            }
        }
        for e in c.env.into_iter().flatten() {
            let r = e
                .value_from
                .as_ref()
                .and_then(|v| v.config_map_key_ref.as_ref());
            if let Some(s) = r {
                f(&s.name);
            }
        }
    }
    for v in spec.volumes.iter().flatten() {
        if let Some(s) = &v.config_map {
            f(&s.name);
        }
        let sources = v.projected.as_ref().and_then(|p| p.sources.as_ref());
        for src in sources.into_iter().flatten() {
            if let Some(s) = &src.config_map {
                f(&s.name);
            }
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(v: serde_json::Value) -> Pod {
        serde_json::from_value(v).unwrap()
    }

    fn web(node: &str) -> Pod {
        pod(json!({
            "metadata": {"namespace": "ns", "name": "web"},
            "spec": {
                "nodeName": node,
                "serviceAccountName": "robot",
                "imagePullSecrets": [{"name": "pull"}],
                "initContainers": [{"name": "i", "envFrom": [{"secretRef": {"name": "init-env"}}]}],
                "containers": [{"name": "c", "env": [
                    {"name": "A", "valueFrom": {"secretKeyRef": {"name": "env-s", "key": "k"}}},
                    {"name": "B", "valueFrom": {"configMapKeyRef": {"name": "env-cm", "key": "k"}}}
                ]}],
                "ephemeralContainers": [{"name": "e", "envFrom": [{"configMapRef": {"name": "eph-cm"}}]}],
                "volumes": [
                    {"name": "s", "secret": {"secretName": "vol-s"}},
                    {"name": "cm", "configMap": {"name": "vol-cm"}},
                    {"name": "p", "projected": {"sources": [
                        {"secret": {"name": "proj-s"}}, {"configMap": {"name": "proj-cm"}}
                    ]}},
                    {"name": "csi", "csi": {"driver": "d", "nodePublishSecretRef": {"name": "csi-s"}}},
                    {"name": "data", "persistentVolumeClaim": {"claimName": "data"}},
                    {"name": "scratch", "ephemeral": {}}
                ]
            }
        }))
    }

    fn pvc(ns: &str, name: &str, volume: &str) -> PersistentVolumeClaim {
        serde_json::from_value(json!({
            "metadata": {"namespace": ns, "name": name},
            "spec": {"volumeName": volume}
        }))
        .unwrap()
    }

    #[test]
    fn a_bound_pod_relates_everything_it_names() {
        let mut g = NodeGraph::new();
        g.upsert_pod(&web("n1"));
        let cases = [
            (Kind::Secret, "pull"),
            (Kind::Secret, "init-env"),
            (Kind::Secret, "env-s"),
            (Kind::Secret, "vol-s"),
            (Kind::Secret, "proj-s"),
            (Kind::Secret, "csi-s"),
            (Kind::ConfigMap, "env-cm"),
            (Kind::ConfigMap, "eph-cm"),
            (Kind::ConfigMap, "vol-cm"),
            (Kind::ConfigMap, "proj-cm"),
            (Kind::PersistentVolumeClaim, "data"),
            (Kind::PersistentVolumeClaim, "web-scratch"),
            (Kind::ServiceAccount, "robot"),
            (Kind::Pod, "web"),
        ];
        for (kind, name) in cases {
            assert!(g.related("n1", kind, "ns", name), "{kind:?} {name}");
            assert!(!g.related("n2", kind, "ns", name), "{kind:?} {name} on n2");
            assert!(
                !g.related("n1", kind, "other", name),
                "{kind:?} {name} in other"
            );
        }
        assert!(!g.related("n1", Kind::Secret, "ns", "env-cm"));
        assert!(!g.related("n1", Kind::ServiceAccount, "ns", "default"));
    }

    #[test]
    fn default_service_account_and_unbound_pods() {
        let mut g = NodeGraph::new();
        let p =
            pod(json!({"metadata": {"namespace": "ns", "name": "a"}, "spec": {"containers": []}}));
        g.upsert_pod(&p);
        assert_eq!(g.pod_count(), 0);
        let p = pod(json!({"metadata": {"namespace": "ns", "name": "a"},
            "spec": {"nodeName": "n1", "containers": []}}));
        g.upsert_pod(&p);
        assert!(g.related("n1", Kind::ServiceAccount, "ns", "default"));
    }

    #[test]
    fn counts_survive_until_the_last_pod_goes() {
        let mut g = NodeGraph::new();
        g.upsert_pod(&web("n1"));
        let mut other = web("n1");
        other.metadata.name = Some("web2".into());
        g.upsert_pod(&other);
        g.remove_pod("ns", "web");
        assert!(g.related("n1", Kind::Secret, "ns", "vol-s"));
        assert!(!g.related("n1", Kind::Pod, "ns", "web"));
        g.remove_pod("ns", "web2");
        assert!(!g.related("n1", Kind::Secret, "ns", "vol-s"));
        assert!(g.refs.values().all(|m| m.len() == 0));
    }

    #[test]
    fn rebinding_moves_references() {
        let mut g = NodeGraph::new();
        g.upsert_pod(&web("n1"));
        g.upsert_pod(&web("n2"));
        assert!(!g.related("n1", Kind::Secret, "ns", "vol-s"));
        assert!(g.related("n2", Kind::Secret, "ns", "vol-s"));
        assert_eq!(g.pod_count(), 1);
    }

    #[test]
    fn mirror_pods_reach_only_themselves() {
        let mut g = NodeGraph::new();
        let mut p = web("n1");
        p.metadata.annotations =
            Some([(MIRROR_POD_ANNOTATION.to_string(), "x".to_string())].into());
        g.upsert_pod(&p);
        assert!(g.related("n1", Kind::Pod, "ns", "web"));
        assert!(!g.related("n1", Kind::Secret, "ns", "vol-s"));
        assert!(!g.related("n1", Kind::ServiceAccount, "ns", "robot"));
    }

    #[test]
    fn volumes_through_claims() {
        let mut g = NodeGraph::new();
        g.upsert_pvc(&pvc("ns", "data", "pv-1"));
        assert!(!g.related("n1", Kind::PersistentVolume, "", "pv-1"));
        g.upsert_pod(&web("n1"));
        assert!(g.related("n1", Kind::PersistentVolume, "", "pv-1"));
        assert!(!g.related("n2", Kind::PersistentVolume, "", "pv-1"));
        g.upsert_pvc(&pvc("ns", "data", "pv-2"));
        assert!(!g.related("n1", Kind::PersistentVolume, "", "pv-1"));
        assert!(g.related("n1", Kind::PersistentVolume, "", "pv-2"));
        g.remove_pvc("ns", "data");
        assert!(!g.related("n1", Kind::PersistentVolume, "", "pv-2"));
        assert!(g.volumes.is_empty());
    }
}
