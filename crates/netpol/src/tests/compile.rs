//! Reading policies: upstream's defaults and the errors for what the API should refuse.

use serde_json::json;

use crate::compile::{CompiledPolicy, NamespaceMatch, Peer, PortNumber};
use crate::model::Protocol;

fn compile(spec: serde_json::Value) -> Result<CompiledPolicy, String> {
    let policy = json!({"metadata": {"namespace": "x", "name": "p"}, "spec": spec});
    CompiledPolicy::compile(&serde_json::from_value(policy).unwrap()).map_err(|e| e.to_string())
}

#[test]
fn policy_types_default_to_ingress_and_to_egress_only_with_egress_rules() {
    let p = compile(json!({"podSelector": {}})).unwrap();
    assert_eq!((p.ingress, p.egress), (Some(vec![]), None));
    let p = compile(json!({"podSelector": {}, "egress": [{}]})).unwrap();
    assert_eq!(p.ingress, Some(vec![]));
    assert_eq!(p.egress.map(|r| r.len()), Some(1));
    // An explicitly empty egress list is no egress rule: not isolating for egress.
    let p = compile(json!({"podSelector": {}, "egress": []})).unwrap();
    assert_eq!(p.egress, None);
    // Given types win: Egress alone leaves ingress open whatever ingress rules say.
    let p =
        compile(json!({"podSelector": {}, "policyTypes": ["Egress"], "ingress": [{}]})).unwrap();
    assert_eq!((p.ingress, p.egress), (None, Some(vec![])));
}

#[test]
fn empty_peer_and_port_lists_mean_everything() {
    let p = compile(json!({"podSelector": {}, "ingress": [{"from": [], "ports": []}]})).unwrap();
    let rule = &p.ingress.unwrap()[0];
    assert_eq!((&rule.peers, &rule.ports), (&None, &None));
}

#[test]
fn peers_take_the_policy_namespace_unless_a_namespace_selector_is_given() {
    let p = compile(json!({"podSelector": {}, "ingress": [{"from": [
        {"podSelector": {"matchLabels": {"pod": "a"}}},
        {"namespaceSelector": {}},
        {"ipBlock": {"cidr": "10.0.0.0/8", "except": ["10.1.0.0/16"]}}
    ]}]}))
    .unwrap();
    let peers = p.ingress.unwrap()[0].peers.clone().unwrap();
    assert!(
        matches!(&peers[0], Peer::Pods { namespaces: NamespaceMatch::Own(ns), .. } if ns == "x")
    );
    assert!(
        matches!(&peers[1], Peer::Pods { namespaces: NamespaceMatch::Selected(s), pods } if s.is_everything() && pods.is_everything())
    );
    let Peer::Block(block) = &peers[2] else {
        panic!()
    };
    assert!(block.contains("10.2.0.1".parse().unwrap()));
    assert!(!block.contains("10.1.0.1".parse().unwrap()));
    assert!(!block.contains("11.0.0.1".parse().unwrap()));
}

#[test]
fn ports_default_to_tcp_and_take_ranges_and_names() {
    let p = compile(json!({"podSelector": {}, "ingress": [{"ports": [
        {"port": 80}, {"protocol": "UDP"}, {"port": 30000, "endPort": 30010, "protocol": "SCTP"},
        {"port": "serve-81-udp", "protocol": "UDP"}
    ]}]}))
    .unwrap();
    let ports = p.ingress.unwrap()[0].ports.clone().unwrap();
    let got: Vec<_> = ports.iter().map(|s| (s.protocol, s.port.clone())).collect();
    assert_eq!(
        got,
        vec![
            (Protocol::Tcp, PortNumber::Range(80, 80)),
            (Protocol::Udp, PortNumber::All),
            (Protocol::Sctp, PortNumber::Range(30000, 30010)),
            (Protocol::Udp, PortNumber::Named("serve-81-udp".into())),
        ]
    );
}

#[test]
fn what_the_api_refuses_is_an_error_naming_the_policy_and_field() {
    for (spec, words) in [
        (
            json!({"ingress": [{"from": [{"ipBlock": {"cidr": "10.0.0.0/33"}}]}]}),
            "spec.ingress[0].from[0].ipBlock.cidr",
        ),
        (
            json!({"egress": [{"to": [{"ipBlock": {"cidr": "10.0.0.0/8", "except": ["nope"]}}]}]}),
            "spec.egress[0].to[0].ipBlock.except",
        ),
        (
            json!({"ingress": [{"ports": [{"port": 81, "endPort": 80}]}]}),
            "must be greater than or equal to `port`",
        ),
        (
            json!({"ingress": [{"ports": [{"port": "web", "endPort": 80}]}]}),
            "non-numeric",
        ),
        (
            json!({"ingress": [{"ports": [{"port": 70000}]}]}),
            "between 1 and 65535",
        ),
        (
            json!({"ingress": [{"ports": [{"protocol": "ICMP"}]}]}),
            "Unsupported value: \"ICMP\"",
        ),
        (json!({"ingress": [{"from": [{}]}]}), "must specify a peer"),
        (json!({"policyTypes": ["Sideways"]}), "spec.policyTypes"),
        (
            json!({"podSelector": {"matchExpressions": [{"key": "a", "operator": "Near"}]}}),
            "spec.podSelector",
        ),
    ] {
        let err = compile(spec.clone()).unwrap_err();
        assert!(err.starts_with("NetworkPolicy x/p: "), "{err}");
        assert!(err.contains(words), "{spec}: {err}");
    }
}
