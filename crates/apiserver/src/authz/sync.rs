//! Keeps the authorizers' indexes current, as informers would: a first fill from the
//! watch cache, then its events applied one by one (a binding is in effect, and a pod's
//! Secret readable by its node, a moment after the write). After a gap the index is
//! refilled from a fresh list.
//!
//! - RBAC: Roles, ClusterRoles and their bindings.
//! - The Node authorizer's graph: pods and PersistentVolumeClaims.

use std::sync::Arc;

use cairn_auth::RbacAuthorizer;
use cairn_store::cache::{CachedObject, WatchCache, WatchEventType};
use k8s_openapi::api::core::v1::{
    Container, EnvFromSource, EnvVar, EphemeralContainer, LocalObjectReference,
    PersistentVolumeClaim, Pod, PodSpec, Volume,
};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use tokio::task::JoinHandle;
use tracing::warn;

use super::Authorizer;

const RBAC_PREFIX: &str = "/registry/rbac.authorization.k8s.io/";
const PODS_PREFIX: &str = "/registry/core/pods/";
const CLAIMS_PREFIX: &str = "/registry/core/persistentvolumeclaims/";

/// One index fed from one key prefix.
trait Index: Send + Sync + 'static {
    fn prefix(&self) -> &'static str;
    fn apply(&self, object: &CachedObject, deleted: bool);
    /// Replaces the whole index with `objects`.
    fn refill(&self, objects: &[Arc<CachedObject>]);
}

/// Fills the authorizer's indexes from the cache now; the returned tasks follow the
/// changes.
pub fn start(authorizer: Arc<Authorizer>, cache: Arc<WatchCache>) -> Vec<JoinHandle<()>> {
    let mut indexes: Vec<Arc<dyn Index>> = vec![Arc::new(Rbac(Arc::clone(&authorizer)))];
    if authorizer.mode().node {
        indexes.push(Arc::new(Pods(Arc::clone(&authorizer))));
        indexes.push(Arc::new(Claims(authorizer)));
    }
    indexes
        .into_iter()
        .map(|index| {
            let (objects, revision) = cache.list(index.prefix());
            index.refill(&objects);
            tokio::spawn(follow(index, Arc::clone(&cache), revision))
        })
        .collect()
}

async fn follow(index: Arc<dyn Index>, cache: Arc<WatchCache>, mut revision: i64) {
    loop {
        let mut watcher = match cache.watch(index.prefix(), revision).await {
            Ok(w) => w,
            Err(e) => {
                warn!(error = %e, prefix = index.prefix(), "authorizer index: watching");
                tokio::time::sleep(std::time::Duration::from_secs(1)).await;
                continue;
            }
        };
        while let Some(event) = watcher.next().await {
            let Ok(event) = event else {
                break;
            };
            index.apply(&event.object, matches!(event.kind, WatchEventType::Deleted));
        }
        // Fell behind or the window moved on: start over from a full list.
        let (objects, at) = cache.list(index.prefix());
        index.refill(&objects);
        revision = at;
    }
}

fn decode<T: serde::de::DeserializeOwned>(object: &CachedObject) -> Option<T> {
    let decoded = serde_json::from_slice(&object.bytes).ok();
    if decoded.is_none() {
        warn!(key = %object.key, "an object the authorizer could not read");
    }
    decoded
}

/// `(namespace, name)` of a namespaced key under `prefix`.
fn namespaced_key<'k>(key: &'k str, prefix: &str) -> Option<(&'k str, &'k str)> {
    key.strip_prefix(prefix)?.split_once('/')
}

struct Rbac(Arc<Authorizer>);

impl Index for Rbac {
    fn prefix(&self) -> &'static str {
        RBAC_PREFIX
    }

    fn apply(&self, object: &CachedObject, deleted: bool) {
        apply_rbac(&mut self.0.rbac.write(), object, deleted);
    }

    fn refill(&self, objects: &[Arc<CachedObject>]) {
        let mut fresh = RbacAuthorizer::default();
        for o in objects {
            apply_rbac(&mut fresh, o, false);
        }
        *self.0.rbac.write() = fresh;
    }
}

