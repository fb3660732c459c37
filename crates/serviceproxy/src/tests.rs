use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use serde_json::json;

use crate::*;

fn svc(v: serde_json::Value) -> Service {
    serde_json::from_value(v).unwrap()
}

fn slice(
    svc: &str,
    addr_type: &str,
    ports: serde_json::Value,
    eps: serde_json::Value,
) -> EndpointSlice {
    serde_json::from_value(json!({"metadata": {"name": format!("{svc}-x"), "namespace": "ns",
        "labels": {"kubernetes.io/service-name": svc}}, "addressType": addr_type, "ports": ports, "endpoints": eps}))
    .unwrap()
}

fn ep(ip: &str, node: &str, ready: bool, serving: bool, terminating: bool) -> serde_json::Value {
    json!({"addresses": [ip], "nodeName": node,
        "conditions": {"ready": ready, "serving": serving, "terminating": terminating}})
}

fn web() -> Service {
    svc(json!({"metadata": {"name": "web", "namespace": "ns"},
        "spec": {"type": "NodePort", "clusterIP": "10.96.0.10", "externalTrafficPolicy": "Local",
            "sessionAffinity": "ClientIP",
            "ports": [{"name": "http", "port": 80, "targetPort": "http", "nodePort": 30080, "protocol": "TCP"},
                      {"name": "dns", "port": 53, "protocol": "UDP"}]}}))
}

fn key(port: &str, protocol: Protocol) -> ServicePortName {
    ServicePortName {
        namespace: "ns".into(),
        name: "web".into(),
        port: port.into(),
        protocol,
    }
}

#[test]
fn ports_resolve_per_slice_and_endpoints_are_categorized() {
    let slices = [
        slice(
            "web",
            "IPv4",
            json!([{"name": "http", "port": 8080, "protocol": "TCP"}]),
            json!([
                ep("10.244.1.2", "a", true, true, false),
                ep("10.244.2.2", "b", true, true, false),
                ep("10.244.1.3", "a", false, true, true)
            ]),
        ),
        slice(
            "web",
            "IPv6",
            json!([{"name": "http", "port": 8080}]),
            json!([ep("fd00::1", "a", true, true, false)]),
        ),
    ];
    let (state, warnings) = desired_state(&[web()], &slices, "a");
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    let http = &state[&key("http", Protocol::Tcp)];
    assert_eq!(http.port.node_port, Some(30080));
    assert_eq!(http.port.affinity_seconds, Some(10_800));
    assert!(http.port.external_local);
    let ips = |v: &[Endpoint]| v.iter().map(|e| e.ip.to_string()).collect::<Vec<_>>();
    assert_eq!(ips(&http.cluster), ["10.244.1.2", "10.244.2.2"]);
    assert_eq!(
        ips(&http.external),
        ["10.244.1.2"],
        "Local: this node's only"
    );
    assert_eq!(http.cluster[0].port, 8080);
    assert!(
        state[&key("dns", Protocol::Udp)].cluster.is_empty(),
        "no slice port named dns"
    );
}

#[test]
fn terminating_serving_endpoints_are_used_only_when_none_is_ready() {
    let slices = [slice(
        "web",
        "IPv4",
        json!([{"name": "http", "port": 8080}]),
        json!([
            ep("10.244.1.3", "a", false, true, true),
            ep("10.244.1.4", "a", false, false, true)
        ]),
    )];
    let (state, _) = desired_state(&[web()], &slices, "b");
    let http = &state[&key("http", Protocol::Tcp)];
    assert_eq!(http.cluster.len(), 1);
    assert_eq!(http.cluster[0].ip.to_string(), "10.244.1.3");
    assert!(http.external.is_empty(), "no local endpoint on b");
    assert_eq!(http.local_count, 0);
}

