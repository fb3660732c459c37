//! Authorizer tests over hand-made objects: index upkeep, reasons, errors, rules review.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use k8s_openapi::api::rbac::v1::{
    ClusterRole, ClusterRoleBinding, PolicyRule, Role, RoleBinding, RoleRef, Subject,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::RbacAuthorizer;
use crate::attributes::{Attributes, Decision};
use crate::user::UserInfo;

fn meta(ns: Option<&str>, name: &str) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.into()),
        namespace: ns.map(Into::into),
        ..ObjectMeta::default()
    }
}

fn rule(verbs: &[&str], resources: &[&str]) -> PolicyRule {
    let v = |x: &[&str]| x.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    PolicyRule {
        verbs: v(verbs),
        api_groups: Some(vec![String::new()]),
        resources: Some(v(resources)),
        ..PolicyRule::default()
    }
}

fn role(ns: &str, name: &str, rules: Vec<PolicyRule>) -> Role {
    Role {
        metadata: meta(Some(ns), name),
        rules: Some(rules),
    }
}

fn cluster_role(name: &str, rules: Vec<PolicyRule>) -> ClusterRole {
    ClusterRole {
        metadata: meta(None, name),
        rules: Some(rules),
        aggregation_rule: None,
    }
}

fn subject(kind: &str, name: &str, ns: Option<&str>) -> Subject {
    Subject {
        kind: kind.into(),
        name: name.into(),
        namespace: ns.map(Into::into),
        api_group: None,
    }
}

fn role_ref(kind: &str, name: &str) -> RoleRef {
    RoleRef {
        api_group: "rbac.authorization.k8s.io".into(),
        kind: kind.into(),
        name: name.into(),
    }
}

fn rb(ns: &str, name: &str, kind: &str, role: &str, subjects: Vec<Subject>) -> RoleBinding {
    RoleBinding {
        metadata: meta(Some(ns), name),
        role_ref: role_ref(kind, role),
        subjects: Some(subjects),
    }
}

fn crb(name: &str, role: &str, subjects: Vec<Subject>) -> ClusterRoleBinding {
    ClusterRoleBinding {
        metadata: meta(None, name),
        role_ref: role_ref("ClusterRole", role),
        subjects: Some(subjects),
    }
}

fn get_pods<'a>(u: &'a UserInfo, ns: &'a str) -> Attributes<'a> {
    Attributes::resource(u, "get", "", "pods").namespace(ns)
}

#[test]
fn upserts_and_removals_keep_decisions_current() {
    let mut a = RbacAuthorizer::default();
    let alice = UserInfo::new("alice", vec![]);
    assert_eq!(
        a.authorize(&get_pods(&alice, "ns1")),
        Decision::NoOpinion(String::new())
    );

    a.upsert_role(role("ns1", "reader", vec![rule(&["get"], &["pods"])]));
    a.upsert_role_binding(rb(
        "ns1",
        "rb",
        "Role",
        "reader",
        vec![subject("User", "alice", None)],
    ));
    assert!(a.authorize(&get_pods(&alice, "ns1")).is_allowed());
    assert!(!a.authorize(&get_pods(&alice, "ns2")).is_allowed());

    // The binding now names bob: alice loses, bob gains.
    a.upsert_role_binding(rb(
        "ns1",
        "rb",
        "Role",
        "reader",
        vec![subject("User", "bob", None)],
    ));
    let bob = UserInfo::new("bob", vec![]);
    assert!(!a.authorize(&get_pods(&alice, "ns1")).is_allowed());
    assert!(a.authorize(&get_pods(&bob, "ns1")).is_allowed());

    // A role's new rules apply without touching its bindings.
    a.upsert_role(role("ns1", "reader", vec![rule(&["list"], &["pods"])]));
    assert!(!a.authorize(&get_pods(&bob, "ns1")).is_allowed());
    let list = Attributes::resource(&bob, "list", "", "pods").namespace("ns1");
    assert!(a.authorize(&list).is_allowed());

    assert!(a.remove_role_binding("ns1", "rb").is_some());
    assert!(!a.authorize(&list).is_allowed());
    assert!(a.remove_role_binding("ns1", "rb").is_none());
    assert!(a.remove_role("ns1", "reader").is_some());
}

#[test]
fn cluster_bindings_apply_everywhere_and_role_bindings_of_cluster_roles_in_their_namespace() {
    let mut a = RbacAuthorizer::new(
        vec![],
        vec![cluster_role("pods", vec![rule(&["get"], &["pods"])])],
        vec![rb(
            "ns1",
            "rb",
            "ClusterRole",
            "pods",
            vec![subject("Group", "devs", None)],
        )],
        vec![crb("crb", "pods", vec![subject("User", "ops", None)])],
    );
    let ops = UserInfo::new("ops", vec![]);
    let dev = UserInfo::new("dev", vec!["devs".into()]);
    assert!(a.authorize(&get_pods(&ops, "ns2")).is_allowed());
    assert!(a
        .authorize(&Attributes::resource(&ops, "get", "", "pods"))
        .is_allowed());
    assert!(a.authorize(&get_pods(&dev, "ns1")).is_allowed());
    assert!(!a.authorize(&get_pods(&dev, "ns2")).is_allowed());
    // A RoleBinding never grants cluster-scoped requests.
    assert!(!a
        .authorize(&Attributes::resource(&dev, "get", "", "pods"))
        .is_allowed());
    a.remove_cluster_role_binding("crb");
    assert!(!a.authorize(&get_pods(&ops, "ns2")).is_allowed());
}

