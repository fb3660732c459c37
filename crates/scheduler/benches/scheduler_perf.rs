//! Scheduler benchmark: upstream scheduler_perf's shapes (SchedulingBasic,
//! TopologySpreading, PodAntiAffinity), first on the algorithm alone (the snapshot, no
//! API), then end to end through a real `cairn-control` (API server with its SQLite
//! store) and a standalone `cairn-control scheduler` process: pods created by 50
//! concurrent clients, a watch timing each pod's binding.
//!
//! `cargo bench -p cairn-scheduler` (all), or with `-- basic|spread|anti|algo` to pick.

// Benchmark code: a failed setup step should stop the run loudly.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use cairn_scheduler::{schedule, Cursor, Profile, Snapshot};
use cairn_testsupport::control_plane::{control_binary, cpu_secs, vm_kib, ControlPlane, Proc};
use futures::{StreamExt, TryStreamExt};
use serde_json::{json, Value};

const CLIENTS: usize = 50;

#[derive(Clone, Copy, PartialEq)]
enum Shape {
    Basic,
    Spread,
    Anti,
}

impl Shape {
    fn name(self) -> &'static str {
        match self {
            Shape::Basic => "SchedulingBasic",
            Shape::Spread => "TopologySpreading",
            Shape::Anti => "PodAntiAffinity",
        }
    }
    /// (nodes, initial pods, measured pods)
    fn sizes(self) -> (usize, usize, usize) {
        match self {
            Shape::Basic => (5000, 1000, 10_000),
            Shape::Spread => (5000, 1000, 5000),
            Shape::Anti => (5000, 1000, 2000),
        }
    }
}

fn zone(i: usize) -> &'static str {
    ["moon-1", "moon-2", "moon-3"][i % 3]
}

fn node_json(i: usize) -> Value {
    let name = format!("node-{i}");
    json!({"apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, "topology.kubernetes.io/zone": zone(i)}},
        "status": {"capacity": {"pods": "110", "cpu": "4", "memory": "32Gi"},
                   "allocatable": {"pods": "110", "cpu": "4", "memory": "32Gi"},
                   "conditions": [{"type": "Ready", "status": "True"}]}})
}

fn pod_json(name: &str, shape: Option<Shape>) -> Value {
    let res = json!({"cpu": "100m", "memory": "500Mi"});
    let mut p = json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "labels": {"color": "blue"}},
        "spec": {"containers": [{"name": "pause", "image": "registry.k8s.io/pause:3.10",
            "resources": {"requests": res, "limits": res}}]}});
    match shape {
        Some(Shape::Spread) => {
            let c = |key: &str| {
                json!({"maxSkew": 5, "topologyKey": key, "whenUnsatisfiable": "DoNotSchedule",
                "labelSelector": {"matchLabels": {"color": "blue"}}})
            };
            p["spec"]["topologySpreadConstraints"] = json!([
                c("kubernetes.io/hostname"),
                c("topology.kubernetes.io/zone")
            ]);
        }
        Some(Shape::Anti) => {
            p["metadata"]["labels"]["color"] = json!("green");
            p["spec"]["affinity"] = json!({"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": {"matchLabels": {"color": "green"}}, "topologyKey": "kubernetes.io/hostname"}]}});
        }
        _ => {}
    }
    p
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// The algorithm alone: one cycle per pod on the snapshot, each placement assumed.
fn algorithm_only(shape: Shape) {
    let (nodes, init, measured) = shape.sizes();
    let mut snap = Snapshot::default();
    for i in 0..nodes {
        let n: k8s_openapi::api::core::v1::Node = serde_json::from_value(node_json(i)).unwrap();
        snap.upsert_node(&n);
    }
    for i in 0..init {
        let p: k8s_openapi::api::core::v1::Pod =
            serde_json::from_value(pod_json(&format!("init-{i}"), None)).unwrap();
        let mut info = cairn_scheduler::PodInfo::from_pod(&p).unwrap();
        info.uid = format!("init-{i}");
        snap.add_pod(info, &format!("node-{}", i % nodes));
    }
    let profile = Profile::default_profile("default-scheduler");
    let mut cursor = Cursor::new(42);
    let pods: Vec<cairn_scheduler::PodInfo> = (0..measured)
        .map(|i| {
            let p: k8s_openapi::api::core::v1::Pod =
                serde_json::from_value(pod_json(&format!("m-{i}"), Some(shape))).unwrap();
            let mut info = cairn_scheduler::PodInfo::from_pod(&p).unwrap();
            info.uid = format!("m-{i}");
            info
        })
        .collect();
    let mut lat = Vec::with_capacity(measured);
    let start = Instant::now();
    for info in pods {
        let t = Instant::now();
        let placed = schedule(&info, &snap, &profile, &mut cursor).expect("fits");
        lat.push(t.elapsed());
        snap.add_pod(info, &placed.node);
    }
    let total = start.elapsed();
    lat.sort();
    println!(
        "algorithm {:<18} {nodes} nodes, {measured} pods: {:>9.0} pods/s  cycle p50 {:.3} ms p99 {:.3} ms",
        shape.name(),
        measured as f64 / total.as_secs_f64(),
        ms(percentile(&lat, 0.5)),
        ms(percentile(&lat, 0.99)),
    );
}

