//! Upstream's netpol cases (T: `network_policy.go`, U: its UDP and S: its SCTP variants),
//! and cases upstream's suite lacks, worked out from the API's rules (D). Each builds the
//! expected matrix with upstream's `Expect*` calls, in upstream's order.

use serde_json::json;

use super::{ip_of, Model, Reachability};
use crate::model::Protocol::{Sctp, Tcp, Udp};

const NS_NAME: &str = "kubernetes.io/metadata.name";

fn all() -> Reachability {
    Reachability::all(true)
}

fn ns_is(ns: &str) -> serde_json::Value {
    json!({"matchLabels": {NS_NAME: ns}})
}

fn ns_not_in(ns: &str) -> serde_json::Value {
    json!({"matchExpressions": [{"key": NS_NAME, "operator": "NotIn", "values": [ns]}]})
}

fn pod_is(pod: &str) -> serde_json::Value {
    json!({"matchLabels": {"pod": pod}})
}

fn deny_ingress() -> serde_json::Value {
    json!({"podSelector": {}, "policyTypes": ["Ingress"], "ingress": []})
}

#[test]
fn t01_default_deny_ingress() {
    let mut m = Model::new();
    m.apply("x", "deny-ingress", deny_ingress());
    m.expect(Tcp, 80, &all().peer("", "x", false));
}

#[test]
fn t02_default_deny_all() {
    let mut m = Model::new();
    let spec = json!({"podSelector": {}, "policyTypes": ["Ingress", "Egress"], "ingress": [], "egress": []});
    m.apply("x", "deny-all", spec);
    m.expect(Tcp, 80, &all().peer("", "x", false).peer("x", "", false));
}

#[test]
fn t03_allow_from_pods_of_the_namespace_by_pod_selector() {
    let mut m = Model::new();
    let spec = json!({"podSelector": pod_is("a"), "policyTypes": ["Ingress"],
        "ingress": [{"from": [{"podSelector": pod_is("b")}]}]});
    m.apply("x", "x-a-allows-x-b", spec);
    m.expect(
        Tcp,
        80,
        &all().ingress("x/a", false).peer("x/b", "x/a", true),
    );
}

#[test]
fn t04_a_second_policy_widens_the_first_for_its_target() {
    let mut m = Model::new();
    m.apply("x", "deny-all", deny_ingress());
    let spec = json!({"podSelector": pod_is("a"), "policyTypes": ["Ingress"],
        "ingress": [{"from": [{"podSelector": {}, "namespaceSelector": {}}]}]});
    m.apply("x", "allow-all-to-a", spec);
    let want = all()
        .ingress("x/a", true)
        .ingress("x/b", false)
        .ingress("x/c", false);
    m.expect(Tcp, 80, &want);
}

#[test]
fn t05_an_empty_namespace_selector_allows_every_namespace() {
    let mut m = Model::new();
    let spec = json!({"podSelector": pod_is("a"), "policyTypes": ["Ingress"],
        "ingress": [{"from": [{"namespaceSelector": {"matchLabels": {}}}]}]});
    m.apply("x", "allow-from-another-ns", spec);
    m.expect(Tcp, 80, &all());
}

#[test]
fn t06_t41_allow_only_from_another_namespace_by_its_name_label() {
    let mut m = Model::new();
    let spec = json!({"podSelector": pod_is("a"), "policyTypes": ["Ingress"],
        "ingress": [{"from": [{"namespaceSelector": ns_is("y")}]}]});
    m.apply("x", "allow-client-a-via-ns-selector", spec);
    m.expect(
        Tcp,
        80,
        &all().peer("x", "x/a", false).peer("z", "x/a", false),
    );
}

#[test]
fn t07_pod_selector_with_match_expressions() {
    let mut m = Model::new();
    let from = json!({"matchExpressions": [{"key": "pod", "operator": "In", "values": ["b"]}]});
    let spec = json!({"podSelector": pod_is("a"), "policyTypes": ["Ingress"],
        "ingress": [{"from": [{"podSelector": from}]}]});
    m.apply("x", "allow-x-b", spec);
    m.expect(
        Tcp,
        80,
        &all().ingress("x/a", false).peer("x/b", "x/a", true),
    );
}

