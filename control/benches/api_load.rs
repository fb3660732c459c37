//! Load benchmark of cairn-control (not a test: it prints figures, asserts nothing timed).
//!
//! 50 concurrent clients create 10,000 pods, then get and list them, while 100 watchers
//! follow the namespace. Prints p50/p99 per verb, the delay from a create's
//! acknowledgement to its event reaching each watcher, and the server's RSS.
//!
//! Run: `cargo bench -p cairn-control --bench api_load` (env: PODS, CLIENTS, WATCHERS,
//! RBAC_OBJECTS, AUDIT=0 to turn the Metadata-level audit log off; CAIRN_CONTROL_BIN
//! for another binary, e.g. an older plain-HTTP one in an A/B run, which gets neither;
//! SERVER_ARGS for more flags to this build's server;
//! SA_TOKEN=1 to let ServiceAccount admission add the token volume, which makes each
//! pod ~20 % larger and so is off by default: an A/B run against a binary without that
//! admission then stores and sends the same objects; STORE=etcd to serve from a private
//! etcd, after measuring the floor: raw etcd puts of a pod's size at the same concurrency,
//! through the gRPC client etcdctl uses, without its process start per put).

// A benchmark driver: failing loudly on a broken setup is what we want here.
#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

mod common;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use cairn_store_etcd::testing::EtcdServer;
use cairn_testsupport::control_plane::cpu_secs;
use common::{env_usize, percentile, start_server_with};
use futures::StreamExt;
use serde_json::json;
use tokio::task::JoinHandle;

/// Per watcher, when each pod's ADDED event arrived.
type Arrivals = Arc<Vec<Mutex<Vec<Option<Instant>>>>>;
/// When each pod's create was acknowledged.
type Acks = Arc<Mutex<Vec<Option<Instant>>>>;

fn report(verb: &str, mut samples: Vec<Duration>) {
    samples.sort();
    println!(
        "{verb:<22} n={:<7} p50={:>8.2}ms p99={:>8.2}ms max={:>8.2}ms",
        samples.len(),
        percentile(&samples, 0.50).as_secs_f64() * 1e3,
        percentile(&samples, 0.99).as_secs_f64() * 1e3,
        samples.last().copied().unwrap_or_default().as_secs_f64() * 1e3,
    );
}

fn rss_kib(pid: u32, field: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find(|l| l.starts_with(field))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

fn pod(i: usize, sa_token: bool) -> serde_json::Value {
    let mut pod = json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": format!("pod-{i}"), "labels": {"app": "bench", "shard": format!("s{}", i % 10)},
                     "annotations": {"bench.cairn.dev/note": "a pod of realistic size for the load benchmark"}},
        "spec": {
            "containers": [{
                "name": "web", "image": "registry.local/web:1.0",
                "command": ["/bin/web", "--port=8080"],
                "ports": [{"containerPort": 8080, "name": "http"}],
                "env": [{"name": "MODE", "value": "bench"}, {"name": "POD", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}],
                "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}, "limits": {"cpu": "200m", "memory": "128Mi"}},
                "readinessProbe": {"httpGet": {"path": "/healthz", "port": 8080}},
            }],
            "nodeName": format!("node-{}", i % 20),
        },
    });
    if !sa_token {
        pod["spec"]["automountServiceAccountToken"] = json!(false);
    }
    pod
}

/// Index of `pod-N` in a watch event line, without decoding the whole event.
fn pod_index(line: &[u8]) -> Option<usize> {
    let needle = b"\"name\":\"pod-";
    let pos = line.windows(needle.len()).position(|w| w == needle)? + needle.len();
    let digits: Vec<u8> = line[pos..]
        .iter()
        .take_while(|b| b.is_ascii_digit())
        .copied()
        .collect();
    std::str::from_utf8(&digits).ok()?.parse().ok()
}

