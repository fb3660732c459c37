//! Keeps the RBAC authorizer current: a first fill from the watch cache's Roles,
//! ClusterRoles and bindings, then their events applied one by one, as an informer
//! would (a binding is in effect as soon as its event is, a moment after the write).

use std::sync::Arc;

use cairn_auth::RbacAuthorizer;
use cairn_store::cache::{CachedObject, WatchCache, WatchEventType};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use tracing::warn;

use super::Authorizer;

const PREFIX: &str = "/registry/rbac.authorization.k8s.io/";

/// One RBAC object from its cache entry (plural from the key).
fn apply(rbac: &mut RbacAuthorizer, object: &CachedObject, deleted: bool) {
    let Some(rest) = object.key.strip_prefix(PREFIX) else {
        return;
    };
    let parts: Vec<&str> = rest.split('/').collect();
    let (plural, ns, name) = match parts.as_slice() {
        [p, name] => (*p, "", *name),
        [p, ns, name] => (*p, *ns, *name),
        _ => return,
    };
    let decoded = match (plural, deleted) {
        ("roles", true) => rbac.remove_role(ns, name).map(|_| ()).ok_or(()),
        ("clusterroles", true) => rbac.remove_cluster_role(name).map(|_| ()).ok_or(()),
        ("rolebindings", true) => rbac.remove_role_binding(ns, name).map(|_| ()).ok_or(()),
        ("clusterrolebindings", true) => {
            rbac.remove_cluster_role_binding(name).map(|_| ()).ok_or(())
        }
        ("roles", false) => decode::<Role>(object).map(|r| rbac.upsert_role(r)),
        ("clusterroles", false) => {
            decode::<ClusterRole>(object).map(|r| rbac.upsert_cluster_role(r))
        }
        ("rolebindings", false) => {
            decode::<RoleBinding>(object).map(|b| rbac.upsert_role_binding(b))
        }
        ("clusterrolebindings", false) => {
            decode::<ClusterRoleBinding>(object).map(|b| rbac.upsert_cluster_role_binding(b))
        }
        _ => Ok(()),
    };
    if decoded.is_err() && !deleted {
        warn!(key = %object.key, "RBAC object the authorizer could not read");
    }
}

fn decode<T: serde::de::DeserializeOwned>(object: &CachedObject) -> Result<T, ()> {
    serde_json::from_slice(&object.bytes).map_err(|_| ())
}

/// Fills the authorizer from the cache now; the returned task follows the changes.
pub fn start(authorizer: Arc<Authorizer>, cache: Arc<WatchCache>) -> tokio::task::JoinHandle<()> {
    let (objects, revision) = cache.list(PREFIX);
    {
        let mut rbac = authorizer.rbac.write();
        for o in &objects {
            apply(&mut rbac, o, false);
        }
    }
    tokio::spawn(follow(authorizer, cache, revision))
}

async fn follow(authorizer: Arc<Authorizer>, cache: Arc<WatchCache>, mut revision: i64) {
    // Events are applied in order; after a gap the whole set is read again.
    loop {
        let mut watcher = match cache.watch(PREFIX, revision).await {
            Ok(w) => w,
            Err(e) => {
                warn!(error = %e, "RBAC: watching roles and bindings");
                tokio::time::sleep(std::time::Duration::from_secs(1)).await;
                continue;
            }
        };
        while let Some(event) = watcher.next().await {
            let Ok(event) = event else {
                break;
            };
            let deleted = matches!(event.kind, WatchEventType::Deleted);
            apply(&mut authorizer.rbac.write(), &event.object, deleted);
        }
        // Fell behind or the window moved on: start over from a full list.
        let (objects, at) = cache.list(PREFIX);
        let mut fresh = RbacAuthorizer::default();
        for o in &objects {
            apply(&mut fresh, o, false);
        }
        *authorizer.rbac.write() = fresh;
        revision = at;
    }
}