#[test]
fn t08_namespace_selector_with_match_expressions() {
    let mut m = Model::new();
    let ns = json!({"matchExpressions": [{"key": NS_NAME, "operator": "In", "values": ["y"]}]});
    let spec = json!({"podSelector": pod_is("a"), "policyTypes": ["Ingress"],
        "ingress": [{"from": [{"namespaceSelector": ns}]}]});
    m.apply("x", "allow-ns-y-match-selector", spec);
    m.expect(
        Tcp,
        80,
        &all().peer("x", "x/a", false).peer("z", "x/a", false),
    );
}

#[test]
fn t09_pod_selector_or_namespace_selector_as_two_peers() {
    let mut m = Model::new();
    let spec = json!({"podSelector": pod_is("a"), "policyTypes": ["Ingress"],
        "ingress": [{"from": [{"namespaceSelector": ns_not_in("x")}, {"podSelector": pod_is("b")}]}]});
    m.apply("x", "allow-ns-y-z-or-x-b", spec);
    m.expect(
        Tcp,
        80,
        &all().peer("x/a", "x/a", false).peer("x/c", "x/a", false),
    );
}

#[test]
fn t10_pod_selector_and_namespace_selector_in_one_peer() {
    let mut m = Model::new();
    let spec = json!({"podSelector": pod_is("a"), "policyTypes": ["Ingress"],
        "ingress": [{"from": [{"namespaceSelector": ns_not_in("x"), "podSelector": pod_is("b")}]}]});
    m.apply("x", "allow-ns-y-podselector-and-nsselector", spec);
    let want = all()
        .ingress("x/a", false)
        .peer("y/b", "x/a", true)
        .peer("z/b", "x/a", true);
    m.expect(Tcp, 80, &want);
}

#[test]
fn t11_multiple_pod_and_namespace_selectors() {
    let mut m = Model::new();
    let pods =
        json!({"matchExpressions": [{"key": "pod", "operator": "In", "values": ["b", "c"]}]});
    let spec = json!({"podSelector": pod_is("a"), "policyTypes": ["Ingress"],
        "ingress": [{"from": [{"namespaceSelector": ns_not_in("x"), "podSelector": pods}]}]});
    m.apply("x", "allow-ns-y-z-pod-b-c", spec);
    let want = all()
        .peer("x", "x/a", false)
        .peer("y/a", "x/a", false)
        .peer("z/a", "x/a", false);
    m.expect(Tcp, 80, &want);
}

#[test]
fn t12_any_of_several_pod_selectors() {
    let mut m = Model::new();
    let spec = json!({"podSelector": pod_is("a"), "policyTypes": ["Ingress"],
        "ingress": [{"from": [{"podSelector": pod_is("b")}, {"podSelector": pod_is("c")}]}]});
    m.apply("x", "allow-ns-x-pod-b-c", spec);
    let want = all()
        .ingress("x/a", false)
        .peer("x/b", "x/a", true)
        .peer("x/c", "x/a", true);
    m.expect(Tcp, 80, &want);
}

#[test]
fn t13_u3_s3_one_pod_of_another_namespace() {
    let spec = json!({"podSelector": pod_is("a"), "policyTypes": ["Ingress"],
        "ingress": [{"from": [{"namespaceSelector": ns_is("y"), "podSelector": pod_is("a")}]}]});
    let mut m = Model::new();
    m.apply("x", "allow-ns-y-pod-a-via-namespace-pod-selector", spec);
    for protocol in [Tcp, Udp, Sctp] {
        m.expect(
            protocol,
            80,
            &all().ingress("x/a", false).peer("y/a", "x/a", true),
        );
    }
}

#[test]
fn t14_u2_s2_ports_of_a_protocol() {
    for (protocol, name) in [(Tcp, "TCP"), (Udp, "UDP"), (Sctp, "SCTP")] {
        let mut m = Model::new();
        let spec = json!({"podSelector": pod_is("a"), "policyTypes": ["Ingress"],
            "ingress": [{"from": [{"namespaceSelector": ns_is("y")}], "ports": [{"port": 81, "protocol": name}]}]});
        m.apply("x", "allow-ingress-on-port-81", spec);
        let want = all()
            .peer("x", "x/a", false)
            .peer("y", "x/a", true)
            .peer("z", "x/a", false);
        m.expect(protocol, 81, &want);
        m.expect(protocol, 80, &all().ingress("x/a", false));
    }
}

