//! Issue 13's benchmark, on labs of this build's release binaries (`cargo build --release
//! --bins` first):
//!
//! 1. time from `kubectl create deployment … --replicas=20` to all 20 pods Ready and the
//!    Service answering from every node, on a 2-node lab per driver, 5 runs (p50, max);
//! 2. total RSS of every cairn process (cairn-control, cairn-agent, cairn-proxy and the
//!    per-container cairn-logger) of a 3-node lab running 60 pods, with containerd and its
//!    shims shown beside it for scale.
//!
//! `cargo bench -p cairn-lab --bench lab_scale`; LAB_RUNS (default 5) changes the count,
//! LAB_DRIVERS (default `netns,docker`) the drivers of part 1.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

// The e2e suite's harness: under `cargo bench` it drives the release cairn-lab, which
// takes the release binaries beside it.
#[path = "../tests/common/mod.rs"]
mod common;

use common::Lab;

fn kubectl(lab: &Lab, args: &[&str]) -> Option<String> {
    lab.try_kubectl(args).ok()
}

fn up(name: &str, nodes: usize, port: u16, driver: &str) -> Lab {
    Lab::up(
        name,
        port,
        &[&format!("--driver={driver}"), &format!("--nodes={nodes}")],
    )
}

fn release_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/release")
}

fn wait(what: &str, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(300);
    while !f() {
        assert!(Instant::now() < deadline, "timed out: {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// One run: seconds from `create deployment` to 20 Ready pods and the Service answering
/// on every node.
fn one_run(lab: &Lab, nodes: &[&str], cluster_ip: &str) -> f64 {
    let t0 = Instant::now();
    kubectl(
        lab,
        &[
            "create",
            "deployment",
            "bench",
            "--image=httpd",
            "--replicas=20",
        ],
    )
    .unwrap();
    wait("20 ready replicas", || {
        kubectl(
            lab,
            &[
                "get",
                "deployment",
                "bench",
                "-o",
                "jsonpath={.status.readyReplicas}",
            ],
        )
        .is_some_and(|r| r == "20")
    });
    let url = format!("http://{cluster_ip}/");
    for n in nodes {
        wait("the Service answering", || {
            lab.on_node(n, &["curl", "-fsS", "-m", "1", "-o", "/dev/null", &url])
                .is_ok()
        });
    }
    let took = t0.elapsed().as_secs_f64();
    kubectl(lab, &["delete", "deployment", "bench"]).unwrap();
    wait("the pods gone", || {
        kubectl(lab, &["get", "pods", "-l", "app=bench", "--no-headers"])
            .is_some_and(|o| o.trim().is_empty())
    });
    took
}

fn deployment_to_service(driver: &str) {
    let runs: usize = std::env::var("LAB_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(5);
    let lab = &up("benchdep", 2, 16494, driver);
    kubectl(
        lab,
        &["create", "service", "clusterip", "bench", "--tcp=80:80"],
    )
    .unwrap();
    let ip = lab.kubectl(&["get", "svc", "bench", "-o", "jsonpath={.spec.clusterIP}"]);
    let mut samples: Vec<f64> = (0..runs)
        .map(|_| one_run(lab, &["node-1", "node-2"], &ip))
        .collect();
    samples.sort_by(f64::total_cmp);
    let p50 = samples[samples.len() / 2];
    println!(
        "deployment of 20 replicas on 2 nodes ({driver} driver) -> all Ready + Service answering on both nodes: p50 {p50:.2} s, max {:.2} s over {runs} runs {samples:.2?} (goal p50 <= 5 s)",
        samples[samples.len() - 1]
    );
}

/// (RSS, PSS) of a process in KiB: PSS splits pages shared between processes (the
/// binary's text mapped by 60 loggers) among them, so it sums to what they really use.
fn memory_kib(pid: &str) -> (u64, u64) {
    let field = |text: &str, name: &str| {
        text.lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
            .unwrap_or(0)
    };
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let rollup = std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup")).unwrap_or_default();
    (field(&status, "VmRSS:"), field(&rollup, "Pss:"))
}

/// (count, RSS MiB, PSS MiB) by program, of processes whose command line mentions `needle`.
fn memory_by_program(needle: &str) -> BTreeMap<String, (usize, f64, f64)> {
    let mut by: BTreeMap<String, (usize, f64, f64)> = BTreeMap::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let pid = e.file_name().to_string_lossy().to_string();
        let Ok(raw) = std::fs::read(e.path().join("cmdline")) else {
            continue;
        };
        let cmdline = String::from_utf8_lossy(&raw).replace('\0', " ");
        if pid.parse::<u32>().is_err()
            || !cmdline.contains(needle)
            || cmdline.starts_with("nsenter")
        {
            continue;
        }
        let program = cmdline
            .split_whitespace()
            .next()
            .unwrap_or("")
            .rsplit('/')
            .next()
            .unwrap_or("")
            .to_string();
        let (rss, pss) = memory_kib(&pid);
        let entry = by.entry(program).or_default();
        entry.0 += 1;
        entry.1 += rss as f64 / 1024.0;
        entry.2 += pss as f64 / 1024.0;
    }
    by
}

fn three_node_rss() {
    let lab = &up("benchrss", 3, 16495, "netns");
    kubectl(
        lab,
        &[
            "create",
            "deployment",
            "web",
            "--image=httpd",
            "--replicas=60",
        ],
    )
    .unwrap();
    kubectl(lab, &["expose", "deployment", "web", "--port=80"]).unwrap();
    wait("60 ready replicas", || {
        kubectl(
            lab,
            &[
                "get",
                "deployment",
                "web",
                "-o",
                "jsonpath={.status.readyReplicas}",
            ],
        )
        .is_some_and(|r| r == "60")
    });
    std::thread::sleep(Duration::from_secs(5));
    let by = memory_by_program(&lab.roots().display().to_string());
    let (mut rss, mut pss) = (0.0, 0.0);
    println!(
        "  {:<24} {:>4} {:>10} {:>10}",
        "PROGRAM", "N", "RSS MiB", "PSS MiB"
    );
    for (program, (count, r, p)) in &by {
        let ours = program.starts_with("cairn-");
        if ours {
            rss += r;
            pss += p;
        }
        println!(
            "  {program:<24} {count:>4} {r:>10.1} {p:>10.1}{}",
            if ours { "" } else { "  (not cairn's)" }
        );
    }
    println!(
        "3-node lab, 60 pods: all cairn processes together PSS {pss:.1} MiB (RSS summed, shared pages counted in every process: {rss:.1} MiB) (goal <= 250 MB)"
    );
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    for b in [
        "cairn-lab",
        "cairn-control",
        "cairn-agent",
        "cairn-cni",
        "cairn-logger",
        "cairn-proxy",
    ] {
        assert!(
            release_dir().join(b).exists(),
            "{b} is missing: cargo build --release --bins first"
        );
    }
    let drivers = std::env::var("LAB_DRIVERS").unwrap_or_else(|_| "netns,docker".into());
    for driver in drivers.split(',') {
        deployment_to_service(driver);
    }
    three_node_rss();
}
