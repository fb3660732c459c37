//! ADD/DEL latency of cairn-cni against the reference bridge + host-local plugins, with
//! the same configuration in the same run. Each plugin gets its own host and pod
//! namespaces (created here, deleted at the end) and its own data directory; the pairs
//! are interleaved so both see the same machine load. Run as root:
//! `cargo bench -p cairn-cni --bench add_del` (`CAIRN_BENCH_PAIRS` overrides 200).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

#[path = "../tests/common/mod.rs"]
mod common;

use std::time::{Duration, Instant};

use common::*;
use serde_json::{json, Value};

struct Side {
    plugin: &'static str,
    host: Netns,
    pod: Netns,
    _data: tempfile::TempDir,
    conf: Value,
    add: Vec<Duration>,
    del: Vec<Duration>,
}

fn timed(side: &Side, command: &str, id: &str) -> Duration {
    let path = side.pod.path();
    let start = Instant::now();
    let out = run_in(
        &side.host,
        &Call {
            plugin: side.plugin,
            command,
            container_id: id,
            netns: Some(&path),
            ifname: "eth0",
            config: &side.conf,
            extra_env: vec![],
        },
    );
    let took = start.elapsed();
    assert!(
        out.status.success(),
        "{} {command} failed: {}",
        side.plugin,
        String::from_utf8_lossy(&out.stdout)
    );
    took
}

fn pct(sorted: &[Duration], p: f64) -> Duration {
    let idx = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[idx.min(sorted.len() - 1)]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn run(label: &str, pairs: usize, tweak: &dyn Fn(&mut Value)) {
    let mut sides: Vec<Side> = [(REF_BRIDGE, "bridge"), (CAIRN, "cairn-cni")]
        .into_iter()
        .map(|(plugin, ty)| {
            let data = tempfile::tempdir().unwrap();
            let mut conf = bridge_conf("1.0.0", ty, data.path(), "10.244.40.0/24");
            tweak(&mut conf);
            Side {
                plugin,
                host: Netns::new(),
                pod: Netns::new(),
                _data: data,
                conf,
                add: Vec::new(),
                del: Vec::new(),
            }
        })
        .collect();
    // Warm-up: creates the bridge, fills page cache.
    for s in &sides {
        timed(s, "ADD", "warmup");
        timed(s, "DEL", "warmup");
    }
    for i in 0..pairs {
        let id = format!("bench-{i}");
        for s in sides.iter_mut() {
            let a = timed(s, "ADD", &id);
            let d = timed(s, "DEL", &id);
            s.add.push(a);
            s.del.push(d);
        }
    }
    println!("\n== {label}: {pairs} ADD/DEL pairs each ==");
    println!(
        "{:<28} {:>10} {:>10} {:>10} {:>10}",
        "plugin", "ADD p50", "ADD p99", "DEL p50", "DEL p99"
    );
    let mut medians = Vec::new();
    for s in sides.iter_mut() {
        s.add.sort();
        s.del.sort();
        let name = if s.plugin == CAIRN {
            "cairn-cni".to_string()
        } else {
            "reference bridge+host-local".to_string()
        };
        println!(
            "{:<28} {:>8.2}ms {:>8.2}ms {:>8.2}ms {:>8.2}ms",
            name,
            ms(pct(&s.add, 0.5)),
            ms(pct(&s.add, 0.99)),
            ms(pct(&s.del, 0.5)),
            ms(pct(&s.del, 0.99))
        );
        medians.push((
            pct(&s.add, 0.5),
            pct(&s.del, 0.5),
            pct(&s.add, 0.99),
            pct(&s.del, 0.99),
        ));
    }
    let (r, c) = (medians[0], medians[1]);
    println!(
        "ratio cairn/reference: ADD p50 {:.2}x, ADD p99 {:.2}x, DEL p50 {:.2}x, DEL p99 {:.2}x (goal ADD <= 0.5x)",
        ms(c.0) / ms(r.0),
        ms(c.2) / ms(r.2),
        ms(c.1) / ms(r.1),
        ms(c.3) / ms(r.3)
    );
}

fn main() {
    // `cargo bench` passes `--bench`; `cargo test --benches` passes nothing useful: only
    // run when asked to benchmark.
    if !std::env::args().any(|a| a == "--bench") {
        println!("add_del: run with `cargo bench -p cairn-cni --bench add_del`");
        return;
    }
    let pairs = std::env::var("CAIRN_BENCH_PAIRS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(200);
    run(
        "flannel-style bridge (isDefaultGateway, hairpin, no ipMasq)",
        pairs,
        &|_| {},
    );
    run("same with ipMasq: true (iptables)", pairs, &|c| {
        c["ipMasq"] = json!(true);
    });
}