#[test]
fn t15_stacked_policies_with_overlapping_pod_selectors() {
    let rule = |port: u16| {
        json!({"podSelector": pod_is("a"), "policyTypes": ["Ingress"],
        "ingress": [{"from": [{"namespaceSelector": ns_is("y")}], "ports": [{"port": port, "protocol": "TCP"}]}]})
    };
    let allowed = all()
        .peer("x", "x/a", false)
        .peer("y", "x/a", true)
        .peer("z", "x/a", false);
    let mut m = Model::new();
    m.apply("x", "allow-client-a-via-ns-selector", rule(81));
    m.expect(Tcp, 81, &allowed);
    m.expect(Tcp, 80, &all().ingress("x/a", false));
    m.apply("x", "allow-client-a-via-ns-selector-80", rule(80));
    m.expect(Tcp, 80, &allowed);
}

#[test]
fn t16_d11_allow_all_with_an_empty_rule() {
    let mut m = Model::new();
    m.apply(
        "x",
        "allow-all",
        json!({"podSelector": {"matchLabels": {}}, "policyTypes": ["Ingress"], "ingress": [{}]}),
    );
    m.expect(Tcp, 80, &all());
    m.expect(Tcp, 81, &all());
    // D11: the same without policyTypes (defaults to Ingress).
    let mut m = Model::new();
    m.apply(
        "x",
        "allow-all",
        json!({"podSelector": {}, "ingress": [{}]}),
    );
    m.expect(Tcp, 80, &all());
}

#[test]
fn t17_ingress_on_one_named_port() {
    let mut m = Model::new();
    let spec = json!({"podSelector": {}, "policyTypes": ["Ingress"],
        "ingress": [{"ports": [{"port": "serve-81-tcp"}]}]});
    m.apply("x", "allow-all-on-81", spec);
    m.expect(Tcp, 81, &all());
    m.expect(Tcp, 80, &all().peer("", "x", false));
}

#[test]
fn t18_from_a_namespace_on_one_named_port() {
    let mut m = Model::new();
    let spec = json!({"podSelector": pod_is("a"), "policyTypes": ["Ingress"],
        "ingress": [{"from": [{"namespaceSelector": ns_is("y")}], "ports": [{"port": "serve-80-tcp", "protocol": "TCP"}]}]});
    m.apply("x", "allow-y-on-80", spec);
    m.expect(
        Tcp,
        80,
        &all().peer("x", "x/a", false).peer("z", "x/a", false),
    );
    m.expect(Tcp, 81, &all().ingress("x/a", false));
}

#[test]
fn t19_egress_on_one_named_port_of_the_destination() {
    let mut m = Model::new();
    let spec = json!({"podSelector": {"matchLabels": {}}, "policyTypes": ["Egress"],
        "egress": [{"ports": [{"port": "serve-80-tcp"}]}]});
    m.apply("x", "allow-egress", spec);
    m.expect(Tcp, 80, &all());
    m.expect(Tcp, 81, &all().peer("x", "", false));
}

#[test]
fn t20_an_updated_policy_is_enforced() {
    let mut m = Model::new();
    m.apply(
        "x",
        "allow-all-mutate-to-deny-all",
        json!({"podSelector": {}, "policyTypes": ["Ingress"], "ingress": [{}]}),
    );
    m.expect(Tcp, 81, &all());
    m.apply("x", "allow-all-mutate-to-deny-all", deny_ingress());
    m.expect(Tcp, 81, &all().peer("", "x", false));
}

#[test]
fn t21_d12_a_namespace_label_moves_it_in_and_out() {
    let mut m = Model::new();
    let spec = json!({"podSelector": pod_is("a"), "policyTypes": ["Ingress"],
        "ingress": [{"from": [{"namespaceSelector": {"matchLabels": {"ns2": "updated"}}}]}]});
    m.apply("x", "allow-from-updated-ns", spec);
    m.expect(Tcp, 80, &all().ingress("x/a", false));
    m.label_namespace("y", &[("ns2", "updated")]);
    m.expect(Tcp, 80, &all().ingress("x/a", false).peer("y", "", true));
    m.label_namespace("y", &[]);
    m.expect(Tcp, 80, &all().ingress("x/a", false));
}

