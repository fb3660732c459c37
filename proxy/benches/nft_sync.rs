//! nftables programming time of cairn-proxy's ruleset against kube-proxy's nftables shape
//! (the peer in `../shared/peers/netfilter`, generated and loaded in the same run), each
//! in a fresh network namespace this bench makes (never the host's):
//! - full load of N services × 2 endpoints from scratch, N = 1,000 and 10,000;
//! - one endpoint change at N (cairn: the partial transaction the proxy sends; peer:
//!   `gen.py nft-change`, kube-proxy's one-service transaction).
//!
//! Goals (issue 12): full sync at 10,000 ≤ 2 s (peer ~41 s here), one change ≤ 30 ms
//! (peer 179 ms). `cargo bench -p cairn-proxy --bench nft_sync` (root; nft installed).
//! `NFT_BENCH_PEER_10K=0` skips the peer's 10,000-service load (~40 s);
//! `NFT_BENCH_SIZES=1000` runs one size; `NFT_BENCH_DUMP=DIR` keeps the scripts.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::net::Ipv4Addr;
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use cairn_netfilter::{NftCommand, NftDriver};
use cairn_serviceproxy::nftables::{NftConfig, Renderer};
use cairn_serviceproxy::*;
use cairn_testsupport::NetNs;

fn state(n: u32, variant: u32, changed: u32) -> ProxyState {
    let mut s = ProxyState::new();
    for i in 0..n {
        let ep = |k: u32| Endpoint {
            ip: Ipv4Addr::from(
                u32::from(Ipv4Addr::new(10, 244, 0, 0))
                    + 2 * i
                    + k
                    + if i == changed { variant * 100_000 } else { 0 },
            ),
            port: 8080,
            ready: true,
            serving: true,
            terminating: false,
            local: false,
        };
        let eps = vec![ep(1), ep(2)];
        let port = ServicePort {
            cluster_ip: Some(Ipv4Addr::from(
                u32::from(Ipv4Addr::new(10, 96, 0, 0)) + i + 1,
            )),
            port: 80,
            node_port: None,
            external_ips: vec![],
            load_balancer_ips: vec![],
            affinity_seconds: None,
            external_local: false,
            internal_local: false,
            health_check_node_port: None,
        };
        let name = ServicePortName {
            namespace: "bench".into(),
            name: format!("svc-{i}"),
            port: String::new(),
            protocol: Protocol::Tcp,
        };
        s.insert(
            name,
            ServiceEntry {
                port,
                cluster: eps.clone(),
                external: eps,
                local_count: 0,
            },
        );
    }
    s
}

/// With `NFT_BENCH_DUMP=DIR`, the scripts are written there (to study their cost).
fn dump(name: &str, script: &str) {
    if let Ok(dir) = std::env::var("NFT_BENCH_DUMP") {
        std::fs::write(Path::new(&dir).join(name), script).unwrap();
    }
}

fn enter(ns: &NetNs) {
    let f = std::fs::File::open(ns.path()).unwrap();
    nix::sched::setns(f.as_fd(), nix::sched::CloneFlags::CLONE_NEWNET).unwrap();
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn pct(v: &mut [f64], q: f64) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[((v.len() as f64 - 1.0) * q).round() as usize]
}

fn nft_file(path: &Path) -> Duration {
    let t = Instant::now();
    let out = Command::new("nft")
        .arg("-f")
        .arg(path)
        .stdout(Stdio::null())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    t.elapsed()
}

