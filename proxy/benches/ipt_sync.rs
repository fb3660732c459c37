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

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use cairn_netfilter::{IptablesCommand, IptablesVariant};
use cairn_proxy::backend::{IptablesBackend, ProxyBackend};
use cairn_serviceproxy::iptables::IptConfig;
use cairn_testsupport::NetNs;
use support::{ms, pct, peer_gen, services};

mod support;

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
        NetNs::new("iptbench").unwrap().run_inside(|| {
            let driver = Arc::new(IptablesCommand::new(variant).unwrap());
            let mut backend = IptablesBackend::new(driver, cfg.clone());
            let mut applied = services(n, 0, n / 2);
            let start = Instant::now();
            assert!(backend.sync(&applied, true).unwrap().full);
            t.full.push(ms(start.elapsed()));
            for v in 1..=5 {
                let next = services(n, v % 2, n / 2);
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
        NetNs::new("iptbench").unwrap().run_inside(|| {
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
            let r =
                cairn_serviceproxy::iptables::full(&cfg, &services(n, 0, 0), &Default::default());
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
