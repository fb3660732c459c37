//! What a fresh cluster serves about its own API: the user-facing ClusterRoles
//! (`cluster-admin`, and `admin`/`edit`/`view` as aggregating roles that collect every
//! ClusterRole labelled `rbac.authorization.k8s.io/aggregate-to-<role>: "true"`), and one
//! local APIService per served group/version (`v1.`, `v1.apps`, ...), available, as
//! kube-apiserver's `autoregister` controller creates them.
//!
//! Not created: upstream's `system:*` roles and the `system:aggregate-to-*` base rules.
//! RBAC is not enforced yet, so they would grant nothing; they come with enforcement.

use cairn_api::registry::{self, group_versions};
// (group_versions: the built-in ones; CRDs' APIServices are made with the CRD.)
use cairn_api::status::Status;
use serde_json::{json, Value};

use super::{ApiState, WriteOptions};

/// Local APIServices' priorities: the core group above the named groups, each group's
/// preferred (first) version above its others.
const CORE_GROUP_PRIORITY: i64 = 18000;
const NAMED_GROUP_PRIORITY: i64 = 17000;
const PREFERRED_VERSION_PRIORITY: i64 = 15;
const OTHER_VERSION_PRIORITY: i64 = 9;

fn default_cluster_roles() -> Vec<Value> {
    let bootstrap = json!({"kubernetes.io/bootstrapping": "rbac-defaults"});
    let autoupdate = json!({"rbac.authorization.kubernetes.io/autoupdate": "true"});
    let mut roles = vec![json!({
        "metadata": {"name": "cluster-admin", "labels": bootstrap, "annotations": autoupdate},
        "rules": [
            {"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]},
            {"nonResourceURLs": ["*"], "verbs": ["*"]},
        ],
    })];
    for role in ["admin", "edit", "view"] {
        let label = format!("rbac.authorization.k8s.io/aggregate-to-{role}");
        roles.push(json!({
            "metadata": {"name": role, "labels": bootstrap, "annotations": autoupdate},
            "aggregationRule": {"clusterRoleSelectors": [{"matchLabels": {label: "true"}}]},
        }));
    }
    roles
}

fn local_api_services() -> Vec<Value> {
    let mut out = Vec::new();
    let mut seen_groups: Vec<&str> = Vec::new();
    for (group, version) in group_versions() {
        let preferred = !seen_groups.contains(&group);
        seen_groups.push(group);
        let group_priority = if group.is_empty() {
            CORE_GROUP_PRIORITY
        } else {
            NAMED_GROUP_PRIORITY
        };
        let version_priority = if preferred {
            PREFERRED_VERSION_PRIORITY
        } else {
            OTHER_VERSION_PRIORITY
        };
        out.push(json!({
            "metadata": {"name": format!("{version}.{group}"), "labels": {"kube-aggregator.kubernetes.io/automanaged": "onstart"}},
            "spec": {"group": group, "version": version, "groupPriorityMinimum": group_priority, "versionPriority": version_priority},
        }));
    }
    out
}

impl ApiState {
    pub(super) async fn ensure_api_defaults(&self, opts: &WriteOptions) -> Result<(), Status> {
        let roles = registry::find("rbac.authorization.k8s.io", "v1", "clusterroles")
            .ok_or_else(|| Status::internal("clusterroles not registered"))?;
        for role in default_cluster_roles() {
            let name = role["metadata"]["name"].as_str().unwrap_or_default();
            if self.cache.get(&roles.key(None, name)).is_none() {
                self.create(roles, None, role.clone(), opts).await?;
            }
        }
        let services = registry::find("apiregistration.k8s.io", "v1", "apiservices")
            .ok_or_else(|| Status::internal("apiservices not registered"))?;
        for svc in local_api_services() {
            let name = svc["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            if self.cache.get(&services.key(None, &name)).is_some() {
                continue;
            }
            let created = self.create(services, None, svc, opts).await?;
            let mut obj = created.value()?;
            obj["status"] = json!({"conditions": [{
                "type": "Available", "status": "True", "reason": "Local",
                "message": "Local APIServices are always available",
                "lastTransitionTime": obj["metadata"]["creationTimestamp"].clone(),
            }]});
            self.update(services, None, &name, Some("status"), obj, opts)
                .await?;
        }
        Ok(())
    }
}
