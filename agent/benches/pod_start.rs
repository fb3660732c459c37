//! Pod start latency through cairn-agent: API create → phase `Running` observed by a
//! kube-rs watch, on a one-node cluster in a private network namespace (the integration
//! harness of `tests/common`: cairn-control, private containerd, local registry with the
//! busybox image, cairn-cni bridge, cairn-agent). The image is pulled by a warm-up pod
//! first; then N pods one after another, then N pods with PAR in flight. Prints p50/p99
//! (nearest rank, as the CRI peer harness does) and the agent's VmRSS with N pods running.
//!
//! Root only. Needs release builds of the binaries next to the bench:
//! `cargo build --release --bins -p cairn-control -p cairn-agent -p cairn-cni -p cairn-podlogs`
//! then `cargo bench -p cairn-agent --bench pod_start` (or `scripts/bench-pod-start.sh`,
//! which also runs containerd's CRI plugin as a peer). Knobs: `CAIRN_BENCH_PODS` (30),
//! `CAIRN_BENCH_PAR` (5), `CAIRN_BENCH_OUT` (a file to append a JSON summary line to).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

#[path = "../tests/common/mod.rs"]
mod common;

use std::collections::HashMap;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::*;
use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use kube::runtime::watcher::{self, Event};
use serde_json::{json, Value};
use tokio::sync::oneshot;

const LABEL: &str = "cairn-bench";
/// A guard against a hung agent, not a performance assertion.
const POD_TIMEOUT: Duration = Duration::from_secs(120);

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

// ---------- /proc readers ----------

fn status_kb(pid: u32, key: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find(|l| l.starts_with(key))
        .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        .unwrap_or(0)
}

/// utime+stime (self) and cutime+cstime (reaped children) in ms.
fn cpu_ms(pid: u32) -> (f64, f64) {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let Some(rp) = s.rfind(')') else {
        return (0.0, 0.0);
    };
    let f: Vec<&str> = s[rp + 2..].split_whitespace().collect();
    let g = |k: usize| f.get(k).and_then(|x| x.parse::<f64>().ok()).unwrap_or(0.0);
    // Ticks → ms with CLK_TCK = 100 (Linux's USER_HZ, as the peer harness assumes).
    ((g(11) + g(12)) * 10.0, (g(13) + g(14)) * 10.0)
}

/// (busy, total) jiffies of the whole machine, to see whether others shared the CPU.
fn host_jiffies() -> (f64, f64) {
    let s = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    let f: Vec<f64> = s
        .lines()
        .next()
        .unwrap_or("")
        .split_whitespace()
        .skip(1)
        .filter_map(|x| x.parse().ok())
        .collect();
    let total: f64 = f.iter().sum();
    let idle = f.get(3).copied().unwrap_or(0.0) + f.get(4).copied().unwrap_or(0.0);
    (total - idle, total)
}

/// Peak VmRSS of a pid, sampled every 20 ms on a thread until `finish`.
struct RssSampler {
    stop: Arc<AtomicBool>,
    peak: Arc<AtomicU64>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl RssSampler {
    fn start(pid: u32) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let peak = Arc::new(AtomicU64::new(status_kb(pid, "VmRSS:")));
        let (s, p) = (stop.clone(), peak.clone());
        let thread = std::thread::spawn(move || {
            while !s.load(Ordering::Relaxed) {
                p.fetch_max(status_kb(pid, "VmRSS:"), Ordering::Relaxed);
                std::thread::sleep(Duration::from_millis(20));
            }
        });
        RssSampler {
            stop,
            peak,
            thread: Some(thread),
        }
    }

    fn finish(mut self) -> u64 {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        self.peak.load(Ordering::Relaxed)
    }
}

// ---------- stats ----------

/// Nearest rank (with n = 30, p99 is the maximum), like the CRI peer harness.
fn pct(sorted: &[f64], p: f64) -> f64 {
    let k = ((p / 100.0) * sorted.len() as f64).ceil().max(1.0) as usize;
    sorted[k.min(sorted.len()) - 1]
}

fn summary(v: &[f64]) -> Value {
    let mut s = v.to_vec();
    s.sort_by(|a, b| a.total_cmp(b));
    json!({"p50": pct(&s, 50.0), "p90": pct(&s, 90.0), "p99": pct(&s, 99.0), "max": s[s.len() - 1],
           "min": s[0], "mean": s.iter().sum::<f64>() / s.len() as f64})
}

fn fmt(v: &Value) -> String {
    let g = |k: &str| v[k].as_f64().unwrap_or(f64::NAN);
    format!(
        "p50 {:7.1}  p90 {:7.1}  p99 {:7.1}  max {:7.1}  min {:6.1}  mean {:6.1} ms",
        g("p50"),
        g("p90"),
        g("p99"),
        g("max"),
        g("min"),
        g("mean")
    )
}

// ---------- the watch that timestamps Running ----------