#[test]
fn reasons_name_binding_role_and_first_matching_subject() {
    let a = RbacAuthorizer::new(
        vec![role("ns1", "reader", vec![rule(&["get"], &["pods"])])],
        vec![cluster_role("lister", vec![rule(&["list"], &["pods"])])],
        vec![rb(
            "ns1",
            "rb",
            "Role",
            "reader",
            vec![
                subject("User", "other", None),
                subject("ServiceAccount", "builder", None),
            ],
        )],
        vec![crb(
            "crb",
            "lister",
            vec![
                subject("Group", "devs", None),
                subject("User", "alice", None),
            ],
        )],
    );
    let sa = UserInfo::new("system:serviceaccount:ns1:builder", vec![]);
    assert_eq!(
        a.authorize(&get_pods(&sa, "ns1")),
        Decision::Allow(
            r#"RBAC: allowed by RoleBinding "rb/ns1" of Role "reader" to ServiceAccount "builder/ns1""#.into()
        )
    );
    let alice = UserInfo::new("alice", vec!["devs".into()]);
    let list = Attributes::resource(&alice, "list", "", "pods");
    assert_eq!(
        a.authorize(&list),
        Decision::Allow(
            r#"RBAC: allowed by ClusterRoleBinding "crb" of ClusterRole "lister" to Group "devs""#
                .into()
        )
    );
}

#[test]
fn unresolvable_roles_are_reported_and_do_not_stop_others() {
    let a = RbacAuthorizer::new(
        vec![],
        vec![cluster_role("ok", vec![rule(&["get"], &["pods"])])],
        vec![rb(
            "ns1",
            "gone",
            "Role",
            "missing",
            vec![subject("User", "u", None)],
        )],
        vec![
            crb("a-missing", "nope", vec![subject("User", "u", None)]),
            crb("b-ok", "ok", vec![subject("User", "u", None)]),
        ],
    );
    let u = UserInfo::new("u", vec![]);
    assert!(a.authorize(&get_pods(&u, "ns1")).is_allowed());
    let del = Attributes::resource(&u, "delete", "", "pods").namespace("ns1");
    assert_eq!(
        a.authorize(&del),
        Decision::NoOpinion(
            r#"RBAC: [clusterrole.rbac.authorization.k8s.io "nope" not found, role.rbac.authorization.k8s.io "missing" not found]"#
                .into()
        )
    );
    let review = a.rules_for(&u, "ns1");
    assert!(review.incomplete);
    assert_eq!(review.resource_rules.len(), 1);
    assert!(review.evaluation_error.contains(r#""nope" not found"#));
}

#[test]
fn rules_review_splits_kinds_and_counts_each_binding_once() {
    let url_rule = PolicyRule {
        verbs: vec!["get".into()],
        non_resource_urls: Some(vec!["/healthz".into()]),
        ..PolicyRule::default()
    };
    let a = RbacAuthorizer::new(
        vec![],
        vec![cluster_role(
            "mixed",
            vec![rule(&["get"], &["pods"]), url_rule],
        )],
        vec![],
        // Names the user twice, by name and by group.
        vec![crb(
            "crb",
            "mixed",
            vec![subject("User", "u", None), subject("Group", "g", None)],
        )],
    );
    let u = UserInfo::new("u", vec!["g".into()]);
    let review = a.rules_for(&u, "ns1");
    assert_eq!(review.resource_rules.len(), 1);
    assert_eq!(review.non_resource_rules.len(), 1);
    assert!(!review.incomplete);
    assert_eq!(review.evaluation_error, "");
    assert_eq!(
        review.non_resource_rules[0].non_resource_urls,
        Some(vec!["/healthz".to_string()])
    );
}

#[test]
fn service_account_subjects_without_namespace_only_in_role_bindings() {
    let a = RbacAuthorizer::new(
        vec![],
        vec![cluster_role("pods", vec![rule(&["get"], &["pods"])])],
        vec![rb(
            "ns1",
            "rb",
            "ClusterRole",
            "pods",
            vec![subject("ServiceAccount", "default", None)],
        )],
        vec![crb(
            "crb",
            "pods",
            vec![subject("ServiceAccount", "default", None)],
        )],
    );
    let in_ns1 = UserInfo::new("system:serviceaccount:ns1:default", vec![]);
    let in_ns2 = UserInfo::new("system:serviceaccount:ns2:default", vec![]);
    assert!(a.authorize(&get_pods(&in_ns1, "ns1")).is_allowed());
    assert!(!a.authorize(&get_pods(&in_ns1, "ns2")).is_allowed());
    assert!(!a.authorize(&get_pods(&in_ns2, "ns1")).is_allowed());
    assert!(!a.authorize(&get_pods(&in_ns2, "ns2")).is_allowed());
}