/// Every request audited once at Metadata level into the data dir (AUDIT=0: none), as
/// the lab runs.
fn audit_args(dir: &std::path::Path) -> Vec<String> {
    if std::env::var("AUDIT").is_ok_and(|v| v == "0") {
        return Vec::new();
    }
    let policy = dir.join("audit-policy.yaml");
    let text = "apiVersion: audit.k8s.io/v1\nkind: Policy\nomitStages: [RequestReceived]\nrules:\n- level: Metadata\n";
    std::fs::write(&policy, text).expect("write the audit policy");
    let path = |p: std::path::PathBuf| p.display().to_string();
    vec![
        "--audit-policy-file".into(),
        path(policy),
        "--audit-log-path".into(),
        path(dir.join("audit.log")),
    ]
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let pods = env_usize("PODS", 10_000);
    let clients = env_usize("CLIENTS", 50);
    let watchers = env_usize("WATCHERS", 100);
    let dir = tempfile::tempdir().expect("tempdir");
    let mut args = audit_args(dir.path());
    // SERVER_ARGS: more flags for this build's server (e.g. `--leader-elect=false`).
    args.extend(
        std::env::var("SERVER_ARGS")
            .unwrap_or_default()
            .split_whitespace()
            .map(String::from),
    );
    let etcd = etcd_with_floor(pods, clients).await;
    if let Some(etcd) = &etcd {
        let store = [
            "--store",
            "etcd",
            "--etcd-servers",
            etcd.client_url(),
            "--etcd-prefix",
            "/cairn",
        ];
        args.extend(store.map(String::from));
    }
    let (mut server, url, http) =
        start_server_with(env!("CARGO_BIN_EXE_cairn-control"), dir.path(), &args).await;
    let pid = server.id();
    let http = http.pool_max_idle_per_host(200).build().expect("client");
    http.post(format!("{url}/api/v1/namespaces"))
        .json(&json!({"metadata": {"name": "bench"}}))
        .send()
        .await
        .expect("create namespace");
    // Over HTTPS the load runs as a user RBAC decides for (not system:masters, which
    // skips it), with RBAC_OBJECTS Roles and RoleBindings present besides its own.
    let http = match url.starts_with("https://") {
        true => rbac_user_client(&http, &url, dir.path(), env_usize("RBAC_OBJECTS", 1000)).await,
        false => http,
    };
    println!("cairn-control load benchmark: {pods} pods, {clients} clients, {watchers} watchers");
    println!("server RSS idle: {} MiB", rss_kib(pid, "VmRSS:") / 1024);

    let (arrivals, watch_tasks) = start_watchers(&http, &url, pods, watchers).await;
    tokio::time::sleep(Duration::from_millis(500)).await;

    let cpu_before = (cpu_secs(pid), cpu_secs(std::process::id()));
    let acked = create_pods_and_report(&http, &url, pods, clients).await;
    report_watch_delivery(watch_tasks, &acked, &arrivals, pid, pods).await;
    println!(
        "CPU for creates and their watch events: server {:.2}s, benchmark client {:.2}s",
        cpu_secs(pid) - cpu_before.0,
        cpu_secs(std::process::id()) - cpu_before.1
    );
    get_pods_and_report(&http, &url, pods, clients).await;
    list_pods_and_report(&http, &url, clients).await;
    println!(
        "server RSS at end: {} MiB (peak {} MiB)",
        rss_kib(pid, "VmRSS:") / 1024,
        rss_kib(pid, "VmHWM:") / 1024
    );
    let _ = server.kill();
    let _ = server.wait();
}

/// With STORE=etcd: a private etcd, and the p50/p99 of `pods` raw puts of a pod's bytes
/// from `clients` concurrent clients on it (under another prefix than the server's).
async fn etcd_with_floor(pods: usize, clients: usize) -> Option<EtcdServer> {
    if std::env::var("STORE").map_or(true, |s| s != "etcd") {
        return None;
    }
    let etcd = tokio::task::spawn_blocking(EtcdServer::start)
        .await
        .expect("join")
        .expect("start etcd (etcd-server)");
    let client = etcd_client::Client::connect([etcd.client_url()], None)
        .await
        .expect("etcd client");
    let value = serde_json::to_vec(&pod(0, false)).expect("pod json");
    let mut tasks = Vec::new();
    for c in 0..clients {
        let (mut client, value) = (client.clone(), value.clone());
        tasks.push(tokio::spawn(async move {
            let mut lat = Vec::new();
            for i in (c..pods).step_by(clients) {
                let t = Instant::now();
                client
                    .put(format!("/floor/pods/pod-{i}"), value.clone(), None)
                    .await
                    .expect("etcd put");
                lat.push(t.elapsed());
            }
            lat
        }));
    }
    let mut lat = Vec::new();
    for t in tasks {
        lat.extend(t.await.expect("client"));
    }
    report("etcd put (floor)", lat);
    Some(etcd)
}