/// Pods waiting for `Running`, by name; the watch task answers each with the instant its
/// event arrived.
type Waiters = Rc<std::cell::RefCell<HashMap<String, oneshot::Sender<Instant>>>>;

fn is_running(p: &Pod) -> bool {
    p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running")
}

/// Starts a watch on the bench's pods; returns once its initial list is done.
async fn start_watch(pods: Api<Pod>, waiters: Waiters) {
    let (ready_tx, ready_rx) = oneshot::channel();
    let config = watcher::Config::default().labels(LABEL);
    tokio::task::spawn_local(async move {
        let mut ready = Some(ready_tx);
        let mut stream = watcher::watcher(pods, config).boxed_local();
        while let Some(event) = stream.next().await {
            let pod = match event {
                Ok(Event::InitDone) => {
                    if let Some(tx) = ready.take() {
                        let _ = tx.send(());
                    }
                    continue;
                }
                Ok(Event::Apply(p)) | Ok(Event::InitApply(p)) => p,
                Ok(_) => continue,
                Err(e) => {
                    eprintln!("bench watch error (the watcher re-lists): {e}");
                    continue;
                }
            };
            if is_running(&pod) {
                let at = Instant::now();
                let name = pod.metadata.name.clone().unwrap_or_default();
                if let Some(tx) = waiters.borrow_mut().remove(&name) {
                    let _ = tx.send(at);
                }
            }
        }
    });
    ready_rx
        .await
        .expect("bench watch ended before its first list");
}

fn bench_pod(name: &str, image: &str) -> Pod {
    serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "labels": {LABEL: "pod-start"}},
        "spec": {
            "nodeName": NODE,
            "terminationGracePeriodSeconds": 1,
            "containers": [{"name": "c", "image": image, "imagePullPolicy": "IfNotPresent", "command": ["sleep", "3600"]}]
        }
    }))
    .unwrap()
}

fn log_tail(cluster: &Cluster) -> String {
    let log = cluster.agent_log();
    let lines: Vec<&str> = log.lines().collect();
    lines[lines.len().saturating_sub(60)..].join("\n")
}

/// Creates the pod and waits for the watch to see it Running; returns create → Running.
async fn start_one(cluster: &Cluster, waiters: &Waiters, name: &str) -> Duration {
    let (tx, rx) = oneshot::channel();
    waiters.borrow_mut().insert(name.to_string(), tx);
    let pod = bench_pod(name, &cluster.image);
    let started = Instant::now();
    cluster
        .pods()
        .create(&PostParams::default(), &pod)
        .await
        .unwrap();
    match tokio::time::timeout(POD_TIMEOUT, rx).await {
        Ok(Ok(at)) => at.saturating_duration_since(started),
        _ => panic!(
            "pod {name} not Running within {POD_TIMEOUT:?}; agent log tail:\n{}",
            log_tail(cluster)
        ),
    }
}

/// `n` pods named `<prefix>-<i>`, `par` in flight; per-pod latencies in index order.
async fn run_batch(
    cluster: &Cluster,
    waiters: &Waiters,
    prefix: &str,
    n: usize,
    par: usize,
) -> Vec<f64> {
    let next = std::cell::Cell::new(0usize);
    let results = std::cell::RefCell::new(vec![0.0; n]);
    let lane = || async {
        loop {
            let i = next.get();
            if i >= n {
                break;
            }
            next.set(i + 1);
            let took = start_one(cluster, waiters, &format!("{prefix}-{i}")).await;
            results.borrow_mut()[i] = took.as_secs_f64() * 1000.0;
        }
    };
    futures::future::join_all((0..par.max(1)).map(|_| lane())).await;
    results.into_inner()
}

