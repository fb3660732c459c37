//! Acceptance (issue 15, built-in kinds): what a stock 1.33 server serves of the RBAC,
//! networking, node, certificates, apiregistration, events.k8s.io and autoscaling groups,
//! driven with stock kubectl 1.33 and 1.27: `api-resources`, a Helm-chart-like manifest set
//! applied and read back, ClusterRole aggregation, HPAs through autoscaling/v1 and v2,
//! events through events.k8s.io, `kubectl autoscale` and `kubectl certificate approve`
//! (protobuf bodies), and upstream's 422s for bad objects.

// Test code: a failed setup step should fail the test loudly.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::{wait_for, Kubectl, Server};
use serde_json::{json, Value};

const CHART: &str = include_str!("fixtures/chart.yaml");

/// `kubectl api-resources -o wide` rows, cut at the header's column offsets (SHORTNAMES
/// and CATEGORIES may be empty, so splitting on spaces would misalign them).
fn api_resource_rows(table: &str) -> Vec<Vec<String>> {
    let mut lines = table.lines();
    let header = lines.next().unwrap_or("");
    let starts: Vec<usize> = header
        .match_indices(|c: char| c.is_ascii_uppercase())
        .map(|(i, _)| i)
        .filter(|&i| i == 0 || header.as_bytes()[i - 1] == b' ')
        .collect();
    lines
        .map(|l| {
            starts
                .iter()
                .enumerate()
                .map(|(n, &s)| {
                    let e = starts.get(n + 1).copied().unwrap_or(l.len()).min(l.len());
                    l.get(s.min(l.len())..e).unwrap_or("").trim().to_string()
                })
                .collect()
        })
        .collect()
}

const ALL_VERBS: &str = "create,delete,deletecollection,get,list,patch,update,watch";

/// `(name, shortnames, apiVersion, namespaced, kind, categories)` as a stock 1.33 server
/// lists them, every verb for each.
const EXPECTED_RESOURCES: &[(&str, &str, &str, &str, &str, &str)] = &[
    (
        "apiservices",
        "",
        "apiregistration.k8s.io/v1",
        "false",
        "APIService",
        "api-extensions",
    ),
    (
        "horizontalpodautoscalers",
        "hpa",
        "autoscaling/v2",
        "true",
        "HorizontalPodAutoscaler",
        "all",
    ),
    (
        "certificatesigningrequests",
        "csr",
        "certificates.k8s.io/v1",
        "false",
        "CertificateSigningRequest",
        "",
    ),
    ("events", "ev", "events.k8s.io/v1", "true", "Event", ""),
    (
        "ingressclasses",
        "",
        "networking.k8s.io/v1",
        "false",
        "IngressClass",
        "",
    ),
    (
        "ingresses",
        "ing",
        "networking.k8s.io/v1",
        "true",
        "Ingress",
        "",
    ),
    (
        "ipaddresses",
        "ip",
        "networking.k8s.io/v1",
        "false",
        "IPAddress",
        "",
    ),
    (
        "networkpolicies",
        "netpol",
        "networking.k8s.io/v1",
        "true",
        "NetworkPolicy",
        "",
    ),
    (
        "servicecidrs",
        "",
        "networking.k8s.io/v1",
        "false",
        "ServiceCIDR",
        "",
    ),
    (
        "runtimeclasses",
        "",
        "node.k8s.io/v1",
        "false",
        "RuntimeClass",
        "",
    ),
    (
        "clusterrolebindings",
        "",
        "rbac.authorization.k8s.io/v1",
        "false",
        "ClusterRoleBinding",
        "",
    ),
    (
        "clusterroles",
        "",
        "rbac.authorization.k8s.io/v1",
        "false",
        "ClusterRole",
        "",
    ),
    (
        "rolebindings",
        "",
        "rbac.authorization.k8s.io/v1",
        "true",
        "RoleBinding",
        "",
    ),
    (
        "roles",
        "",
        "rbac.authorization.k8s.io/v1",
        "true",
        "Role",
        "",
    ),
    (
        "mutatingwebhookconfigurations",
        "",
        "admissionregistration.k8s.io/v1",
        "false",
        "MutatingWebhookConfiguration",
        "api-extensions",
    ),
    (
        "validatingadmissionpolicies",
        "",
        "admissionregistration.k8s.io/v1",
        "false",
        "ValidatingAdmissionPolicy",
        "api-extensions",
    ),
    (
        "validatingadmissionpolicybindings",
        "",
        "admissionregistration.k8s.io/v1",
        "false",
        "ValidatingAdmissionPolicyBinding",
        "api-extensions",
    ),
    (
        "validatingwebhookconfigurations",
        "",
        "admissionregistration.k8s.io/v1",
        "false",
        "ValidatingWebhookConfiguration",
        "api-extensions",
    ),
];