#[test]
fn t22_d13_a_pod_label_moves_a_peer_in_and_out() {
    let mut m = Model::new();
    let spec = json!({"podSelector": pod_is("a"), "policyTypes": ["Ingress"],
        "ingress": [{"from": [{"podSelector": {"matchLabels": {"pod": "b", "pod2": "updated"}}}]}]});
    m.apply("x", "allow-from-updated-pod", spec);
    m.expect(Tcp, 80, &all().ingress("x/a", false));
    m.label_pod("x/b", &[("pod", "b"), ("pod2", "updated")]);
    m.expect(
        Tcp,
        80,
        &all().ingress("x/a", false).peer("x/b", "x/a", true),
    );
    m.label_pod("x/b", &[("pod", "b")]);
    m.expect(Tcp, 80, &all().ingress("x/a", false));
}

#[test]
fn t23_an_empty_pod_selector_peer_means_the_policy_namespace() {
    let mut m = Model::new();
    let spec = json!({"podSelector": {}, "policyTypes": ["Ingress"],
        "ingress": [{"from": [{"podSelector": {"matchLabels": {}}}]}]});
    m.apply("x", "deny-empty-policy", spec);
    m.expect(Tcp, 80, &all().peer("y", "x", false).peer("z", "x", false));
}

#[test]
fn t24_d14_a_pod_label_moves_a_target_in_and_out() {
    let mut m = Model::new();
    let spec = json!({"podSelector": {"matchLabels": {"target": "isolated"}}, "policyTypes": ["Ingress"], "ingress": []});
    m.apply("x", "deny-ingress-via-label-selector", spec);
    m.expect(Tcp, 80, &all());
    m.label_pod("x/a", &[("pod", "a"), ("target", "isolated")]);
    m.expect(Tcp, 80, &all().ingress("x/a", false));
    m.label_pod("x/a", &[("pod", "a")]);
    m.expect(Tcp, 80, &all());
}

#[test]
fn t25_deny_egress_of_one_pod() {
    let mut m = Model::new();
    m.apply(
        "x",
        "deny-egress-pod-a",
        json!({"podSelector": pod_is("a"), "policyTypes": ["Egress"], "egress": []}),
    );
    m.expect(Tcp, 80, &all().egress("x/a", false));
}

#[test]
fn t26_default_deny_egress() {
    let mut m = Model::new();
    m.apply(
        "x",
        "deny-egress-ns-x",
        json!({"podSelector": {}, "policyTypes": ["Egress"], "egress": []}),
    );
    m.expect(Tcp, 80, &all().peer("x", "", false));
}

#[test]
fn t27_ingress_and_egress_together() {
    let mut m = Model::new();
    let spec = json!({"podSelector": pod_is("a"), "policyTypes": ["Egress", "Ingress"],
        "ingress": [{"from": [{"podSelector": pod_is("b")}]}],
        "egress": [{"ports": [{"port": 80}]}]});
    m.apply("x", "allow-client-a-via-pod-selector", spec);
    m.expect(
        Tcp,
        80,
        &all().ingress("x/a", false).peer("x/b", "x/a", true),
    );
    let want = all()
        .ingress("x/a", false)
        .egress("x/a", false)
        .peer("x/b", "x/a", true);
    m.expect(Tcp, 81, &want);
}

#[test]
fn t28_the_client_side_egress_denies_what_the_server_allows() {
    let mut m = Model::new();
    let xa = json!([{"namespaceSelector": ns_is("x"), "podSelector": pod_is("a")}]);
    m.apply(
        "x",
        "allow-to-ns-y-pod-a",
        json!({"podSelector": pod_is("a"), "policyTypes": ["Egress"],
        "egress": [{"to": [{"namespaceSelector": ns_is("y"), "podSelector": pod_is("a")}]}]}),
    );
    for target in ["a", "b"] {
        m.apply(
            "y",
            &format!("allow-from-xa-on-y{target}"),
            json!({"podSelector": pod_is(target),
            "policyTypes": ["Ingress"], "ingress": [{"from": xa}]}),
        );
    }
    let want = all()
        .peer("x/a", "", false)
        .peer("", "y/a", false)
        .peer("x/a", "y/a", true)
        .peer("", "y/b", false);
    m.expect(Tcp, 80, &want);
}

#[test]
fn t29_egress_to_a_pod_of_another_namespace() {
    let mut m = Model::new();
    m.apply(
        "x",
        "allow-to-y-a",
        json!({"podSelector": pod_is("a"), "policyTypes": ["Egress"],
        "egress": [{"to": [{"namespaceSelector": ns_is("y"), "podSelector": pod_is("a")}]}]}),
    );
    m.expect(
        Tcp,
        80,
        &all().egress("x/a", false).peer("x/a", "y/a", true),
    );
}

