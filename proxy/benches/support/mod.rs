//! What the proxy's benchmarks share: the synthetic cluster, the peer's generator,
//! percentiles, and the connection hammer and server of the data-plane benches. (Not a benchmark itself: cargo only runs the files named in Cargo.toml.)

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::net::{Ipv4Addr, SocketAddr, TcpListener};
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use cairn_serviceproxy::*;
use cairn_testsupport::NetNs;

/// The cluster IP of service `i`.
pub fn vip(i: u32) -> Ipv4Addr {
    Ipv4Addr::from(u32::from(Ipv4Addr::new(10, 96, 0, 0)) + i + 1)
}

pub fn name(i: u32) -> ServicePortName {
    ServicePortName {
        namespace: "bench".into(),
        name: format!("svc-{i}"),
        port: String::new(),
        protocol: Protocol::Tcp,
    }
}

/// `n` ClusterIP services × 2 endpoints; service `changed` has its endpoints moved by
/// `variant` (so consecutive variants are one endpoint change each).
pub fn services(n: u32, variant: u32, changed: u32) -> ProxyState {
    (0..n)
        .map(|i| {
            let moved = if i == changed { variant * 100_000 } else { 0 };
            let ep = |k: u32| {
                let ip = u32::from(Ipv4Addr::new(10, 244, 0, 0)) + 2 * i + k + moved;
                Endpoint::ready(Ipv4Addr::from(ip), 8080)
            };
            let port = ServicePort {
                cluster_ip: Some(vip(i)),
                port: 80,
                ..Default::default()
            };
            (
                name(i),
                ServiceEntry::with_endpoints(port, vec![ep(1), ep(2)]),
            )
        })
        .collect()
}

pub fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

pub fn pct(v: &mut [f64], q: f64) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[((v.len() as f64 - 1.0) * q).round() as usize]
}

/// Runs the peer's `gen.py` (`../shared/peers/netfilter`) and keeps its output in `dir`.
pub fn peer_gen(dir: &Path, args: &[String]) -> PathBuf {
    let gen = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/peers/netfilter/gen.py");
    let path = dir.join(args.join("-"));
    let out = Command::new("python3")
        .arg(&gen)
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "gen.py {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    std::fs::write(&path, out.stdout).unwrap();
    path
}

/// Connects and resets for `secs`; connections/s and connect latencies (µs).
pub fn hammer(to: SocketAddr, secs: f64) -> (f64, Vec<f64>) {
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

/// Starts the server: accepts and drops connections on the pod's `port`.
pub fn serve(pod: &NetNs, port: u16) {
    let pod_path = pod.path();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let f = std::fs::File::open(pod_path).unwrap();
        nix::sched::setns(f.as_fd(), nix::sched::CloneFlags::CLONE_NEWNET).unwrap();
        // A deep accept queue: a full one drops SYNs, and a retransmitted SYN costs 1 s.
        let l = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
        l.set_reuse_address(true).unwrap();
        l.bind(&SocketAddr::from(([0, 0, 0, 0], port)).into())
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

/// Runs `cmd` with `sh -c` in `ns`; panics with its stderr on failure.
pub fn sh(ns: &NetNs, cmd: &str) {
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

/// The data-plane benches' namespaces: a "node" (routing, 10.244.1.1 and 10.244.200.1,
/// the service range towards the server), a server "pod" (10.244.1.2) and a client pod
/// (10.244.200.2), each pod joined to the node by a veth. Named `PREFIXnode`, `PREFIXpod`
/// and `PREFIXcli`.
pub fn pod_namespaces(prefix: &str) -> (NetNs, NetNs, NetNs) {
    let (node, pod, client) = (
        NetNs::new(&format!("{prefix}node")).unwrap(),
        NetNs::new(&format!("{prefix}pod")).unwrap(),
        NetNs::new(&format!("{prefix}cli")).unwrap(),
    );
    sh(&node, &format!("ip link add p1 type veth peer name eth0 netns {} && ip addr add 10.244.1.1/24 dev p1 && ip link set p1 up && ip link set lo up && ip route add 10.96.0.0/12 dev p1 && sysctl -qw net.ipv4.ip_forward=1", pod.name()));
    sh(&node, &format!("ip link add p2 type veth peer name eth0 netns {} && ip addr add 10.244.200.1/24 dev p2 && ip link set p2 up", client.name()));
    sh(&pod, "ip addr add 10.244.1.2/24 dev eth0 && ip link set eth0 up && ip link set lo up && ip route add default via 10.244.1.1 && sysctl -qw net.core.somaxconn=65535 net.ipv4.tcp_max_syn_backlog=65535");
    sh(&client, "ip addr add 10.244.200.2/24 dev eth0 && ip link set eth0 up && ip link set lo up && ip route add default via 10.244.200.1");
    (node, pod, client)
}
