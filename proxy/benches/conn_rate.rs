//! Data plane: new TCP connections per second to a pod, straight to the pod's IP and
//! through a ClusterIP, with 10 and with 10,000 services programmed (2 endpoints each; the
//! measured service sits in the middle of them), for each proxy mode this kernel has, from
//! two clients: the node itself and another pod on the node. Everything lives in network
//! namespaces this bench makes: a "node", a server "pod" and a client pod, each pod joined
//! to the node by a veth; the server accepts and drops connections; the client closes with
//! RST (linger 0), so no TIME_WAIT limits the rate. The rate through the ClusterIP and the
//! direct rate under the same rules are measured in alternating rounds and pooled, so a
//! drift in the machine's speed (large under TCG) falls on both alike. Printed per case:
//! connections/s, connect latency p50/p99, the ratio to the direct rate under the same
//! rules (the goal's ratio; iptables walks its service list for every new connection, even
//! one to a pod IP), and the ratio to the direct rate before any rule existed (no NAT
//! hooks, so no conntrack at all). Goal (issue 12): through the ClusterIP at 10,000
//! services ≥ 0.9× direct for nftables and IPVS. This kernel has no IPVS: that case runs
//! in the stock-kernel qemu guest (`CONN_RATE_GUEST=0` skips it).
//!
//! Two things only IPVS mode does, which the figures show:
//! - From the node, IPVS masquerades: the node's source address for a service address on
//!   the dummy link is that address itself, outside `--cluster-cidr` (kube-proxy's IPVS
//!   mode does the same). From a pod it does not, as in nftables mode.
//! - IPVS keeps its own connection table and matches replies after conntrack has undone
//!   NAT. A direct connection from a client to a backend `ip:port`, on a source port that
//!   a connection through the service to that same backend used within IPVS's timeout
//!   (10 s after a reset), has its SYN-ACK rewritten to come from the service address, and
//!   stalls in SYN retransmits until the entry expires. So the direct connections go to a
//!   second port of the server pod (8081), never the service's target port: same cost,
//!   no shared tuple.
//!
//! Kubernetes issues 90042 and 107249 report the same stall against kube-proxy.
//!
//! Under TCG the guest's wall-clock rates swing by ±20 % with the host's load, so the
//! guest runs on an instruction-counted clock (see `Guest::instruction_clock`): its rates
//! are repeatable counts of the kernel's work per connection, which is what the ratio is
//! about (`CONN_RATE_ICOUNT=0` for the wall clock). `CONN_RATE_GUEST_MODES` (default `ipvs`)
//! adds `nftables` there, to compare the modes on the same clock.
//!
//! `cargo bench -p cairn-proxy --bench conn_rate` (root). `CONN_RATE_SECONDS` per round
//! (default 2), `CONN_RATE_ROUNDS` (default 3).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

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
use support::{hammer, pct, serve, services, vip};

mod support;

const POD: Ipv4Addr = Ipv4Addr::new(10, 244, 1, 2);
/// The service's target port on the server pod.
const SERVICE_TARGET: u16 = 8080;
/// The port direct connections go to (see the module doc for why not the target port).
const DIRECT: SocketAddr = SocketAddr::new(std::net::IpAddr::V4(POD), 8081);

/// Where connections start from.
#[derive(Clone, Copy)]
enum Client {
    Node,
    Pod,
}

impl Client {
    const BOTH: [Client; 2] = [Client::Node, Client::Pod];

    fn label(self) -> &'static str {
        match self {
            Client::Node => "from the node",
            Client::Pod => "from a pod",
        }
    }
}

/// The namespaces: the node (the bench's main thread lives in it), the server pod, the
/// client pod.
struct Lab {
    node: NetNs,
    pod: NetNs,
    client: NetNs,
}

impl Lab {
    fn new() -> Lab {
        let (node, pod, client) = support::pod_namespaces("cr");
        Lab { node, pod, client }
    }

    /// [`hammer`] from `client`.
    fn hammer(&self, client: Client, to: SocketAddr, secs: f64) -> (f64, Vec<f64>) {
        match client {
            Client::Node => hammer(to, secs),
            Client::Pod => self.client.run_inside(|| hammer(to, secs)),
        }
    }