#[test]
fn t30_any_port_of_one_protocol() {
    let mut m = Model::new();
    m.apply(
        "x",
        "allow-ingress-by-proto",
        json!({"podSelector": pod_is("a"), "policyTypes": ["Ingress"],
        "ingress": [{"ports": [{"protocol": "TCP"}]}]}),
    );
    m.expect(Tcp, 80, &all());
    m.expect(Udp, 80, &all().peer("", "x/a", false));
}

#[test]
fn t31_t32_allow_all_takes_precedence_in_both_directions() {
    for (types, field, blocked) in [
        ("Ingress", "ingress", ("", "x")),
        ("Egress", "egress", ("x", "")),
    ] {
        let mut m = Model::new();
        m.apply(
            "x",
            "allow-port-80",
            json!({"podSelector": {"matchLabels": {}}, "policyTypes": [types],
            field: [{"ports": [{"port": 80}]}]}),
        );
        m.expect(Tcp, 81, &all().peer(blocked.0, blocked.1, false));
        m.apply(
            "x",
            "allow-all",
            json!({"podSelector": {"matchLabels": {}}, "policyTypes": [types], field: [{}]}),
        );
        m.expect(Tcp, 81, &all());
    }
}

#[test]
fn t33_deleted_policies_stop_being_enforced() {
    let mut m = Model::new();
    m.apply("x", "deny-all", json!({"podSelector": {}, "policyTypes": ["Ingress", "Egress"], "ingress": [], "egress": []}));
    m.expect(Tcp, 80, &all().peer("x", "", false).peer("", "x", false));
    m.delete_all_policies();
    m.expect(Tcp, 80, &all());
}

#[test]
fn t34_egress_to_a_cidr_block() {
    let mut m = Model::new();
    let cidr = format!("{}/32", ip_of("y/b"));
    m.apply(
        "x",
        "allow-client-a-via-cidr-egress-rule",
        json!({"podSelector": pod_is("a"),
        "policyTypes": ["Egress"], "egress": [{"to": [{"ipBlock": {"cidr": cidr}}]}]}),
    );
    m.expect(
        Tcp,
        80,
        &all().egress("x/a", false).peer("x/a", "y/b", true),
    );
}

#[test]
fn t35_t36_except_clauses_and_an_update_that_overlaps_them() {
    let mut m = Model::new();
    let except = format!("{}/32", ip_of("x/b"));
    // Upstream's older form: x/a's address with a /4 mask, host bits left set.
    let wide = format!("{}/4", ip_of("x/a"));
    m.apply("x", "allow-client-a-via-cidr-egress-rule", json!({"podSelector": pod_is("a"),
        "policyTypes": ["Egress"], "egress": [{"to": [{"ipBlock": {"cidr": wide, "except": [except]}}]}]}));
    m.expect(Tcp, 80, &all().peer("x/a", "x/b", false));
    m.apply(
        "x",
        "allow-client-a-via-cidr-egress-rule",
        json!({"podSelector": pod_is("a"),
        "policyTypes": ["Egress"], "egress": [{"to": [{"ipBlock": {"cidr": except}}]}]}),
    );
    m.expect(
        Tcp,
        80,
        &all().egress("x/a", false).peer("x/a", "x/b", true),
    );
}

#[test]
fn t37_ingress_and_egress_are_controlled_independently() {
    let mut m = Model::new();
    m.apply(
        "x",
        "allow-egress-for-target",
        json!({"podSelector": pod_is("a"), "policyTypes": ["Egress"], "egress": [{}]}),
    );
    m.expect(Tcp, 80, &all());
    m.apply(
        "x",
        "deny-ingress-via-label-selector",
        json!({"podSelector": pod_is("a"), "policyTypes": ["Ingress"], "ingress": []}),
    );
    m.expect(Tcp, 80, &all().ingress("x/a", false));
}