fn check_api_resources(k: &Kubectl) {
    let rows = api_resource_rows(&k.ok(&["api-resources", "-o", "wide"]));
    for (name, short, api_version, namespaced, kind, categories) in EXPECTED_RESOURCES {
        let row = rows
            .iter()
            .find(|r| r[0] == *name && r[2] == *api_version)
            .unwrap_or_else(|| panic!("api-resources lacks {name} {api_version}: {rows:?}"));
        let want: Vec<String> = [
            *name,
            *short,
            *api_version,
            *namespaced,
            *kind,
            ALL_VERBS,
            *categories,
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        assert_eq!(row[..7], want[..], "{name}");
    }
}

fn apply_chart_and_read_back(k: &Kubectl) {
    k.ok_stdin(&["apply", "-f", "-"], CHART);
    // Everything reads back.
    let out = k.ok_stdin(&["get", "-f", "-", "-o", "name"], CHART);
    assert_eq!(out.lines().count(), 14, "{out}");
    // A second apply changes nothing. kubectl itself still sends three patches, whatever
    // the server: stringData (never stored), a PDB's selector (patchStrategy=replace) and a
    // NetworkPolicy's rules (an atomic list, live with its defaulted protocol).
    let again = k.ok_stdin(&["apply", "-f", "-"], CHART);
    assert_eq!(again.matches("unchanged").count(), 11, "{again}");
    for kept in [
        "secret/shop-secret",
        "networkpolicy.networking.k8s.io/shop",
        "poddisruptionbudget.policy/shop",
    ] {
        assert!(again.contains(&format!("{kept} configured")), "{again}");
    }
    // Defaults as upstream fills them.
    let rb = k.json(&["get", "rolebinding", "shop-reader"]);
    assert!(rb["subjects"][0].get("apiGroup").is_none(), "{rb}");
    let crb = k.json(&["get", "clusterrolebinding", "shop-viewers"]);
    assert_eq!(crb["subjects"][0]["apiGroup"], "rbac.authorization.k8s.io");
    let np = k.json(&["get", "netpol", "shop"]);
    assert_eq!(np["spec"]["policyTypes"], json!(["Ingress"]));
    assert_eq!(np["spec"]["ingress"][0]["ports"][0]["protocol"], "TCP");
    assert_eq!(np["metadata"]["generation"], 1);
    // Printed as upstream prints them.
    let ing = k.ok(&["get", "ingress", "shop"]);
    assert!(
        ing.contains("shop-nginx") && ing.contains("shop.example.com") && ing.contains("80, 443"),
        "{ing}"
    );
    let bindings = k.ok(&["get", "rolebinding", "shop-reader", "-o", "wide"]);
    assert!(
        bindings.contains("Role/shop-reader") && bindings.contains("default/shop"),
        "{bindings}"
    );
    let hpa = k.ok(&["get", "hpa", "shop"]);
    assert!(
        hpa.contains("cpu: <unknown>/70%, memory: <unknown>/200Mi"),
        "{hpa}"
    );
    let netpol = k.ok(&["get", "netpol", "shop"]);
    assert!(netpol.contains("app.kubernetes.io/name=shop"), "{netpol}");
    // `kubectl get all` includes HPAs (category `all`).
    let all = k.ok(&["get", "all"]);
    assert!(
        all.contains("horizontalpodautoscaler.autoscaling/shop"),
        "{all}"
    );
}

/// The chart's aggregated ClusterRole lands in the bootstrap `view` role, and leaves it
/// when deleted.
fn aggregation(k: &Kubectl) {
    let view_has_orders = || {
        let view = k.json(&["get", "clusterrole", "view"]);
        view["rules"]
            .as_array()
            .is_some_and(|rules| rules.iter().any(|r| r["resources"] == json!(["orders"])))
    };
    wait_for("view to aggregate shop-view-orders", 20, || {
        view_has_orders().then_some(())
    });
    k.ok(&["delete", "clusterrole", "shop-view-orders"]);
    wait_for("view to drop shop-view-orders", 20, || {
        (!view_has_orders()).then_some(())
    });
    k.ok_stdin(&["apply", "-f", "-"], CHART);
}

/// One HPA, two shapes: v1 shows the CPU target and keeps the memory metric in upstream's
/// annotation; an update through v1 keeps it; v2 sees the change.
fn hpa_versions(k: &Kubectl) {
    let raw = k.ok(&[
        "get",
        "--raw",
        "/apis/autoscaling/v1/namespaces/default/horizontalpodautoscalers/shop",
    ]);
    let mut v1: Value = serde_json::from_str(&raw).unwrap();
    assert_eq!(v1["apiVersion"], "autoscaling/v1");
    assert_eq!(v1["spec"]["targetCPUUtilizationPercentage"], 70);
    let kept = v1["metadata"]["annotations"]["autoscaling.alpha.kubernetes.io/metrics"]
        .as_str()
        .unwrap();
    assert!(kept.contains("memory"), "{kept}");
    v1["spec"]["maxReplicas"] = json!(12);
    v1["metadata"]["annotations"]
        .as_object_mut()
        .unwrap()
        .remove("kubectl.kubernetes.io/last-applied-configuration");
    k.ok_stdin(&["replace", "-f", "-"], &v1.to_string());
    let v2 = k.json(&["get", "hpa.v2.autoscaling", "shop"]);
    assert_eq!(v2["spec"]["maxReplicas"], 12);
    assert_eq!(v2["spec"]["metrics"].as_array().unwrap().len(), 2, "{v2}");
    assert!(v2["metadata"]["annotations"]
        .get("autoscaling.alpha.kubernetes.io/metrics")
        .is_none());
    // `kubectl autoscale` sends a protobuf autoscaling/v1 (1.27: v1 as well).
    k.ok(&[
        "autoscale",
        "deployment",
        "shop",
        "--name",
        "shop-auto",
        "--max",
        "4",
        "--cpu-percent",
        "55",
    ]);
    let auto = k.json(&["get", "hpa.v2.autoscaling", "shop-auto"]);
    assert_eq!(
        auto["spec"]["metrics"][0]["resource"]["target"]["averageUtilization"],
        55
    );
    assert_eq!(auto["spec"]["minReplicas"], 1);
    k.ok(&["delete", "hpa", "shop-auto"]);
}

/// A core Event is an events.k8s.io Event too, with the fields renamed.
fn events_in_both_groups(k: &Kubectl) {
    let event = json!({"apiVersion": "v1", "kind": "Event",
        "metadata": {"name": "shop.manual", "namespace": "default"},
        "involvedObject": {"kind": "Deployment", "name": "shop", "namespace": "default", "apiVersion": "apps/v1"},
        "reason": "Tested", "message": "seen from both groups", "type": "Normal",
        "source": {"component": "api-breadth-test"}, "count": 1,
        "firstTimestamp": "2026-01-01T00:00:00Z", "lastTimestamp": "2026-01-01T00:00:00Z"});
    k.ok_stdin(&["apply", "-f", "-"], &event.to_string());
    let raw = k.ok(&[
        "get",
        "--raw",
        "/apis/events.k8s.io/v1/namespaces/default/events/shop.manual",
    ]);
    let new: Value = serde_json::from_str(&raw).unwrap();
    assert_eq!(new["apiVersion"], "events.k8s.io/v1");
    assert_eq!(new["note"], "seen from both groups");
    assert_eq!(new["regarding"]["name"], "shop");
    assert_eq!(new["deprecatedSource"]["component"], "api-breadth-test");
    let listed = k.ok(&["get", "events.events.k8s.io", "shop.manual"]);
    assert!(listed.contains("Tested"), "{listed}");
    k.ok(&["delete", "events.events.k8s.io", "shop.manual"]);
    k.fails(&["get", "event", "shop.manual"]);
}

/// base64 of a PEM `CERTIFICATE REQUEST` block (its DER is not parsed by the server).
const CSR_REQUEST: &str = "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURSBSRVFVRVNULS0tLS0KTUlJQlZqQ0J3QUlCQURBWE1SVXdFd1lEVlFRRERBeGhiR2xqWlVCbGVHRnRjR3hsTUlHZk1BMEdDU3FHU0liMwotLS0tLUVORCBDRVJUSUZJQ0FURSBSRVFVRVNULS0tLS0K";

fn certificate_signing(k: &Kubectl, name: &str) {
    let request = CSR_REQUEST;
    let csr = json!({"apiVersion": "certificates.k8s.io/v1", "kind": "CertificateSigningRequest",
        "metadata": {"name": name},
        "spec": {"request": request, "signerName": "kubernetes.io/kube-apiserver-client",
            "expirationSeconds": 86400, "usages": ["client auth"]}});
    k.ok_stdin(&["create", "-f", "-"], &csr.to_string());
    let pending = k.ok(&["get", "csr", name]);
    assert!(
        pending.contains("Pending") && pending.contains("24h"),
        "{pending}"
    );
    // `kubectl certificate approve` PUTs a protobuf body to the `approval` subresource.
    k.ok(&["certificate", "approve", name]);
    let approved = k.json(&["get", "csr", name]);
    assert_eq!(approved["status"]["conditions"][0]["type"], "Approved");
    assert!(k.ok(&["get", "csr", name]).contains("Approved"));
    // The spec is immutable.
    let mut changed = approved.clone();
    changed["spec"]["expirationSeconds"] = json!(7200);
    let err = k.fails_stdin(&["replace", "-f", "-"], &changed.to_string());
    assert!(
        err.contains("spec: Invalid value") && err.contains("field is immutable"),
        "{err}"
    );
}

/// Upstream's 422s, word for word.
fn bad_input(k: &Kubectl) {
    let cases: &[(&str, &[&str])] = &[
        (
            "{\"apiVersion\":\"rbac.authorization.k8s.io/v1\",\"kind\":\"Role\",\"metadata\":{\"name\":\"bad\"},\"rules\":[{\"apiGroups\":[\"\"],\"resources\":[\"pods\"]}]}",
            &["The Role \"bad\" is invalid: rules[0].verbs: Required value: verbs must contain at least one value"],
        ),
        (
            "{\"apiVersion\":\"rbac.authorization.k8s.io/v1\",\"kind\":\"ClusterRoleBinding\",\"metadata\":{\"name\":\"bad\"},\"roleRef\":{\"apiGroup\":\"rbac.authorization.k8s.io\",\"kind\":\"Role\",\"name\":\"x\"},\"subjects\":[{\"kind\":\"ServiceAccount\",\"name\":\"sa\"}]}",
            &[
                "roleRef.kind: Unsupported value: \"Role\": supported values: \"ClusterRole\"",
                "subjects[0].namespace: Required value",
            ],
        ),
        (
            "{\"apiVersion\":\"networking.k8s.io/v1\",\"kind\":\"Ingress\",\"metadata\":{\"name\":\"bad\"},\"spec\":{\"rules\":[{\"host\":\"1.2.3.4\",\"http\":{\"paths\":[{\"path\":\"/\",\"backend\":{\"service\":{\"name\":\"s\",\"port\":{\"number\":80}}}}]}}]}}",
            &[
                "spec.rules[0].host: Invalid value: \"1.2.3.4\": must be a DNS name, not an IP address",
                "spec.rules[0].http.paths[0].pathType: Required value: pathType must be specified",
            ],
        ),
        (
            "{\"apiVersion\":\"networking.k8s.io/v1\",\"kind\":\"NetworkPolicy\",\"metadata\":{\"name\":\"bad\"},\"spec\":{\"podSelector\":{},\"ingress\":[{\"from\":[{\"ipBlock\":{\"cidr\":\"10.0.0.0/16\",\"except\":[\"10.1.0.0/24\"]}}]}]}}",
            &["spec.ingress[0].from[0].ipBlock.except[0]: Invalid value: \"10.1.0.0/24\": must be a strict subset of `cidr`"],
        ),
        (
            "{\"apiVersion\":\"autoscaling/v2\",\"kind\":\"HorizontalPodAutoscaler\",\"metadata\":{\"name\":\"bad\"},\"spec\":{\"scaleTargetRef\":{\"kind\":\"Deployment\",\"name\":\"x\"},\"minReplicas\":5,\"maxReplicas\":2}}",
            &["spec.maxReplicas: Invalid value: 2: must be greater than or equal to `minReplicas`"],
        ),
        (
            "{\"apiVersion\":\"apiregistration.k8s.io/v1\",\"kind\":\"APIService\",\"metadata\":{\"name\":\"v1.wrong\"},\"spec\":{\"group\":\"foo.io\",\"version\":\"v1\",\"groupPriorityMinimum\":100,\"versionPriority\":10}}",
            &["metadata.name: Invalid value: \"v1.wrong\": must be `spec.version+\".\"+spec.group`: \"v1.foo.io\""],
        ),
        (
            "{\"apiVersion\":\"node.k8s.io/v1\",\"kind\":\"RuntimeClass\",\"metadata\":{\"name\":\"bad\"},\"handler\":\"Not_A_Label\"}",
            &["handler: Invalid value: \"Not_A_Label\": a lowercase RFC 1123 label must consist of"],
        ),
        (
            "{\"apiVersion\":\"certificates.k8s.io/v1\",\"kind\":\"CertificateSigningRequest\",\"metadata\":{\"name\":\"bad\"},\"spec\":{\"request\":\"aGVsbG8=\",\"signerName\":\"nodomain\",\"usages\":[\"flying\"]}}",
            &[
                "spec.request: Invalid value: []byte{...}: PEM block type must be CERTIFICATE REQUEST",
                "spec.usages[0]: Unsupported value: \"flying\"",
            ],
        ),
    ];
    for (body, wants) in cases {
        let err = k.fails_stdin(&["create", "-f", "-"], body);
        for want in *wants {
            assert!(err.contains(want), "want {want:?} in:\n{err}");
        }
    }
    // A binding's roleRef never changes.
    k.ok(&[
        "create",
        "rolebinding",
        "fixed",
        "--role=shop-reader",
        "--user=bob",
    ]);
    let err = k.fails(&[
        "patch",
        "rolebinding",
        "fixed",
        "--type=merge",
        "-p",
        "{\"roleRef\":{\"name\":\"other\"}}",
    ]);
    assert!(
        err.contains("roleRef: Invalid value: rbac.RoleRef{APIGroup:\"rbac.authorization.k8s.io\", Kind:\"Role\", Name:\"other\"}: cannot change roleRef"),
        "{err}"
    );
    k.ok(&["delete", "rolebinding", "fixed"]);
}

/// A ValidatingAdmissionPolicy denies with its message (Deny) or warns (Warn); one that
/// does not compile is refused.
fn admission_policy(k: &Kubectl) {
    let policy = json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": "replica-limit"},
        "spec": {"failurePolicy": "Fail",
            "matchConstraints": {"resourceRules": [{"apiGroups": ["apps"], "apiVersions": ["v1"],
                "operations": ["CREATE", "UPDATE"], "resources": ["deployments"]}]},
            "validations": [{"expression": "object.spec.replicas <= 5",
                "messageExpression": "'at most 5 replicas, not ' + string(object.spec.replicas)"}]}});
    k.ok_stdin(&["apply", "-f", "-"], &policy.to_string());
    let binding = json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": "replica-limit-default"},
        "spec": {"policyName": "replica-limit", "validationActions": ["Deny"],
            "matchResources": {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "default"}}}}});
    k.ok_stdin(&["apply", "-f", "-"], &binding.to_string());
    let err = k.fails(&[
        "create",
        "deployment",
        "big",
        "--image=httpd",
        "--replicas=7",
    ]);
    assert!(
        err.contains("ValidatingAdmissionPolicy 'replica-limit' with binding 'replica-limit-default' denied request: at most 5 replicas, not 7"),
        "{err}"
    );
    k.ok(&[
        "create",
        "deployment",
        "small",
        "--image=httpd",
        "--replicas=2",
    ]);
    let err = k.fails(&[
        "patch",
        "deployment",
        "small",
        "--type=merge",
        "-p",
        r#"{"spec":{"replicas":9}}"#,
    ]);
    assert!(err.contains("at most 5 replicas, not 9"), "{err}");
    // Another namespace is not bound.
    k.ok(&["create", "namespace", "free"]);
    k.ok(&[
        "create",
        "deployment",
        "big",
        "--image=httpd",
        "--replicas=7",
        "-n",
        "free",
    ]);
    // Warn instead of Deny: the write goes through with kubectl's "Warning:".
    let mut warn = binding.clone();
    warn["spec"]["validationActions"] = json!(["Warn"]);
    k.ok_stdin(&["apply", "-f", "-"], &warn.to_string());
    let out = k.output(&[
        "create",
        "deployment",
        "warned",
        "--image=httpd",
        "--replicas=8",
    ]);
    assert!(out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("Warning: Validation failed for ValidatingAdmissionPolicy 'replica-limit'"),
        "{stderr}"
    );
    k.ok(&[
        "delete",
        "validatingadmissionpolicybinding",
        "replica-limit-default",
    ]);
    parameterized_policy(k);
    // Bad policies.
    let mut bad = policy.clone();
    bad["metadata"]["name"] = json!("bad");
    bad["spec"]["validations"] = json!([{"expression": "object.spec.replicas <="}]);
    let err = k.fails_stdin(&["create", "-f", "-"], &bad.to_string());
    assert!(
        err.contains("spec.validations[0].expression") && err.contains("compilation failed"),
        "{err}"
    );
    let both = json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": "both"}, "spec": {"policyName": "replica-limit", "validationActions": ["Deny", "Warn"]}});
    let err = k.fails_stdin(&["create", "-f", "-"], &both.to_string());
    assert!(
        err.contains("Deny and Warn may not be used together"),
        "{err}"
    );
}