fn start_cluster(bin: &Path, dir: &Path) -> (ControlPlane, Proc, String) {
    // Upstream's scheduler_perf runs no node IPAM either; 5,000 nodes would exhaust the
    // default /16 and add an Event per node to the measured run. No inflight limits: the
    // scheduler's binds on top of 50 clients' creates pass 200 writes at once (429s).
    let args = [
        "--scheduler=false",
        "--controllers=",
        "--allocate-node-cidrs=false",
        "--max-requests-inflight=0",
        "--max-mutating-requests-inflight=0",
    ];
    let cp = ControlPlane::start(bin, dir, &args).unwrap();
    let scheduler = cp.sidecar("scheduler", &[]).unwrap();
    let url = cp.url.clone();
    (cp, scheduler, url)
}

/// Watches pods; records when each is first seen bound.
async fn watch_bindings(
    http: reqwest::Client,
    url: String,
    bound: Arc<Mutex<HashMap<String, Instant>>>,
) {
    #[derive(serde::Deserialize)]
    struct Ev {
        object: Obj,
    }
    #[derive(serde::Deserialize)]
    struct Obj {
        metadata: Meta,
        #[serde(default)]
        spec: Option<Spec>,
    }
    #[derive(serde::Deserialize)]
    struct Meta {
        name: String,
    }
    #[derive(serde::Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Spec {
        node_name: Option<String>,
    }
    let resp = http
        .get(format!("{url}/api/v1/pods?watch=1&timeoutSeconds=3600"))
        .send()
        .await
        .unwrap();
    let mut stream = resp.bytes_stream().map_err(std::io::Error::other);
    let mut buf: Vec<u8> = Vec::new();
    while let Some(chunk) = stream.next().await {
        let Ok(chunk) = chunk else { return };
        buf.extend_from_slice(&chunk);
        while let Some(i) = buf.iter().position(|b| *b == b'\n') {
            let line: Vec<u8> = buf.drain(..=i).collect();
            if let Ok(ev) = serde_json::from_slice::<Ev>(&line) {
                if ev.object.spec.and_then(|s| s.node_name).is_some() {
                    bound
                        .lock()
                        .unwrap()
                        .entry(ev.object.metadata.name)
                        .or_insert_with(Instant::now);
                }
            }
        }
    }
}

async fn create_all(
    http: &reqwest::Client,
    url: &str,
    path: &str,
    objs: Vec<(String, Value)>,
) -> HashMap<String, Instant> {
    let created = Arc::new(Mutex::new(HashMap::new()));
    futures::stream::iter(objs)
        .for_each_concurrent(CLIENTS, |(name, obj)| {
            let created = created.clone();
            async move {
                let t = Instant::now();
                let r = http
                    .post(format!("{url}{path}"))
                    .json(&obj)
                    .send()
                    .await
                    .unwrap();
                assert!(r.status().is_success(), "create {name}: {}", r.status());
                created.lock().unwrap().insert(name, t);
            }
        })
        .await;
    Arc::try_unwrap(created).unwrap().into_inner().unwrap()
}