#[test]
fn t38_t39_t40_a_port_of_another_protocol_allows_nothing_here() {
    let mut m = Model::new();
    m.apply("x", "deny-ingress", deny_ingress());
    m.apply(
        "x",
        "allow-sctp-81",
        json!({"podSelector": pod_is("a"), "policyTypes": ["Ingress"],
        "ingress": [{"ports": [{"port": 81, "protocol": "SCTP"}]}]}),
    );
    m.expect(Tcp, 81, &all().peer("", "x", false));
    for (port, protocol) in [(80, "SCTP"), (81, "UDP")] {
        let mut m = Model::new();
        m.apply(
            "x",
            "allow-other-protocol",
            json!({"podSelector": pod_is("a"), "policyTypes": ["Ingress"],
            "ingress": [{"ports": [{"port": port, "protocol": protocol}]}]}),
        );
        m.expect(Tcp, 81, &all().ingress("x/a", false));
    }
}

#[test]
fn t42_egress_to_namespaces_not_in_a_list() {
    let mut m = Model::new();
    m.apply(
        "x",
        "allow-not-y",
        json!({"podSelector": pod_is("a"), "policyTypes": ["Egress"],
        "egress": [{"to": [{"namespaceSelector": ns_not_in("y")}]}]}),
    );
    m.expect(Tcp, 80, &all().peer("x/a", "y", false));
}

#[test]
fn u1_s1_default_deny_ingress_on_udp_and_sctp() {
    let mut m = Model::new();
    m.apply("x", "deny-all", deny_ingress());
    for protocol in [Udp, Sctp] {
        m.expect(protocol, 80, &all().peer("", "x", false));
    }
}

#[test]
fn d01_d02_d03_end_port_ranges() {
    let mut m = Model::new();
    m.apply(
        "x",
        "range",
        json!({"podSelector": pod_is("a"), "policyTypes": ["Ingress"],
        "ingress": [{"ports": [{"protocol": "TCP", "port": 80, "endPort": 81}]}]}),
    );
    m.expect(Tcp, 80, &all());
    m.expect(Tcp, 81, &all());
    m.apply(
        "x",
        "range",
        json!({"podSelector": pod_is("a"), "policyTypes": ["Ingress"],
        "ingress": [{"ports": [{"port": 81, "endPort": 90}]}]}),
    );
    m.expect(Tcp, 80, &all().ingress("x/a", false));
    m.expect(Tcp, 81, &all());
    let mut m = Model::new();
    m.apply(
        "x",
        "egress-range",
        json!({"podSelector": {}, "policyTypes": ["Egress"],
        "egress": [{"ports": [{"port": 70, "endPort": 80}]}]}),
    );
    m.expect(Tcp, 80, &all());
    m.expect(Tcp, 81, &all().peer("x", "", false));
}

#[test]
fn d04_numbered_and_named_ports_in_one_rule() {
    let mut m = Model::new();
    m.apply("x", "two-ports", json!({"podSelector": pod_is("a"), "policyTypes": ["Ingress"],
        "ingress": [{"from": [{"namespaceSelector": ns_is("y")}], "ports": [{"port": 80}, {"port": "serve-81-tcp"}]}]}));
    for port in [80, 81] {
        m.expect(
            Tcp,
            port,
            &all().peer("x", "x/a", false).peer("z", "x/a", false),
        );
    }
}

#[test]
fn d05_d06_d07_ingress_from_cidr_blocks() {
    let mut m = Model::new();
    m.apply(
        "x",
        "from-y-b",
        json!({"podSelector": pod_is("a"), "policyTypes": ["Ingress"],
        "ingress": [{"from": [{"ipBlock": {"cidr": format!("{}/32", ip_of("y/b"))}}]}]}),
    );
    m.expect(
        Tcp,
        80,
        &all().ingress("x/a", false).peer("y/b", "x/a", true),
    );
    m.apply("x", "from-y-b", json!({"podSelector": pod_is("a"), "policyTypes": ["Ingress"],
        "ingress": [{"from": [{"ipBlock": {"cidr": "10.0.0.0/8", "except": [format!("{}/32", ip_of("y/b"))]}}]}]}));
    m.expect(Tcp, 80, &all().peer("y/b", "x/a", false));
    m.apply(
        "x",
        "from-y-b",
        json!({"podSelector": pod_is("a"), "policyTypes": ["Ingress"],
        "ingress": [{"from": [{"ipBlock": {"cidr": "10.244.2.0/24"}}]}]}),
    );
    m.expect(Tcp, 80, &all().ingress("x/a", false).peer("y", "x/a", true));
}

