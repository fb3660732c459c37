#![allow(clippy::unwrap_used)]

use super::*;

const POLICY: &str = r#"
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: None
  users: ["system:kube-proxy"]
  verbs: [watch]
- level: None
  userGroups: ["system:nodes"]
  resources: [{group: "", resources: [events]}]
- level: RequestResponse
  resources:
  - group: ""
    resources: [configmaps]
    resourceNames: [watched]
- level: Request
  resources: [{group: apps, resources: ["deployments/*"]}]
- level: Metadata
  resources: [{group: "", resources: ["*/status"]}]
  omitStages: [ResponseStarted]
- level: None
  nonResourceURLs: ["/healthz*", /version]
- level: Metadata
  namespaces: [kube-system]
- level: Request
  resources: [{group: "", resources: [secrets, pods/log]}]
  omitManagedFields: true
- level: Metadata
"#;

fn user(name: &str, groups: &[&str]) -> UserInfo {
    UserInfo::new(name, groups.iter().map(|g| g.to_string()).collect())
}

fn resource<'a>(
    u: &'a UserInfo,
    verb: &'a str,
    group: &'a str,
    ns: &'a str,
    res: &'a str,
    sub: &'a str,
    name: &'a str,
) -> RequestAttributes<'a> {
    RequestAttributes {
        user: Some(u),
        verb,
        resource_request: true,
        path: "/api",
        api_group: group,
        namespace: ns,
        resource: res,
        subresource: sub,
        name,
    }
}

#[test]
fn the_first_matching_rule_gives_the_level() {
    let p = Policy::parse(POLICY, "p.yaml").unwrap();
    let alice = user("alice", &["devs"]);
    let proxy = user("system:kube-proxy", &[]);
    let node = user("system:node:n1", &["system:nodes"]);
    let level = |a: RequestAttributes<'_>| p.evaluate(&a).level;
    let cases = [
        (
            resource(&proxy, "watch", "", "", "services", "", ""),
            Level::None,
        ),
        (
            resource(&proxy, "list", "", "", "services", "", ""),
            Level::Metadata,
        ),
        (
            resource(&node, "create", "", "ns", "events", "", ""),
            Level::None,
        ),
        (
            resource(&alice, "create", "", "ns", "events", "", ""),
            Level::Metadata,
        ),
        (
            resource(&alice, "get", "", "ns", "configmaps", "", "watched"),
            Level::RequestResponse,
        ),
        (
            resource(&alice, "get", "", "ns", "configmaps", "", "other"),
            Level::Metadata,
        ),
        (
            resource(&alice, "patch", "apps", "ns", "deployments", "scale", "d"),
            Level::Request,
        ),
        // `resource/*` also names the resource itself, as upstream's checker.
        (
            resource(&alice, "patch", "apps", "ns", "deployments", "", "d"),
            Level::Request,
        ),
        (
            resource(&alice, "patch", "apps", "ns", "replicasets", "scale", "d"),
            Level::Metadata,
        ),
        (
            resource(&alice, "update", "", "ns", "pods", "status", "p"),
            Level::Metadata,
        ),
        (
            resource(&alice, "get", "", "kube-system", "secrets", "", "s"),
            Level::Metadata,
        ),
        (
            resource(&alice, "get", "", "ns", "secrets", "", "s"),
            Level::Request,
        ),
        (
            resource(&alice, "get", "", "ns", "pods", "log", "p"),
            Level::Request,
        ),
        (
            resource(&alice, "get", "", "ns", "pods", "exec", "p"),
            Level::Metadata,
        ),
    ];
    for (i, (attrs, want)) in cases.into_iter().enumerate() {
        assert_eq!(level(attrs), want, "case {i}");
    }
    let path = |p: &'static str| RequestAttributes {
        user: Some(&alice),
        verb: "get",
        path: p,
        ..RequestAttributes::default()
    };
    assert_eq!(level(path("/healthz")), Level::None);
    assert_eq!(level(path("/healthz/etcd")), Level::None);
    assert_eq!(level(path("/version")), Level::None);
    assert_eq!(level(path("/versions")), Level::Metadata);
}

#[test]
fn stages_and_managed_fields_combine_policy_and_rule() {
    let p = Policy::parse(POLICY, "p.yaml").unwrap();
    let alice = user("alice", &[]);
    let status = p.evaluate(&resource(&alice, "update", "", "ns", "pods", "status", "p"));
    assert!(!status.records(Stage::RequestReceived));
    assert!(!status.records(Stage::ResponseStarted));
    assert!(status.records(Stage::ResponseComplete));
    let secret = p.evaluate(&resource(&alice, "get", "", "ns", "secrets", "", "s"));
    assert!(secret.omit_managed_fields);
    assert!(secret.records(Stage::ResponseStarted));
    let none = "apiVersion: audit.k8s.io/v1\nkind: Policy\nrules: [{level: None, users: [x]}]\n";
    let none = Policy::parse(none, "p").unwrap();
    let outcome = none.evaluate(&resource(&alice, "get", "", "ns", "pods", "", "p"));
    assert_eq!(outcome, RuleOutcome::none());
    assert!(!outcome.records(Stage::ResponseComplete));
}

#[test]
fn bad_policies_name_the_file_and_the_problem() {
    let head = "apiVersion: audit.k8s.io/v1\nkind: Policy\n";
    let cases = [
        (
            "apiVersion: audit.k8s.io/v1beta1\nkind: Policy\n",
            "apiVersion",
        ),
        ("apiVersion: audit.k8s.io/v1\nkind: Pod\n", "kind"),
        (
            &*format!("{head}rules: [{{level: Loud}}]\n"),
            "unknown variant `Loud`",
        ),
        (
            &*format!("{head}rules: [{{level: None, verbs: get}}]\n"),
            "invalid type",
        ),
        (
            &*format!("{head}rules: [{{level: None, nonResourceURLs: [healthz]}}]\n"),
            "must start with /",
        ),
        (
            &*format!("{head}rules: [{{level: None, nonResourceURLs: ['/a*b']}}]\n"),
            "only at the end",
        ),
        (
            &*format!("{head}rules: [{{level: None, namespaces: [a], nonResourceURLs: [/x]}}]\n"),
            "both regular resources and non-resource URLs",
        ),
        (
            &*format!("{head}rules: [{{level: None, resources: [{{group: apps/v1}}]}}]\n"),
            "group/version",
        ),
        (&*format!("{head}rulez: []\n"), "unknown field `rulez`"),
        (head, "loaded illegal policy with 0 rules"),
    ];
    for (text, want) in cases {
        let err = Policy::parse(text, "/etc/p.yaml").unwrap_err().to_string();
        assert!(err.starts_with("audit policy /etc/p.yaml: "), "{err}");
        assert!(err.contains(want), "{text}: {err}");
    }
}