fn peer_gen(dir: &Path, args: &[String]) -> PathBuf {
    let peers = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/peers/netfilter/gen.py");
    let path = dir.join(args.join("-"));
    let out = Command::new("python3")
        .arg(&peers)
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

fn cairn(n: u32, reps: usize) -> (Vec<f64>, Vec<f64>) {
    let cfg = NftConfig {
        cluster_cidr: Some("10.244.0.0/16".parse().unwrap()),
        ..Default::default()
    };
    let (mut full, mut change) = (Vec::new(), Vec::new());
    for _ in 0..reps {
        let ns = NetNs::new("nftbench").unwrap();
        std::thread::scope(|s| {
            s.spawn(|| {
                enter(&ns);
                let nft = Arc::new(NftCommand::new().unwrap());
                let mut r = Renderer::default();
                let base = state(n, 0, n / 2);
                let script = r.full(&cfg, &base);
                dump(&format!("full-{n}"), &script);
                let t = Instant::now();
                nft.apply(&script).unwrap();
                full.push(ms(t.elapsed()));
                let mut applied = base;
                for v in 1..=5 {
                    let next = state(n, v, n / 2);
                    let t = Instant::now();
                    let d = diff(&applied, &next);
                    let script = r.partial(&cfg, &applied, &next, &d);
                    dump(&format!("change-{n}-{v}"), &script);
                    nft.apply(&script).unwrap();
                    change.push(ms(t.elapsed()));
                    applied = next;
                }
            });
        });
    }
    (full, change)
}

fn peer(n: u32, reps: usize, dir: &Path) -> (Vec<f64>, Vec<f64>) {
    let full_file = peer_gen(dir, &["nft-full".into(), n.to_string()]);
    let k = (n / 2).to_string();
    let changes: Vec<PathBuf> = (0..5)
        .map(|v| {
            peer_gen(
                dir,
                &[
                    "nft-change".into(),
                    n.to_string(),
                    k.clone(),
                    (v % 2).to_string(),
                    ((v + 1) % 2).to_string(),
                ],
            )
        })
        .collect();
    let (mut full, mut change) = (Vec::new(), Vec::new());
    for _ in 0..reps {
        let ns = NetNs::new("nftpeer").unwrap();
        std::thread::scope(|s| {
            s.spawn(|| {
                enter(&ns);
                full.push(ms(nft_file(&full_file)));
                for c in &changes {
                    change.push(ms(nft_file(c)));
                }
            });
        });
    }
    (full, change)
}

fn line(what: &str, cairn: &mut [f64], peer: &mut [f64]) {
    let (c50, c99, p50, p99) = (
        pct(cairn, 0.5),
        pct(cairn, 0.99),
        pct(peer, 0.5),
        pct(peer, 0.99),
    );
    println!("  {what}: cairn p50 {c50:.1} ms, p99 {c99:.1} ms | kube-proxy nft shape p50 {p50:.1} ms, p99 {p99:.1} ms | peer/cairn {:.1}x", p50 / c50);
}

fn main() {
    let dir = tempfile::tempdir().unwrap();
    let skip_peer_10k = std::env::var("NFT_BENCH_PEER_10K").as_deref() == Ok("0");
    // `NFT_BENCH_SIZES=1000` runs one size only.
    let sizes: Vec<u32> = std::env::var("NFT_BENCH_SIZES")
        .map(|v| v.split(',').filter_map(|n| n.trim().parse().ok()).collect())
        .unwrap_or_else(|_| vec![1000, 10_000]);
    for n in sizes {
        let reps = if n >= 10_000 { 3 } else { 5 };
        let (mut full, mut change) = cairn(n, reps);
        println!("nftables, {n} services x 2 endpoints:");
        if n == 10_000 && skip_peer_10k {
            println!(
                "  full load: cairn p50 {:.1} ms, p99 {:.1} ms (peer skipped)",
                pct(&mut full, 0.5),
                pct(&mut full, 0.99)
            );
            println!(
                "  one endpoint change: cairn p50 {:.1} ms, p99 {:.1} ms (peer skipped)",
                pct(&mut change, 0.5),
                pct(&mut change, 0.99)
            );
            continue;
        }
        let (mut pfull, mut pchange) = peer(n, if n == 10_000 { 1 } else { reps }, dir.path());
        line("full load", &mut full, &mut pfull);
        line("one endpoint change", &mut change, &mut pchange);
    }
}