#[test]
fn d08_egress_to_dns_only() {
    let mut m = Model::new();
    m.apply(
        "x",
        "dns-only",
        json!({"podSelector": {}, "policyTypes": ["Egress"],
        "egress": [{"ports": [{"protocol": "UDP", "port": 53}]}]}),
    );
    m.expect(Tcp, 80, &all().peer("x", "", false));
    m.expect(Udp, 53, &all());
    m.expect(Tcp, 53, &all().peer("x", "", false));
}

#[test]
fn d09_d10_policy_types_default_from_the_rules_given() {
    let mut m = Model::new();
    m.apply(
        "x",
        "egress-rules",
        json!({"podSelector": pod_is("a"), "egress": [{"to": [{"podSelector": pod_is("b")}]}]}),
    );
    let want = all()
        .ingress("x/a", false)
        .egress("x/a", false)
        .peer("x/a", "x/b", true);
    m.expect(Tcp, 80, &want);
    let mut m = Model::new();
    m.apply(
        "x",
        "empty-egress",
        json!({"podSelector": pod_is("a"), "egress": []}),
    );
    m.expect(Tcp, 80, &all().ingress("x/a", false));
}

#[test]
fn d15_an_update_that_changes_the_peer() {
    let mut m = Model::new();
    let from = |pod: &str| {
        json!({"podSelector": pod_is("a"), "policyTypes": ["Ingress"],
        "ingress": [{"from": [{"podSelector": pod_is(pod)}]}]})
    };
    m.apply("x", "x-a-allows", from("b"));
    m.apply("x", "x-a-allows", from("c"));
    m.expect(
        Tcp,
        80,
        &all().ingress("x/a", false).peer("x/c", "x/a", true),
    );
}

#[test]
fn d16_a_policy_leaves_other_namespaces_alone() {
    let mut m = Model::new();
    m.apply("y", "deny-all", json!({"podSelector": {}, "policyTypes": ["Ingress", "Egress"], "ingress": [], "egress": []}));
    m.expect(Tcp, 80, &all().peer("", "y", false).peer("y", "", false));
}

#[test]
fn d17_a_named_port_the_pod_does_not_serve_matches_nothing() {
    let mut m = Model::serving(&[80]);
    m.apply(
        "x",
        "named-81",
        json!({"podSelector": pod_is("a"), "policyTypes": ["Ingress"],
        "ingress": [{"ports": [{"port": "serve-81-tcp"}]}]}),
    );
    m.expect(Tcp, 80, &all().ingress("x/a", false));
}

#[test]
fn egress_named_ports_resolve_on_each_destination() {
    // y/b serves "web" on 8080, every other pod on 80: the rule allows each its own.
    let mut m = Model::serving(&[80]);
    for pod in m.cluster.pods.values_mut() {
        let port = if pod.key.namespace == "y" && pod.key.name == "b" {
            8080
        } else {
            80
        };
        pod.named_ports.push(crate::model::NamedPort {
            name: "web".into(),
            protocol: Tcp,
            port,
        });
    }
    m.apply(
        "x",
        "egress-web",
        json!({"podSelector": pod_is("a"), "policyTypes": ["Egress"],
        "egress": [{"ports": [{"port": "web"}]}]}),
    );
    m.expect(Tcp, 80, &all().peer("x/a", "y/b", false));
    m.expect(
        Tcp,
        8080,
        &all().egress("x/a", false).peer("x/a", "y/b", true),
    );
}

#[test]
fn host_network_and_finished_pods_are_neither_isolated_nor_selected_peers() {
    let mut m = Model::new();
    m.cluster
        .pods
        .get_mut(&crate::model::PodKey::new("x", "a"))
        .unwrap()
        .host_network = true;
    m.cluster
        .pods
        .get_mut(&crate::model::PodKey::new("x", "b"))
        .unwrap()
        .finished = true;
    m.apply("x", "deny-ingress", deny_ingress());
    m.apply(
        "y",
        "from-x",
        json!({"podSelector": {}, "policyTypes": ["Ingress"],
        "ingress": [{"from": [{"namespaceSelector": ns_is("x")}]}]}),
    );
    // x/a (host network) and x/b (finished) stay open; y admits x/c only: x/a and x/b
    // are no pod peers.
    let want = all()
        .peer("", "x/c", false)
        .peer("", "y", false)
        .peer("x/c", "y", true);
    m.expect(Tcp, 80, &want);
}
