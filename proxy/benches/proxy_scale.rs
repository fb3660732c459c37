//! cairn-proxy at 10,000 services × 2 endpoints, end to end: a release `cairn-control
//! serve` and a release `cairn-proxy` (nftables mode, `--min-sync-period 0` so the
//! pipeline itself is timed) in a network namespace this bench makes; the bench writes
//! the Services and EndpointSlices through the API. Printed: the proxy's first full sync
//! (from its start, and the `nft` transaction alone), its RSS after it, and for 30 single
//! endpoint changes the time from the API write to the proxy's log line of the partial
//! sync that programmed it, p50/p99. Goal (issue 12): RSS ≤ 60 MB.
//!
//! `cargo bench -p cairn-proxy --bench proxy_scale` (root; nft installed).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::os::fd::AsFd;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use cairn_testsupport::control_plane::{control_binary, vm_kib, ControlPlane, Proc};
use cairn_testsupport::NetNs;
use futures::StreamExt;
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;

const SERVICES: usize = 10_000;
const CHANGES: usize = 30;

fn slice(i: usize, variant: usize) -> serde_json::Value {
    let ip = |k: usize| {
        format!(
            "10.{}.{}.{}",
            244 + variant,
            (2 * i + k) / 250,
            (2 * i + k) % 250 + 1
        )
    };
    json!({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
        "metadata": {"name": format!("svc-{i}-1"), "namespace": "default", "labels": {"kubernetes.io/service-name": format!("svc-{i}")}},
        "addressType": "IPv4", "ports": [{"name": "", "port": 8080, "protocol": "TCP"}],
        "endpoints": [{"addresses": [ip(0)], "conditions": {"ready": true}}, {"addresses": [ip(1)], "conditions": {"ready": true}}]})
}

async fn populate(client: &kube::Client) {
    let services: Api<Service> = Api::namespaced(client.clone(), "default");
    let slices: Api<EndpointSlice> = Api::namespaced(client.clone(), "default");
    futures::stream::iter(0..SERVICES)
        .for_each_concurrent(16, |i| {
            let (services, slices) = (services.clone(), slices.clone());
            async move {
                let svc: Service =
                    serde_json::from_value(json!({"metadata": {"name": format!("svc-{i}")},
                    "spec": {"ports": [{"port": 80, "targetPort": 8080}]}}))
                    .unwrap();
                services.create(&PostParams::default(), &svc).await.unwrap();
                let s: EndpointSlice = serde_json::from_value(slice(i, 0)).unwrap();
                slices.create(&PostParams::default(), &s).await.unwrap();
            }
        })
        .await;
}

/// Waits until the proxy's log has `n` lines containing `needle`; returns the last one.
fn wait_log(path: &Path, needle: &str, n: usize, limit: Duration) -> String {
    let deadline = Instant::now() + limit;
    loop {
        let log = std::fs::read_to_string(path).unwrap_or_default();
        let hits: Vec<&str> = log.lines().filter(|l| l.contains(needle)).collect();
        if hits.len() >= n {
            return hits[n - 1].to_string();
        }
        assert!(
            Instant::now() < deadline,
            "no {needle:?} in the proxy log:\n{log}"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
}

fn took_ms(line: &str) -> f64 {
    line.split("took_ms=")
        .nth(1)
        .and_then(|r| r.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap_or(-1.0)
}

fn pct(v: &mut [f64], q: f64) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[((v.len() as f64 - 1.0) * q).round() as usize]
}

fn main() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let bin = control_binary(&root).unwrap();
    // Every thread made from here on (the runtime's, the daemons) lives in the namespace.
    let ns = NetNs::new("proxyscale").unwrap();
    let f = std::fs::File::open(ns.path()).unwrap();
    nix::sched::setns(f.as_fd(), nix::sched::CloneFlags::CLONE_NEWNET).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let args = [
        "--scheduler=false",
        "--controllers=",
        "--allocate-node-cidrs=false",
    ];
    let cp = ControlPlane::start(&bin, dir.path(), &args).unwrap();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let _in_runtime = rt.enter();
    let client = rt.block_on(cp.kube_client()).unwrap();
    let t0 = Instant::now();
    rt.block_on(populate(&client));
    println!(
        "proxy scale: {SERVICES} services + slices written in {:.1} s",
        t0.elapsed().as_secs_f64()
    );

    let log_path = dir.path().join("proxy.log");
    let log = std::fs::File::create(&log_path).unwrap();
    let started = Instant::now();
    let proxy = Proc(
        Command::new(env!("CARGO_BIN_EXE_cairn-proxy"))
            .arg("--kubeconfig")
            .arg(&cp.kubeconfig)
            .args([
                "--hostname-override",
                "node-a",
                "--cluster-cidr",
                "10.244.0.0/16",
                "--min-sync-period",
                "0",
                "--sync-period",
                "3600",
                "--healthz-bind-address",
                "",
            ])
            .env("RUST_LOG", "info")
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap(),
    );
    let first = wait_log(&log_path, "full=true", 1, Duration::from_secs(300));
    let ready = started.elapsed();
    std::thread::sleep(Duration::from_secs(1));
    let rss = vm_kib(proxy.pid(), "VmRSS:") as f64 / 1024.0;
    println!(
        "  first full sync of {SERVICES} service ports: {:.0} ms after start (the nft transaction {:.0} ms); proxy RSS {rss:.1} MiB (goal <= 60 MB)",
        ready.as_secs_f64() * 1000.0,
        took_ms(&first)
    );
    let slices: Api<EndpointSlice> = Api::namespaced(client, "default");
    let (mut latency, mut took) = (Vec::new(), Vec::new());
    for c in 0..CHANGES {
        let i = (c * 331) % SERVICES;
        let t = Instant::now();
        let patch = slice(i, 1 + c % 2);
        rt.block_on(slices.patch(
            &format!("svc-{i}-1"),
            &PatchParams::default(),
            &Patch::Merge(&patch),
        ))
        .unwrap();
        let line = wait_log(&log_path, "full=false", c + 1, Duration::from_secs(60));
        latency.push(t.elapsed().as_secs_f64() * 1000.0);
        took.push(took_ms(&line));
    }
    println!(
        "  one endpoint change, API write -> programmed: p50 {:.1} ms, p99 {:.1} ms; the partial sync itself p50 {:.1} ms, p99 {:.1} ms ({CHANGES} changes)",
        pct(&mut latency, 0.5),
        pct(&mut latency, 0.99),
        pct(&mut took, 0.5),
        pct(&mut took, 0.99)
    );
    drop(proxy);
    let out = Command::new(env!("CARGO_BIN_EXE_cairn-proxy"))
        .arg("--cleanup")
        .output()
        .unwrap();
    assert!(out.status.success());
}
