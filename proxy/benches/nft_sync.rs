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

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use cairn_netfilter::{NftCommand, NftDriver};
use cairn_serviceproxy::nftables::{NftConfig, Renderer};
use cairn_serviceproxy::*;
use cairn_testsupport::NetNs;
use support::{ms, pct, peer_gen, services};

mod support;

/// With `NFT_BENCH_DUMP=DIR`, the scripts are written there (to study their cost).
fn dump(name: &str, script: &str) {
    if let Ok(dir) = std::env::var("NFT_BENCH_DUMP") {
        std::fs::write(Path::new(&dir).join(name), script).unwrap();
    }
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

fn cairn(n: u32, reps: usize) -> (Vec<f64>, Vec<f64>) {
    let cfg = NftConfig {
        cluster_cidr: Some("10.244.0.0/16".parse().unwrap()),
        ..Default::default()
    };
    let (mut full, mut change) = (Vec::new(), Vec::new());
    for _ in 0..reps {
        NetNs::new("nftbench").unwrap().run_inside(|| {
            let nft = Arc::new(NftCommand::new().unwrap());
            let mut r = Renderer::default();
            let base = services(n, 0, n / 2);
            let script = r.full(&cfg, &base);
            dump(&format!("full-{n}"), &script);
            let t = Instant::now();
            nft.apply(&script).unwrap();
            full.push(ms(t.elapsed()));
            let mut applied = base;
            for v in 1..=5 {
                let next = services(n, v, n / 2);
                let t = Instant::now();
                let d = diff(&applied, &next);
                let ops = r.partial(&cfg, &applied, &next, &d);
                if std::env::var_os("NFT_BENCH_DUMP").is_some() {
                    dump(&format!("change-{n}-{v}"), &cairn_nft::script(&ops));
                }
                nft.apply_ops(&ops).unwrap();
                change.push(ms(t.elapsed()));
                applied = next;
            }
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
        NetNs::new("nftpeer").unwrap().run_inside(|| {
            full.push(ms(nft_file(&full_file)));
            for c in &changes {
                change.push(ms(nft_file(c)));
            }
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
