//! UDP failover through a cluster IP needs the proxy's conntrack cleanup (real nftables,
//! real conntrack, network namespaces this test makes; root only). A client keeps one
//! UDP socket (one conntrack flow) talking to a service; the endpoint serving it is
//! removed. Without cleanup (the hidden `--conntrack-cleanup=false`) the flow keeps going
//! to the removed pod — the test's negative control; a proxy with cleanup deletes exactly
//! that flow on its first sync (a restart flushes nothing else) and the client fails over.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::net::UdpSocket;
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use cairn_testsupport::NetNs;
use common::*;
use serde_json::json;

/// A UDP server in `ns` answering every datagram with `name`.
fn serve_udp(ns: &NetNs, name: &'static str) {
    let path = ns.path();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let f = std::fs::File::open(path).unwrap();
        nix::sched::setns(f.as_fd(), nix::sched::CloneFlags::CLONE_NEWNET).unwrap();
        let sock = UdpSocket::bind("0.0.0.0:5353").unwrap();
        tx.send(()).unwrap();
        let mut buf = [0u8; 64];
        while let Ok((_, from)) = sock.recv_from(&mut buf) {
            let _ = sock.send_to(name.as_bytes(), from);
        }
    });
    rx.recv().unwrap();
}

/// Who answers a datagram sent from `sock`.
fn ask(sock: &UdpSocket) -> Option<String> {
    sock.send(b"?").ok()?;
    let mut buf = [0u8; 64];
    let n = sock.recv(&mut buf).ok()?;
    Some(String::from_utf8_lossy(&buf[..n]).into_owned())
}

fn client(port: u16, vip: &str) -> UdpSocket {
    let sock = UdpSocket::bind(("0.0.0.0", port)).unwrap();
    sock.set_read_timeout(Some(Duration::from_millis(500)))
        .unwrap();
    sock.connect(format!("{vip}:53")).unwrap();
    sock
}

fn slice(ips: &[&str]) -> String {
    let eps: Vec<_> = ips
        .iter()
        .map(|ip| json!({"addresses": [ip], "nodeName": "node-a", "conditions": {"ready": true}}))
        .collect();
    json!({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
        "metadata": {"name": "dns-1", "namespace": "default", "labels": {"kubernetes.io/service-name": "dns"}},
        "addressType": "IPv4", "ports": [{"name": "dns", "port": 5353, "protocol": "UDP"}],
        "endpoints": eps})
    .to_string()
}

fn proxy(kc: &Path, log: &Path, cleanup: bool) -> Kill {
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
        .unwrap();
    Kill(
        Command::new(env!("CARGO_BIN_EXE_cairn-proxy"))
            .arg("--kubeconfig")
            .arg(kc)
            .args(["--mode", "nftables", "--hostname-override", "node-a"])
            .args(["--min-sync-period", "0.1", "--healthz-bind-address", ""])
            .args(["--metrics-bind-address", ""])
            .arg(format!("--conntrack-cleanup={cleanup}"))
            .stderr(log)
            .spawn()
            .unwrap(),
    )
}

fn udp_flows() -> String {
    let out = Command::new("conntrack")
        .args(["-L", "-p", "udp"])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn udp_clients_fail_over_only_because_stale_flows_are_deleted() {
    let (node, pod_a, pod_b, _client) = network();
    serve_udp(&pod_a, "pod-a");
    serve_udp(&pod_b, "pod-b");
    enter(&node);
    let dir = tempfile::tempdir().unwrap();
    let (_control, kc) = start_control(dir.path());
    let svc = json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "dns", "namespace": "default"},
        "spec": {"ports": [{"name": "dns", "port": 53, "targetPort": 5353, "protocol": "UDP"}]}});
    kubectl(&kc, &["apply", "-f", "-"], Some(svc.to_string()));
    kubectl(
        &kc,
        &["apply", "-f", "-"],
        Some(slice(&["10.244.1.2", "10.244.2.2"])),
    );
    let vip = kubectl(
        &kc,
        &["get", "svc", "dns", "-o", "jsonpath={.spec.clusterIP}"],
        None,
    );
    let log: PathBuf = dir.path().join("proxy.log");
    let without = proxy(&kc, &log, false);

    let sock = client(40000, &vip);
    let first = wait("the service answering", || ask(&sock));
    let (gone_ip, other) = if first == "pod-a" {
        ("10.244.1.2", "pod-b")
    } else {
        ("10.244.2.2", "pod-a")
    };
    let survivor_ip = if gone_ip == "10.244.1.2" {
        "10.244.2.2"
    } else {
        "10.244.1.2"
    };
    // A second client whose flow goes to the endpoint that stays (a new source port is a
    // new pick; the misses are stale flows too, to be deleted).
    let mut missed = Vec::new();
    let (steady_port, steady) = (40001..40100)
        .find_map(|port| {
            let sock = client(port, &vip);
            match ask(&sock) {
                Some(who) if who == other => Some((port, sock)),
                _ => {
                    missed.push(port);
                    None
                }
            }
        })
        .unwrap();
    kubectl(&kc, &["apply", "-f", "-"], Some(slice(&[survivor_ip])));
    let dnat = format!("dnat to {gone_ip}:5353");
    wait("the endpoint out of the rules", || {
        let rules = Command::new("nft")
            .args(["list", "ruleset"])
            .output()
            .unwrap();
        (!String::from_utf8_lossy(&rules.stdout).contains(&dnat)).then_some(())
    });
    // Negative control: with the rules updated but the flow left, the client still
    // reaches the removed pod.
    assert_eq!(
        ask(&sock).as_deref(),
        Some(first.as_str()),
        "stale flow without cleanup"
    );
    drop(without);

    let _with = proxy(&kc, &log, true);
    wait("the stale flow deleted", || {
        std::fs::read_to_string(&log)
            .unwrap()
            .contains(&format!(
                "removed stale UDP conntrack flows deleted={}",
                missed.len() + 1
            ))
            .then_some(())
    });
    let flows = udp_flows();
    assert!(
        flows.contains(&format!("sport={steady_port} ")),
        "the live flow stays:\n{flows}"
    );
    for port in missed.iter().chain([&40000]) {
        assert!(!flows.contains(&format!("sport={port} ")), "{flows}");
    }
    assert_eq!(ask(&sock).as_deref(), Some(other), "failed over");
    assert_eq!(ask(&steady).as_deref(), Some(other));
}
