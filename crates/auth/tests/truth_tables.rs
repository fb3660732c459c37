//! What `view`, `edit`, `admin` (bound in `ns1`) and a custom Role allow, checked in
//! `ns1` and `ns2` against upstream's bootstrap rules.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use cairn_auth::{Attributes, RbacAuthorizer};
use common::{cluster, user};

/// (verb, group, resource, subresource, name, allowed in ns1). Nothing is allowed in ns2.
type Case = (
    &'static str,
    &'static str,
    &'static str,
    &'static str,
    &'static str,
    bool,
);

fn check(a: &RbacAuthorizer, who: &str, cases: &[Case]) {
    let u = user(who);
    for &(verb, group, resource, sub, name, in_ns1) in cases {
        for (ns, want) in [("ns1", in_ns1), ("ns2", false)] {
            let attrs = Attributes::resource(&u, verb, group, resource)
                .namespace(ns)
                .subresource(sub)
                .name(name);
            assert_eq!(
                a.authorize(&attrs).is_allowed(),
                want,
                "{who}: {verb} {resource}/{sub} ({group}) named {name:?} in {ns}"
            );
        }
    }
}

#[test]
fn view() {
    check(
        &cluster(),
        "viewer",
        &[
            ("get", "", "pods", "", "", true),
            ("list", "", "pods", "", "", true),
            ("watch", "", "pods", "", "", true),
            ("get", "", "pods", "log", "web", true),
            ("get", "", "pods", "status", "web", true),
            ("get", "", "pods", "exec", "web", false),
            ("create", "", "pods", "exec", "web", false),
            ("create", "", "pods", "", "", false),
            ("delete", "", "pods", "", "web", false),
            ("get", "", "secrets", "", "", false),
            ("list", "", "secrets", "", "", false),
            ("get", "", "configmaps", "", "cfg", true),
            ("update", "", "configmaps", "", "cfg", false),
            ("get", "", "services", "", "", true),
            ("get", "", "endpoints", "", "", true),
            ("get", "", "namespaces", "", "ns1", true),
            ("list", "apps", "deployments", "", "", true),
            ("get", "apps", "deployments", "scale", "d", true),
            ("update", "apps", "deployments", "scale", "d", false),
            ("list", "batch", "jobs", "", "", true),
            ("get", "discovery.k8s.io", "endpointslices", "", "", true),
            ("get", "rbac.authorization.k8s.io", "roles", "", "", false),
            ("get", "coordination.k8s.io", "leases", "", "", false),
            ("impersonate", "", "serviceaccounts", "", "", false),
        ],
    );
}

#[test]
fn edit() {
    check(
        &cluster(),
        "editor",
        &[
            ("create", "", "pods", "", "", true),
            ("delete", "", "pods", "", "web", true),
            ("get", "", "pods", "exec", "web", true),
            ("create", "", "pods", "exec", "web", true),
            ("create", "", "pods", "attach", "web", true),
            ("create", "", "pods", "portforward", "web", true),
            ("create", "", "pods", "eviction", "web", true),
            ("update", "", "pods", "status", "web", false),
            ("get", "", "secrets", "", "", true),
            ("create", "", "secrets", "", "", true),
            ("create", "", "serviceaccounts", "token", "default", true),
            ("impersonate", "", "serviceaccounts", "", "default", true),
            ("create", "", "endpoints", "", "", false),
            ("get", "", "resourcequotas", "", "", true),
            ("update", "", "resourcequotas", "", "q", false),
            ("create", "apps", "deployments", "", "", true),
            ("update", "apps", "deployments", "scale", "d", true),
            ("deletecollection", "batch", "jobs", "", "", true),
            ("create", "coordination.k8s.io", "leases", "", "", true),
            (
                "create",
                "networking.k8s.io",
                "networkpolicies",
                "",
                "",
                true,
            ),
            ("get", "rbac.authorization.k8s.io", "roles", "", "", false),
            (
                "create",
                "rbac.authorization.k8s.io",
                "rolebindings",
                "",
                "",
                false,
            ),
            (
                "create",
                "authorization.k8s.io",
                "localsubjectaccessreviews",
                "",
                "",
                false,
            ),
            ("delete", "", "namespaces", "", "ns1", false),
        ],
    );
}

