//! Escalation prevention: `covers`, and who may write Roles, ClusterRoles and bindings.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use cairn_auth::rbac::escalation::{
    check_cluster_role, check_cluster_role_binding, check_role, check_role_binding, compact_string,
    covers,
};
use cairn_auth::{EscalationError, Operation, UserInfo};
use common::{binding, cluster, meta, named, rule, strings, user, user_subject};
use k8s_openapi::api::rbac::v1::{
    AggregationRule, ClusterRole, ClusterRoleBinding, PolicyRule, Role, RoleRef,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

fn urls(verbs: &[&str], urls: &[&str]) -> PolicyRule {
    PolicyRule {
        verbs: strings(verbs),
        non_resource_urls: Some(strings(urls)),
        ..PolicyRule::default()
    }
}

#[test]
fn covers_breaks_rules_down() {
    let owner = vec![
        rule(&["get", "list"], &[""], &["pods"]),
        rule(&["get"], &["*"], &["*/scale"]),
        named(&["update"], &[""], &["configmaps"], &["a", "b"]),
        urls(&["get"], &["/healthz", "/api/*"]),
    ];
    assert!(covers(&owner, &[rule(&["get"], &[""], &["pods"])]).0);
    assert!(covers(&owner, &[rule(&["get"], &["apps"], &["deployments/scale"])]).0);
    assert!(
        covers(
            &owner,
            &[named(&["update"], &[""], &["configmaps"], &["a"])]
        )
        .0
    );
    assert!(covers(&owner, &[urls(&["get"], &["/api/v1", "/healthz"])]).0);
    assert!(covers(&owner, &[]).0);

    // Names held for some names do not cover every name.
    let (ok, missing) = covers(&owner, &[rule(&["update"], &[""], &["configmaps"])]);
    assert!(!ok);
    assert_eq!(missing, vec![rule(&["update"], &[""], &["configmaps"])]);

    let (ok, missing) = covers(
        &owner,
        &[rule(&["get", "delete", "list"], &["", "apps"], &["pods"])],
    );
    assert!(!ok);
    let shown: Vec<String> = missing.iter().map(compact_string).collect();
    assert_eq!(
        shown,
        vec![
            r#"{APIGroups:[""], Resources:["pods"], Verbs:["delete"]}"#,
            r#"{APIGroups:["apps"], Resources:["pods"], Verbs:["get"]}"#,
            r#"{APIGroups:["apps"], Resources:["pods"], Verbs:["delete"]}"#,
            r#"{APIGroups:["apps"], Resources:["pods"], Verbs:["list"]}"#,
        ]
    );
    assert!(!covers(&owner, &[urls(&["get"], &["/api"])]).0);
    assert!(!covers(&owner, &[urls(&["post"], &["/healthz"])]).0);

    let star = vec![rule(&["*"], &["*"], &["*"])];
    assert!(covers(&star, &[named(&["escalate"], &["x"], &["y/z"], &["n"])]).0);
    assert!(!covers(&star, &[urls(&["get"], &["/healthz"])]).0);
}

fn ns1_role(name: &str, rules: Vec<PolicyRule>) -> Role {
    Role {
        metadata: meta(Some("ns1"), name),
        rules: Some(rules),
    }
}

#[test]
fn roles_within_what_the_writer_holds() {
    let a = cluster();
    let editor = user("editor");
    let ok = ns1_role(
        "r",
        vec![rule(&["get", "create"], &[""], &["pods", "secrets"])],
    );
    assert_eq!(check_role(&a, &editor, &ok, Operation::Create), Ok(()));

    let too_much = ns1_role(
        "r",
        vec![
            rule(&["get", "list"], &["rbac.authorization.k8s.io"], &["roles"]),
            rule(&["get"], &[""], &["pods"]),
            urls(&["get"], &["/metrics"]),
        ],
    );
    let err = check_role(&a, &editor, &too_much, Operation::Create).unwrap_err();
    assert_eq!(
        err.to_string(),
        "roles.rbac.authorization.k8s.io \"r\" is forbidden: user \"editor\" (groups=[\"system:authenticated\"]) \
         is attempting to grant RBAC permissions not currently held:\n\
         {APIGroups:[\"rbac.authorization.k8s.io\"], Resources:[\"roles\"], Verbs:[\"get\" \"list\"]}\n\
         {NonResourceURLs:[\"/metrics\"], Verbs:[\"get\"]}"
    );
    // The same rules elsewhere are not held at all.
    let elsewhere = Role {
        metadata: meta(Some("ns2"), "r"),
        ..ok.clone()
    };
    assert!(check_role(&a, &editor, &elsewhere, Operation::Create).is_err());
    // system:masters may write anything.
    let root = UserInfo::new("root", vec!["system:masters".into()]);
    assert_eq!(check_role(&a, &root, &too_much, Operation::Create), Ok(()));
}

#[test]
fn escalate_permission_lifts_the_check_by_name_on_update_only() {
    let mut a = cluster();
    a.upsert_role(ns1_role(
        "escalator",
        vec![named(
            &["escalate"],
            &["rbac.authorization.k8s.io"],
            &["roles"],
            &["r"],
        )],
    ));
    a.upsert_role_binding(binding("ns1", "escalators", "Role", "escalator", "eve"));
    let eve = user("eve");
    let role = ns1_role("r", vec![rule(&["*"], &["*"], &["*"])]);
    assert_eq!(check_role(&a, &eve, &role, Operation::Update), Ok(()));
    // On create the URL has no name, so a named grant does not apply.
    assert!(check_role(&a, &eve, &role, Operation::Create).is_err());
    let other = ns1_role("s", role.rules.clone().unwrap());
    assert!(check_role(&a, &eve, &other, Operation::Update).is_err());
}

#[test]
fn cluster_roles_and_aggregation_rules() {
    let a = cluster();
    let sched = user("system:kube-scheduler");
    let small = ClusterRole {
        metadata: meta(None, "c"),
        rules: Some(vec![rule(&["get"], &[""], &["nodes"])]),
        aggregation_rule: None,
    };
    assert_eq!(
        check_cluster_role(&a, &sched, &small, Operation::Create),
        Ok(())
    );
    let aggregating = ClusterRole {
        aggregation_rule: Some(AggregationRule {
            cluster_role_selectors: Some(vec![LabelSelector::default()]),
        }),
        ..small.clone()
    };
    assert_eq!(
        check_cluster_role(&a, &sched, &aggregating, Operation::Create).unwrap_err().to_string(),
        "clusterroles.rbac.authorization.k8s.io \"c\" is forbidden: must have cluster-admin privileges to use the aggregationRule"
    );
    // Rules held only in a namespace do not count for a ClusterRole.
    let pods = ClusterRole {
        rules: Some(vec![rule(&["get"], &[""], &["pods"])]),
        ..small
    };
    assert!(check_cluster_role(&a, &user("viewer"), &pods, Operation::Create).is_err());
}

#[test]
fn bindings_need_the_roles_rules_or_bind() {
    let mut a = cluster();
    let admin = user("ns-admin");
    // admin aggregates edit and view and itself, so it may hand them out in ns1.
    for role in ["view", "edit", "admin"] {
        assert_eq!(
            check_role_binding(&a, &admin, &binding("ns1", "b", "ClusterRole", role, "x")),
            Ok(()),
            "{role}"
        );
        assert!(
            check_role_binding(&a, &admin, &binding("ns2", "b", "ClusterRole", role, "x")).is_err(),
            "{role}"
        );
    }
    let err = check_role_binding(
        &a,
        &admin,
        &binding("ns1", "b", "ClusterRole", "cluster-admin", "x"),
    )
    .unwrap_err();
    let text = err.to_string();
    assert!(text.starts_with(
        "rolebindings.rbac.authorization.k8s.io \"b\" is forbidden: user \"ns-admin\" (groups=[\"system:authenticated\"]) \
         is attempting to grant RBAC permissions not currently held:\n"
    ), "{text}");
    assert!(
        text.contains("{APIGroups:[\"*\"], Resources:[\"*\"], Verbs:[\"*\"]}"),
        "{text}"
    );
    assert!(
        text.contains("{NonResourceURLs:[\"*\"], Verbs:[\"*\"]}"),
        "{text}"
    );
    assert_eq!(
        check_role_binding(&a, &admin, &binding("ns1", "b", "Role", "missing", "x")),
        Err(EscalationError::RoleNotFound {
            resource: "roles",
            name: "missing".into()
        })
    );
    assert_eq!(
        EscalationError::RoleNotFound {
            resource: "roles",
            name: "missing".into()
        }
        .to_string(),
        "roles.rbac.authorization.k8s.io \"missing\" not found"
    );
    // A namespaced Role the admin created is bindable by the admin.
    a.upsert_role(ns1_role("mine", vec![rule(&["get"], &[""], &["pods"])]));
    assert_eq!(
        check_role_binding(&a, &admin, &binding("ns1", "b", "Role", "mine", "x")),
        Ok(())
    );
}

#[test]
fn bind_on_a_named_cluster_role_allows_binding_that_one_only() {
    let mut a = cluster();
    let admin = user("ns-admin");
    a.upsert_cluster_role(ClusterRole {
        metadata: meta(None, "binder"),
        rules: Some(vec![named(
            &["bind"],
            &["rbac.authorization.k8s.io"],
            &["clusterroles"],
            &["view"],
        )]),
        aggregation_rule: None,
    });
    a.upsert_cluster_role_binding(ClusterRoleBinding {
        metadata: meta(None, "binders"),
        role_ref: RoleRef {
            api_group: "rbac.authorization.k8s.io".into(),
            kind: "ClusterRole".into(),
            name: "binder".into(),
        },
        subjects: Some(vec![user_subject("bob")]),
    });
    let bob = user("bob");
    assert_eq!(
        check_role_binding(&a, &bob, &binding("ns7", "b", "ClusterRole", "view", "x")),
        Ok(())
    );
    assert!(
        check_role_binding(&a, &bob, &binding("ns7", "b", "ClusterRole", "edit", "x")).is_err()
    );
    let crb = |role: &str| ClusterRoleBinding {
        metadata: meta(None, "cb"),
        role_ref: RoleRef {
            api_group: "rbac.authorization.k8s.io".into(),
            kind: "ClusterRole".into(),
            name: role.into(),
        },
        subjects: Some(vec![user_subject("x")]),
    };
    assert_eq!(check_cluster_role_binding(&a, &bob, &crb("view")), Ok(()));
    assert!(check_cluster_role_binding(&a, &admin, &crb("view")).is_err());
}
