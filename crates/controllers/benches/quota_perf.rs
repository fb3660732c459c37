//! ResourceQuota recomputation in a 10,000-pod namespace, two ways:
//! - in memory: `resourcequota::pods_usage` over 10,000 cached pods (what every sync of a
//!   quota does), p50/p99 over 200 runs;
//! - end to end: a release `cairn-control serve` holding 10,000 pods, the quota controller
//!   as a separate `cairn-control controllers` process; a new quota is created and the
//!   time until its `status.used` shows all 10,000 pods is measured, p50/p99 over 20 quotas.
//!
//! Goal: ≤ 1 s. No peer runs here (no Go toolchain for kube-controller-manager, whose
//! quota controller recounts on a 5-minute resync and on replenishment events).
//!
//! `cargo bench -p cairn-controllers --bench quota_perf`.

// Benchmark code: a failed setup step should stop the run loudly.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::Path;
use std::time::{Duration, Instant};

use cairn_controllers::cached_pod::CachedPod;
use cairn_controllers::resourcequota::pods_usage;
use cairn_testsupport::control_plane::{control_binary, vm_kib, ControlPlane};
use futures::StreamExt;
use k8s_openapi::api::core::v1::{Pod, ResourceQuota};
use kube::api::{Api, PostParams};
use serde_json::json;

const PODS: usize = 10_000;

fn pod_json(i: usize) -> serde_json::Value {
    json!({"metadata": {"name": format!("pod-{i}"), "namespace": "default"},
        "spec": {"containers": [{"name": "c", "image": "pause",
            "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}, "limits": {"memory": "32Mi"}}}]}})
}

fn percentile(v: &mut [f64], q: f64) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[((v.len() as f64 - 1.0) * q).round() as usize]
}

fn quota_spec(name: &str) -> ResourceQuota {
    serde_json::from_value(json!({"metadata": {"name": name},
        "spec": {"hard": {"pods": "20000", "requests.cpu": "200", "requests.memory": "400Gi", "limits.memory": "800Gi"}}}))
    .unwrap()
}

fn in_memory() {
    let pods: Vec<CachedPod> = (0..PODS)
        .map(|i| CachedPod::from(serde_json::from_value::<Pod>(pod_json(i)).unwrap()))
        .collect();
    let spec = quota_spec("q").spec.unwrap();
    let mut lat = Vec::new();
    for _ in 0..200 {
        let t = Instant::now();
        let used = pods_usage(&spec, pods.iter(), k8s_openapi::jiff::Timestamp::now());
        lat.push(t.elapsed().as_secs_f64() * 1000.0);
        assert_eq!(used.get("pods"), Some(PODS as i128 * 1000));
    }
    println!(
        "quota: in-memory recount of {PODS} cached pods: p50 {:.2} ms, p99 {:.2} ms over 200 runs (goal <= 1 s)",
        percentile(&mut lat, 0.5),
        percentile(&mut lat, 0.99)
    );
}

async fn end_to_end() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let bin = control_binary(&root).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let args = [
        "--scheduler=false",
        "--controllers=",
        "--allocate-node-cidrs=false",
    ];
    let cp = ControlPlane::start(&bin, dir.path(), &args).unwrap();
    let controllers = cp
        .sidecar("controllers", &["--controllers=resourcequota"])
        .unwrap();
    let client = cp.kube_client().await.unwrap();
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let t0 = Instant::now();
    futures::stream::iter(0..PODS)
        .for_each_concurrent(16, |i| {
            let pods = pods.clone();
            async move {
                let pod: Pod = serde_json::from_value(pod_json(i)).unwrap();
                pods.create(&PostParams::default(), &pod).await.unwrap();
            }
        })
        .await;
    println!(
        "quota: {PODS} pods created in {:.1} s",
        t0.elapsed().as_secs_f64()
    );
    let quotas: Api<ResourceQuota> = Api::namespaced(client, "default");
    let mut lat = Vec::new();
    for n in 0..20 {
        let name = format!("q-{n}");
        let t = Instant::now();
        quotas
            .create(&PostParams::default(), &quota_spec(&name))
            .await
            .unwrap();
        loop {
            let q = quotas.get(&name).await.unwrap();
            let used = q.status.and_then(|s| s.used).unwrap_or_default();
            if used.get("pods").map(|p| p.0.as_str()) == Some("10k") {
                lat.push(t.elapsed().as_secs_f64() * 1000.0);
                break;
            }
            assert!(
                t.elapsed() < Duration::from_secs(60),
                "{name} never counted"
            );
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    }
    let rss = vm_kib(controllers.pid(), "VmRSS:") as f64 / 1024.0;
    println!(
        "  quota created -> status.used counts {PODS} pods: p50 {:.1} ms, p99 {:.1} ms over 20 quotas (goal <= 1 s); controllers RSS {rss:.1} MiB",
        percentile(&mut lat, 0.5),
        percentile(&mut lat, 0.99)
    );
}

#[tokio::main]
async fn main() {
    in_memory();
    end_to_end().await;
}