    /// `rounds` alternating rounds through `to` and direct; the pooled rates and the
    /// latencies through `to`.
    fn paired(
        &self,
        client: Client,
        to: SocketAddr,
        rounds: u32,
        secs: f64,
    ) -> (f64, f64, Vec<f64>) {
        let (mut through, mut direct, mut lat) = (0.0, 0.0, Vec::new());
        self.hammer(client, to, 0.5);
        for _ in 0..rounds {
            let (rate, l) = self.hammer(client, to, secs);
            through += rate;
            lat.extend(l);
            direct += self.hammer(client, DIRECT, secs).0;
        }
        (through / f64::from(rounds), direct / f64::from(rounds), lat)
    }
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
fn ipvs_in_guest(rounds: u32, secs: f64) {
    let modes: String = env_or("CONN_RATE_GUEST_MODES", "ipvs".to_owned());
    let mut guest = Guest::new().unwrap().memory_mib(2048);
    if std::env::var("CONN_RATE_ICOUNT").as_deref() != Ok("0") {
        guest = guest.instruction_clock();
    }
    let exe = std::env::current_exe().unwrap();
    let script = format!(
        "modprobe ip_vs && modprobe ip_vs_rr && modprobe dummy && CONN_RATE_SECONDS={secs} CONN_RATE_ROUNDS={rounds} CONN_RATE_GUEST_MODES={modes} exec {}",
        exe.display()
    );
    let out = guest.run(&script, Duration::from_secs(1800)).unwrap();
    for line in out.output.lines().filter(|l| l.contains("conn/s")) {
        println!("(guest, {}) {line}", guest.kernel_release());
    }
    assert!(out.success(), "{out}");
}

/// One mode at one size, from both clients; `base` is each client's direct rate before
/// any rule.
fn measure(lab: &Lab, mode: &str, n: u32, base: &[f64; 2], rounds: u32, secs: f64) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let mut b = on_runtime(&rt, || backend(mode));
    on_runtime(&rt, || b.sync(&state(n), true)).unwrap();
    let to = SocketAddr::from((vip(n / 2), 80));
    for (client, base) in Client::BOTH.into_iter().zip(base) {
        let (rate, again, mut lat) = lab.paired(client, to, rounds, secs);
        println!(
            "{mode}, {n} services, {}, through the ClusterIP: {rate:.0} conn/s, connect p50 {:.0} µs, p99 {:.0} µs | direct with these rules {again:.0} conn/s, ratio {:.2} | ratio to direct before any rule (no NAT, no conntrack) {:.2}",
            client.label(),
            pct(&mut lat, 0.5),
            pct(&mut lat, 0.99),
            rate / again,
            rate / base
        );
    }
    on_runtime(&rt, || b.cleanup()).unwrap();
}

fn env_or<T: std::str::FromStr>(key: &str, default: T) -> T {
    std::env::var(key)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

fn main() {
    let secs: f64 = env_or("CONN_RATE_SECONDS", 2.0);
    let rounds: u32 = env_or("CONN_RATE_ROUNDS", 3).max(1);
    let lab = Lab::new();
    serve(&lab.pod, SERVICE_TARGET);
    serve(&lab.pod, DIRECT.port());
    lab.node.enter().unwrap();
    let mut base = [0.0; 2];
    for (client, base) in Client::BOTH.into_iter().zip(&mut base) {
        lab.hammer(client, DIRECT, 0.5); // warm up
        let (rate, mut lat) = lab.hammer(client, DIRECT, secs * f64::from(rounds));
        *base = rate;
        println!(
            "direct to the pod, {}: {rate:.0} conn/s, connect p50 {:.0} µs, p99 {:.0} µs",
            client.label(),
            pct(&mut lat, 0.5),
            pct(&mut lat, 0.99)
        );
    }
    let modes: Vec<String> = if in_guest() {
        env_or("CONN_RATE_GUEST_MODES", "ipvs".to_owned())
            .split(',')
            .map(str::to_owned)
            .collect()
    } else {
        vec!["nftables".into(), "iptables".into()]
    };
    for mode in &modes {
        for n in [10, 10_000] {
            measure(&lab, mode, n, &base, rounds, secs);
        }
    }
    if !in_guest() && std::env::var("CONN_RATE_GUEST").as_deref() != Ok("0") {
        ipvs_in_guest(rounds, secs);
    }
}
