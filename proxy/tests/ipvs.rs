//! cairn-proxy's IPVS mode against real IPVS. This kernel has no IPVS, so the host side
//! boots Debian's stock kernel in a qemu guest (`cairn_testsupport::qemu`) and runs this
//! test there; the guest side builds the usual network namespaces (a node, two pods, an
//! outside client), programs the backend from Services and EndpointSlices, and checks:
//! a ClusterIP spreads over both pods (rr); a NodePort answers from outside, masqueraded;
//! `externalTrafficPolicy: Local` uses the local pod only and keeps the client address; a
//! service without endpoints refuses at once; ClientIP affinity pins; a removed endpoint
//! with connections drains at weight 0 while new connections go elsewhere; a restarted
//! backend writes nothing; NetworkPolicy's table closes a pod to IPVS connections (they
//! reach the backend from the output hook); `--cleanup`'s code leaves IPVS, links and
//! nftables as they were.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::collections::BTreeMap;
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use cairn_netfilter::ipvs::IpvsNetlink;
use cairn_netfilter::{NftCommand, NftDriver};
use cairn_netpol::nft::{full_script, Desired};
use cairn_netpol::{for_node, Cluster, CompiledPolicy, Namespace, Pod, PodKey};
use cairn_proxy::backend::ipvs::NetlinkHost;
use cairn_proxy::backend::{IpvsBackend, ProxyBackend};
use cairn_serviceproxy::ipvs::IpvsConfig;
use cairn_serviceproxy::{desired_state, ProxyState};
use cairn_testsupport::qemu::{in_guest, Guest};
use common::*;
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use serde_json::json;

const GUEST_TIMEOUT: Duration = Duration::from_secs(600);
const NAME: &str = "ipvs_mode_in_a_stock_kernel_guest";

#[test]
fn ipvs_mode_in_a_stock_kernel_guest() {
    if in_guest() {
        let result = std::panic::catch_unwind(guest_side);
        match result {
            Ok(()) => println!("\nRESULT ok"),
            Err(e) => {
                let why = e
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_default();
                println!("\nRESULT fail: {why}");
            }
        }
        return;
    }
    let guest = Guest::new().unwrap();
    let out = guest.run_test(NAME, GUEST_TIMEOUT).unwrap();
    eprintln!(
        "guest ({}) took {:.1?}",
        guest.kernel_release(),
        out.elapsed
    );
    assert_eq!(
        out.last_line_starting_with("RESULT "),
        Some("RESULT ok"),
        "{out}"
    );
}

fn sh_here(cmd: &str) -> String {
    let out = Command::new("sh").args(["-c", cmd]).output().unwrap();
    assert!(
        out.status.success(),
        "{cmd}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn services() -> Vec<Service> {
    let svc = |v: serde_json::Value| serde_json::from_value::<Service>(v).unwrap();
    let port = |np: u16| json!([{"name": "http", "port": 80, "nodePort": np}]);
    vec![
        svc(json!({"metadata": {"name": "web", "namespace": "default"},
            "spec": {"type": "NodePort", "clusterIP": "10.96.0.10", "ports": port(30080)}})),
        svc(
            json!({"metadata": {"name": "local", "namespace": "default"},
            "spec": {"type": "NodePort", "clusterIP": "10.96.0.11", "externalTrafficPolicy": "Local", "ports": port(30081)}}),
        ),
        svc(
            json!({"metadata": {"name": "sticky", "namespace": "default"},
            "spec": {"clusterIP": "10.96.0.12", "sessionAffinity": "ClientIP", "ports": [{"name": "http", "port": 80}]}}),
        ),
        svc(
            json!({"metadata": {"name": "empty", "namespace": "default"},
            "spec": {"clusterIP": "10.96.0.13", "ports": [{"name": "http", "port": 80}]}}),
        ),
    ]
}

fn slice(svc: &str, eps: &[(&str, &str)]) -> EndpointSlice {
    let eps: Vec<_> = eps
        .iter()
        .map(|(ip, node)| json!({"addresses": [ip], "nodeName": node, "conditions": {"ready": true}}))
        .collect();
    serde_json::from_value(
        json!({"metadata": {"name": format!("{svc}-1"), "namespace": "default",
        "labels": {"kubernetes.io/service-name": svc}}, "addressType": "IPv4",
        "ports": [{"name": "http", "port": 8080}], "endpoints": eps}),
    )
    .unwrap()
}

fn state(web: &[(&str, &str)]) -> ProxyState {
    let both = [("10.244.1.2", "node-a"), ("10.244.2.2", "node-b")];
    let slices = [
        slice("web", web),
        slice("local", &both),
        slice("sticky", &both),
    ];
    desired_state(&services(), &slices, "node-a").0
}

fn backend() -> IpvsBackend {
    let cfg = IpvsConfig {
        cluster_cidr: Some("10.244.0.0/16".parse().unwrap()),
        ..Default::default()
    };
    IpvsBackend::new(
        Arc::new(IpvsNetlink::new()),
        Arc::new(NftCommand::new().unwrap()),
        Box::new(NetlinkHost::new().unwrap()),
        cfg,
    )
}

fn guest_side() {
    for m in ["ip_vs", "ip_vs_rr", "dummy", "nf_conntrack"] {
        sh_here(&format!("modprobe {m}"));
    }
    let (node, pod_a, pod_b, client) = network();
    serve(&pod_a, "pod-a");
    serve(&pod_b, "pod-b");
    enter(&node);
    let before = sh_here("nft list ruleset; ip -o link; ipvsadm -Ln");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async move {
        tokio::task::block_in_place(|| checks(&client, &before));
    });
}

