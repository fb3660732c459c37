//! nftables mode with its service ports spread over several shard tables (root; real
//! nftables in network namespaces this test makes): a node and a pod joined by a veth;
//! 2,600 service ports make three shards. A ClusterIP in every shard reaches the pod, a
//! service without endpoints refuses at once (its element lives in the main table), an
//! endpoint change is a partial sync of one shard, shrinking drops the unused shards, and
//! `cleanup` removes every table.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::io::ErrorKind;
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsFd;
use std::sync::Arc;
use std::time::Duration;

use cairn_netfilter::NftCommand;
use cairn_proxy::backend::{NftBackend, ProxyBackend};
use cairn_serviceproxy::nftables::{NftConfig, SHARD_PREFIX, TABLE};
use cairn_serviceproxy::*;
use cairn_testsupport::NetNs;

const POD: Ipv4Addr = Ipv4Addr::new(10, 244, 1, 2);

/// Runs `cmd` with `sh` in the namespace; its stdout.
fn sh(ns: &NetNs, cmd: &str) -> String {
    let out = ns.command("sh").args(["-c", cmd]).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{cmd}: {err}");
    String::from_utf8(out.stdout).unwrap()
}

fn vip(i: u32) -> Ipv4Addr {
    Ipv4Addr::from(u32::from(Ipv4Addr::new(10, 96, 0, 0)) + i + 1)
}

/// `n` services, each with the pod as its endpoint, and the last one with none.
fn state(n: u32, endpoint_of_first: Ipv4Addr) -> ProxyState {
    (0..n)
        .map(|i| {
            let name = ServicePortName {
                namespace: "shards".into(),
                name: format!("svc-{i}"),
                port: String::new(),
                protocol: Protocol::Tcp,
            };
            let port = ServicePort {
                cluster_ip: Some(vip(i)),
                port: 80,
                ..Default::default()
            };
            let eps = match i {
                0 => vec![Endpoint::ready(endpoint_of_first, 8080)],
                _ if i == n - 1 => vec![],
                _ => vec![Endpoint::ready(POD, 8080)],
            };
            (name, ServiceEntry::with_endpoints(port, eps))
        })
        .collect()
}

/// A cluster IP the shard table's `service-ips` map holds.
fn vip_in(node: &NetNs, shard: usize) -> Ipv4Addr {
    let listing = sh(
        node,
        &format!("nft list map ip {SHARD_PREFIX}{shard} service-ips"),
    );
    let at = listing
        .find("10.96.")
        .unwrap_or_else(|| panic!("{listing}"));
    let ip = listing[at..].split(' ').next().unwrap();
    ip.parse().unwrap()
}

fn connect(ip: Ipv4Addr) -> std::io::Result<TcpStream> {
    TcpStream::connect_timeout(&SocketAddr::from((ip, 80)), Duration::from_secs(2))
}

fn tables(node: &NetNs) -> Vec<String> {
    sh(node, "nft list tables")
        .lines()
        .filter_map(|l| l.strip_prefix("table ip "))
        .map(str::to_string)
        .collect()
}

/// The pod: accepts on 8080 and closes.
fn serve(pod: &NetNs) {
    let path = pod.path();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let f = std::fs::File::open(path).unwrap();
        nix::sched::setns(f.as_fd(), nix::sched::CloneFlags::CLONE_NEWNET).unwrap();
        let l = TcpListener::bind(("0.0.0.0", 8080)).unwrap();
        tx.send(()).unwrap();
        for s in l.incoming() {
            drop(s);
        }
    });
    rx.recv().unwrap();
}

#[test]
fn service_ports_in_every_shard_reach_their_pod() {
    let (node, pod) = (NetNs::new("shnode").unwrap(), NetNs::new("shpod").unwrap());
    sh(&node, &format!("ip link add p1 type veth peer name eth0 netns {} && ip addr add 10.244.1.1/24 dev p1 && ip link set p1 up && ip link set lo up && ip route add 10.96.0.0/12 dev p1", pod.name()));
    sh(&pod, "ip addr add 10.244.1.2/24 dev eth0 && ip link set eth0 up && ip link set lo up && ip route add default via 10.244.1.1");
    serve(&pod);
    node.run_inside(|| {
        let mut b = NftBackend::new(
            Arc::new(NftCommand::new().unwrap()),
            NftConfig {
                cluster_cidr: Some("10.244.0.0/16".parse().unwrap()),
                ..Default::default()
            },
        );
        let n = 2600;
        b.sync(&state(n, POD), true).unwrap();
        let mut expected = vec![TABLE.to_string()];
        expected.extend((0..3).map(|k| format!("{SHARD_PREFIX}{k}")));
        assert_eq!(tables(&node), expected);
        for shard in 0..3 {
            let ip = vip_in(&node, shard);
            connect(ip).unwrap_or_else(|e| panic!("{ip} in shard {shard}: {e}"));
        }
        let refused = connect(vip(n - 1)).unwrap_err();
        assert_eq!(refused.kind(), ErrorKind::ConnectionRefused, "{refused}");

        // One endpoint change: a partial sync; the service now leads nowhere reachable.
        let r = b
            .sync(&state(n, Ipv4Addr::new(10, 244, 9, 9)), false)
            .unwrap();
        assert_eq!((r.full, r.written), (false, 1));
        assert!(connect(vip(0)).is_err(), "moved to an address nobody has");
        b.sync(&state(n, POD), false).unwrap();
        connect(vip(0)).unwrap();

        // Fewer services: one shard, the others gone; traffic still flows.
        b.sync(&state(100, POD), true).unwrap();
        assert_eq!(
            tables(&node),
            [TABLE.to_string(), format!("{SHARD_PREFIX}0")]
        );
        connect(vip(1)).unwrap();
        b.cleanup().unwrap();
        assert!(tables(&node).is_empty(), "{:?}", tables(&node));
    });
}
