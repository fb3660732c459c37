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
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
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

impl Index for Pods {
    fn prefix(&self) -> &'static str {
        PODS_PREFIX
    }

    fn apply(&self, object: &CachedObject, deleted: bool) {
        if deleted {
            if let Some((ns, name)) = namespaced_key(&object.key, PODS_PREFIX) {
                self.0.node_graph.write().remove_pod(ns, name);
            }
        } else if let Some(pod) = decode::<Pod>(object) {
            self.0.node_graph.write().upsert_pod(&pod);
        }
    }

    fn refill(&self, objects: &[Arc<CachedObject>]) {
        let pods: Vec<Pod> = objects.iter().filter_map(|o| decode(o)).collect();
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
}
