//! Upstream's netpol cases (and ones it lacks) as policies and label changes, for the
//! truth tables in `netpol.rs`.

use std::collections::BTreeMap;

use serde_json::{json, Value};

use super::{policy, NS_NAME};

pub(super) type Case = (&'static str, Vec<Value>, Vec<Vec<String>>);

fn ns_is(ns: &str) -> Value {
    json!({"matchLabels": {NS_NAME: ns}})
}

fn ns_not_in(ns: &str) -> Value {
    json!({"matchExpressions": [{"key": NS_NAME, "operator": "NotIn", "values": [ns]}]})
}

fn pod_is(pod: &str) -> Value {
    json!({"matchLabels": {"pod": pod}})
}

fn ingress(pod: Value, rules: Value) -> Value {
    json!({"podSelector": pod, "policyTypes": ["Ingress"], "ingress": rules})
}

fn egress(pod: Value, rules: Value) -> Value {
    json!({"podSelector": pod, "policyTypes": ["Egress"], "egress": rules})
}

fn label(args: &[&str]) -> Vec<String> {
    let mut all = vec!["label".to_string()];
    all.extend(args.iter().map(|a| a.to_string()));
    all.push("--overwrite".into());
    all
}

/// Upstream's netpol cases over TCP 80 and 81 (`T` numbers as in cairn-netpol's unit
/// tests), and the ones it lacks (`D`).
pub(super) fn cases(ips: &BTreeMap<String, String>) -> Vec<Case> {
    let p = |ns: &str, name: &str, spec: Value| policy(ns, name, &spec);
    let all = json!({});
    let yb = format!("{}/32", ips["y/b"]);
    let xb = format!("{}/32", ips["x/b"]);
    vec![
        (
            "T1 default deny ingress",
            vec![p("x", "deny", ingress(all.clone(), json!([])))],
            vec![],
        ),
        (
            "T2 default deny all",
            vec![p(
                "x",
                "deny-all",
                json!({"podSelector": {}, "policyTypes": ["Ingress", "Egress"]}),
            )],
            vec![],
        ),
        (
            "T3 from a pod of the namespace",
            vec![p(
                "x",
                "x-a-allows-x-b",
                ingress(
                    pod_is("a"),
                    json!([{"from": [{"podSelector": pod_is("b")}]}]),
                ),
            )],
            vec![],
        ),
        (
            "T4 a second policy widens the first",
            vec![
                p("x", "deny-all", ingress(all.clone(), json!([]))),
                p(
                    "x",
                    "allow-all-to-a",
                    ingress(
                        pod_is("a"),
                        json!([{"from": [{"podSelector": {}, "namespaceSelector": {}}]}]),
                    ),
                ),
            ],
            vec![],
        ),
        (
            "T5 every namespace",
            vec![p(
                "x",
                "allow-from-another-ns",
                ingress(pod_is("a"), json!([{"from": [{"namespaceSelector": {}}]}])),
            )],
            vec![],
        ),
        (
            "T6 from another namespace by name",
            vec![p(
                "x",
                "allow-y",
                ingress(
                    pod_is("a"),
                    json!([{"from": [{"namespaceSelector": ns_is("y")}]}]),
                ),
            )],
            vec![],
        ),
        (
            "T7 pod selector with expressions",
            vec![p(
                "x",
                "allow-x-b",
                ingress(
                    pod_is("a"),
                    json!([{"from": [{"podSelector": {"matchExpressions": [{"key": "pod", "operator": "In", "values": ["b"]}]}}]}]),
                ),
            )],
            vec![],
        ),
        (
            "T9 pod or namespace selector",
            vec![p(
                "x",
                "or",
                ingress(
                    pod_is("a"),
                    json!([{"from": [{"namespaceSelector": ns_not_in("x")}, {"podSelector": pod_is("b")}]}]),
                ),
            )],
            vec![],
        ),
        (
            "T10 pod and namespace selector",
            vec![p(
                "x",
                "and",
                ingress(
                    pod_is("a"),
                    json!([{"from": [{"namespaceSelector": ns_not_in("x"), "podSelector": pod_is("b")}]}]),
                ),
            )],
            vec![],
        ),
        (
            "T11 several pods and namespaces",
            vec![p(
                "x",
                "bc",
                ingress(
                    pod_is("a"),
                    json!([{"from": [{"namespaceSelector": ns_not_in("x"), "podSelector": {"matchExpressions": [{"key": "pod", "operator": "In", "values": ["b", "c"]}]}}]}]),
                ),
            )],
            vec![],
        ),
        (
            "T12 any of two pod selectors",
            vec![p(
                "x",
                "b-or-c",
                ingress(
                    pod_is("a"),
                    json!([{"from": [{"podSelector": pod_is("b")}, {"podSelector": pod_is("c")}]}]),
                ),
            )],
            vec![],
        ),
        (
            "T13 one pod of another namespace",
            vec![p(
                "x",
                "y-a",
                ingress(
                    pod_is("a"),
                    json!([{"from": [{"namespaceSelector": ns_is("y"), "podSelector": pod_is("a")}]}]),
                ),
            )],
            vec![],
        ),
        (
            "T14 a port",
            vec![p(
                "x",
                "y-81",
                ingress(
                    pod_is("a"),
                    json!([{"from": [{"namespaceSelector": ns_is("y")}], "ports": [{"port": 81, "protocol": "TCP"}]}]),
                ),
            )],
            vec![],
        ),
        (
            "T15 stacked policies",
            vec![
                p(
                    "x",
                    "y-81",
                    ingress(
                        pod_is("a"),
                        json!([{"from": [{"namespaceSelector": ns_is("y")}], "ports": [{"port": 81}]}]),
                    ),
                ),
                p(
                    "x",
                    "y-80",
                    ingress(
                        pod_is("a"),
                        json!([{"from": [{"namespaceSelector": ns_is("y")}], "ports": [{"port": 80}]}]),
                    ),
                ),
            ],
            vec![],
        ),
        (
            "T16 allow all with an empty rule",
            vec![p("x", "allow-all", ingress(all.clone(), json!([{}])))],
            vec![],
        ),
        (
            "T17 one named port",
            vec![p(
                "x",
                "named",
                ingress(all.clone(), json!([{"ports": [{"port": "serve-81-tcp"}]}])),
            )],
            vec![],
        ),
        (
            "T18 a namespace on one named port",
            vec![p(
                "x",
                "y-named",
                ingress(
                    pod_is("a"),
                    json!([{"from": [{"namespaceSelector": ns_is("y")}], "ports": [{"port": "serve-80-tcp"}]}]),
                ),
            )],
            vec![],
        ),
        (
            "T19 egress on one named port",
            vec![p(
                "x",
                "egress-80",
                egress(all.clone(), json!([{"ports": [{"port": "serve-80-tcp"}]}])),
            )],
            vec![],
        ),
        (
            "T21 a namespace label moves it in",
            vec![p(
                "x",
                "ns2",
                ingress(
                    pod_is("a"),
                    json!([{"from": [{"namespaceSelector": {"matchLabels": {"ns2": "updated"}}}]}]),
                ),
            )],
            vec![label(&["namespace", "y", "ns2=updated"])],
        ),
        (
            "T22 a pod label moves it in",
            vec![p(
                "x",
                "pod2",
                ingress(
                    pod_is("a"),
                    json!([{"from": [{"podSelector": {"matchLabels": {"pod": "b", "pod2": "updated"}}}]}]),
                ),
            )],
            vec![label(&["-n", "x", "pod", "b", "pod2=updated"])],
        ),
        (
            "T23 an empty pod selector is the policy's namespace",
            vec![p(
                "x",
                "own-ns",
                ingress(all.clone(), json!([{"from": [{"podSelector": {}}]}])),
            )],
            vec![],
        ),
        (
            "T24 a pod label moves the target in",
            vec![p(
                "x",
                "isolated",
                ingress(json!({"matchLabels": {"target": "isolated"}}), json!([])),
            )],
            vec![label(&["-n", "x", "pod", "a", "target=isolated"])],
        ),
        (
            "T25 deny egress of one pod",
            vec![p("x", "deny-egress-a", egress(pod_is("a"), json!([])))],
            vec![],
        ),
        (
            "T26 default deny egress",
            vec![p("x", "deny-egress", egress(all.clone(), json!([])))],
            vec![],
        ),
        (
            "T27 ingress and egress together",
            vec![p(
                "x",
                "both",
                json!({"podSelector": pod_is("a"), "policyTypes": ["Egress", "Ingress"],
            "ingress": [{"from": [{"podSelector": pod_is("b")}]}], "egress": [{"ports": [{"port": 80}]}]}),
            )],
            vec![],
        ),
        (
            "T28 the client's egress denies what the server allows",
            vec![
                p(
                    "x",
                    "to-y-a",
                    egress(
                        pod_is("a"),
                        json!([{"to": [{"namespaceSelector": ns_is("y"), "podSelector": pod_is("a")}]}]),
                    ),
                ),
                p(
                    "y",
                    "from-x-a-on-a",
                    ingress(
                        pod_is("a"),
                        json!([{"from": [{"namespaceSelector": ns_is("x"), "podSelector": pod_is("a")}]}]),
                    ),
                ),
                p(
                    "y",
                    "from-x-a-on-b",
                    ingress(
                        pod_is("b"),
                        json!([{"from": [{"namespaceSelector": ns_is("x"), "podSelector": pod_is("a")}]}]),
                    ),
                ),
            ],
            vec![],
        ),
        (
            "T29 egress to a pod of another namespace",
            vec![p(
                "x",
                "to-y-a",
                egress(
                    pod_is("a"),
                    json!([{"to": [{"namespaceSelector": ns_is("y"), "podSelector": pod_is("a")}]}]),
                ),
            )],
            vec![],
        ),
        (
            "T34 egress to a CIDR",
            vec![p(
                "x",
                "cidr",
                egress(pod_is("a"), json!([{"to": [{"ipBlock": {"cidr": yb}}]}])),
            )],
            vec![],
        ),
        (
            "T35 egress to a CIDR with an exception",
            vec![p(
                "x",
                "cidr-except",
                egress(
                    pod_is("a"),
                    json!([{"to": [{"ipBlock": {"cidr": "10.0.0.0/8", "except": [xb]}}]}]),
                ),
            )],
            vec![],
        ),
        (
            "T37 ingress and egress independently",
            vec![
                p("x", "egress-all", egress(pod_is("a"), json!([{}]))),
                p("x", "deny-in", ingress(pod_is("a"), json!([]))),
            ],
            vec![],
        ),
        (
            "T38 SCTP is not TCP",
            vec![
                p("x", "deny", ingress(all.clone(), json!([]))),
                p(
                    "x",
                    "sctp-81",
                    ingress(
                        pod_is("a"),
                        json!([{"ports": [{"port": 81, "protocol": "SCTP"}]}]),
                    ),
                ),
            ],
            vec![],
        ),
        (
            "T42 egress to namespaces not in a list",
            vec![p(
                "x",
                "not-y",
                egress(
                    pod_is("a"),
                    json!([{"to": [{"namespaceSelector": ns_not_in("y")}]}]),
                ),
            )],
            vec![],
        ),
        (
            "D1 endPort covers both",
            vec![p(
                "x",
                "range",
                ingress(
                    pod_is("a"),
                    json!([{"ports": [{"port": 80, "endPort": 81}]}]),
                ),
            )],
            vec![],
        ),
        (
            "D2 endPort leaves 80 out",
            vec![p(
                "x",
                "range",
                ingress(
                    pod_is("a"),
                    json!([{"ports": [{"port": 81, "endPort": 90}]}]),
                ),
            )],
            vec![],
        ),
        (
            "D5 ingress from a CIDR",
            vec![p(
                "x",
                "from-y-b",
                ingress(pod_is("a"), json!([{"from": [{"ipBlock": {"cidr": yb}}]}])),
            )],
            vec![],
        ),
        (
            "D16 a policy leaves other namespaces alone",
            vec![p(
                "y",
                "deny-all",
                json!({"podSelector": {}, "policyTypes": ["Ingress", "Egress"]}),
            )],
            vec![],
        ),
    ]
}
