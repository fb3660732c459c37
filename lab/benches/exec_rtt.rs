//! Issue 14's exec benchmark, on a lab of this build's release binaries (`cargo build
//! --release --bins` first): the round trip of `kubectl exec POD -- true` (kubectl →
//! cairn-control → the agent → containerd and back, websocket v5 with kubectl 1.33, SPDY
//! with 1.27), next to two peers measured in the same run: `kubectl get pod POD` (the
//! floor of any kubectl command: process start, config, one API round trip) and `ctr task
//! exec` straight to the node's containerd (the runtime's own exec cost, no Kubernetes).
//!
//! `cargo bench -p cairn-lab --bench exec_rtt`; EXEC_RUNS (default 40) sets the count.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::process::Command;
use std::time::{Duration, Instant};

#[path = "../tests/common/mod.rs"]
mod common;

use common::Lab;

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

fn measure(runs: usize, mut once: impl FnMut(usize)) -> (Duration, Duration) {
    for i in 0..3 {
        once(i);
    }
    let mut times: Vec<Duration> = (0..runs)
        .map(|i| {
            let t = Instant::now();
            once(i + 3);
            t.elapsed()
        })
        .collect();
    times.sort();
    (percentile(&times, 0.5), percentile(&times, 0.99))
}

fn ok(cmd: &mut Command) {
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "{:?}: {}",
        cmd,
        String::from_utf8_lossy(&out.stderr)
    );
}

fn main() {
    let runs: usize = std::env::var("EXEC_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(40);
    let lab = Lab::up("benchex", 16495, &["--driver=netns", "--nodes=1"]);
    lab.kubectl(&["run", "web", "--image=httpd"]);
    lab.kubectl(&["wait", "--for=condition=Ready", "pod/web", "--timeout=90s"]);
    let kubeconfig = lab.kubeconfig.display().to_string();
    let kubectl = |minor: u32, args: &[&str]| {
        let mut c = Command::new(common::kubectl_path(minor));
        c.arg("--kubeconfig").arg(&kubeconfig).args(args);
        c
    };
    let cid = lab.kubectl(&[
        "get",
        "pod",
        "web",
        "-o",
        "jsonpath={.status.containerStatuses[0].containerID}",
    ]);
    let cid = cid.trim_start_matches("containerd://").to_string();
    let sock = lab
        .roots()
        .join("run/benchex/nodes/node-1/containerd/containerd.sock");
    let ctr = |i: usize| {
        ok(Command::new("ctr").arg("--address").arg(&sock).args([
            "-n",
            "cairn",
            "task",
            "exec",
            "--exec-id",
            &format!("bench-{i}"),
            &cid,
            "true",
        ]));
    };
    let rows = [
        (
            "kubectl 1.33 exec -- true (websocket)",
            measure(runs, |_| {
                ok(&mut kubectl(33, &["exec", "web", "--", "true"]))
            }),
        ),
        (
            "kubectl 1.27 exec -- true (SPDY)",
            measure(runs, |_| {
                ok(&mut kubectl(27, &["exec", "web", "--", "true"]))
            }),
        ),
        (
            "peer: kubectl 1.33 get pod",
            measure(runs, |_| ok(&mut kubectl(33, &["get", "pod", "web"]))),
        ),
        ("peer: ctr task exec -- true", measure(runs, ctr)),
    ];
    println!("{runs} runs each (after 3 warm-ups)");
    for (name, (p50, p99)) in &rows {
        println!(
            "{name:<42} p50 {:>7.1} ms  p99 {:>7.1} ms",
            p50.as_secs_f64() * 1e3,
            p99.as_secs_f64() * 1e3
        );
    }
    let ratio = |a: usize, b: usize| rows[a].1 .0.as_secs_f64() / rows[b].1 .0.as_secs_f64();
    println!(
        "exec p50 / kubectl get p50: {:.2}x (1.33), {:.2}x (1.27)",
        ratio(0, 2),
        ratio(1, 2)
    );
    println!(
        "exec p50 / ctr exec p50:    {:.2}x (1.33), {:.2}x (1.27)",
        ratio(0, 3),
        ratio(1, 3)
    );
}