/// NetworkPolicy's table (`cairn-netpol`) in IPVS mode: IPVS hands a connection to its
/// backend from the output hook, not forward. An ingress deny on pod-a closes the
/// NodePort only pod-a serves (`externalTrafficPolicy: Local`) to the outside client, by a
/// drop (a timeout); the node itself still reaches pod-a through the ClusterIP.
fn policy_holds_for_ipvs_connections(client: &cairn_testsupport::NetNs) {
    let mut cluster = Cluster::default();
    cluster.add_namespace(Namespace::new("default", BTreeMap::new()));
    for (name, ip, node) in [
        ("pod-a", "10.244.1.2", "node-a"),
        ("pod-b", "10.244.2.2", "node-b"),
    ] {
        cluster.add_pod(Pod {
            key: PodKey::new("default", name),
            labels: BTreeMap::from([("app".to_string(), name.to_string())]),
            ips: vec![ip.parse().unwrap()],
            node: Some(node.into()),
            host_network: false,
            finished: false,
            named_ports: Vec::new(),
        });
    }
    let deny = json!({"metadata": {"namespace": "default", "name": "deny-a"},
        "spec": {"podSelector": {"matchLabels": {"app": "pod-a"}}, "policyTypes": ["Ingress"]}});
    let deny = CompiledPolicy::compile(&serde_json::from_value(deny).unwrap()).unwrap();
    let desired = Desired::from_pods(for_node(&[deny], &cluster, "node-a").values())
        .guarding(&["10.244.1.0/24".parse().unwrap()]);
    NftCommand::new()
        .unwrap()
        .apply(&full_script(&desired))
        .unwrap();
    let dropped = fetch_from(client, "198.18.0.10:30081").unwrap_err();
    assert!(
        matches!(
            dropped.kind(),
            std::io::ErrorKind::TimedOut | std::io::ErrorKind::WouldBlock
        ),
        "pod-a must be closed to the outside through IPVS: {dropped}"
    );
    let from_node: std::collections::BTreeSet<String> =
        (0..10).map(|_| fetch("10.96.0.11:80").unwrap()).collect();
    assert!(from_node.contains("pod-a"), "{from_node:?}");
    let counters = sh_here("nft list counters table ip cairn-netpol");
    let deny_counter = counters
        .split("counter ")
        .find(|block| block.starts_with("drops_"))
        .unwrap_or_else(|| panic!("no drop counter: {counters}"));
    assert!(
        !deny_counter.contains("packets 0 "),
        "the deny counted nothing: {counters}"
    );
    sh_here("nft delete table ip cairn-netpol");
}

fn checks(client: &cairn_testsupport::NetNs, before: &str) {
    let both = [("10.244.1.2", "node-a"), ("10.244.2.2", "node-b")];
    let mut b = backend();
    let report = b.sync(&state(&both), true).unwrap();
    assert!(report.written > 0);
    let seen: std::collections::BTreeSet<String> =
        (0..10).map(|_| fetch("10.96.0.10:80").unwrap()).collect();
    assert_eq!(seen.into_iter().collect::<Vec<_>>(), ["pod-a", "pod-b"]);
    let outside = fetch_from(client, "198.18.0.10:30080").unwrap();
    assert!(
        ["pod-a 10.244.1.1", "pod-b 10.244.2.1"].contains(&outside.as_str()),
        "{outside}"
    );
    for _ in 0..4 {
        let local = fetch_from(client, "198.18.0.10:30081").unwrap();
        assert_eq!(
            local, "pod-a 198.18.0.20",
            "only the local endpoint, client address kept"
        );
    }
    let t = Instant::now();
    let refused = fetch("10.96.0.13:80").unwrap_err();
    assert_eq!(
        refused.kind(),
        std::io::ErrorKind::ConnectionRefused,
        "{refused}"
    );
    assert!(t.elapsed() < Duration::from_secs(1));
    let first = fetch("10.96.0.12:80").unwrap();
    for _ in 0..6 {
        assert_eq!(
            fetch("10.96.0.12:80").unwrap(),
            first,
            "affinity pins the client"
        );
    }
    // pod-b leaves web: its real server has (inactive) connections, so it drains.
    let report = b.sync(&state(&both[..1]), false).unwrap();
    assert!(!report.full);
    for _ in 0..6 {
        assert_eq!(fetch("10.96.0.10:80").unwrap(), "pod-a");
    }
    let table = sh_here("ipvsadm -Ln -t 10.96.0.10:80");
    let b_line: Vec<&str> = table
        .lines()
        .find(|l| l.contains("10.244.2.2:8080"))
        .map(|l| l.split_whitespace().collect())
        .unwrap_or_default();
    assert_eq!(b_line.get(3), Some(&"0"), "drained at weight 0:\n{table}");
    policy_holds_for_ipvs_connections(client);
    // A new backend (a restarted proxy) finds everything right.
    let mut fresh = backend();
    assert_eq!(fresh.sync(&state(&both[..1]), false).unwrap().written, 0);
    fresh.cleanup().unwrap();
    let after = sh_here("nft list ruleset; ip -o link; ipvsadm -Ln");
    assert_eq!(after, before);
}
