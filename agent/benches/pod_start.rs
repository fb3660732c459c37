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
//! `CAIRN_BENCH_PAR` (5), `CAIRN_BENCH_OUT` (a file to append a JSON summary line to),
//! `CAIRN_BENCH_HOLD_SECS` (keep each batch's pods running that long before teardown, to
//! attach `perf` to the agent or containerd in steady state).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

#[path = "../tests/common/mod.rs"]
mod common;

use std::collections::HashMap;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
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
/// How long to watch CPU use with the pods running: the agent's resync period (10 s).
const IDLE_WINDOW: Duration = Duration::from_secs(10);

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

/// When the watch saw a pod `Running` (monotonic, and wall clock to line up with the
/// agent's log).
type Seen = (Instant, DateTime<Utc>);

/// Pods waiting for `Running`, by name; the watch task answers each with the instant its
/// event arrived.
type Waiters = Rc<std::cell::RefCell<HashMap<String, oneshot::Sender<Seen>>>>;

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
                let at = (Instant::now(), Utc::now());
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

/// One measured pod: create → Running seen, and the wall clock of both ends.
#[derive(Clone, Copy)]
struct Timing {
    took: Duration,
    created: DateTime<Utc>,
    running: DateTime<Utc>,
}

/// Creates the pod and waits for the watch to see it Running.
async fn start_one(cluster: &Cluster, waiters: &Waiters, name: &str) -> Timing {
    let (tx, rx) = oneshot::channel();
    waiters.borrow_mut().insert(name.to_string(), tx);
    let pod = bench_pod(name, &cluster.image);
    let created = Utc::now();
    let started = Instant::now();
    cluster
        .pods()
        .create(&PostParams::default(), &pod)
        .await
        .unwrap();
    match tokio::time::timeout(POD_TIMEOUT, rx).await {
        Ok(Ok((at, running))) => Timing {
            took: at.saturating_duration_since(started),
            created,
            running,
        },
        _ => panic!(
            "pod {name} not Running within {POD_TIMEOUT:?}; agent log tail:\n{}",
            log_tail(cluster)
        ),
    }
}

