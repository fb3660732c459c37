//! Endpoint programming latency, through a release `cairn-control serve` with the
//! Endpoints, EndpointSlice and mirroring controllers as a separate `cairn-control
//! controllers` process: 1,000 Services × 10 pods (bound, Running, with addresses), then
//! pods flipped Ready ↔ not Ready one at a time; the latency is from the status write
//! (sent) to the watch showing the pod's endpoint with the new `ready` condition in its
//! EndpointSlice. Prints p50/p99 and the controllers' RSS.
//!
//! Anchor (no Go here, so no kube-controller-manager run): its EndpointSlice controller
//! waits `--endpointslice-updates-batch-period` (default 0 s, 1 s in many distributions)
//! and syncs a service at most once per its rate-limited queue turn.
//!
//! `cargo bench -p cairn-controllers --bench endpoints_perf`.

// Benchmark code: a failed setup step should stop the run loudly.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use cairn_testsupport::control_plane::{control_binary, vm_kib, ControlPlane};
use futures::StreamExt;
use k8s_openapi::api::core::v1::{Pod, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::runtime::watcher::{self, Event};
use serde_json::json;

const SERVICES: usize = 1000;
const PODS_PER_SERVICE: usize = 10;
const SAMPLES: usize = 300;

/// Pod name → its endpoint's `ready` in the slices, with when that was seen.
type Seen = Arc<Mutex<HashMap<String, (bool, Instant)>>>;

async fn watch_slices(client: kube::Client, seen: Seen) {
    let api: Api<EndpointSlice> = Api::all(client);
    let mut events = watcher::watcher(api, watcher::Config::default()).boxed();
    while let Some(Ok(ev)) = events.next().await {
        let (Event::Apply(s) | Event::InitApply(s)) = ev else {
            continue;
        };
        let now = Instant::now();
        let mut seen = seen.lock().unwrap();
        for e in &s.endpoints {
            let Some(name) = e.target_ref.as_ref().and_then(|r| r.name.clone()) else {
                continue;
            };
            let ready = e.conditions.as_ref().and_then(|c| c.ready).unwrap_or(false);
            if seen.get(&name).map(|(r, _)| *r) != Some(ready) {
                seen.insert(name, (ready, now));
            }
        }
    }
}

fn status(ready: bool, ip: &str) -> serde_json::Value {
    let flag = if ready { "True" } else { "False" };
    let t = k8s_openapi::jiff::Timestamp::now().to_string();
    json!({"status": {"phase": "Running", "podIP": ip,
        "conditions": [{"type": "Ready", "status": flag, "lastTransitionTime": t}]}})
}

async fn populate(client: &kube::Client) {
    let services: Api<Service> = Api::namespaced(client.clone(), "default");
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    futures::stream::iter(0..SERVICES)
        .for_each_concurrent(16, |s| {
            let (services, pods) = (services.clone(), pods.clone());
            async move {
                let svc: Service = serde_json::from_value(json!({"metadata": {"name": format!("svc-{s}")},
                    "spec": {"selector": {"svc": format!("s{s}")}, "ports": [{"port": 80, "targetPort": 8080}]}})).unwrap();
                services.create(&PostParams::default(), &svc).await.unwrap();
                for p in 0..PODS_PER_SERVICE {
                    let name = format!("pod-{s}-{p}");
                    let pod: Pod = serde_json::from_value(json!({"metadata": {"name": name, "labels": {"svc": format!("s{s}")}},
                        "spec": {"nodeName": "node-0", "containers": [{"name": "c", "image": "pause"}]}})).unwrap();
                    pods.create(&PostParams::default(), &pod).await.unwrap();
                    let ip = format!("10.{}.{}.{}", 100 + s / 250, s % 250, p + 1);
                    pods.patch_status(&name, &PatchParams::default(), &Patch::Merge(status(true, &ip))).await.unwrap();
                }
            }
        })
        .await;
}

fn percentile(v: &mut [f64], q: f64) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[((v.len() as f64 - 1.0) * q).round() as usize]
}

#[tokio::main]
async fn main() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let bin = control_binary(&root).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let args = [
        "--scheduler=false",
        "--controllers=",
        "--allocate-node-cidrs=false",
    ];
    let cp = ControlPlane::start(&bin, dir.path(), &args).unwrap();
    let selection = "--controllers=endpointslice,endpoints,endpointslicemirroring";
    let controllers = cp.sidecar("controllers", &[selection]).unwrap();
    let client = cp.kube_client().await.unwrap();
    let seen: Seen = Arc::default();
    tokio::spawn(watch_slices(client.clone(), seen.clone()));
    let t0 = Instant::now();
    populate(&client).await;
    let total = SERVICES * PODS_PER_SERVICE;
    while seen.lock().unwrap().values().filter(|(r, _)| *r).count() < total {
        assert!(
            t0.elapsed() < Duration::from_secs(600),
            "endpoints never caught up"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    println!("endpoints: {SERVICES} services x {PODS_PER_SERVICE} pods programmed in {:.1} s (create + status of {total} pods included)", t0.elapsed().as_secs_f64());
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let mut lat = Vec::with_capacity(SAMPLES);
    for i in 0..SAMPLES {
        let (s, p) = ((i * 37) % SERVICES, i % PODS_PER_SERVICE);
        let name = format!("pod-{s}-{p}");
        let want = seen
            .lock()
            .unwrap()
            .get(&name)
            .map(|(r, _)| !r)
            .unwrap_or(false);
        let ip = format!("10.{}.{}.{}", 100 + s / 250, s % 250, p + 1);
        let written = Instant::now();
        pods.patch_status(
            &name,
            &PatchParams::default(),
            &Patch::Merge(status(want, &ip)),
        )
        .await
        .unwrap();
        loop {
            if let Some((r, t)) = seen.lock().unwrap().get(&name).copied() {
                if r == want {
                    lat.push(t.duration_since(written).as_secs_f64() * 1000.0);
                    break;
                }
            }
            assert!(
                written.elapsed() < Duration::from_secs(30),
                "{name} never updated"
            );
            tokio::time::sleep(Duration::from_micros(200)).await;
        }
    }
    let rss = vm_kib(controllers.pid(), "VmRSS:") as f64 / 1024.0;
    println!(
        "  pod Ready flip -> EndpointSlice updated: p50 {:.1} ms, p99 {:.1} ms over {SAMPLES} flips (goal p99 <= 50 ms; anchor: kube-controller-manager batches 0-1 s); controllers RSS {rss:.1} MiB",
        percentile(&mut lat, 0.5),
        percentile(&mut lat, 0.99)
    );
}