async fn wait_bound(bound: &Arc<Mutex<HashMap<String, Instant>>>, want: usize, timeout: Duration) {
    let deadline = Instant::now() + timeout;
    while bound.lock().unwrap().len() < want {
        assert!(
            Instant::now() < deadline,
            "only {} of {want} pods bound",
            bound.lock().unwrap().len()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn end_to_end(bin: &Path, shape: Shape) {
    let (nodes, init, measured) = shape.sizes();
    let dir = tempfile::tempdir().unwrap();
    let (server, scheduler, url) = start_cluster(bin, dir.path());
    // For attaching a profiler to either process.
    eprintln!(
        "api server pid {}, scheduler pid {}",
        server.server.pid(),
        scheduler.pid()
    );
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let http = server.http_builder().unwrap().pool_max_idle_per_host(CLIENTS * 2).build().unwrap();
        let node_objs = (0..nodes).map(|i| (format!("node-{i}"), node_json(i))).collect();
        create_all(&http, &url, "/api/v1/nodes", node_objs).await;
        let bound = Arc::new(Mutex::new(HashMap::new()));
        tokio::spawn(watch_bindings(http.clone(), url.clone(), bound.clone()));
        let init_objs = (0..init).map(|i| (format!("init-{i}"), pod_json(&format!("init-{i}"), None))).collect();
        create_all(&http, &url, "/api/v1/namespaces/default/pods", init_objs).await;
        wait_bound(&bound, init, Duration::from_secs(120)).await;
        let objs = (0..measured).map(|i| (format!("m-{i}"), pod_json(&format!("m-{i}"), Some(shape)))).collect();
        let cpu0 = (cpu_secs(server.server.pid()), cpu_secs(scheduler.pid()));
        let t0 = Instant::now();
        let created = create_all(&http, &url, "/api/v1/namespaces/default/pods", objs).await;
        wait_bound(&bound, init + measured, Duration::from_secs(600)).await;
        let wall = t0.elapsed().as_secs_f64();
        let cpu = (cpu_secs(server.server.pid()) - cpu0.0, cpu_secs(scheduler.pid()) - cpu0.1);
        let bound = bound.lock().unwrap();
        let last = created.keys().filter_map(|n| bound.get(n)).max().copied().unwrap_or(t0);
        let mut lat: Vec<Duration> = created.iter().filter_map(|(n, c)| bound.get(n).map(|b| b.saturating_duration_since(*c))).collect();
        lat.sort();
        let secs = last.duration_since(t0).as_secs_f64();
        println!(
            "end-to-end {:<17} {nodes} nodes, {init}+{measured} pods: {:>7.0} pods/s  create->bound p50 {:.1} ms p99 {:.1} ms  scheduler RSS {:.1} MiB (peak {:.1} MiB)",
            shape.name(),
            measured as f64 / secs,
            ms(percentile(&lat, 0.5)),
            ms(percentile(&lat, 0.99)),
            vm_kib(scheduler.pid(), "VmRSS:") as f64 / 1024.0,
            vm_kib(scheduler.pid(), "VmHWM:") as f64 / 1024.0,
        );
        println!(
            "           CPU while measuring: API server {:.0} %, scheduler {:.0} % of one core",
            100.0 * cpu.0 / wall,
            100.0 * cpu.1 / wall
        );
    });
}

fn main() {
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .collect();
    let want = |k: &str| args.is_empty() || args.iter().any(|a| a == k);
    let shapes = [
        ("basic", Shape::Basic),
        ("spread", Shape::Spread),
        ("anti", Shape::Anti),
    ];
    for (key, shape) in shapes {
        if want(key) || want("algo") {
            algorithm_only(shape);
        }
    }
    if args.iter().all(|a| a == "algo") && !args.is_empty() {
        return;
    }
    let bin = control_binary(&Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")).unwrap();
    for (key, shape) in shapes {
        if want(key) {
            end_to_end(&bin, shape);
        }
    }
    println!("anchors (upstream, not run here: no kube-scheduler on this machine): CI thresholds 270 / 85 / 60 pods/s; ~1,150 pods/s SchedulingBasic on a developer workstation");
}
