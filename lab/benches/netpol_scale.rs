//! Issue 32's scale measurement, on a 3-node lab of this build's release binaries
//! (`cargo build --release --bins` first): 1,000 pods and 200 NetworkPolicies, then the
//! time from a policy write to the change in force on every node, and the proxies' memory.
//!
//! The 1,000 pods are API objects bound to the three nodes (333 or 334 each) with their
//! addresses written to their status, as an agent would: the agents are stopped first,
//! so nothing runs them, and the pods tolerate every taint, so the stopped nodes keep
//! them. The proxies, which enforce policy, run as in any lab. Requests go to the API
//! server with curl and the lab's admin credentials, 8 at a time.
//!
//! Measured, p50/p99/max over `NETPOL_SCALE_CHANGES` (default 40) changes: from just
//! before the write of a policy's port (a policy selecting 50 pods spread over all nodes,
//! so every node rewrites their chains) to the new rule seen on the last node, by
//! `nft monitor` in each node (no polling). The time the write itself took is printed
//! beside it. Then the same for a new pod selected by that policy: from its status write
//! (the moment it has an address) to its chain in force on its node. Memory: each
//! cairn-proxy's RSS before the objects exist and at the end.
//!
//! `cargo bench -p cairn-lab --bench netpol_scale`

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

#[path = "../tests/common/mod.rs"]
mod common;

#[path = "support/api.rs"]
mod api;

use api::Api;
use common::Lab;
use serde_json::{json, Value};

const NODES: [&str; 3] = ["node-1", "node-2", "node-3"];

fn pod_body(ns: &str, name: &str, node: &str, app: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"namespace": ns, "name": name, "labels": {"app": app}},
        "spec": {"nodeName": node, "tolerations": [{"operator": "Exists"}],
                 "containers": [{"name": "c", "image": "busybox", "ports": [{"name": "web", "containerPort": 8080}]}]}})
}

fn status_body(ip: &str) -> Value {
    json!({"status": {"phase": "Running", "podIP": ip, "podIPs": [{"ip": ip}]}})
}

/// Pod `i`'s namespace, node, app label and address (never in a node's own range).
fn fake(i: u32) -> (String, &'static str, String, String) {
    let ip = std::net::Ipv4Addr::from(u32::from(std::net::Ipv4Addr::new(10, 244, 100, 2)) + i);
    (
        format!("ns-{}", i % 10),
        NODES[(i % 3) as usize],
        format!("app-{}", i % 20),
        ip.to_string(),
    )
}

fn ingress(app: &str, team: &str, port: u32) -> Value {
    json!([{"from": [{"podSelector": {"matchLabels": {"app": app}}, "namespaceSelector": {"matchLabels": {"team": team}}}],
            "ports": [{"port": port}]}])
}

fn policy_body(ns: &str, name: &str, selects: &str, rules: Value) -> Value {
    json!({"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
        "metadata": {"namespace": ns, "name": name},
        "spec": {"podSelector": {"matchLabels": {"app": selects}}, "ingress": rules}})
}

/// 10 namespaces, 1,000 pods with addresses, 200 policies (10 per app label, each
/// admitting another app's pods of another namespace).
fn populate(api: &Api) {
    let mut calls = Vec::new();
    for n in 0..10 {
        let ns = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": format!("ns-{n}"), "labels": {"team": format!("ns-{n}")}}});
        calls.push(("/api/v1/namespaces".to_string(), ns, true));
    }
    api.all(calls);
    let pods = (0..1000).map(|i| {
        let (ns, node, app, _) = fake(i);
        (
            format!("/api/v1/namespaces/{ns}/pods"),
            pod_body(&ns, &format!("p-{i}"), node, &app),
            true,
        )
    });
    api.all(pods.collect());
    let statuses = (0..1000).map(|i| {
        let (ns, _, _, ip) = fake(i);
        (
            format!("/api/v1/namespaces/{ns}/pods/p-{i}/status"),
            status_body(&ip),
            false,
        )
    });
    api.all(statuses.collect());
    let policies = (0..200u32).map(|j| {
        let ns = format!("ns-{}", j % 10);
        let rules = ingress(
            &format!("app-{}", (j + 1) % 20),
            &format!("ns-{}", (j + 3) % 10),
            80,
        );
        let body = policy_body(&ns, &format!("q-{j:03}"), &format!("app-{}", j % 20), rules);
        (
            format!("/apis/networking.k8s.io/v1/namespaces/{ns}/networkpolicies"),
            body,
            true,
        )
    });
    api.all(policies.collect());
}

