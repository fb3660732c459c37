//! Upstream's bootstrap RBAC policy (and cairn's additions, `cairn-auth`'s
//! `rbac::bootstrap`), created at start where missing, as kube-apiserver's
//! `rbac/bootstrap-roles` post-start hook does. `admin`, `edit` and `view` are stored with
//! the rules they aggregate. Existing objects are left as the operator left them.

use cairn_api::registry;
use cairn_api::status::Status;
use serde_json::Value;

use super::{ApiState, WriteOptions};

fn resource(plural: &str) -> Result<&'static registry::ResourceInfo, Status> {
    registry::find("rbac.authorization.k8s.io", "v1", plural)
        .ok_or_else(|| Status::internal(format!("{plural} is not registered")))
}

impl ApiState {
    pub(crate) async fn ensure_rbac_defaults(&self, opts: &WriteOptions) -> Result<(), Status> {
        let policy = cairn_auth::rbac::bootstrap::policy().aggregated();
        let mut wanted: Vec<(&'static registry::ResourceInfo, Option<String>, Value)> = Vec::new();
        let encode = |v: Result<Value, serde_json::Error>| {
            v.map_err(|e| Status::internal(format!("encoding the bootstrap policy: {e}")))
        };
        for r in &policy.cluster_roles {
            wanted.push((
                resource("clusterroles")?,
                None,
                encode(serde_json::to_value(r))?,
            ));
        }
        for b in &policy.cluster_role_bindings {
            wanted.push((
                resource("clusterrolebindings")?,
                None,
                encode(serde_json::to_value(b))?,
            ));
        }
        for r in &policy.roles {
            let ns = r.metadata.namespace.clone();
            wanted.push((resource("roles")?, ns, encode(serde_json::to_value(r))?));
        }
        for b in &policy.role_bindings {
            let ns = b.metadata.namespace.clone();
            wanted.push((
                resource("rolebindings")?,
                ns,
                encode(serde_json::to_value(b))?,
            ));
        }
        // Concurrently: the store commits them in a few group commits, not ~150 fsyncs.
        let creates = wanted.into_iter().filter_map(|(r, ns, body)| {
            let name = body.pointer("/metadata/name")?.as_str()?.to_string();
            if self.cache.get(&r.key(ns.as_deref(), &name)).is_some() {
                return None;
            }
            Some(async move { self.create(r, ns.as_deref(), body, opts).await })
        });
        for result in futures::future::join_all(creates).await {
            result?;
        }
        Ok(())
    }
}