/// A policy with a parameter kind (a ConfigMap per namespace holds the limit) and a
/// variable: denied over the limit, allowed under it, denied when the parameter is gone.
fn parameterized_policy(k: &Kubectl) {
    let policy = json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": "replica-limit-param"},
        "spec": {"paramKind": {"apiVersion": "v1", "kind": "ConfigMap"},
            "matchConstraints": {"resourceRules": [{"apiGroups": ["apps"], "apiVersions": ["v1"],
                "operations": ["CREATE", "UPDATE"], "resources": ["deployments"]}]},
            "variables": [{"name": "limit", "expression": "int(params.data.maxReplicas)"}],
            "validations": [{"expression": "object.spec.replicas <= variables.limit",
                "messageExpression": "'at most ' + string(variables.limit) + ' replicas in ' + namespaceObject.metadata.name"}]}});
    k.ok_stdin(&["apply", "-f", "-"], &policy.to_string());
    let binding = json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": "replica-limit-param"},
        "spec": {"policyName": "replica-limit-param", "validationActions": ["Deny"],
            "paramRef": {"name": "replica-limits", "parameterNotFoundAction": "Deny"},
            "matchResources": {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "limited"}}}}});
    k.ok_stdin(&["apply", "-f", "-"], &binding.to_string());
    k.ok(&["create", "namespace", "limited"]);
    let err = k.fails(&[
        "create",
        "deployment",
        "a",
        "--image=httpd",
        "-n",
        "limited",
    ]);
    assert!(
        err.contains("no params found for policy binding with `Deny` parameterNotFoundAction"),
        "{err}"
    );
    k.ok(&[
        "create",
        "configmap",
        "replica-limits",
        "-n",
        "limited",
        "--from-literal=maxReplicas=3",
    ]);
    let err = k.fails(&[
        "create",
        "deployment",
        "a",
        "--image=httpd",
        "--replicas=4",
        "-n",
        "limited",
    ]);
    assert!(
        err.contains("denied request: at most 3 replicas in limited"),
        "{err}"
    );
    k.ok(&[
        "create",
        "deployment",
        "a",
        "--image=httpd",
        "--replicas=3",
        "-n",
        "limited",
    ]);
    // A binding without paramRef for a policy with paramKind, and a paramRef without its
    // not-found action, are refused.
    let mut no_action = binding.clone();
    no_action["metadata"]["name"] = json!("no-action");
    no_action["spec"]["paramRef"] = json!({"name": "replica-limits"});
    let err = k.fails_stdin(&["create", "-f", "-"], &no_action.to_string());
    assert!(
        err.contains("spec.paramRef.parameterNotFoundAction: Required value"),
        "{err}"
    );
    k.ok(&[
        "delete",
        "validatingadmissionpolicybinding",
        "replica-limit-param",
    ]);
}

