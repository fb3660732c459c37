//! NetworkPolicy's cost on the data plane (issue 32's benchmark): new TCP connections per
//! second and connect latency from a client pod to a server pod on another node's
//! address range, through the node's forward hook, with no policy table and with the
//! table of a cluster of 1,000 pods and 200 policies, 50 of them selecting the server
//! (the one that admits the client sorts last, so a SYN walks the other 49 rules first).
//! The namespaces are conn_rate's: a "node", a server "pod" and a client pod, each pod
//! joined to the node by a veth. Rounds with and without the table alternate and are
//! pooled, so a drift in the machine's speed falls on both alike. Goal: ≥ 0.9× the rate
//! without policies.
//!
//! Also printed: the time to compute the node's state from the cluster (what every
//! change costs before the diff), p50/p99 over 20 runs, and the table's size.
//!
//! `cargo bench -p cairn-proxy --bench netpol_rate` (root). `NETPOL_RATE_SECONDS` per
//! round (default 2), `NETPOL_RATE_ROUNDS` (default 3).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeMap;
use std::net::{Ipv4Addr, SocketAddr, TcpListener};
use std::os::fd::AsFd;
use std::process::Command;
use std::time::{Duration, Instant};

use cairn_netpol::nft::{full_script, Desired};
use cairn_netpol::{for_node, Cluster, CompiledPolicy, Namespace, Pod, PodKey};
use cairn_testsupport::NetNs;
use serde_json::json;
use support::pct;

mod support;

const SERVER: Ipv4Addr = Ipv4Addr::new(10, 244, 1, 2);
const CLIENT: Ipv4Addr = Ipv4Addr::new(10, 244, 200, 2);
const PORT: u16 = 8080;

fn sh(ns: &NetNs, cmd: &str) {
    let out = Command::new("ip")
        .args(["netns", "exec", ns.name(), "sh", "-c", cmd])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{cmd}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The node, the server pod and the client pod, as conn_rate builds them.
fn namespaces() -> (NetNs, NetNs, NetNs) {
    let (node, pod, client) = (
        NetNs::new("npnode").unwrap(),
        NetNs::new("nppod").unwrap(),
        NetNs::new("npcli").unwrap(),
    );
    sh(&node, &format!("ip link add p1 type veth peer name eth0 netns {} && ip addr add 10.244.1.1/24 dev p1 && ip link set p1 up && ip link set lo up && sysctl -qw net.ipv4.ip_forward=1", pod.name()));
    sh(&node, &format!("ip link add p2 type veth peer name eth0 netns {} && ip addr add 10.244.200.1/24 dev p2 && ip link set p2 up", client.name()));
    sh(&pod, "ip addr add 10.244.1.2/24 dev eth0 && ip link set eth0 up && ip link set lo up && ip route add default via 10.244.1.1 && sysctl -qw net.core.somaxconn=65535 net.ipv4.tcp_max_syn_backlog=65535");
    sh(&client, "ip addr add 10.244.200.2/24 dev eth0 && ip link set eth0 up && ip link set lo up && ip route add default via 10.244.200.1");
    (node, pod, client)
}

fn pod(ns: &str, name: &str, ip: Ipv4Addr, node: &str, app: &str) -> Pod {
    Pod {
        key: PodKey::new(ns, name),
        labels: BTreeMap::from([("app".to_string(), app.to_string())]),
        ips: vec![ip.into()],
        node: Some(node.into()),
        host_network: false,
        finished: false,
        named_ports: Vec::new(),
    }
}

fn policy(ns: &str, name: &str, spec: serde_json::Value) -> CompiledPolicy {
    let p = json!({"metadata": {"namespace": ns, "name": name}, "spec": spec});
    CompiledPolicy::compile(&serde_json::from_value(p).unwrap()).unwrap()
}

fn from_pods(app: &str, team: &str, ports: &[u16]) -> serde_json::Value {
    let ports: Vec<_> = ports.iter().map(|p| json!({"port": p})).collect();
    json!([{"from": [{"podSelector": {"matchLabels": {"app": app}},
                      "namespaceSelector": {"matchLabels": {"team": team}}}],
            "ports": ports}])
}

/// 1,000 pods (the server on node-1, the client on node-2, 998 spread over 3 nodes and
/// 10 namespaces) and 200 policies: 50 select the server (the last admits the client's
/// namespace), 150 select other pods, 20 of those with an `ipBlock`.
fn cluster() -> (Cluster, Vec<CompiledPolicy>) {
    let mut c = Cluster::default();
    let team = |t: &str| BTreeMap::from([("team".to_string(), t.to_string())]);
    for ns in ["target", "client"] {
        c.add_namespace(Namespace::new(ns, team(ns)));
    }
    for n in 0..10 {
        let ns = format!("ns-{n}");
        c.add_namespace(Namespace::new(&ns, team(&ns)));
    }
    c.add_pod(pod("target", "server", SERVER, "node-1", "server"));
    c.add_pod(pod("client", "client", CLIENT, "node-2", "client"));
    for i in 0..998u32 {
        let ip = Ipv4Addr::from(u32::from(Ipv4Addr::new(10, 244, 2, 2)) + i);
        let node = format!("node-{}", 1 + i % 3);
        let (ns, app) = (format!("ns-{}", i % 10), format!("app-{}", i % 20));
        c.add_pod(pod(&ns, &format!("p-{i}"), ip, &node, &app));
    }
    let server = json!({"matchLabels": {"app": "server"}});
    let mut policies = Vec::new();
    for k in 0..49 {
        let rules = from_pods(&format!("app-{}", k % 20), &format!("ns-{}", k % 10), &[80]);
        let spec = json!({"podSelector": server, "ingress": rules});
        policies.push(policy("target", &format!("p-{k:02}"), spec));
    }
    let admit = json!([{"from": [{"namespaceSelector": {"matchLabels": {"team": "client"}}}],
                        "ports": [{"port": PORT}]}]);
    policies.push(policy(
        "target",
        "p-49",
        json!({"podSelector": server, "ingress": admit}),
    ));
    for j in 0..150 {
        let ns = format!("ns-{}", j % 10);
        let selector = json!({"matchLabels": {"app": format!("app-{}", j % 20)}});
        let mut rules = from_pods(&format!("app-{}", (j + 1) % 20), &ns, &[80, 443]);
        if j < 20 {
            rules[0]["from"].as_array_mut().unwrap().push(
                json!({"ipBlock": {"cidr": "10.0.0.0/8", "except": [format!("10.{j}.0.0/16")]}}),
            );
        }
        let spec = json!({"podSelector": selector, "ingress": rules});
        policies.push(policy(&ns, &format!("q-{j:03}"), spec));
    }
    policies.sort_by(|a, b| a.key.cmp(&b.key));
    (c, policies)
}

/// Connects and resets for `secs`; connections/s and connect latencies (µs).
fn hammer(to: SocketAddr, secs: f64) -> (f64, Vec<f64>) {
    let deadline = Instant::now() + Duration::from_secs_f64(secs);
    let start = Instant::now();
    let mut lat = Vec::new();
    while Instant::now() < deadline {
        let sock =
            socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
        let t = Instant::now();
        sock.connect(&to.into()).unwrap();
        lat.push(t.elapsed().as_secs_f64() * 1e6);
        sock.set_linger(Some(Duration::ZERO)).unwrap();
    }
    (lat.len() as f64 / start.elapsed().as_secs_f64(), lat)
}

/// Accepts and drops connections on the server pod's `PORT`.
fn serve(pod: &NetNs) {
    let pod_path = pod.path();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let f = std::fs::File::open(pod_path).unwrap();
        nix::sched::setns(f.as_fd(), nix::sched::CloneFlags::CLONE_NEWNET).unwrap();
        let l = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
        l.set_reuse_address(true).unwrap();
        l.bind(&SocketAddr::from(([0, 0, 0, 0], PORT)).into())
            .unwrap();
        l.listen(65535).unwrap();
        let l: TcpListener = l.into();
        tx.send(()).unwrap();
        for s in l.incoming() {
            drop(s);
        }
    });
    rx.recv().unwrap();
}