async fn start_watchers(
    http: &reqwest::Client,
    url: &str,
    pods: usize,
    watchers: usize,
) -> (Arrivals, Vec<JoinHandle<()>>) {
    // Watchers record when each pod's ADDED event arrives.
    let list: serde_json::Value = http
        .get(format!("{url}/api/v1/namespaces/bench/pods"))
        .send()
        .await
        .expect("list")
        .json()
        .await
        .expect("list json");
    let rv = list["metadata"]["resourceVersion"]
        .as_str()
        .unwrap_or("0")
        .to_string();
    let arrivals: Arc<Vec<Mutex<Vec<Option<Instant>>>>> = Arc::new(
        (0..watchers)
            .map(|_| Mutex::new(vec![None; pods]))
            .collect(),
    );
    let mut watch_tasks = Vec::new();
    for w in 0..watchers {
        let (http, url, rv, arrivals) =
            (http.clone(), url.to_owned(), rv.clone(), arrivals.clone());
        watch_tasks.push(tokio::spawn(async move {
            let resp = http
                .get(format!("{url}/api/v1/namespaces/bench/pods?watch=true&resourceVersion={rv}&timeoutSeconds=600"))
                .send()
                .await
                .expect("watch");
            let mut stream = resp.bytes_stream();
            let mut buf: Vec<u8> = Vec::new();
            let mut seen = 0;
            while let Some(Ok(chunk)) = stream.next().await {
                buf.extend_from_slice(&chunk);
                // Lines are cut by index and the consumed prefix dropped once per chunk:
                // a TLS record carries a dozen events, and draining each line alone
                // moved the rest of the buffer a dozen times (the client's CPU is the
                // server's on this machine).
                let mut start = 0;
                while let Some(nl) = buf[start..].iter().position(|b| *b == b'\n') {
                    let line = &buf[start..start + nl];
                    start += nl + 1;
                    if line.starts_with(b"{\"type\":\"ADDED\"") {
                        if let Some(i) = pod_index(line) {
                            if let Some(slot) = arrivals[w].lock().expect("lock").get_mut(i) {
                                *slot = Some(Instant::now());
                                seen += 1;
                            }
                        }
                    }
                }
                buf.drain(..start);
                if seen >= pods {
                    return;
                }
            }
        }));
    }
    (arrivals, watch_tasks)
}

async fn create_pods_and_report(
    http: &reqwest::Client,
    url: &str,
    pods: usize,
    clients: usize,
) -> Acks {
    // Creates.
    let acked: Arc<Mutex<Vec<Option<Instant>>>> = Arc::new(Mutex::new(vec![None; pods]));
    let sa_token = std::env::var("SA_TOKEN").is_ok_and(|v| v == "1");
    let started = Instant::now();
    let mut tasks = Vec::new();
    for c in 0..clients {
        let (http, url, acked) = (http.clone(), url.to_owned(), acked.clone());
        tasks.push(tokio::spawn(async move {
            let mut lat = Vec::new();
            for i in (c..pods).step_by(clients) {
                let body = serde_json::to_vec(&pod(i, sa_token)).expect("encode");
                let t = Instant::now();
                let resp = http
                    .post(format!("{url}/api/v1/namespaces/bench/pods"))
                    .header("content-type", "application/json")
                    .body(body)
                    .send()
                    .await
                    .expect("create");
                let status = resp.status();
                let _ = resp.bytes().await;
                let done = Instant::now();
                assert_eq!(status.as_u16(), 201, "create pod-{i}");
                acked.lock().expect("lock")[i] = Some(done);
                lat.push(done - t);
            }
            lat
        }));
    }
    let mut create_lat = Vec::new();
    for t in tasks {
        create_lat.extend(t.await.expect("client"));
    }
    let create_secs = started.elapsed().as_secs_f64();
    report("create", create_lat);
    println!("create throughput: {:.0} pods/s", pods as f64 / create_secs);
    acked
}

async fn report_watch_delivery(
    watch_tasks: Vec<JoinHandle<()>>,
    acked: &Acks,
    arrivals: &Arrivals,
    pid: u32,
    pods: usize,
) {
    // Watch delivery: acknowledged → event received, over every watcher.
    let deadline = Instant::now() + Duration::from_secs(60);
    for t in watch_tasks {
        let _ = tokio::time::timeout(deadline.saturating_duration_since(Instant::now()), t).await;
    }
    let acked = acked.lock().expect("lock").clone();
    let mut delivery = Vec::new();
    let mut missing = 0usize;
    for w in arrivals.iter() {
        let w = w.lock().expect("lock");
        for (i, a) in w.iter().enumerate() {
            match (a, acked[i]) {
                (Some(a), Some(k)) => delivery.push(a.saturating_duration_since(k)),
                _ => missing += 1,
            }
        }
    }
    report("watch delivery", delivery);
    println!("watch events missing: {missing}");
    println!(
        "server RSS with {pods} pods: {} MiB",
        rss_kib(pid, "VmRSS:") / 1024
    );
}

