use std::sync::Arc;

use cairn_netfilter::{RecordingIptables, RecordingNft};
use cairn_serviceproxy::desired_state;
use cairn_serviceproxy::iptables::IptConfig;
use cairn_serviceproxy::nftables::NftConfig;
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use serde_json::json;

use super::*;

fn service(name: &str, ip: &str) -> Service {
    serde_json::from_value(json!({"metadata": {"name": name, "namespace": "default"},
        "spec": {"clusterIP": ip, "ports": [{"port": 80, "protocol": "TCP"}]}}))
    .unwrap()
}

fn slice(name: &str, ips: &[&str]) -> EndpointSlice {
    let eps: Vec<_> = ips
        .iter()
        .map(|ip| json!({"addresses": [ip], "conditions": {"ready": true}}))
        .collect();
    serde_json::from_value(
        json!({"metadata": {"name": format!("{name}-1"), "namespace": "default",
        "labels": {"kubernetes.io/service-name": name}}, "addressType": "IPv4",
        "ports": [{"port": 8080, "protocol": "TCP"}], "endpoints": eps}),
    )
    .unwrap()
}

fn backend() -> (Arc<RecordingNft>, NftBackend) {
    let nft = Arc::new(RecordingNft::default());
    let b = NftBackend::new(
        nft.clone(),
        NftConfig {
            cluster_cidr: Some("10.244.0.0/16".parse().unwrap()),
            ..Default::default()
        },
    );
    (nft, b)
}

#[test]
fn first_sync_is_full_then_only_changed_services_are_written() {
    let (nft, mut b) = backend();
    let svcs = [service("a", "10.96.0.10"), service("b", "10.96.0.11")];
    let (state, _) = desired_state(
        &svcs,
        &[slice("a", &["10.244.1.2"]), slice("b", &["10.244.1.3"])],
        "n",
    );
    let r = b.sync(&state, false).unwrap();
    assert!(r.full);
    let full = nft.scripts.lock()[0].clone();
    assert!(full.contains("delete table ip cairn-proxy"), "{full}");
    assert!(full.contains("10.96.0.10 . tcp . 80 : goto svc-"));
    assert!(full.contains("dnat to 10.244.1.3:8080"));
    assert!(full.contains(
        "ip daddr 10.96.0.10 ip saddr != 10.244.0.0/16 meta mark set meta mark | 0x00004000"
    ));

    // Nothing changed: nothing is written.
    assert_eq!(b.sync(&state, false).unwrap(), SyncReport::default());
    assert_eq!(nft.scripts.lock().len(), 1);

    // One endpoint changes: only that service's chains and elements.
    let (next, _) = desired_state(
        &svcs,
        &[
            slice("a", &["10.244.1.2", "10.244.2.2"]),
            slice("b", &["10.244.1.3"]),
        ],
        "n",
    );
    let r = b.sync(&next, false).unwrap();
    assert_eq!((r.full, r.written), (false, 1));
    let partial = nft.scripts.lock()[1].clone();
    assert!(
        !partial.contains("10.96.0.11") && !partial.contains("table ip cairn-proxy {"),
        "{partial}"
    );
    assert!(
        partial.contains("dnat to 10.244.2.2:8080") && partial.contains("numgen random mod 2"),
        "{partial}"
    );
    // The service's element points at the same chain: it is not rewritten.
    assert!(!partial.contains("element"), "{partial}");
}

#[test]
fn a_service_without_endpoints_is_rejected_and_a_failed_partial_sync_falls_back_to_full() {
    let (nft, mut b) = backend();
    let svcs = [service("a", "10.96.0.10")];
    let (empty, _) = desired_state(&svcs, &[], "n");
    b.sync(&empty, false).unwrap();
    assert!(nft.scripts.lock()[0].contains("10.96.0.10 . tcp . 80 : goto reject-packet"));
    let (next, _) = desired_state(&svcs, &[slice("a", &["10.244.1.2"])], "n");
    *nft.fail_next.lock() = Some("Error: Could not process rule".into());
    let r = b.sync(&next, false).unwrap();
    assert!(r.full, "fell back to a full sync");
    // Cleanup deletes the tables that are there, the main one and its shards.
    for table in ["cairn-proxy", "cairn-proxy-shard0", "other"] {
        nft.tables
            .lock()
            .insert(format!("ip {table}"), format!("table ip {table} {{}}\n"));
    }
    b.cleanup().unwrap();
    assert_eq!(
        nft.scripts.lock().last().unwrap(),
        "delete table ip cairn-proxy\ndelete table ip cairn-proxy-shard0\n"
    );
}

fn ipt_backend() -> (Arc<RecordingIptables>, IptablesBackend) {
    let ipt = Arc::new(RecordingIptables::default());
    let b = IptablesBackend::new(
        ipt.clone(),
        IptConfig {
            cluster_cidr: Some("10.244.0.0/16".parse().unwrap()),
            ..Default::default()
        },
    );
    (ipt, b)
}

#[test]
fn iptables_partial_syncs_touch_one_service_and_failures_fall_back_to_a_compared_full_sync() {
    let (ipt, mut b) = ipt_backend();
    let services = [service("a", "10.96.0.10"), service("b", "10.96.0.11")];
    let slices = [slice("a", &["10.244.1.2"]), slice("b", &["10.244.1.3"])];
    let (state, _) = desired_state(&services, &slices, "node-a");
    let report = b.sync(&state, false).unwrap();
    assert!(report.full);
    let first = ipt.payloads.lock()[0].clone();
    assert!(first.contains("-I PREROUTING -j CAIRN-SERVICES"), "{first}");

    let slices = [
        slice("a", &["10.244.1.2", "10.244.1.4"]),
        slice("b", &["10.244.1.3"]),
    ];
    let (state, _) = desired_state(&services, &slices, "node-a");
    let report = b.sync(&state, false).unwrap();
    assert!(!report.full && report.written == 1);
    let second = ipt.payloads.lock()[1].clone();
    assert!(
        second.contains("10.244.1.4:8080") && !second.contains("10.244.1.3"),
        "{second}"
    );
    assert!(!second.contains("CAIRN-SERVICES"), "{second}");

    // The kernel lost the rules (say, a flush by someone): the partial sync fails, and the
    // full one reads the (now empty) tables and writes everything again.
    *ipt.fail_next.lock() = Some("Chain 'CAIRN-SVC-x' does not exist".into());
    let slices = [slice("a", &["10.244.1.2"]), slice("b", &["10.244.1.3"])];
    let (state, _) = desired_state(&services, &slices, "node-a");
    let report = b.sync(&state, false).unwrap();
    assert!(report.full);
    let third = ipt.payloads.lock().last().unwrap().clone();
    assert!(third.contains("-I PREROUTING -j CAIRN-SERVICES") && third.contains("10.244.1.3"));
    // With the save showing exactly that, a periodic full sync writes nothing.
    ipt.saved.lock().insert(
        "nat".into(),
        format!(
            "*nat\n{}",
            third.split("*nat\n").nth(1).unwrap().replace("-I ", "-A ")
        ),
    );
    ipt.saved.lock().insert(
        "filter".into(),
        third.split("*nat\n").next().unwrap().replace("-I ", "-A "),
    );
    let before = ipt.payloads.lock().len();
    assert!(b.sync(&state, true).unwrap().full);
    assert_eq!(
        ipt.payloads.lock().len(),
        before,
        "{:?}",
        ipt.payloads.lock().last()
    );
}
