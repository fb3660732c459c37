//! The iptables backend against real `iptables-restore`/`iptables-save`, nft and legacy,
//! each in a network namespace this test makes (root only). What the renderer writes must
//! be exactly what `iptables-save` prints back: a full sync onto the rules it just wrote
//! writes nothing, partial syncs apply (their `-D` must match), and `--cleanup`'s code
//! leaves the tables as they were, rules of others included.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use cairn_netfilter::{IptablesCommand, IptablesDriver, IptablesError, IptablesVariant};
use cairn_proxy::backend::{IptablesBackend, ProxyBackend};
use cairn_serviceproxy::iptables::IptConfig;
use cairn_serviceproxy::{desired_state, ProxyState};
use cairn_testsupport::NetNs;
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use serde_json::json;

/// The real driver, counting restores.
struct Counting(IptablesCommand, AtomicUsize);

impl IptablesDriver for Counting {
    fn restore(&self, payload: &str) -> Result<(), IptablesError> {
        self.1.fetch_add(1, Ordering::SeqCst);
        self.0.restore(payload)
    }
    fn save(&self, table: &str) -> Result<String, IptablesError> {
        self.0.save(table)
    }
}

fn services() -> Vec<Service> {
    let svc = |v: serde_json::Value| serde_json::from_value::<Service>(v).unwrap();
    vec![
        svc(json!({"metadata": {"name": "web", "namespace": "default"},
            "spec": {"type": "NodePort", "clusterIP": "10.96.0.10", "externalIPs": ["198.18.0.50"],
                "ports": [{"name": "http", "port": 80, "nodePort": 30080},
                          {"name": "dns", "port": 53, "protocol": "UDP", "nodePort": 30053},
                          {"name": "assoc", "port": 9, "protocol": "SCTP"}]}})),
        svc(
            json!({"metadata": {"name": "sticky", "namespace": "default"},
            "spec": {"clusterIP": "10.96.0.11", "sessionAffinity": "ClientIP",
                "ports": [{"name": "http", "port": 80}]}}),
        ),
        svc(json!({"metadata": {"name": "lb", "namespace": "default"},
            "spec": {"type": "LoadBalancer", "clusterIP": "10.96.0.12", "externalTrafficPolicy": "Local",
                "ports": [{"name": "http", "port": 8081, "nodePort": 30081}]},
            "status": {"loadBalancer": {"ingress": [{"ip": "198.18.0.10"}]}}})),
        svc(
            json!({"metadata": {"name": "empty", "namespace": "default"},
            "spec": {"type": "NodePort", "clusterIP": "10.96.0.13", "ports": [{"port": 80, "nodePort": 30082}]}}),
        ),
    ]
}

fn slice(svc: &str, ports: serde_json::Value, eps: &[(&str, &str)]) -> EndpointSlice {
    let eps: Vec<_> = eps
        .iter()
        .map(|(ip, node)| json!({"addresses": [ip], "nodeName": node, "conditions": {"ready": true}}))
        .collect();
    serde_json::from_value(
        json!({"metadata": {"name": format!("{svc}-1"), "namespace": "default",
        "labels": {"kubernetes.io/service-name": svc}}, "addressType": "IPv4",
        "ports": ports, "endpoints": eps}),
    )
    .unwrap()
}

fn state(web_eps: &[(&str, &str)]) -> ProxyState {
    let web_ports = json!([{"name": "http", "port": 8080}, {"name": "dns", "port": 5353, "protocol": "UDP"},
        {"name": "assoc", "port": 9, "protocol": "SCTP"}]);
    let slices = [
        slice("web", web_ports, web_eps),
        slice(
            "sticky",
            json!([{"name": "http", "port": 8080}]),
            &[("10.244.1.2", "a"), ("10.244.2.2", "b")],
        ),
        slice(
            "lb",
            json!([{"name": "http", "port": 8080}]),
            &[("10.244.2.2", "b")],
        ),
    ];
    let (state, warnings) = desired_state(&services(), &slices, "a");
    assert!(warnings.is_empty(), "{warnings:?}");
    state
}

fn save_all(ipt: &IptablesCommand) -> String {
    let strip = |t: String| {
        t.lines()
            .filter(|l| !l.starts_with('#'))
            .map(|l| l.to_string() + "\n")
            .collect::<String>()
    };
    strip(ipt.save("filter").unwrap()) + &strip(ipt.save("nat").unwrap())
}

fn round_trip(variant: IptablesVariant) {
    NetNs::new("cipt").unwrap().run_inside(|| {
        let ipt = IptablesCommand::new(variant).unwrap();
        // Rules of someone else, which the proxy must leave alone.
        ipt.restore(
            "*nat\n:OTHER - [0:0]\n-A PREROUTING -j OTHER\n-A OTHER -p tcp -j RETURN\nCOMMIT\n",
        )
        .unwrap();
        let before = save_all(&ipt);
        let driver = Arc::new(Counting(ipt.clone(), AtomicUsize::new(0)));
        let cfg = IptConfig {
            cluster_cidr: Some("10.244.0.0/16".parse().unwrap()),
            ..Default::default()
        };
        let mut backend = IptablesBackend::new(driver.clone(), cfg.clone());
        let two = [("10.244.1.2", "a"), ("10.244.2.2", "b")];
        backend.sync(&state(&two), true).unwrap();
        assert_eq!(driver.1.load(Ordering::SeqCst), 1);
        // What iptables-save prints is what the renderer wrote: nothing to do.
        backend.sync(&state(&two), true).unwrap();
        assert_eq!(driver.1.load(Ordering::SeqCst), 1, "{}", save_all(&ipt));
        let after_full = save_all(&ipt);
        assert!(
            after_full.contains("-A PREROUTING -j CAIRN-SERVICES"),
            "{after_full}"
        );
        // Partial syncs: an endpoint replaced, then the web service losing all of them.
        let partials = [
            vec![("10.244.1.2", "a"), ("10.244.3.2", "c")],
            vec![],
            two.to_vec(),
        ];
        for eps in &partials {
            let report = backend.sync(&state(eps), false).unwrap();
            assert!(!report.full, "partial sync applied");
        }
        // A new process (a restarted proxy) finds everything right.
        let mut fresh = IptablesBackend::new(driver.clone(), cfg);
        let restores = driver.1.load(Ordering::SeqCst);
        fresh.sync(&state(&two), false).unwrap();
        assert_eq!(
            driver.1.load(Ordering::SeqCst),
            restores,
            "{}",
            save_all(&ipt)
        );
        fresh.cleanup().unwrap();
        assert_eq!(save_all(&ipt), before);
    });
}

#[test]
fn iptables_nft_rules_round_trip() {
    round_trip(IptablesVariant::Nft);
}

#[test]
fn iptables_legacy_rules_round_trip() {
    round_trip(IptablesVariant::Legacy);
}