/// One RBAC object from its cache entry (plural from the key).
fn apply_rbac(rbac: &mut RbacAuthorizer, object: &CachedObject, deleted: bool) {
    let Some(rest) = object.key.strip_prefix(RBAC_PREFIX) else {
        return;
    };
    let parts: Vec<&str> = rest.split('/').collect();
    let (plural, ns, name) = match parts.as_slice() {
        [p, name] => (*p, "", *name),
        [p, ns, name] => (*p, *ns, *name),
        _ => return,
    };
    match (plural, deleted) {
        ("roles", true) => drop(rbac.remove_role(ns, name)),
        ("clusterroles", true) => drop(rbac.remove_cluster_role(name)),
        ("rolebindings", true) => drop(rbac.remove_role_binding(ns, name)),
        ("clusterrolebindings", true) => drop(rbac.remove_cluster_role_binding(name)),
        ("roles", false) => decode::<Role>(object)
            .into_iter()
            .for_each(|r| rbac.upsert_role(r)),
        ("clusterroles", false) => decode::<ClusterRole>(object)
            .into_iter()
            .for_each(|r| rbac.upsert_cluster_role(r)),
        ("rolebindings", false) => decode::<RoleBinding>(object)
            .into_iter()
            .for_each(|b| rbac.upsert_role_binding(b)),
        ("clusterrolebindings", false) => decode::<ClusterRoleBinding>(object)
            .into_iter()
            .for_each(|b| rbac.upsert_cluster_role_binding(b)),
        _ => {}
    }
}

struct Pods(Arc<Authorizer>);

/// The parts of a pod the Node graph reads. The rest (container probes, ports,
/// resources, the status) is skipped without being built: a full `Pod` per event was
/// the authorizer's largest cost under a create load (stop 43's profile).
#[derive(serde::Deserialize)]
struct GraphPod {
    metadata: GraphMeta,
    spec: Option<GraphSpec>,
}

#[derive(serde::Deserialize)]
struct GraphMeta {
    name: Option<String>,
    namespace: Option<String>,
    annotations: Option<std::collections::BTreeMap<String, String>>,
}

#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct GraphSpec {
    node_name: Option<String>,
    service_account_name: Option<String>,
    image_pull_secrets: Option<Vec<LocalObjectReference>>,
    #[serde(default)]
    containers: Vec<EnvOnly>,
    init_containers: Option<Vec<EnvOnly>>,
    ephemeral_containers: Option<Vec<EnvOnly>>,
    volumes: Option<Vec<Volume>>,
}

#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct EnvOnly {
    env: Option<Vec<EnvVar>>,
    env_from: Option<Vec<EnvFromSource>>,
}

impl GraphPod {
    /// The `Pod` the graph takes, with only what it reads filled in.
    fn into_pod(self) -> Pod {
        let spec = self.spec.map(|s| {
            let container = |c: EnvOnly| Container {
                env: c.env,
                env_from: c.env_from,
                ..Container::default()
            };
            let ephemeral = |c: EnvOnly| EphemeralContainer {
                env: c.env,
                env_from: c.env_from,
                ..EphemeralContainer::default()
            };
            PodSpec {
                node_name: s.node_name,
                service_account_name: s.service_account_name,
                image_pull_secrets: s.image_pull_secrets,
                containers: s.containers.into_iter().map(container).collect(),
                init_containers: s
                    .init_containers
                    .map(|l| l.into_iter().map(container).collect()),
                ephemeral_containers: s
                    .ephemeral_containers
                    .map(|l| l.into_iter().map(ephemeral).collect()),
                volumes: s.volumes,
                ..PodSpec::default()
            }
        });
        Pod {
            metadata: ObjectMeta {
                name: self.metadata.name,
                namespace: self.metadata.namespace,
                annotations: self.metadata.annotations,
                ..ObjectMeta::default()
            },
            spec,
            status: None,
        }
    }
}

fn decode_pod(object: &CachedObject) -> Option<Pod> {
    decode::<GraphPod>(object).map(GraphPod::into_pod)
}

impl Index for Pods {
    fn prefix(&self) -> &'static str {
        PODS_PREFIX
    }

    fn apply(&self, object: &CachedObject, deleted: bool) {
        if deleted {
            if let Some((ns, name)) = namespaced_key(&object.key, PODS_PREFIX) {
                self.0.node_graph.write().remove_pod(ns, name);
            }
        } else if let Some(pod) = decode_pod(object) {
            self.0.node_graph.write().upsert_pod(&pod);
        }
    }

    fn refill(&self, objects: &[Arc<CachedObject>]) {
        let pods: Vec<Pod> = objects.iter().filter_map(|o| decode_pod(o)).collect();
        let mut graph = self.0.node_graph.write();
        graph.clear_pods();
        pods.iter().for_each(|p| graph.upsert_pod(p));
    }
}

