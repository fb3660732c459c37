//! iptables programming time of cairn-proxy's iptables backend against kube-proxy's
//! iptables shape (the peer in `../shared/peers/netfilter`, generated and loaded in the
//! same run), for iptables-nft and iptables-legacy, each run in a fresh network namespace
//! this bench makes (never the host's):
//! - full sync of N services × 2 endpoints from scratch, N = 1,000 and 10,000 (cairn: the
//!   backend's whole full sync, `iptables-save` included; peer: `gen.py ipt-full`, the
//!   `iptables-restore` floor);
//! - one endpoint change at N (cairn: the backend's partial sync; peer: `gen.py
//!   ipt-partial`, kube-proxy's MinimizeIPTablesRestore transaction, which rewrites
//!   KUBE-SERVICES);
//! - a periodic full sync onto rules that are already right (cairn: save + compare, no
//!   restore; peer: `gen.py ipt-resync`, kube-proxy's full rewrite).
//!
//! Goals (issue 12): full sync ≤ 1.2× the restore floor, one change ≤ 120 ms at 10,000
//! (peer 710 ms). `cargo bench -p cairn-proxy --bench ipt_sync` (root).
//! `IPT_BENCH_SIZES=1000` runs one size; `IPT_BENCH_VARIANTS=nft` one variant;
//! `IPT_BENCH_PEER_RESYNC=0` skips the peer's resync (quadratic: ~30 s at 10,000).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::net::Ipv4Addr;
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use cairn_netfilter::{IptablesCommand, IptablesVariant};
use cairn_proxy::backend::{IptablesBackend, ProxyBackend};
use cairn_serviceproxy::iptables::IptConfig;
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
        let entry = ServiceEntry {
            port,
            cluster: eps.clone(),
            external: eps,
            local_count: 0,
        };
        s.insert(name, entry);
    }
    s
}

fn in_netns<T: Send>(f: impl FnOnce() -> T + Send) -> T {
    let ns = NetNs::new("iptbench").unwrap();
    std::thread::scope(|s| {
        s.spawn(|| {
            let file = std::fs::File::open(ns.path()).unwrap();
            nix::sched::setns(file.as_fd(), nix::sched::CloneFlags::CLONE_NEWNET).unwrap();
            f()
        })
        .join()
        .unwrap()
    })
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn pct(v: &mut [f64], q: f64) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[((v.len() as f64 - 1.0) * q).round() as usize]
}

fn restore_file(binary: &str, args: &[&str], path: &Path) -> Duration {
    let t = Instant::now();
    let out = Command::new(binary)
        .args(args)
        .stdin(std::fs::File::open(path).unwrap())
        .stdout(Stdio::null())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{binary} {}: {}",
        path.display(),
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

#[derive(Default)]
struct Times {
    full: Vec<f64>,
    change: Vec<f64>,
    resync: Vec<f64>,
}

fn cairn(variant: IptablesVariant, n: u32, reps: usize) -> Times {
    let cfg = IptConfig {
        cluster_cidr: Some("10.244.0.0/16".parse().unwrap()),
        ..Default::default()
    };
    let mut t = Times::default();
    for _ in 0..reps {
        in_netns(|| {
            let driver = Arc::new(IptablesCommand::new(variant).unwrap());
            let mut backend = IptablesBackend::new(driver, cfg.clone());
            let mut applied = state(n, 0, n / 2);
            let start = Instant::now();
            assert!(backend.sync(&applied, true).unwrap().full);
            t.full.push(ms(start.elapsed()));
            for v in 1..=5 {
                let next = state(n, v % 2, n / 2);
                let start = Instant::now();
                assert!(!backend.sync(&next, false).unwrap().full);
                t.change.push(ms(start.elapsed()));
                applied = next;
            }
            let start = Instant::now();
            backend.sync(&applied, true).unwrap();
            t.resync.push(ms(start.elapsed()));
        });
    }
    t
}

fn peer(variant: IptablesVariant, n: u32, reps: usize, dir: &Path) -> Times {
    let restore = match variant {
        IptablesVariant::Legacy => "iptables-legacy-restore",
        _ => "iptables-nft-restore",
    };
    let full_file = peer_gen(dir, &["ipt-full".into(), n.to_string()]);
    let resync_file = peer_gen(dir, &["ipt-resync".into(), n.to_string()]);
    let k = (n / 2).to_string();
    let changes: Vec<PathBuf> = (0..5)
        .map(|v| {
            let (from, to) = ((v % 2).to_string(), ((v + 1) % 2).to_string());
            peer_gen(
                dir,
                &["ipt-partial".into(), n.to_string(), k.clone(), from, to],
            )
        })
        .collect();
    let skip_resync = std::env::var("IPT_BENCH_PEER_RESYNC").as_deref() == Ok("0");
    let mut t = Times::default();
    for _ in 0..reps {
        in_netns(|| {
            t.full.push(ms(restore_file(restore, &[], &full_file)));
            for c in &changes {
                t.change
                    .push(ms(restore_file(restore, &["--noflush", "--counters"], c)));
            }
            if !skip_resync {
                let args = ["--noflush", "--counters"];
                t.resync
                    .push(ms(restore_file(restore, &args, &resync_file)));
            }
        });
    }
    t
}

fn line(what: &str, cairn: &mut [f64], peer: &mut [f64]) {
    let (c50, c99) = (pct(cairn, 0.5), pct(cairn, 0.99));
    if peer.is_empty() {
        println!("  {what}: cairn p50 {c50:.1} ms, p99 {c99:.1} ms (peer skipped)");
        return;
    }
    let (p50, p99) = (pct(peer, 0.5), pct(peer, 0.99));
    println!("  {what}: cairn p50 {c50:.1} ms, p99 {c99:.1} ms | kube-proxy iptables shape p50 {p50:.1} ms, p99 {p99:.1} ms | cairn/peer {:.2}x", c50 / p50);
}

fn main() {
    let dir = tempfile::tempdir().unwrap();
    // `IPT_BENCH_DUMP=DIR`: write cairn's full payloads there and stop (to study their cost).
    if let Ok(out) = std::env::var("IPT_BENCH_DUMP") {
        let cfg = IptConfig::default();
        for n in [1000, 10_000] {
            let r = cairn_serviceproxy::iptables::full(&cfg, &state(n, 0, 0), &Default::default());
            std::fs::write(
                Path::new(&out).join(format!("full-{n}")),
                r.payload.unwrap(),
            )
            .unwrap();
        }
        return;
    }
    let sizes: Vec<u32> = std::env::var("IPT_BENCH_SIZES")
        .map(|v| v.split(',').filter_map(|n| n.trim().parse().ok()).collect())
        .unwrap_or_else(|_| vec![1000, 10_000]);
    let variants = std::env::var("IPT_BENCH_VARIANTS").unwrap_or_else(|_| "nft,legacy".into());
    for name in variants.split(',') {
        let variant = match name.trim() {
            "legacy" => IptablesVariant::Legacy,
            _ => IptablesVariant::Nft,
        };
        for &n in &sizes {
            let reps = if n >= 10_000 { 3 } else { 5 };
            let mut c = cairn(variant, n, reps);
            let mut p = peer(variant, n, if n >= 10_000 { 1 } else { reps }, dir.path());
            println!("iptables-{name}, {n} services x 2 endpoints:");
            line("full sync from scratch", &mut c.full, &mut p.full);
            line("one endpoint change", &mut c.change, &mut p.change);
            line(
                "full sync onto unchanged rules",
                &mut c.resync,
                &mut p.resync,
            );
        }
    }
}