/// `kubectl explain` of built-in kinds, from the server's OpenAPI v3 documents; and
/// `kubectl apply` still computes strategic merge patches with upstream's strategies
/// (an env var removed from the manifest is removed from the object).
fn explain_built_in_kinds(k: &Kubectl) {
    let pods = k.ok(&["explain", "pods"]);
    assert!(pods.contains("KIND:") && pods.contains("Pod"), "{pods}");
    assert!(pods.contains("Pod is a collection of containers"), "{pods}");
    let replicas = k.ok(&["explain", "deployment.spec.replicas"]);
    assert!(replicas.contains("Number of desired pods"), "{replicas}");
    let ports = k.ok(&["explain", "svc.spec.ports", "--recursive"]);
    assert!(
        ports.contains("targetPort") && ports.contains("nodePort"),
        "{ports}"
    );
    let rules = k.ok(&["explain", "clusterrole.rules"]);
    assert!(rules.contains("verbs"), "{rules}");
    let metrics = k.ok(&["explain", "hpa.spec.metrics"]);
    assert!(metrics.contains("containerResource"), "{metrics}");
    let webhooks = k.ok(&[
        "explain",
        "validatingwebhookconfiguration.webhooks.clientConfig",
    ]);
    assert!(webhooks.contains("caBundle"), "{webhooks}");
    let env = |values: &str| {
        format!(
            "apiVersion: apps/v1\nkind: Deployment\nmetadata: {{name: explained}}\nspec:\n  selector: {{matchLabels: {{app: e}}}}\n  template:\n    metadata: {{labels: {{app: e}}}}\n    spec:\n      containers:\n      - name: c\n        image: nginx\n        env: [{values}]\n"
        )
    };
    k.ok_stdin(
        &["apply", "-f", "-"],
        &env(r#"{name: ONE, value: "1"}, {name: TWO, value: "2"}"#),
    );
    let out = k.output_stdin(&["apply", "-f", "-"], &env(r#"{name: ONE, value: "1"}"#));
    assert!(out.status.success());
    assert!(
        !String::from_utf8_lossy(&out.stderr).contains("warning"),
        "{out:?}"
    );
    let d = k.json(&["get", "deployment", "explained"]);
    assert_eq!(
        d["spec"]["template"]["spec"]["containers"][0]["env"],
        json!([{"name": "ONE", "value": "1"}])
    );
}

fn scenario(minor: u32) {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path());
    let k = Kubectl::new(minor, &server);
    check_api_resources(&k);
    apply_chart_and_read_back(&k);
    aggregation(&k);
    hpa_versions(&k);
    events_in_both_groups(&k);
    certificate_signing(&k, "alice");
    bad_input(&k);
    admission_policy(&k);
    explain_built_in_kinds(&k);
    let apiservices = k.ok(&["get", "apiservices"]);
    assert!(
        apiservices.contains("v2.autoscaling") && apiservices.contains("Local"),
        "{apiservices}"
    );
    let log = server.log();
    assert!(!log.contains("panicked"), "{log}");
}

#[test]
fn kubectl_1_33() {
    scenario(33);
}

#[test]
fn kubectl_1_27() {
    scenario(27);
}