#[test]
fn headless_and_external_name_services_are_left_out_and_diffs_name_what_changed() {
    let headless = svc(
        json!({"metadata": {"name": "h", "namespace": "ns"}, "spec": {"clusterIP": "None", "ports": [{"port": 80}]}}),
    );
    let ext = svc(
        json!({"metadata": {"name": "e", "namespace": "ns"}, "spec": {"type": "ExternalName", "externalName": "x.example"}}),
    );
    let (state, _) = desired_state(&[headless, ext, web()], &[], "a");
    assert_eq!(state.len(), 2);
    let slices = [slice(
        "web",
        "IPv4",
        json!([{"name": "http", "port": 8080}]),
        json!([ep("10.244.1.2", "a", true, true, false)]),
    )];
    let (next, _) = desired_state(&[web()], &slices, "a");
    let d = diff(&state, &next);
    assert_eq!(d.changed, vec![key("http", Protocol::Tcp)]);
    assert!(d.added.is_empty() && d.removed.is_empty());
    let d = diff(&next, &ProxyState::new());
    assert_eq!(d.removed.len(), 2);
}

#[test]
fn nodeport_addresses_limit_nftables_node_ports() {
    use crate::nftables::{NftConfig, Renderer};
    let cfg = NftConfig {
        nodeport_cidrs: vec![
            "198.18.0.0/24".parse().unwrap(),
            "10.0.0.1/32".parse().unwrap(),
        ],
        ..Default::default()
    };
    let script = Renderer::default().full(&cfg, &ProxyState::new());
    let limited = "fib daddr type local ip daddr { 198.18.0.0/24, 10.0.0.1/32 } meta l4proto . th dport vmap @service-nodeports";
    assert!(script.contains(limited), "{script}");
    assert!(!script.contains("127.0.0.0/8"));
}

#[test]
fn a_frontend_claimed_twice_stays_with_the_first_service_port() {
    let a = svc(json!({"metadata": {"name": "a", "namespace": "ns"},
        "spec": {"clusterIP": "10.96.0.1", "externalIPs": ["198.18.0.9", "198.18.0.9"],
            "ports": [{"port": 80}]}}));
    let b = svc(json!({"metadata": {"name": "b", "namespace": "ns"},
        "spec": {"type": "NodePort", "clusterIP": "10.96.0.2", "externalIPs": ["198.18.0.9"],
            "ports": [{"port": 80, "nodePort": 30000}]}}));
    let (state, warnings) = desired_state([&a, &b], [], "n");
    let ports: Vec<_> = state
        .values()
        .map(|e| e.port.external_ips.clone())
        .collect();
    assert_eq!(
        ports,
        [
            vec!["198.18.0.9".parse::<std::net::Ipv4Addr>().unwrap()],
            vec![]
        ]
    );
    assert_eq!(
        warnings,
        ["ns/b: 198.18.0.9:80/tcp is already ns/a's; left out"]
    );
    assert_eq!(state.values().nth(1).unwrap().port.node_port, Some(30000));
}

#[test]
fn sources_keep_what_the_desired_state_reads() {
    use crate::source::{ServiceSource, SliceSource};
    let mut s = slice(
        "web",
        "IPv4",
        json!([{"name": "http", "port": 8080}]),
        json!([ep("10.0.0.1", "n", true, true, false)]),
    );
    s.metadata.annotations = Some(
        [
            (
                "endpoints.kubernetes.io/last-change-trigger-time".to_string(),
                "2026-01-01T00:00:00Z".to_string(),
            ),
            ("other".to_string(), "x".to_string()),
        ]
        .into(),
    );
    let source = SliceSource::from_slice(&s).unwrap();
    assert_eq!(source.service, "web");
    assert_eq!(source.trigger_time.as_deref(), Some("2026-01-01T00:00:00Z"));
    assert_eq!(source.endpoints[0].ip, Some("10.0.0.1".parse().unwrap()));
    s.metadata.labels = None;
    assert!(
        SliceSource::from_slice(&s).is_none(),
        "a slice of no service is not kept"
    );
    let headless = svc(
        json!({"metadata": {"name": "h", "namespace": "ns"}, "spec": {"clusterIP": "None", "ports": [{"port": 80}]}}),
    );
    assert!(!ServiceSource::from_service(&headless).proxied);
    let w = ServiceSource::from_service(&web());
    assert!(
        w.proxied && w.exposes_node_ports && w.external_local && w.affinity_seconds == Some(10_800)
    );
    assert_eq!(w.ports.len(), 2);
}