/// The node's state, and the time each of 20 computations took (ms).
fn compute(cluster: &Cluster, policies: &[CompiledPolicy]) -> (Desired, Vec<f64>) {
    let mut times = Vec::new();
    let mut desired = Desired::default();
    for _ in 0..20 {
        let t = Instant::now();
        desired = Desired::from_pods(for_node(policies, cluster, "node-1").values())
            .guarding(&["10.244.1.0/24".parse().unwrap()]);
        times.push(t.elapsed().as_secs_f64() * 1000.0);
    }
    (desired, times)
}

fn nft(node: &NetNs, script: &str) {
    let mut child = node
        .command("nft")
        .args(["-f", "-"])
        .stdin(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(script.as_bytes())
        .unwrap();
    assert!(child.wait().unwrap().success(), "nft -f failed");
}

fn env_or<T: std::str::FromStr>(key: &str, default: T) -> T {
    std::env::var(key)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

fn main() {
    let secs: f64 = env_or("NETPOL_RATE_SECONDS", 2.0);
    let rounds: u32 = env_or("NETPOL_RATE_ROUNDS", 3).max(1);
    let (cluster, policies) = cluster();
    let (desired, mut times) = compute(&cluster, &policies);
    let script = full_script(&desired);
    println!(
        "node-1's state at 1,000 pods / 200 policies: {} chains, {} sets, {} set elements, script {} KiB; computed in p50 {:.1} ms, p99 {:.1} ms",
        desired.chains.len(),
        desired.sets.len(),
        desired.sets.values().map(|s| s.len()).sum::<usize>(),
        script.len() / 1024,
        pct(&mut times, 0.5),
        pct(&mut times, 0.99)
    );
    let (node, server, client) = namespaces();
    serve(&server);
    let to = SocketAddr::from((SERVER, PORT));
    client.run_inside(|| hammer(to, 0.5));
    let (mut without, mut with) = ((0.0, Vec::new()), (0.0, Vec::new()));
    for _ in 0..rounds {
        let (rate, lat) = client.run_inside(|| hammer(to, secs));
        without.0 += rate;
        without.1.extend(lat);
        nft(&node, &script);
        let (rate, lat) = client.run_inside(|| hammer(to, secs));
        with.0 += rate;
        with.1.extend(lat);
        nft(&node, "delete table ip cairn-netpol\n");
    }
    let rounds = f64::from(rounds);
    for (what, (rate, lat)) in [
        ("no policy", &mut without),
        ("200 policies, 50 selecting the server", &mut with),
    ] {
        println!(
            "{what}: {:.0} conn/s, connect p50 {:.0} µs, p99 {:.0} µs",
            *rate / rounds,
            pct(lat, 0.5),
            pct(lat, 0.99)
        );
    }
    println!(
        "ratio with/without policies: {:.2} (goal ≥ 0.90)",
        with.0 / without.0
    );
}