/// `n` pods named `<prefix>-<i>`, `par` in flight; per-pod timings in index order.
async fn run_batch(
    cluster: &Cluster,
    waiters: &Waiters,
    prefix: &str,
    n: usize,
    par: usize,
) -> Vec<Timing> {
    let next = std::cell::Cell::new(0usize);
    let results = std::cell::RefCell::new(Vec::with_capacity(n));
    let lane = || async {
        loop {
            let i = next.get();
            if i >= n {
                break;
            }
            next.set(i + 1);
            let timing = start_one(cluster, waiters, &format!("{prefix}-{i}")).await;
            results.borrow_mut().push((i, timing));
        }
    };
    futures::future::join_all((0..par.max(1)).map(|_| lane())).await;
    let mut results = results.into_inner();
    results.sort_by_key(|(i, _)| *i);
    results.into_iter().map(|(_, t)| t).collect()
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

// ---------- where the time goes, from the agent's event log lines ----------

/// The agent logs each Event it posts (`<RFC3339> INFO … event pod=<ns>/<name> reason="…"`);
/// per pod: wall-clock time of its first Pulled, Created and Started line.
fn event_times(log: &str) -> HashMap<String, HashMap<String, DateTime<Utc>>> {
    let mut out: HashMap<String, HashMap<String, DateTime<Utc>>> = HashMap::new();
    for raw in log.lines() {
        let line = strip_ansi(raw);
        if !line.contains(" event ") {
            continue;
        }
        let Some(at) = line
            .split_whitespace()
            .next()
            .and_then(|t| DateTime::parse_from_rfc3339(t).ok())
        else {
            continue;
        };
        let field = |key: &str| {
            let rest = &line[line.rfind(key)? + key.len()..];
            let v = rest.split_whitespace().next()?;
            Some(v.trim_matches('"').trim_end_matches('}').to_string())
        };
        let (Some(pod), Some(reason)) = (field(" pod=default/"), field(" reason=")) else {
            continue;
        };
        out.entry(pod)
            .or_default()
            .entry(reason)
            .or_insert(at.with_timezone(&Utc));
    }
    out
}

fn strip_ansi(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            // CSI: ESC [ params final-byte(@..~)
            for d in chars.by_ref() {
                if ('@'..='~').contains(&d) && d != '[' {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// Phases of each pod start (ms), from the bench's create/Running-seen instants and the
/// agent's Pulled/Created/Started log lines: create → Pulled (API + watch to the agent,
/// pod cgroup, sandbox = netns + CNI ADD, pod files, volumes, image lookup), Pulled →
/// Created (env, mounts, snapshot + container record), Created → Started (task create =
/// shim + runc, start), Started → Running seen (status write, watch back to us).
const PHASES: [&str; 4] = [
    "create_to_pulled",
    "pulled_to_created",
    "created_to_started",
    "started_to_running_seen",
];

fn phases(log: &str, prefix: &str, timings: &[Timing]) -> Vec<Vec<f64>> {
    let events = event_times(log);
    let mut out = vec![Vec::new(); PHASES.len()];
    for (i, t) in timings.iter().enumerate() {
        let Some(ev) = events.get(&format!("{prefix}-{i}")) else {
            continue;
        };
        let (Some(pulled), Some(created), Some(started)) =
            (ev.get("Pulled"), ev.get("Created"), ev.get("Started"))
        else {
            continue;
        };
        let ms = |a: &DateTime<Utc>, b: &DateTime<Utc>| {
            (*b - *a).num_microseconds().unwrap_or(0) as f64 / 1000.0
        };
        out[0].push(ms(&t.created, pulled));
        out[1].push(ms(pulled, created));
        out[2].push(ms(created, started));
        out[3].push(ms(started, &t.running));
    }
    out
}

/// `/metrics/cadvisor` of the node `rounds` times each way Prometheus scrapes a kubelet:
/// straight at the agent's port with a client certificate (kube-prometheus's
/// `kubelet` job) and through the API server's node proxy (docs/monitoring/prometheus.yml),
/// after a housekeeping pass saw every pod: per-scrape latency (body read in full) and
/// the exposition's size and series.
async fn scrape_cadvisor(cluster: &Cluster, n: usize, rounds: usize) -> Value {
    let proxied = format!("/api/v1/nodes/{NODE}/proxy/metrics/cadvisor");
    let via_proxy = || async {
        let req = http::Request::get(&proxied).body(Vec::new()).unwrap();
        cluster.client.request_text(req).await.unwrap_or_default()
    };
    let admin = cairn_testsupport::api_client::http_client(&cluster.kubeconfig).unwrap();
    let url = format!("https://{NODE_IP}:10250/metrics/cadvisor");
    let direct = || async {
        let response = admin.get(&url).send().await.unwrap();
        response.text().await.unwrap_or_default()
    };
    // Every bench pod's container in the exposition (a pass after the last start).
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut text = via_proxy().await;
    while text
        .matches("container_cpu_usage_seconds_total{container=\"c\"")
        .count()
        < n
    {
        assert!(
            Instant::now() < deadline,
            "cAdvisor metrics never listed {n} containers"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
        text = via_proxy().await;
    }
    let mut lat_direct = Vec::with_capacity(rounds);
    let mut lat_proxy = Vec::with_capacity(rounds);
    for _ in 0..rounds {
        let t = Instant::now();
        assert!(!direct().await.is_empty());
        lat_direct.push(t.elapsed().as_secs_f64() * 1000.0);
        let t = Instant::now();
        assert!(!via_proxy().await.is_empty());
        lat_proxy.push(t.elapsed().as_secs_f64() * 1000.0);
    }
    let series = text.lines().filter(|l| !l.starts_with('#')).count();
    json!({
        "per_scrape_ms": summary(&lat_direct),
        "per_scrape_ms_via_proxy": summary(&lat_proxy),
        "bytes": text.len(),
        "series": series,
    })
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
    let prefix = format!("bench-{mode}");
    let timings = run_batch(cluster, waiters, &prefix, n, par).await;
    let lat: Vec<f64> = timings
        .iter()
        .map(|t| t.took.as_secs_f64() * 1000.0)
        .collect();
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
    let cadvisor = scrape_cadvisor(cluster, n, 200).await;
    println!(
        "         /metrics/cadvisor with {n} containers ({} bytes, {} series): direct {}; via the node proxy {}",
        cadvisor["bytes"],
        cadvisor["series"],
        fmt(&cadvisor["per_scrape_ms"]),
        fmt(&cadvisor["per_scrape_ms_via_proxy"]),
    );
    let (idle_secs, agent_idle, containerd_idle) = steady_state_cpu_then_hold(pids, mode, n).await;
    all_bench_pods_running(cluster, mode, n).await;
    let phase_ms = phases(&cluster.agent_log(), &prefix, &timings);
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
    println!(
        "         steady state with {n} pods over {idle_secs:.0} s: agent cpu {agent_idle:.1} ms/s, containerd cpu {containerd_idle:.1} ms/s"
    );
    let phase_json = phase_summaries(&phase_ms);
    Mode {
        name: mode.to_string(),
        json: json!({
            "mode": mode, "n": n, "par": par, "per_pod_ms": s, "per_pod_raw_ms": lat, "phases_ms": phase_json, "batch_wall_ms": wall,
            "teardown_ms": teardown.as_secs_f64() * 1000.0, "host_busy_cores": busy_cores,
            "agent_rss_kb_running": rss_kb, "agent_rss_kb_peak": peak_kb, "cadvisor_scrape": cadvisor,
            "steady_agent_cpu_ms_per_s": agent_idle, "steady_containerd_cpu_ms_per_s": containerd_idle,
            "agent_cpu_ms": agent_cpu, "agent_children_cpu_ms": agent_children,
            "control_cpu_ms": cpu1[1].0 - cpu0[1].0,
            "containerd_cpu_ms": cpu1[2].0 - cpu0[2].0, "containerd_children_cpu_ms": cpu1[2].1 - cpu0[2].1,
        }),
    }
}

/// Agent and containerd cpu (ms/s) over one idle window with the pods running, then
/// the optional hold for inspection; returns the window (s) and the two rates.
async fn steady_state_cpu_then_hold(pids: &Pids, mode: &str, n: usize) -> (f64, f64, f64) {
    // Steady state with n pods: one full resync period of every pod worker.
    let idle0 = [cpu_ms(pids.agent), cpu_ms(pids.containerd)];
    tokio::time::sleep(IDLE_WINDOW).await;
    let idle1 = [cpu_ms(pids.agent), cpu_ms(pids.containerd)];
    let idle_secs = IDLE_WINDOW.as_secs_f64();
    let agent_idle = (idle1[0].0 - idle0[0].0) / idle_secs;
    let containerd_idle = (idle1[1].0 - idle0[1].0) / idle_secs;
    let hold = env_usize("CAIRN_BENCH_HOLD_SECS", 0);
    if hold > 0 {
        println!(
            "[cairn] {mode}: holding {n} pods for {hold} s (agent pid {}, containerd pid {})",
            pids.agent, pids.containerd
        );
        tokio::time::sleep(Duration::from_secs(hold as u64)).await;
    }
    (idle_secs, agent_idle, containerd_idle)
}

async fn all_bench_pods_running(cluster: &Cluster, mode: &str, n: usize) {
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
}

/// p50/p99 per agent phase, printed and as JSON (empty when the log lacks events).
fn phase_summaries(phase_ms: &[Vec<f64>]) -> serde_json::Map<String, Value> {
    let mut phase_json = serde_json::Map::new();
    if phase_ms.iter().all(|p| !p.is_empty()) {
        let parts: Vec<String> = PHASES
            .iter()
            .zip(phase_ms)
            .map(|(name, v)| {
                let sum = summary(v);
                let text = format!(
                    "{name} {:.1}/{:.1}",
                    sum["p50"].as_f64().unwrap_or(f64::NAN),
                    sum["p99"].as_f64().unwrap_or(f64::NAN)
                );
                phase_json.insert(name.to_string(), sum);
                text
            })
            .collect();
        println!(
            "         phases p50/p99 ms ({} pods with all agent events): {}",
            phase_ms[0].len(),
            parts.join(", ")
        );
    } else {
        println!(
            "         phases: the agent log lacks Pulled/Created/Started lines for these pods"
        );
    }
    phase_json
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
        warm.took.as_secs_f64() * 1000.0
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