#[test]
fn admin() {
    check(
        &cluster(),
        "ns-admin",
        &[
            (
                "create",
                "rbac.authorization.k8s.io",
                "rolebindings",
                "",
                "",
                true,
            ),
            ("create", "rbac.authorization.k8s.io", "roles", "", "", true),
            (
                "delete",
                "rbac.authorization.k8s.io",
                "roles",
                "",
                "r",
                true,
            ),
            (
                "create",
                "authorization.k8s.io",
                "localsubjectaccessreviews",
                "",
                "",
                true,
            ),
            ("get", "", "pods", "log", "web", true),
            ("create", "", "pods", "exec", "web", true),
            ("delete", "", "secrets", "", "s", true),
            ("create", "apps", "deployments", "", "", true),
            ("get", "", "resourcequotas", "", "", true),
            ("update", "", "resourcequotas", "", "q", false),
            ("get", "", "namespaces", "", "ns1", true),
            ("delete", "", "namespaces", "", "ns1", false),
            ("create", "", "namespaces", "", "", false),
            (
                "escalate",
                "rbac.authorization.k8s.io",
                "roles",
                "",
                "r",
                false,
            ),
            (
                "bind",
                "rbac.authorization.k8s.io",
                "clusterroles",
                "",
                "admin",
                false,
            ),
            (
                "create",
                "rbac.authorization.k8s.io",
                "clusterroles",
                "",
                "",
                false,
            ),
        ],
    );
}

#[test]
fn custom_namespaced_role() {
    check(
        &cluster(),
        "custom",
        &[
            ("get", "", "pods", "", "web", true),
            ("list", "", "pods", "", "", true),
            ("watch", "", "pods", "", "", false),
            ("delete", "", "pods", "", "web", false),
            ("get", "", "pods", "log", "web", false),
            ("get", "", "configmaps", "", "app-config", true),
            ("get", "", "configmaps", "", "other", false),
            ("list", "", "configmaps", "", "", false),
            ("update", "", "configmaps", "", "app-config", false),
            ("get", "apps", "pods", "", "web", false),
        ],
    );
}

#[test]
fn namespaced_grants_never_reach_cluster_scope() {
    let a = cluster();
    for who in ["viewer", "editor", "ns-admin", "custom"] {
        let u = user(who);
        assert!(
            !a.authorize(&Attributes::resource(&u, "list", "", "pods"))
                .is_allowed(),
            "{who}"
        );
        assert!(
            !a.authorize(&Attributes::resource(&u, "get", "", "nodes"))
                .is_allowed(),
            "{who}"
        );
    }
}

#[test]
fn everybody_and_anonymous_non_resource_urls() {
    let a = cluster();
    let anon = cairn_auth::UserInfo::anonymous();
    let get = |u, p| Attributes::non_resource(u, "get", p);
    for p in ["/healthz", "/livez", "/readyz", "/version", "/version/"] {
        assert!(a.authorize(&get(&anon, p)).is_allowed(), "{p}");
    }
    assert_eq!(
        a.authorize(&get(&anon, "/healthz")).reason(),
        r#"RBAC: allowed by ClusterRoleBinding "system:public-info-viewer" of ClusterRole "system:public-info-viewer" to Group "system:unauthenticated""#
    );
    for p in [
        "/api",
        "/apis/apps/v1",
        "/openapi/v3",
        "/healthz/etcd",
        "/metrics",
    ] {
        assert!(!a.authorize(&get(&anon, p)).is_allowed(), "{p}");
    }
    assert!(!a
        .authorize(&Attributes::non_resource(&anon, "post", "/healthz"))
        .is_allowed());
    let bob = user("bob");
    for p in [
        "/api",
        "/api/v1",
        "/apis",
        "/apis/apps/v1",
        "/openapi/v2",
        "/version",
    ] {
        assert!(a.authorize(&get(&bob, p)).is_allowed(), "{p}");
    }
    assert!(!a.authorize(&get(&bob, "/metrics")).is_allowed());
    let ssar = Attributes::resource(
        &bob,
        "create",
        "authorization.k8s.io",
        "selfsubjectaccessreviews",
    );
    assert!(a.authorize(&ssar).is_allowed());
    let anon_ssar = Attributes::resource(
        &anon,
        "create",
        "authorization.k8s.io",
        "selfsubjectaccessreviews",
    );
    assert!(!a.authorize(&anon_ssar).is_allowed());
}