async fn get_pods_and_report(http: &reqwest::Client, url: &str, pods: usize, clients: usize) {
    // Gets.
    let mut tasks = Vec::new();
    for c in 0..clients {
        let (http, url) = (http.clone(), url.to_owned());
        tasks.push(tokio::spawn(async move {
            let mut lat = Vec::new();
            for i in (c..pods).step_by(clients).take(200) {
                let t = Instant::now();
                let resp = http
                    .get(format!("{url}/api/v1/namespaces/bench/pods/pod-{i}"))
                    .send()
                    .await
                    .expect("get");
                let _ = resp.bytes().await;
                lat.push(t.elapsed());
            }
            lat
        }));
    }
    let mut get_lat = Vec::new();
    for t in tasks {
        get_lat.extend(t.await.expect("client"));
    }
    report("get", get_lat);
}

async fn list_pods_and_report(http: &reqwest::Client, url: &str, clients: usize) {
    // Lists: a labelled shard (1,000 pods) and pages of 500; then whole-namespace lists.
    for (verb, query, per_client) in [
        ("list shard (1k)", "labelSelector=shard%3Ds3", 4usize),
        ("list page (limit=500)", "limit=500", 4),
        ("list all (10k)", "", 1),
    ] {
        let mut tasks = Vec::new();
        for _ in 0..clients {
            let (http, url) = (http.clone(), url.to_owned());
            let query = query.to_string();
            tasks.push(tokio::spawn(async move {
                let mut lat = Vec::new();
                for _ in 0..per_client {
                    let t = Instant::now();
                    let resp = http
                        .get(format!("{url}/api/v1/namespaces/bench/pods?{query}"))
                        .send()
                        .await
                        .expect("list");
                    let _ = resp.bytes().await;
                    lat.push(t.elapsed());
                }
                lat
            }));
        }
        let mut lat = Vec::new();
        for t in tasks {
            lat.extend(t.await.expect("client"));
        }
        report(verb, lat);
    }
}

/// Creates `objects` Roles and as many RoleBindings (for other users) across 100
/// namespaces, binds `edit` in `bench` to the user `loader`, and returns a client as
/// `loader`.
async fn rbac_user_client(
    admin: &reqwest::Client,
    url: &str,
    data_dir: &std::path::Path,
    objects: usize,
) -> reqwest::Client {
    let rbac = format!("{url}/apis/rbac.authorization.k8s.io/v1");
    for n in 0..100.min(objects.max(1)) {
        let ns = json!({"metadata": {"name": format!("rbac-{n}")}});
        admin
            .post(format!("{url}/api/v1/namespaces"))
            .json(&ns)
            .send()
            .await
            .expect("namespace");
    }
    let posts = (0..objects).map(|i| {
        let ns = format!("rbac-{}", i % 100);
        let role = json!({"metadata": {"name": format!("role-{i}")},
            "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list"]}]});
        let binding = json!({"metadata": {"name": format!("binding-{i}")},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": format!("role-{i}")},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": format!("user-{i}")}]});
        let (rbac, admin) = (rbac.clone(), admin.clone());
        async move {
            admin.post(format!("{rbac}/namespaces/{ns}/roles")).json(&role).send().await.expect("role");
            admin.post(format!("{rbac}/namespaces/{ns}/rolebindings")).json(&binding).send().await.expect("binding");
        }
    });
    futures::stream::iter(posts)
        .buffer_unordered(16)
        .collect::<Vec<()>>()
        .await;
    let binding = json!({"metadata": {"name": "loader-edit"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "edit"},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "loader"}]});
    admin
        .post(format!("{rbac}/namespaces/bench/rolebindings"))
        .json(&binding)
        .send()
        .await
        .expect("binding");
    let bin = std::env::var_os("CAIRN_CONTROL_BIN").map_or_else(
        || env!("CARGO_BIN_EXE_cairn-control").into(),
        std::path::PathBuf::from,
    );
    let out = std::process::Command::new(bin)
        .args(["kubeconfig", "--user", "loader", "--data-dir"])
        .arg(data_dir)
        .output()
        .expect("kubeconfig for loader");
    let text = String::from_utf8(out.stdout).expect("utf-8");
    let client = cairn_testsupport::api_client::Credentials::from_kubeconfig_text(&text)
        .expect("loader kubeconfig")
        .reqwest_builder()
        .expect("loader client")
        .pool_max_idle_per_host(200)
        .build()
        .expect("client");
    // The binding is in effect once the authorizer has seen it.
    loop {
        let r = client
            .get(format!("{url}/api/v1/namespaces/bench/pods"))
            .send()
            .await;
        if r.is_ok_and(|r| r.status().is_success()) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    println!(
        "RBAC: {objects} Roles and RoleBindings present; load runs as user loader (edit in bench)"
    );
    client
}