/// The `nft monitor` processes, killed when dropped (a failed run leaves none behind).
struct Monitors(Vec<Child>);

impl Drop for Monitors {
    fn drop(&mut self) {
        for child in &mut self.0 {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// `nft monitor` in every node (straight in its netns: `cairn-lab exec` hands output
/// over at exit): each line about the policy table, with its node and time.
fn monitors(lab: &str) -> (Monitors, mpsc::Receiver<(usize, Instant, String)>) {
    let (tx, rx) = mpsc::channel();
    let mut children = Vec::new();
    for n in 0..NODES.len() {
        let netns = format!("--net=/run/netns/cl-{lab}-n{}", n + 1);
        let mut child = Command::new("nsenter")
            .args([netns.as_str(), "--", "nft", "monitor"])
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let out = child.stdout.take().unwrap();
        let tx = tx.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines().map_while(Result::ok) {
                if line.contains("cairn-netpol") && tx.send((n, Instant::now(), line)).is_err() {
                    return;
                }
            }
        });
        children.push(child);
    }
    (Monitors(children), rx)
}

/// Waits until every node in `nodes` printed a line containing `needle`; the time of the last.
fn seen_on(
    rx: &mpsc::Receiver<(usize, Instant, String)>,
    nodes: &[usize],
    needle: &str,
) -> Instant {
    let mut pending: Vec<usize> = nodes.to_vec();
    let mut last = Instant::now();
    let mut seen: Vec<String> = Vec::new();
    while !pending.is_empty() {
        let (n, at, line) = rx
            .recv_timeout(Duration::from_secs(20))
            .unwrap_or_else(|_| {
                let tail = &seen[seen.len().saturating_sub(5)..];
                panic!(
                    "{needle} never seen on nodes {pending:?}; {} lines, the last: {tail:#?}",
                    seen.len()
                )
            });
        seen.push(format!(
            "{n}: {}",
            line.chars().take(200).collect::<String>()
        ));
        if line.contains(needle) && pending.contains(&n) {
            pending.retain(|p| *p != n);
            last = at;
        }
    }
    last
}

/// The isolated pods in node `n`'s ingress map (`None`: no table yet).
fn isolated_on(lab: &str, n: usize) -> Option<usize> {
    let out = Command::new("nsenter")
        .arg(format!("--net=/run/netns/cl-{lab}-n{}", n + 1))
        .args([
            "--",
            "nft",
            "list",
            "map",
            "ip",
            "cairn-netpol",
            "ingress_pods",
        ])
        .output()
        .unwrap();
    out.status.success().then(|| {
        String::from_utf8_lossy(&out.stdout)
            .matches(": jump")
            .count()
    })
}

/// Waits until every node isolates each of its 1,000 / 3 pods (every pod is selected).
fn programmed_everywhere(lab: &str, start: Instant) {
    for (n, node) in NODES.iter().enumerate() {
        let want = (0..1000u32).filter(|i| (i % 3) as usize == n).count();
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            let have = isolated_on(lab, n);
            if have == Some(want) {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "{node} isolates {have:?} of {want} pods"
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }
    println!(
        "every node programmed its pods {:.1?} after the first write",
        start.elapsed()
    );
}

fn rss_kib(node: &str) -> u64 {
    let out = Command::new("pgrep")
        .args(["-f", &format!("cairn-proxy .*--hostname-override {node}")])
        .output()
        .unwrap();
    let pid = String::from_utf8_lossy(&out.stdout)
        .lines()
        .next()
        .unwrap_or_else(|| panic!("no proxy of {node}"))
        .to_string();
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status.lines().find(|l| l.starts_with("VmRSS:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

fn pct(v: &mut [f64], q: f64) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[((v.len() as f64 - 1.0) * q).round() as usize]
}

fn report(what: &str, total: &mut [f64], write: &mut [f64]) {
    println!(
        "{what} ({} runs): on every node p50 {:.0} ms, p99 {:.0} ms, max {:.0} ms after the write began | the write itself p50 {:.0} ms, p99 {:.0} ms",
        total.len(), pct(total, 0.5), pct(total, 0.99), pct(total, 1.0), pct(write, 0.5), pct(write, 0.99)
    );
}

fn main() {
    let changes: u32 = std::env::var("NETPOL_SCALE_CHANGES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(40);
    let mut lab = Lab::up("npscale", 16510, &["--nodes=3"]);
    for node in NODES {
        lab.lab(&["stop", node, "agent"]);
    }
    let before: Vec<u64> = NODES.iter().map(|n| rss_kib(n)).collect();
    let api = Api::new(&lab);
    // Started on empty tables: `nft monitor` reads the whole ruleset when it starts.
    let (monitors, rx) = monitors("npscale");
    let start = Instant::now();
    populate(&api);
    println!(
        "1,000 pods with addresses and 200 policies written in {:.1?}",
        start.elapsed()
    );
    programmed_everywhere("npscale", start);
    // What the monitors saw while the objects were written.
    let drained = rx.try_iter().count();
    println!("({drained} nft events while programming)");
    // The policy every measured change rewrites: app-0 in ns-0 is 50 pods on all 3 nodes.
    let path = "/apis/networking.k8s.io/v1/namespaces/ns-0/networkpolicies/q-000";
    let (mut total, mut write) = (Vec::new(), Vec::new());
    for i in 0..changes {
        let port = 20_000 + i;
        let t0 = Instant::now();
        api.merge(
            path,
            &json!({"spec": {"ingress": ingress("app-1", "ns-3", port)}}),
        );
        write.push(t0.elapsed().as_secs_f64() * 1000.0);
        let last = seen_on(&rx, &[0, 1, 2], &format!("dport {port}"));
        total.push((last - t0).as_secs_f64() * 1000.0);
    }
    report("a policy's port changed", &mut total, &mut write);
    let (mut total, mut write) = (Vec::new(), Vec::new());
    for i in 0..changes {
        let (ns, node, ip) = ("ns-0", (i % 3) as usize, format!("10.244.120.{}", i + 2));
        api.create(
            &format!("/api/v1/namespaces/{ns}/pods"),
            &pod_body(ns, &format!("new-{i}"), NODES[node], "app-0"),
        );
        let t0 = Instant::now();
        api.merge(
            &format!("/api/v1/namespaces/{ns}/pods/new-{i}/status"),
            &status_body(&ip),
        );
        write.push(t0.elapsed().as_secs_f64() * 1000.0);
        let last = seen_on(&rx, &[node], &format!("{ip} : jump in_"));
        total.push((last - t0).as_secs_f64() * 1000.0);
    }
    report("a new pod selected by a policy", &mut total, &mut write);
    for (n, node) in NODES.iter().enumerate() {
        let chains = lab
            .on_node(
                node,
                &["nft", "list", "map", "ip", "cairn-netpol", "ingress_pods"],
            )
            .unwrap();
        println!(
            "{node}: cairn-proxy RSS {} KiB with no objects, {} KiB at 1,000 pods / 200 policies ({} isolated local pods)",
            before[n], rss_kib(node), chains.matches(": jump").count()
        );
    }
    drop(monitors);
    lab.down();
}