#[test]
fn masters_through_the_cluster_admin_binding() {
    let a = cluster();
    let root = cairn_auth::UserInfo::new("root", vec!["system:masters".into()]);
    let d = a.authorize(
        &Attributes::resource(&root, "delete", "x.example.com", "anything").namespace("ns2"),
    );
    assert_eq!(
        d.reason(),
        r#"RBAC: allowed by ClusterRoleBinding "cluster-admin" of ClusterRole "cluster-admin" to Group "system:masters""#
    );
    assert!(a
        .authorize(&Attributes::non_resource(&root, "delete", "/anything"))
        .is_allowed());
}

#[test]
fn system_components() {
    let a = cluster();
    let rs = cairn_auth::UserInfo::new(
        "system:serviceaccount:kube-system:replicaset-controller",
        vec![],
    );
    assert!(a
        .authorize(&Attributes::resource(&rs, "create", "", "pods").namespace("ns2"))
        .is_allowed());
    assert!(a
        .authorize(
            &Attributes::resource(&rs, "update", "apps", "replicasets")
                .subresource("status")
                .namespace("ns2")
        )
        .is_allowed());
    assert!(!a
        .authorize(&Attributes::resource(&rs, "create", "apps", "deployments").namespace("ns2"))
        .is_allowed());
    // The same name outside kube-system is nobody.
    let fake = cairn_auth::UserInfo::new("system:serviceaccount:ns1:replicaset-controller", vec![]);
    assert!(!a
        .authorize(&Attributes::resource(&fake, "create", "", "pods").namespace("ns2"))
        .is_allowed());

    let sched = user("system:kube-scheduler");
    assert!(a
        .authorize(
            &Attributes::resource(&sched, "create", "", "pods")
                .subresource("binding")
                .namespace("ns1")
        )
        .is_allowed());
    let lease =
        |name| Attributes::resource(&sched, "update", "coordination.k8s.io", "leases").name(name);
    assert!(a
        .authorize(&lease("kube-scheduler").namespace("ns1"))
        .is_allowed());
    assert!(a
        .authorize(&lease("other").namespace("kube-system"))
        .is_allowed());
    assert!(!a.authorize(&lease("other").namespace("ns1")).is_allowed());

    let proxy = user("system:kube-proxy");
    assert!(a
        .authorize(&Attributes::resource(
            &proxy,
            "watch",
            "discovery.k8s.io",
            "endpointslices"
        ))
        .is_allowed());
    // Upstream binds system:node to nobody: nodes go through the Node authorizer.
    // RBAC gives them only cairn:node (what the agent's embedded DNS, network
    // controller and provisioner need), never Secrets.
    let node =
        cairn_auth::UserInfo::new("system:node:n1", vec!["system:nodes".into()]).authenticated();
    let system_node = a
        .cluster_role("system:node")
        .and_then(|r| r.rules.clone())
        .unwrap_or_default();
    assert!(!system_node.is_empty());
    assert!(!a
        .authorize(&Attributes::resource(&node, "get", "", "secrets").namespace("ns1"))
        .is_allowed());
    assert!(!a
        .authorize(&Attributes::resource(&node, "delete", "", "secrets").namespace("ns1"))
        .is_allowed());
    assert!(a
        .authorize(&Attributes::resource(&node, "list", "", "services"))
        .is_allowed());
    assert!(a
        .authorize(&Attributes::resource(&node, "watch", "", "nodes"))
        .is_allowed());
}

#[test]
fn rules_review_of_a_namespace_viewer() {
    let a = cluster();
    let review = a.rules_for(&user("viewer"), "ns1");
    assert!(!review.incomplete);
    let has = |res: &str| {
        review.resource_rules.iter().any(|r| {
            r.resources
                .as_ref()
                .is_some_and(|x| x.iter().any(|s| s == res))
        })
    };
    assert!(has("pods") && has("pods/log") && has("selfsubjectaccessreviews"));
    assert!(!has("secrets"));
    assert!(review.non_resource_rules.iter().any(|r| r
        .non_resource_urls
        .as_ref()
        .is_some_and(|u| u.contains(&"/api".to_string()))));
    // In another namespace only the cluster-wide basics remain.
    assert!(a
        .rules_for(&user("viewer"), "ns2")
        .resource_rules
        .iter()
        .all(|r| {
            r.resources
                .as_ref()
                .is_some_and(|x| !x.contains(&"pods".to_string()))
        }));
}
