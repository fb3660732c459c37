//! Upstream's bootstrap RBAC policy (Kubernetes 1.33, `bootstrappolicy`): the
//! ClusterRoles and ClusterRoleBindings every cluster starts with, the controllers'
//! `system:controller:*` roles ([`controller_roles`]) and the Roles and RoleBindings
//! of `kube-system` and `kube-public` ([`namespaced`]), as k8s-openapi objects with
//! upstream's `kubernetes.io/bootstrapping: rbac-defaults` label and autoupdate
//! annotation. Rules are built as upstream's rule builder does (every list sorted).
//!
//! `admin`, `edit` and `view` come with no rules, as upstream creates them: run
//! [`BootstrapPolicy::aggregated`] (the aggregation controller's step) to fill them.
//!
//! Left out: `system:heapster` (Heapster is retired) and the roles of feature-gated or
//! cloud controllers cairn does not run (attach-detach, expand, HPA, route, service,
//! resource-claim, storage-version ones, ...).

pub mod cairn;
mod cluster_roles;
pub use cluster_roles::node_rules;
pub mod controller_roles;
pub mod namespaced;

use std::collections::BTreeMap;

use k8s_openapi::api::rbac::v1::{
    ClusterRole, ClusterRoleBinding, PolicyRule, Role, RoleBinding, RoleRef, Subject,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::aggregation::aggregate;
use super::authorizer::RbacAuthorizer;
use crate::user::{AUTHENTICATED, MASTERS, UNAUTHENTICATED};

/// The label on every bootstrap object.
pub const BOOTSTRAPPING_LABEL: (&str, &str) = ("kubernetes.io/bootstrapping", "rbac-defaults");
/// The annotation telling the API server to reconcile the object at start.
pub const AUTOUPDATE_ANNOTATION: (&str, &str) =
    ("rbac.authorization.kubernetes.io/autoupdate", "true");
pub const RBAC_GROUP: &str = "rbac.authorization.k8s.io";
/// Group every service account is in.
pub const SERVICE_ACCOUNTS_GROUP: &str = "system:serviceaccounts";
/// Group upstream binds `system:monitoring` to.
pub const MONITORING_GROUP: &str = "system:monitoring";

pub(crate) const READ: &[&str] = &["get", "list", "watch"];
pub(crate) const WRITE: &[&str] = &["create", "update", "patch", "delete", "deletecollection"];
pub(crate) const READ_WRITE: &[&str] = &[
    "get",
    "list",
    "watch",
    "create",
    "update",
    "patch",
    "delete",
    "deletecollection",
];

/// The whole bootstrap policy.
#[derive(Debug, Clone, Default)]
pub struct BootstrapPolicy {
    pub cluster_roles: Vec<ClusterRole>,
    pub cluster_role_bindings: Vec<ClusterRoleBinding>,
    pub roles: Vec<Role>,
    pub role_bindings: Vec<RoleBinding>,
}

/// Upstream's bootstrap policy, aggregated roles still empty.
pub fn policy() -> BootstrapPolicy {
    let mut cluster_roles = cluster_roles::cluster_roles();
    let controllers = controller_roles::controller_roles();
    let cairn_roles = cairn::roles(&controllers);
    cluster_roles.extend(controllers);
    cluster_roles.extend(cairn_roles);
    let mut cluster_role_bindings = cluster_role_bindings();
    cluster_role_bindings.extend(controller_roles::controller_role_bindings());
    cluster_role_bindings.extend(cairn::bindings());
    let mut role_bindings = namespaced::role_bindings();
    role_bindings.extend(cairn::role_bindings());
    BootstrapPolicy {
        cluster_roles,
        cluster_role_bindings,
        roles: namespaced::roles(),
        role_bindings,
    }
}

impl BootstrapPolicy {
    /// With `admin`, `edit` and `view` holding what they aggregate.
    pub fn aggregated(mut self) -> BootstrapPolicy {
        for changed in aggregate(&self.cluster_roles) {
            if let Some(r) = self
                .cluster_roles
                .iter_mut()
                .find(|r| r.metadata.name == changed.metadata.name)
            {
                *r = changed;
            }
        }
        self
    }

    /// An authorizer holding exactly this policy.
    pub fn authorizer(&self) -> RbacAuthorizer {
        RbacAuthorizer::new(
            self.roles.clone(),
            self.cluster_roles.clone(),
            self.role_bindings.clone(),
            self.cluster_role_bindings.clone(),
        )
    }
}

fn strings(items: &[&str]) -> Vec<String> {
    let mut v: Vec<String> = items.iter().map(|s| s.to_string()).collect();
    v.sort();
    v
}

/// A resource rule, lists sorted as upstream's `RuleOrDie` leaves them.
pub(crate) fn rule(verbs: &[&str], groups: &[&str], resources: &[&str]) -> PolicyRule {
    PolicyRule {
        verbs: strings(verbs),
        api_groups: Some(strings(groups)),
        resources: Some(strings(resources)),
        resource_names: None,
        non_resource_urls: None,
    }
}

/// A resource rule limited to `names`.
pub(crate) fn named(
    verbs: &[&str],
    groups: &[&str],
    resources: &[&str],
    names: &[&str],
) -> PolicyRule {
    PolicyRule {
        resource_names: Some(strings(names)),
        ..rule(verbs, groups, resources)
    }
}

/// A non-resource URL rule.
pub(crate) fn urls(verbs: &[&str], urls: &[&str]) -> PolicyRule {
    PolicyRule {
        verbs: strings(verbs),
        non_resource_urls: Some(strings(urls)),
        ..PolicyRule::default()
    }
}

/// Upstream's `eventsRule()`: write Events of both groups.
pub(crate) fn events_rule() -> PolicyRule {
    rule(
        &["create", "update", "patch"],
        &["", "events.k8s.io"],
        &["events"],
    )
}

pub(crate) fn meta(
    name: &str,
    namespace: Option<&str>,
    extra_labels: &[(&str, &str)],
) -> ObjectMeta {
    let mut labels: BTreeMap<String, String> = extra_labels
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    labels.insert(BOOTSTRAPPING_LABEL.0.into(), BOOTSTRAPPING_LABEL.1.into());
    let annotations = BTreeMap::from([(
        AUTOUPDATE_ANNOTATION.0.to_string(),
        AUTOUPDATE_ANNOTATION.1.to_string(),
    )]);
    ObjectMeta {
        name: Some(name.into()),
        namespace: namespace.map(Into::into),
        labels: Some(labels),
        annotations: Some(annotations),
        ..ObjectMeta::default()
    }
}

pub(crate) fn cluster_role(name: &str, rules: Vec<PolicyRule>) -> ClusterRole {
    ClusterRole {
        metadata: meta(name, None, &[]),
        rules: Some(rules),
        aggregation_rule: None,
    }
}

pub(crate) fn user(name: &str) -> Subject {
    Subject {
        kind: "User".into(),
        api_group: Some(RBAC_GROUP.into()),
        name: name.into(),
        namespace: None,
    }
}

pub(crate) fn group(name: &str) -> Subject {
    Subject {
        kind: "Group".into(),
        api_group: Some(RBAC_GROUP.into()),
        name: name.into(),
        namespace: None,
    }
}

pub(crate) fn service_account(namespace: &str, name: &str) -> Subject {
    Subject {
        kind: "ServiceAccount".into(),
        api_group: None,
        name: name.into(),
        namespace: Some(namespace.into()),
    }
}

pub(crate) fn role_ref(kind: &str, name: &str) -> RoleRef {
    RoleRef {
        api_group: RBAC_GROUP.into(),
        kind: kind.into(),
        name: name.into(),
    }
}

/// A ClusterRoleBinding of the ClusterRole of the same name.
pub(crate) fn cluster_binding(name: &str, subjects: Vec<Subject>) -> ClusterRoleBinding {
    ClusterRoleBinding {
        metadata: meta(name, None, &[]),
        role_ref: role_ref("ClusterRole", name),
        subjects: (!subjects.is_empty()).then_some(subjects),
    }
}

/// Upstream's `ClusterRoleBindings()`. `system:node` keeps no subjects: nodes are
/// authorized by the Node authorizer, and the empty binding lets reconciliation drop
/// the `system:nodes` group from clusters that had it.
pub fn cluster_role_bindings() -> Vec<ClusterRoleBinding> {
    vec![
        cluster_binding("cluster-admin", vec![group(MASTERS)]),
        cluster_binding("system:monitoring", vec![group(MONITORING_GROUP)]),
        cluster_binding("system:discovery", vec![group(AUTHENTICATED)]),
        cluster_binding("system:basic-user", vec![group(AUTHENTICATED)]),
        cluster_binding(
            "system:public-info-viewer",
            vec![group(AUTHENTICATED), group(UNAUTHENTICATED)],
        ),
        cluster_binding("system:node-proxier", vec![user("system:kube-proxy")]),
        cluster_binding(
            "system:kube-controller-manager",
            vec![user("system:kube-controller-manager")],
        ),
        cluster_binding(
            "system:kube-dns",
            vec![service_account("kube-system", "kube-dns")],
        ),
        cluster_binding("system:kube-scheduler", vec![user("system:kube-scheduler")]),
        cluster_binding(
            "system:volume-scheduler",
            vec![user("system:kube-scheduler")],
        ),
        cluster_binding(
            "system:service-account-issuer-discovery",
            vec![group(SERVICE_ACCOUNTS_GROUP)],
        ),
        cluster_binding("system:node", vec![]),
    ]
}