/// Deletes every bench pod and waits until the agent has confirmed all deletions.
async fn delete_all(cluster: &Cluster) -> Duration {
    let started = Instant::now();
    let lp = ListParams::default().labels(LABEL);
    for p in cluster.pods().list(&lp).await.unwrap() {
        let name = p.metadata.name.unwrap_or_default();
        let _ = cluster.pods().delete(&name, &DeleteParams::default()).await;
    }
    let deadline = Instant::now() + POD_TIMEOUT;
    while !cluster.pods().list(&lp).await.unwrap().items.is_empty() {
        assert!(
            Instant::now() < deadline,
            "bench pods not deleted; agent log tail:\n{}",
            log_tail(cluster)
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    started.elapsed()
}

struct Pids {
    agent: u32,
    control: u32,
    containerd: u32,
}

struct Mode {
    name: String,
    json: Value,
}

async fn measure(
    cluster: &Cluster,
    waiters: &Waiters,
    pids: &Pids,
    mode: &str,
    n: usize,
    par: usize,
) -> Mode {
    let sampler = RssSampler::start(pids.agent);
    let cpu0 = [
        cpu_ms(pids.agent),
        cpu_ms(pids.control),
        cpu_ms(pids.containerd),
    ];
    let host0 = host_jiffies();
    let t0 = Instant::now();
    let lat = run_batch(cluster, waiters, &format!("bench-{mode}"), n, par).await;
    let wall = t0.elapsed().as_secs_f64() * 1000.0;
    let host1 = host_jiffies();
    let busy_cores = (host1.0 - host0.0) * 10.0 / wall;
    let cpu1 = [
        cpu_ms(pids.agent),
        cpu_ms(pids.control),
        cpu_ms(pids.containerd),
    ];
    let peak_kb = sampler.finish();
    // Let status writes, events and probes of the last pod settle before reading RSS.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let rss_kb = status_kb(pids.agent, "VmRSS:");
    let running = cluster
        .pods()
        .list(&ListParams::default().labels(LABEL))
        .await
        .unwrap()
        .items
        .iter()
        .filter(|p| is_running(p))
        .count();
    assert_eq!(
        running, n,
        "{mode}: only {running} of {n} bench pods Running"
    );
    let teardown = delete_all(cluster).await;
    let s = summary(&lat);
    let agent_cpu = cpu1[0].0 - cpu0[0].0;
    let agent_children = cpu1[0].1 - cpu0[0].1;
    println!("[cairn] {mode:>6} per-pod {}", fmt(&s));
    println!(
        "         batch wall {wall:.0} ms ({:.1} pods/s), teardown {:.0} ms; cpu: agent {agent_cpu:.0} ms (+{agent_children:.0} ms reaped children: cni), control {:.0} ms, containerd {:.0} ms (+{:.0} ms children); host busy {busy_cores:.2} cores",
        n as f64 / wall * 1000.0,
        teardown.as_secs_f64() * 1000.0,
        cpu1[1].0 - cpu0[1].0,
        cpu1[2].0 - cpu0[2].0,
        cpu1[2].1 - cpu0[2].1,
    );
    println!(
        "         agent VmRSS with {n} pods running {:.1} MiB (peak during batch {:.1} MiB)",
        rss_kb as f64 / 1024.0,
        peak_kb as f64 / 1024.0
    );
    Mode {
        name: mode.to_string(),
        json: json!({
            "mode": mode, "n": n, "par": par, "per_pod_ms": s, "per_pod_raw_ms": lat, "batch_wall_ms": wall,
            "teardown_ms": teardown.as_secs_f64() * 1000.0, "host_busy_cores": busy_cores,
            "agent_rss_kb_running": rss_kb, "agent_rss_kb_peak": peak_kb,
            "agent_cpu_ms": agent_cpu, "agent_children_cpu_ms": agent_children,
            "control_cpu_ms": cpu1[1].0 - cpu0[1].0,
            "containerd_cpu_ms": cpu1[2].0 - cpu0[2].0, "containerd_children_cpu_ms": cpu1[2].1 - cpu0[2].1,
        }),
    }
}

async fn bench() {
    let n = env_usize("CAIRN_BENCH_PODS", 30);
    let par = env_usize("CAIRN_BENCH_PAR", 5);
    let _cgroups;
    let cluster = Cluster::start().await;
    _cgroups = CgroupCleanup(cluster.cgroup_root.clone());
    let pids = Pids {
        agent: cluster.agent.as_ref().map(|c| c.id()).unwrap(),
        control: cluster.control.id(),
        containerd: cluster.containerd.pid(),
    };
    let waiters: Waiters = Default::default();
    start_watch(cluster.pods(), waiters.clone()).await;
    println!(
        "[cairn] agent pid {}, VmRSS {:.1} MiB idle (node Ready, no pods); {n} pods, {par} in flight",
        pids.agent,
        status_kb(pids.agent, "VmRSS:") as f64 / 1024.0
    );

    // Warm-up: pulls the image (and warms every cache); discarded.
    let warm = start_one(&cluster, &waiters, "bench-warmup").await;
    delete_all(&cluster).await;
    println!(
        "[cairn] warm-up pod (image pull) {:.1} ms (discarded)",
        warm.as_secs_f64() * 1000.0
    );

    let seq = measure(&cluster, &waiters, &pids, "seq", n, 1).await;
    let parallel = measure(&cluster, &waiters, &pids, &format!("par{par}"), n, par).await;

    if let Ok(out) = std::env::var("CAIRN_BENCH_OUT") {
        use std::io::Write;
        let line = json!({
            "modes": {seq.name: seq.json, parallel.name: parallel.json},
            "agent_rss_kb_idle_end": status_kb(pids.agent, "VmRSS:"),
        });
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&out)
            .unwrap();
        writeln!(f, "{line}").unwrap();
    }
}

fn main() {
    // One thread: the harness enters the test network namespace on the current thread
    // only, and every connection (kube client, watch) must be made from inside it.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    tokio::task::LocalSet::new().block_on(&runtime, bench());
}
