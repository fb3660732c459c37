//! Controllers benchmark, through a release `cairn-control serve` (API and SQLite store)
//! with the scheduler and the controllers as separate `cairn-control scheduler` /
//! `cairn-control controllers` processes and a simulated kubelet in this process (bound
//! pods marked Running and Ready, deletions finished at once), on 100 simulated nodes:
//! a 1,000-replica Deployment from create to 1,000 pods created, bound and Ready; a
//! rolling update of it (maxSurge 25 %) to completion; a Job of 1,000 completions at
//! parallelism 100 (its pods succeed as soon as they are bound); then the Deployment
//! scaled to 10,000 pods for the controllers' memory.
//!
//! `cargo bench -p cairn-controllers`.

// Benchmark code: a failed setup step should stop the run loudly.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use cairn_testsupport::control_plane::{control_binary, cpu_secs, vm_kib, ControlPlane};
use futures::StreamExt;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::runtime::watcher::{self, Event};
use kube::ResourceExt;
use serde_json::json;

const NODES: usize = 100;
const REPLICAS: i32 = 1000;
const SCALED: i32 = 10_000;
const JOB_COMPLETIONS: i32 = 1000;
const JOB_PARALLELISM: i32 = 100;

#[derive(Default)]
struct Seen {
    created: HashMap<String, Instant>,
    bound: HashMap<String, Instant>,
    ready: HashMap<String, Instant>,
}

fn is_ready(p: &Pod) -> bool {
    p.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// The simulated kubelet: marks bound pods Running and Ready, finishes deletions, and
/// records when each pod was first seen created, bound and ready.
async fn kubelet(client: kube::Client, seen: Arc<Mutex<Seen>>) {
    let api: Api<Pod> = Api::all(client.clone());
    let marking = Arc::new(tokio::sync::Semaphore::new(64));
    let mut events = watcher::watcher(api, watcher::Config::default()).boxed();
    while let Some(Ok(ev)) = events.next().await {
        let (Event::Apply(p) | Event::InitApply(p)) = ev else {
            continue;
        };
        let name = p.name_any();
        let now = Instant::now();
        let bound = p.spec.as_ref().and_then(|s| s.node_name.as_ref()).is_some();
        {
            let mut s = seen.lock().unwrap();
            s.created.entry(name.clone()).or_insert(now);
            if bound {
                s.bound.entry(name.clone()).or_insert(now);
            }
            if is_ready(&p) {
                s.ready.entry(name.clone()).or_insert(now);
            }
        }
        let deleting = p.metadata.deletion_timestamp.is_some();
        let job_pod = p.labels().contains_key("job-name");
        let phase = p
            .status
            .as_ref()
            .and_then(|s| s.phase.as_deref())
            .unwrap_or("");
        if !bound || (is_ready(&p) && !deleting) || (job_pod && phase == "Succeeded" && !deleting) {
            continue;
        }
        let permit = marking.clone().acquire_owned().await.unwrap();
        let pods: Api<Pod> = Api::namespaced(client.clone(), &p.namespace().unwrap_or_default());
        tokio::spawn(async move {
            let _permit = permit;
            // Errors (the pod went away meanwhile) need nothing: the watch brings the truth.
            if deleting {
                let _ = pods
                    .delete(
                        &name,
                        &DeleteParams {
                            grace_period_seconds: Some(0),
                            ..Default::default()
                        },
                    )
                    .await;
                return;
            }
            let t = k8s_openapi::jiff::Timestamp::now().to_string();
            let status = if job_pod {
                json!({"status": {"phase": "Succeeded", "containerStatuses": [{"name": "c",
                    "image": "", "imageID": "", "ready": false, "restartCount": 0,
                    "state": {"terminated": {"exitCode": 0, "startedAt": t, "finishedAt": t}}}]}})
            } else {
                json!({"status": {"phase": "Running", "podIP": "10.244.0.2",
                    "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": t},
                                   {"type": "ContainersReady", "status": "True", "lastTransitionTime": t}]}})
            };
            let _ = pods
                .patch_status(&name, &PatchParams::default(), &Patch::Merge(status))
                .await;
        });
    }
}

async fn add_nodes(client: &kube::Client) {
    let api: Api<Node> = Api::all(client.clone());
    futures::stream::iter(0..NODES)
        .for_each_concurrent(16, |i| {
            let api = api.clone();
            async move {
                let name = format!("node-{i}");
                let node: Node = serde_json::from_value(json!({
                    "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
                    "status": {"capacity": {"cpu": "64", "memory": "256Gi", "pods": "110"},
                               "allocatable": {"cpu": "64", "memory": "256Gi", "pods": "110"},
                               "conditions": [{"type": "Ready", "status": "True"}]}}))
                .unwrap();
                api.create(&PostParams::default(), &node).await.unwrap();
            }
        })
        .await;
}

