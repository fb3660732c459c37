//! Bad input never fails a whole sync (root; real nftables and iptables in a network
//! namespace this test makes): a service with 5,000 endpoints, an IPv6-only slice, a port
//! with an unknown protocol, and two services claiming the same external address and
//! port are programmed or skipped with a warning, and an ordinary service next to them
//! still works.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::process::Command;
use std::sync::Arc;

use cairn_netfilter::{IptablesCommand, IptablesVariant, NftCommand};
use cairn_proxy::backend::{IptablesBackend, NftBackend, ProxyBackend};
use cairn_serviceproxy::desired_state;
use cairn_serviceproxy::iptables::IptConfig;
use cairn_serviceproxy::nftables::NftConfig;
use cairn_testsupport::NetNs;
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use serde_json::json;

fn service(name: &str, ip: &str, spec: serde_json::Value) -> Service {
    let mut s = json!({"metadata": {"name": name, "namespace": "default"},
        "spec": {"clusterIP": ip, "ports": [{"name": "http", "port": 80}]}});
    for (k, v) in spec.as_object().unwrap() {
        s["spec"][k] = v.clone();
    }
    serde_json::from_value(s).unwrap()
}

fn slice(svc: &str, family: &str, ips: Vec<String>) -> EndpointSlice {
    let eps: Vec<_> = ips
        .iter()
        .map(|ip| json!({"addresses": [ip], "conditions": {"ready": true}}))
        .collect();
    serde_json::from_value(
        json!({"metadata": {"name": format!("{svc}-{family}"), "namespace": "default",
        "labels": {"kubernetes.io/service-name": svc}}, "addressType": family,
        "ports": [{"name": "http", "port": 8080}], "endpoints": eps}),
    )
    .unwrap()
}

fn inputs() -> (Vec<Service>, Vec<EndpointSlice>) {
    let many: Vec<String> = (0..5000)
        .map(|i| format!("10.244.{}.{}", i / 250, i % 250 + 1))
        .collect();
    let services = vec![
        service("ok", "10.96.0.10", json!({})),
        service("huge", "10.96.0.11", json!({})),
        service("v6", "10.96.0.12", json!({})),
        service(
            "odd",
            "10.96.0.13",
            json!({"ports": [{"name": "http", "port": 80, "protocol": "QUIC"}]}),
        ),
        service(
            "claim-a",
            "10.96.0.14",
            json!({"externalIPs": ["198.18.0.99"]}),
        ),
        service(
            "claim-b",
            "10.96.0.15",
            json!({"externalIPs": ["198.18.0.99"]}),
        ),
    ];
    let slices = vec![
        slice("ok", "IPv4", vec!["10.244.200.2".into()]),
        slice("huge", "IPv4", many),
        slice("v6", "IPv6", vec!["fd00::2".into()]),
        slice("claim-a", "IPv4", vec!["10.244.200.3".into()]),
        slice("claim-b", "IPv4", vec!["10.244.200.4".into()]),
    ];
    (services, slices)
}

fn in_netns(f: impl FnOnce() + Send) {
    NetNs::new("cbad").unwrap().run_inside(f)
}

fn check(mut backend: Box<dyn ProxyBackend>, list: &[&str]) {
    let (services, slices) = inputs();
    let (state, mut warnings) = desired_state(&services, &slices, "node-a");
    let report = backend.sync(&state, true).expect("the sync succeeds");
    warnings.extend(report.warnings);
    let all = warnings.join("\n");
    for expected in [
        "default/v6: IPv6 endpoints ignored",
        "default/odd: port 80 has an unsupported protocol",
        "default/huge:http: 5000 endpoints",
        "198.18.0.99",
    ] {
        assert!(all.contains(expected), "{expected} in:\n{all}");
    }
    let out = Command::new(list[0]).args(&list[1..]).output().unwrap();
    let rules = String::from_utf8_lossy(&out.stdout);
    assert!(
        rules.contains("10.244.200.2:8080"),
        "the ordinary service is programmed"
    );
    assert!(
        rules.contains("10.244.19.250:8080"),
        "the last of 5,000 endpoints too"
    );
    backend.cleanup().unwrap();
}

#[test]
fn bad_input_is_skipped_or_warned_about_in_nftables() {
    in_netns(|| {
        let nft = Arc::new(NftCommand::new().unwrap());
        let b = NftBackend::new(nft, NftConfig::default());
        check(Box::new(b), &["nft", "list", "ruleset"]);
    });
}

#[test]
fn bad_input_is_skipped_or_warned_about_in_iptables() {
    in_netns(|| {
        let ipt = Arc::new(IptablesCommand::new(IptablesVariant::System).unwrap());
        let b = IptablesBackend::new(ipt, IptConfig::default());
        check(Box::new(b), &["iptables-save", "-t", "nat"]);
    });
}
