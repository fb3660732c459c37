//! The bootstrap policy plus `view`, `edit`, `admin` and a custom Role bound in `ns1`.
#![allow(dead_code)]

use cairn_auth::rbac::bootstrap;
use cairn_auth::{RbacAuthorizer, UserInfo};
use k8s_openapi::api::rbac::v1::{PolicyRule, Role, RoleBinding, RoleRef, Subject};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

pub fn strings(x: &[&str]) -> Vec<String> {
    x.iter().map(|s| s.to_string()).collect()
}

pub fn rule(verbs: &[&str], groups: &[&str], resources: &[&str]) -> PolicyRule {
    PolicyRule {
        verbs: strings(verbs),
        api_groups: Some(strings(groups)),
        resources: Some(strings(resources)),
        ..PolicyRule::default()
    }
}

pub fn named(verbs: &[&str], groups: &[&str], resources: &[&str], names: &[&str]) -> PolicyRule {
    PolicyRule {
        resource_names: Some(strings(names)),
        ..rule(verbs, groups, resources)
    }
}

pub fn meta(ns: Option<&str>, name: &str) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.into()),
        namespace: ns.map(Into::into),
        ..ObjectMeta::default()
    }
}

pub fn user_subject(name: &str) -> Subject {
    Subject {
        kind: "User".into(),
        api_group: Some("rbac.authorization.k8s.io".into()),
        name: name.into(),
        namespace: None,
    }
}

pub fn binding(ns: &str, name: &str, kind: &str, role: &str, user: &str) -> RoleBinding {
    RoleBinding {
        metadata: meta(Some(ns), name),
        role_ref: RoleRef {
            api_group: "rbac.authorization.k8s.io".into(),
            kind: kind.into(),
            name: role.into(),
        },
        subjects: Some(vec![user_subject(user)]),
    }
}

pub fn user(name: &str) -> UserInfo {
    UserInfo::new(name, vec![]).authenticated()
}

/// Users `viewer`, `editor`, `ns-admin` (ClusterRoles through RoleBindings in `ns1`)
/// and `custom` (Role `pod-reader` in `ns1`: get/list pods, get ConfigMap `app-config`).
pub fn cluster() -> RbacAuthorizer {
    let mut a = bootstrap::policy().aggregated().authorizer();
    a.upsert_role(Role {
        metadata: meta(Some("ns1"), "pod-reader"),
        rules: Some(vec![
            rule(&["get", "list"], &[""], &["pods"]),
            named(&["get"], &[""], &["configmaps"], &["app-config"]),
        ]),
    });
    for (name, kind, role, user) in [
        ("viewers", "ClusterRole", "view", "viewer"),
        ("editors", "ClusterRole", "edit", "editor"),
        ("admins", "ClusterRole", "admin", "ns-admin"),
        ("readers", "Role", "pod-reader", "custom"),
    ] {
        a.upsert_role_binding(binding("ns1", name, kind, role, user));
    }
    a
}
