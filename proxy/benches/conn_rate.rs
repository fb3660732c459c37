//! Data plane: new TCP connections per second from a node to a pod, straight to the pod's
//! IP and through a ClusterIP, with 10 and with 10,000 services programmed (2 endpoints
//! each; the measured service sits in the middle of them), for each proxy mode this
//! kernel has. Everything lives in network namespaces this bench makes: a "node" and a
//! "pod" joined by a veth; the pod accepts and drops connections; the client closes with
//! RST (linger 0), so no TIME_WAIT limits the rate. Rules are programmed by the backends
//! themselves. Printed per case: connections/s, connect latency p50/p99, the ratio to the
//! direct rate under the same rules (the goal's ratio; iptables walks its service list for
//! every new connection, even one to a pod IP), and the ratio to the direct rate before
//! any rule existed (no NAT hooks, so no conntrack at all). Goal (issue 12): through the ClusterIP at
//! 10,000 services ≥ 0.9× direct for nftables and IPVS. This kernel has no IPVS: that
//! case runs in the stock-kernel qemu guest (`CONN_RATE_GUEST=0` skips it).
//!
//! `cargo bench -p cairn-proxy --bench conn_rate` (root). `CONN_RATE_SECONDS` per case
//! (default 2).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::net::{Ipv4Addr, SocketAddr, TcpListener};
use std::os::fd::AsFd;
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use cairn_netfilter::ipvs::IpvsNetlink;
use cairn_netfilter::{IptablesCommand, IptablesVariant, NftCommand};
use cairn_proxy::backend::ipvs::NetlinkHost;
use cairn_proxy::backend::{IptablesBackend, IpvsBackend, NftBackend, ProxyBackend};
use cairn_serviceproxy::iptables::IptConfig;
use cairn_serviceproxy::ipvs::IpvsConfig;
use cairn_serviceproxy::nftables::NftConfig;
use cairn_serviceproxy::*;
use cairn_testsupport::qemu::{in_guest, Guest};
use cairn_testsupport::NetNs;
use support::{pct, services, vip};

mod support;

const POD: Ipv4Addr = Ipv4Addr::new(10, 244, 1, 2);

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

/// `n` services × 2 endpoints; service `n / 2` has the real pod as its one endpoint.
fn state(n: u32) -> ProxyState {
    let mut s = services(n, 0, 0);
    let port = ServicePort {
        cluster_ip: Some(vip(n / 2)),
        port: 80,
        ..Default::default()
    };
    let pod = ServiceEntry::with_endpoints(port, vec![Endpoint::ready(POD, 8080)]);
    s.insert(support::name(n / 2), pod);
    s
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

fn backend(mode: &str) -> Box<dyn ProxyBackend> {
    let cidr = Some("10.244.0.0/16".parse().unwrap());
    match mode {
        "ipvs" => Box::new(IpvsBackend::new(
            Arc::new(IpvsNetlink::new()),
            Arc::new(NftCommand::new().unwrap()),
            Box::new(NetlinkHost::new().unwrap()),
            IpvsConfig {
                cluster_cidr: cidr,
                ..Default::default()
            },
        )),
        "nftables" => Box::new(NftBackend::new(
            Arc::new(NftCommand::new().unwrap()),
            NftConfig {
                cluster_cidr: cidr,
                ..Default::default()
            },
        )),
        _ => Box::new(IptablesBackend::new(
            Arc::new(IptablesCommand::new(IptablesVariant::Nft).unwrap()),
            IptConfig {
                cluster_cidr: cidr,
                ..Default::default()
            },
        )),
    }
}

/// Runs `f` where the IPVS backend can reach rtnetlink (a runtime, blocking allowed).
fn on_runtime<T: Send>(rt: &tokio::runtime::Runtime, f: impl FnOnce() -> T + Send) -> T {
    rt.block_on(async { tokio::task::block_in_place(f) })
}

/// This kernel has no IPVS: the IPVS case runs in the stock-kernel qemu guest (TCG, so
/// its rates are far lower; the ratio to the direct rate in the same guest is the figure).
fn ipvs_in_guest(secs: f64) {
    let guest = Guest::new().unwrap().memory_mib(2048);
    let exe = std::env::current_exe().unwrap();
    let script = format!(
        "modprobe ip_vs && modprobe ip_vs_rr && modprobe dummy && CONN_RATE_SECONDS={secs} exec {}",
        exe.display()
    );
    let out = guest.run(&script, Duration::from_secs(1800)).unwrap();
    for line in out.output.lines().filter(|l| l.contains("conn/s")) {
        println!("(guest, {}) {line}", guest.kernel_release());
    }
    assert!(out.success(), "{out}");
}

fn main() {
    let secs: f64 = std::env::var("CONN_RATE_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(2.0);
    let (node, pod) = (NetNs::new("crnode").unwrap(), NetNs::new("crpod").unwrap());
    sh(&node, &format!("ip link add p1 type veth peer name eth0 netns {} && ip addr add 10.244.1.1/24 dev p1 && ip link set p1 up && ip link set lo up && ip route add 10.96.0.0/12 dev p1", pod.name()));
    sh(&pod, "ip addr add 10.244.1.2/24 dev eth0 && ip link set eth0 up && ip link set lo up && ip route add default via 10.244.1.1 && sysctl -qw net.core.somaxconn=65535 net.ipv4.tcp_max_syn_backlog=65535");
    let pod_path = pod.path();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let f = std::fs::File::open(pod_path).unwrap();
        nix::sched::setns(f.as_fd(), nix::sched::CloneFlags::CLONE_NEWNET).unwrap();
        // A deep accept queue: a full one drops SYNs, and a retransmitted SYN costs 1 s.
        let l = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
        l.set_reuse_address(true).unwrap();
        l.bind(&SocketAddr::from(([0, 0, 0, 0], 8080)).into())
            .unwrap();
        l.listen(65535).unwrap();
        let l: TcpListener = l.into();
        tx.send(()).unwrap();
        for s in l.incoming() {
            drop(s);
        }
    });
    rx.recv().unwrap();
    node.enter().unwrap();
    let direct = SocketAddr::from((POD, 8080));
    hammer(direct, 0.5); // warm up
    let (base, mut lat) = hammer(direct, secs);
    println!(
        "direct to the pod: {base:.0} conn/s, connect p50 {:.0} µs, p99 {:.0} µs",
        pct(&mut lat, 0.5),
        pct(&mut lat, 0.99)
    );
    let modes: &[&str] = if in_guest() {
        &["ipvs"]
    } else {
        &["nftables", "iptables"]
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    for mode in modes {
        for n in [10, 10_000] {
            let mut b = on_runtime(&rt, || backend(mode));
            on_runtime(&rt, || b.sync(&state(n), true)).unwrap();
            let to = SocketAddr::from((vip(n / 2), 80));
            hammer(to, 0.5);
            let (rate, mut lat) = hammer(to, secs);
            let (again, _) = hammer(direct, secs);
            println!(
                "{mode}, {n} services, through the ClusterIP: {rate:.0} conn/s, connect p50 {:.0} µs, p99 {:.0} µs | direct with these rules {again:.0} conn/s, ratio {:.2} | ratio to direct before any rule (no NAT, no conntrack) {:.2}",
                pct(&mut lat, 0.5),
                pct(&mut lat, 0.99),
                rate / again,
                rate / base
            );
            on_runtime(&rt, || b.cleanup()).unwrap();
        }
    }
    if !in_guest() && std::env::var("CONN_RATE_GUEST").as_deref() != Ok("0") {
        ipvs_in_guest(secs);
    }
}