async fn wait_for(what: &str, timeout: Duration, mut done: impl FnMut() -> bool) -> Instant {
    let deadline = Instant::now() + timeout;
    loop {
        if done() {
            return Instant::now();
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

async fn rolled_out(api: &Api<Deployment>, replicas: i32, generation: i64) -> bool {
    let Ok(d) = api.get("bench").await else {
        return false;
    };
    let s = d.status.unwrap_or_default();
    s.observed_generation >= Some(generation)
        && s.updated_replicas == Some(replicas)
        && s.ready_replicas == Some(replicas)
        && s.available_replicas == Some(replicas)
        && s.replicas == Some(replicas)
}

async fn wait_rolled_out(
    api: &Api<Deployment>,
    replicas: i32,
    generation: i64,
    timeout: Duration,
) -> Instant {
    let deadline = Instant::now() + timeout;
    while !rolled_out(api, replicas, generation).await {
        assert!(
            Instant::now() < deadline,
            "deployment did not roll out {replicas} replicas"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    Instant::now()
}

fn percentile(v: &mut [Duration], q: f64) -> f64 {
    v.sort();
    let i = ((v.len() as f64 - 1.0) * q).round() as usize;
    v.get(i).map_or(0.0, |d| d.as_secs_f64() * 1000.0)
}

fn deployment() -> Deployment {
    serde_json::from_value(json!({
        "metadata": {"name": "bench"},
        "spec": {"replicas": REPLICAS, "selector": {"matchLabels": {"app": "bench"}},
                 "template": {"metadata": {"labels": {"app": "bench"}},
                              "spec": {"containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}]}}}}))
    .unwrap()
}
/// The simulated kubelets' heartbeats: every node's Lease renewed every 10 s, so the node
/// lifecycle controller keeps them Ready.
async fn keep_leases(client: kube::Client) {
    let api: Api<Lease> = Api::namespaced(client, "kube-node-lease");
    loop {
        let now = k8s_openapi::jiff::Timestamp::now();
        for i in 0..NODES {
            let name = format!("node-{i}");
            let spec = json!({"holderIdentity": name, "leaseDurationSeconds": 40,
                "renewTime": k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime(now)});
            let patch = json!({"spec": spec});
            if api
                .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
                .is_err()
            {
                let lease: Lease =
                    serde_json::from_value(json!({"metadata": {"name": name}, "spec": spec}))
                        .unwrap();
                // Err: created meanwhile, or the server is stopping; the next round repairs.
                let _ = api.create(&PostParams::default(), &lease).await;
            }
        }
        tokio::time::sleep(Duration::from_secs(10)).await;
    }
}

#[tokio::main]
async fn main() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let bin = control_binary(&root).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let cp = ControlPlane::start(
        &bin,
        dir.path(),
        // No inflight limits: the ReplicaSet's create bursts and the scheduler's binds
        // may pass 200 writes at once (429s), which the simulated kubelet does not retry.
        &[
            "--scheduler=false",
            "--controllers=",
            "--allocate-node-cidrs=false",
            "--max-requests-inflight=0",
            "--max-mutating-requests-inflight=0",
        ],
    )
    .unwrap();
    let _scheduler = cp.sidecar("scheduler", &[]).unwrap();
    // CONTROLLERS=LIST runs another selection (e.g. `*,-garbagecollector` to see its cost).
    let selection = format!(
        "--controllers={}",
        std::env::var("CONTROLLERS").unwrap_or_else(|_| "*".into())
    );
    let mut controllers = cp.sidecar("controllers", &[&selection]).unwrap();
    let client = cp.kube_client().await.unwrap();
    add_nodes(&client).await;
    tokio::spawn(keep_leases(client.clone()));
    let seen = Arc::new(Mutex::new(Seen::default()));
    tokio::spawn(kubelet(client.clone(), seen.clone()));
    tokio::time::sleep(Duration::from_secs(2)).await;
    let idle_rss = vm_kib(controllers.pid(), "VmRSS:");
    let cpu0 = cpu_secs(controllers.pid());

    let api: Api<Deployment> = Api::namespaced(client.clone(), "default");
    let t0 = Instant::now();
    api.create(&PostParams::default(), &deployment())
        .await
        .unwrap();
    let n = REPLICAS as usize;
    let created = wait_for("1,000 pods created", Duration::from_secs(120), || {
        seen.lock().unwrap().created.len() >= n
    })
    .await;
    let bound = wait_for("1,000 pods bound", Duration::from_secs(120), || {
        seen.lock().unwrap().bound.len() >= n
    })
    .await;
    let ready = wait_rolled_out(&api, REPLICAS, 1, Duration::from_secs(120)).await;
    let mut lat: Vec<Duration> = {
        let s = seen.lock().unwrap();
        s.ready
            .iter()
            .filter_map(|(k, r)| Some(r.duration_since(*s.created.get(k)?)))
            .collect()
    };
    println!("controllers Deployment {REPLICAS} replicas on {NODES} nodes (anchor: kube-controller-manager's default 20 QPS / burst 30 alone needs ~50 s for 1,000 pod creates)");
    println!("  created {:>7.0} ms   bound {:>7.0} ms   Ready (2/2-style status) {:>7.0} ms after create; pod created->Ready p50 {:.0} ms p99 {:.0} ms",
        (created - t0).as_secs_f64() * 1000.0, (bound - t0).as_secs_f64() * 1000.0, (ready - t0).as_secs_f64() * 1000.0,
        percentile(&mut lat, 0.5), percentile(&mut lat, 0.99));

    let t1 = Instant::now();
    let patch = json!({"spec": {"template": {"spec": {"containers": [{"name": "c", "image": "registry.k8s.io/pause:3.9"}]}}}});
    api.patch("bench", &PatchParams::default(), &Patch::Strategic(patch))
        .await
        .unwrap();
    let rolled = wait_rolled_out(&api, REPLICAS, 2, Duration::from_secs(300)).await;
    println!("  rolling update of {REPLICAS} replicas (maxSurge 25 %, maxUnavailable 25 %): {:.0} ms to complete", (rolled - t1).as_secs_f64() * 1000.0);

    job_phase(&client).await;

    let t2 = Instant::now();
    api.patch(
        "bench",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"replicas": SCALED}})),
    )
    .await
    .unwrap();
    let scaled = wait_rolled_out(&api, SCALED, 3, Duration::from_secs(900)).await;
    let rss = vm_kib(controllers.pid(), "VmRSS:");
    let cpu = cpu_secs(controllers.pid()) - cpu0;
    println!("  scaled to {SCALED}: {:.0} ms; controllers RSS {:.1} MiB idle, {:.1} MiB with {SCALED} pods (+{:.1} MiB, goal <= 50 MB); controllers CPU {:.1} s in all",
        (scaled - t2).as_secs_f64() * 1000.0, idle_rss as f64 / 1024.0, rss as f64 / 1024.0, (rss - idle_rss.min(rss)) as f64 / 1024.0, cpu);
    // A fresh controllers process listing the same 10,000 pods: the caches' cost without
    // the allocator's leftovers from the scale-up's churn.
    drop(controllers);
    controllers = cp.sidecar("controllers", &[&selection]).unwrap();
    tokio::time::sleep(Duration::from_secs(8)).await;
    let fresh = vm_kib(controllers.pid(), "VmRSS:");
    println!("  a restarted controllers process with {SCALED} pods cached: RSS {:.1} MiB (+{:.1} MiB over idle)",
        fresh as f64 / 1024.0, (fresh - idle_rss.min(fresh)) as f64 / 1024.0);
}

/// A Job of 1,000 completions, parallelism 100, whose pods succeed once bound.
async fn job_phase(client: &kube::Client) {
    let jobs: Api<Job> = Api::namespaced(client.clone(), "default");
    let job: Job = serde_json::from_value(json!({
        "metadata": {"name": "bench-job"},
        "spec": {"completions": JOB_COMPLETIONS, "parallelism": JOB_PARALLELISM,
                 "template": {"spec": {"restartPolicy": "Never",
                     "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}]}}}}))
    .unwrap();
    let t = Instant::now();
    jobs.create(&PostParams::default(), &job).await.unwrap();
    let deadline = t + Duration::from_secs(300);
    loop {
        let st = jobs
            .get("bench-job")
            .await
            .unwrap()
            .status
            .unwrap_or_default();
        let complete = st
            .conditions
            .iter()
            .flatten()
            .any(|c| c.type_ == "Complete" && c.status == "True");
        if complete {
            assert_eq!(st.succeeded, Some(JOB_COMPLETIONS));
            break;
        }
        assert!(Instant::now() < deadline, "job did not complete: {st:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    println!("  Job {JOB_COMPLETIONS} completions, parallelism {JOB_PARALLELISM}: Complete after {:.0} ms (anchor: at kube-controller-manager's 20 QPS, its 1,000 pod creates and 1,000 tracking-finalizer removals alone take ~100 s)",
        t.elapsed().as_secs_f64() * 1000.0);
    let dp = DeleteParams::background();
    jobs.delete("bench-job", &dp).await.unwrap();
}
