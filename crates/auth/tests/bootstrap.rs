//! Upstream's bootstrap policy: known rules, metadata, bindings, aggregation.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::HashSet;

use cairn_auth::rbac::aggregation::aggregate;
use cairn_auth::rbac::bootstrap::{self, policy};
use k8s_openapi::api::rbac::v1::{ClusterRole, PolicyRule};

fn find<'a>(roles: &'a [ClusterRole], name: &str) -> &'a ClusterRole {
    roles
        .iter()
        .find(|r| r.metadata.name.as_deref() == Some(name))
        .unwrap()
}

fn grants(rules: &[PolicyRule], verb: &str, group: &str, resource: &str) -> bool {
    rules.iter().any(|r| {
        r.verbs.iter().any(|v| v == verb || v == "*")
            && r.api_groups
                .iter()
                .flatten()
                .any(|g| g == group || g == "*")
            && r.resources
                .iter()
                .flatten()
                .any(|x| x == resource || x == "*")
    })
}

#[test]
fn known_rules_of_the_user_facing_roles() {
    let p = policy().aggregated();
    let rules = |n| find(&p.cluster_roles, n).rules.clone().unwrap();
    let (view, edit, admin) = (rules("view"), rules("edit"), rules("admin"));
    assert!(grants(&view, "get", "", "pods") && grants(&view, "get", "", "pods/log"));
    assert!(!grants(&view, "get", "", "secrets") && !grants(&view, "get", "", "pods/exec"));
    assert!(grants(&edit, "get", "", "secrets") && grants(&edit, "create", "", "pods/exec"));
    assert!(!grants(&edit, "get", "rbac.authorization.k8s.io", "roles"));
    assert!(!grants(
        &edit,
        "create",
        "rbac.authorization.k8s.io",
        "rolebindings"
    ));
    assert!(!grants(&edit, "create", "", "endpoints"));
    assert!(grants(
        &admin,
        "create",
        "rbac.authorization.k8s.io",
        "rolebindings"
    ));
    assert!(grants(
        &admin,
        "create",
        "authorization.k8s.io",
        "localsubjectaccessreviews"
    ));
    assert!(!grants(&admin, "update", "", "resourcequotas"));
    // Aggregation order: the selector's matches by name, duplicates dropped.
    let to_edit = rules("system:aggregate-to-edit");
    assert_eq!(&edit[..to_edit.len()], &to_edit[..]);
    assert_eq!(edit.len(), to_edit.len() + view.len());
    assert_eq!(&admin[..edit.len()], &edit[..]);
    let metrics = rules("system:aggregated-metrics-reader");
    assert_eq!(
        view,
        [rules("system:aggregate-to-view"), metrics.clone()].concat()
    );
    assert!(
        grants(&view, "list", "metrics.k8s.io", "pods"),
        "kubectl top for viewers"
    );
    let ca = rules("cluster-admin");
    assert_eq!(ca.len(), 2);
    assert!(grants(
        &rules("system:controller:generic-garbage-collector"),
        "delete",
        "apps",
        "deployments"
    ));
    assert!(grants(
        &rules("system:controller:clusterrole-aggregation-controller"),
        "escalate",
        "rbac.authorization.k8s.io",
        "clusterroles"
    ));
}

#[test]
fn aggregation_is_a_fixed_point_and_reports_only_changes() {
    let raw = policy();
    let changed = aggregate(&raw.cluster_roles);
    let mut names: Vec<_> = changed
        .iter()
        .map(|r| r.metadata.name.clone().unwrap())
        .collect();
    names.sort();
    assert_eq!(names, ["admin", "edit", "view"]);
    let done = raw.aggregated();
    assert!(aggregate(&done.cluster_roles).is_empty());
}

#[test]
fn every_object_carries_upstreams_metadata_and_unique_names() {
    let p = policy();
    let metas = p
        .cluster_roles
        .iter()
        .map(|r| &r.metadata)
        .chain(p.cluster_role_bindings.iter().map(|b| &b.metadata))
        .chain(p.roles.iter().map(|r| &r.metadata))
        .chain(p.role_bindings.iter().map(|b| &b.metadata));
    for m in metas {
        assert_eq!(
            m.labels.as_ref().unwrap()["kubernetes.io/bootstrapping"],
            "rbac-defaults",
            "{:?}",
            m.name
        );
        assert_eq!(
            m.annotations.as_ref().unwrap()["rbac.authorization.kubernetes.io/autoupdate"],
            "true"
        );
    }
    let unique = |names: Vec<String>| names.len() == names.iter().collect::<HashSet<_>>().len();
    assert!(unique(
        p.cluster_roles
            .iter()
            .map(|r| r.metadata.name.clone().unwrap())
            .collect()
    ));
    assert!(unique(
        p.cluster_role_bindings
            .iter()
            .map(|r| r.metadata.name.clone().unwrap())
            .collect()
    ));
    // Every ClusterRoleBinding refers to a ClusterRole that exists.
    for b in &p.cluster_role_bindings {
        find(&p.cluster_roles, &b.role_ref.name);
    }
    for b in &p.role_bindings {
        let ns = b.metadata.namespace.as_deref();
        assert!(p.roles.iter().any(|r| r.metadata.namespace.as_deref() == ns
            && r.metadata.name == Some(b.role_ref.name.clone())));
    }
    let labels = find(&p.cluster_roles, "edit")
        .metadata
        .labels
        .clone()
        .unwrap();
    assert_eq!(
        labels["rbac.authorization.k8s.io/aggregate-to-admin"],
        "true"
    );
}

#[test]
fn bindings_as_upstream_ships_them() {
    let p = policy();
    let subjects = |n: &str| {
        let b = p
            .cluster_role_bindings
            .iter()
            .find(|b| b.metadata.name.as_deref() == Some(n))
            .unwrap();
        b.subjects
            .iter()
            .flatten()
            .map(|s| {
                format!(
                    "{}:{}:{}",
                    s.kind,
                    s.namespace.clone().unwrap_or_default(),
                    s.name
                )
            })
            .collect::<Vec<_>>()
    };
    assert_eq!(subjects("cluster-admin"), ["Group::system:masters"]);
    assert_eq!(
        subjects("system:public-info-viewer"),
        [
            "Group::system:authenticated",
            "Group::system:unauthenticated"
        ]
    );
    assert_eq!(
        subjects("system:discovery"),
        ["Group::system:authenticated"]
    );
    assert_eq!(
        subjects("system:kube-controller-manager"),
        ["User::system:kube-controller-manager"]
    );
    assert_eq!(subjects("system:node-proxier"), ["User::system:kube-proxy"]);
    assert!(subjects("system:node").is_empty());
    assert_eq!(
        subjects("system:controller:replicaset-controller"),
        ["ServiceAccount:kube-system:replicaset-controller"]
    );
    assert_eq!(
        bootstrap::controller_roles::controller_roles().len(),
        bootstrap::controller_roles::controller_role_bindings().len()
    );
}