struct Claims(Arc<Authorizer>);

impl Index for Claims {
    fn prefix(&self) -> &'static str {
        CLAIMS_PREFIX
    }

    fn apply(&self, object: &CachedObject, deleted: bool) {
        if deleted {
            if let Some((ns, name)) = namespaced_key(&object.key, CLAIMS_PREFIX) {
                self.0.node_graph.write().remove_pvc(ns, name);
            }
        } else if let Some(claim) = decode::<PersistentVolumeClaim>(object) {
            self.0.node_graph.write().upsert_pvc(&claim);
        }
    }

    fn refill(&self, objects: &[Arc<CachedObject>]) {
        let claims: Vec<PersistentVolumeClaim> = objects.iter().filter_map(|o| decode(o)).collect();
        let mut graph = self.0.node_graph.write();
        graph.clear_claims();
        claims.iter().for_each(|c| graph.upsert_pvc(c));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefixes_are_the_stores_keys() {
        let prefix = |group, resource| {
            cairn_api::registry::find(group, "v1", resource)
                .map(|r| r.key_prefix())
                .unwrap_or_default()
        };
        assert_eq!(prefix("", "pods"), PODS_PREFIX);
        assert_eq!(prefix("", "persistentvolumeclaims"), CLAIMS_PREFIX);
        assert_eq!(
            prefix("rbac.authorization.k8s.io", "roles"),
            format!("{RBAC_PREFIX}roles/")
        );
    }

    fn cached(json: serde_json::Value) -> CachedObject {
        CachedObject {
            key: "/registry/core/pods/ns/p".into(),
            create_revision: 1,
            mod_revision: 1,
            bytes: serde_json::to_vec(&json).unwrap().into(),
            labels: Default::default(),
            fields: Default::default(),
        }
    }

    /// The slim decode gives the graph what a full decode gives it.
    #[test]
    fn the_graphs_slim_pod_links_what_the_full_pod_links() {
        use cairn_auth::node::graph::{Kind, NodeGraph};
        let pod = serde_json::json!({
            "metadata": {"name": "p", "namespace": "ns", "labels": {"a": "b"}},
            "spec": {
                "nodeName": "n1", "serviceAccountName": "sa",
                "imagePullSecrets": [{"name": "pull"}],
                "initContainers": [{"name": "i", "envFrom": [{"configMapRef": {"name": "cm-init"}}]}],
                "containers": [{"name": "c", "image": "x", "ports": [{"containerPort": 80}],
                    "env": [{"name": "E", "valueFrom": {"secretKeyRef": {"name": "s-env", "key": "k"}}}]}],
                "ephemeralContainers": [{"name": "e", "envFrom": [{"secretRef": {"name": "s-eph"}}]}],
                "volumes": [
                    {"name": "v1", "secret": {"secretName": "s-vol"}},
                    {"name": "v2", "persistentVolumeClaim": {"claimName": "claim"}},
                    {"name": "v3", "projected": {"sources": [{"configMap": {"name": "cm-proj"}}]}},
                    {"name": "v4", "csi": {"driver": "d", "nodePublishSecretRef": {"name": "s-csi"}}},
                    {"name": "v5", "ephemeral": {"volumeClaimTemplate": {"spec": {}}}}
                ]
            },
            "status": {"phase": "Running", "podIP": "10.244.0.5"}
        });
        let full: Pod = serde_json::from_value(pod.clone()).unwrap();
        let slim = decode_pod(&cached(pod)).unwrap();
        let (mut a, mut b) = (NodeGraph::new(), NodeGraph::new());
        a.upsert_pod(&full);
        b.upsert_pod(&slim);
        let expected = [
            (Kind::Secret, "pull"),
            (Kind::Secret, "s-env"),
            (Kind::Secret, "s-eph"),
            (Kind::Secret, "s-vol"),
            (Kind::Secret, "s-csi"),
            (Kind::ConfigMap, "cm-init"),
            (Kind::ConfigMap, "cm-proj"),
            (Kind::ServiceAccount, "sa"),
            (Kind::PersistentVolumeClaim, "claim"),
            (Kind::PersistentVolumeClaim, "p-v5"),
            (Kind::Pod, "p"),
        ];
        for (kind, name) in expected {
            assert!(a.related("n1", kind, "ns", name), "full: {kind:?} {name}");
            assert!(b.related("n1", kind, "ns", name), "slim: {kind:?} {name}");
        }
        assert!(!b.related("n2", Kind::Secret, "ns", "s-vol"));
    }
}
