//! Leader election of the scheduler and the controllers across two cairn-control replicas
//! on one etcd (Debian's etcd-server, private, on loopback), with short timings (lease
//! 4 s, renew deadline 3 s, retry 500 ms).
//!
//! The first replica takes every Lease; the second waits. Cut off from etcd (a proxy in
//! front of it drops every connection), the leader reports that it stopped leading before
//! the second replica takes the Leases, and the second one's controllers then act. Stopped
//! with SIGTERM, a leader releases its Leases and the other takes them at once. The
//! `kubernetes` Endpoints list both replicas' addresses while both run, and only the
//! first's once the second stopped.

// Test code: a failed setup step should fail the test loudly.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{share_identity, Server};
use serde_json::{json, Value};

const LEASES: [&str; 4] = [
    "kube-scheduler",
    "kube-controller-manager",
    "cairn-node-ipam",
    "cairn-csr-controllers",
];

const TIMING: [&str; 6] = [
    "--leader-elect-lease-duration",
    "4s",
    "--leader-elect-renew-deadline",
    "3s",
    "--leader-elect-retry-period",
    "500ms",
];

/// A TCP proxy to etcd that can drop every connection and refuse new ones.
struct Partition {
    addr: SocketAddr,
    cut: Arc<AtomicBool>,
    conns: Arc<std::sync::Mutex<Vec<tokio::task::JoinHandle<()>>>>,
}

impl Partition {
    async fn start(target: SocketAddr) -> Partition {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let cut = Arc::new(AtomicBool::new(false));
        let conns = Arc::new(std::sync::Mutex::new(Vec::new()));
        let (cut2, conns2) = (Arc::clone(&cut), Arc::clone(&conns));
        tokio::spawn(async move {
            while let Ok((mut client, _)) = listener.accept().await {
                if cut2.load(Ordering::SeqCst) {
                    continue;
                }
                conns2.lock().unwrap().push(tokio::spawn(async move {
                    if let Ok(mut server) = tokio::net::TcpStream::connect(target).await {
                        let _ = tokio::io::copy_bidirectional(&mut client, &mut server).await;
                    }
                }));
            }
        });
        Partition { addr, cut, conns }
    }

    fn cut(&self) {
        self.cut.store(true, Ordering::SeqCst);
        for conn in self.conns.lock().unwrap().drain(..) {
            conn.abort();
        }
    }

    fn heal(&self) {
        self.cut.store(false, Ordering::SeqCst);
    }
}

fn on_etcd(url: &str) -> Vec<&str> {
    let mut args = vec!["--store", "etcd", "--etcd-servers", url];
    args.extend(TIMING);
    args
}

fn identity(server: &Server) -> String {
    let id = std::fs::read_to_string(server.data_dir.join("leader-identity")).unwrap();
    format!("{}_{}", cairn_leaderelection::host_name(), id.trim())
}

/// `leader_election_master_status` of `lease` on `server`'s /metrics (None: no answer).
async fn leading(server: &Server, lease: &str) -> Option<bool> {
    let resp = server
        .http()
        .get(format!("{}/metrics", server.url))
        .timeout(Duration::from_secs(2))
        .send()
        .await
        .ok()?;
    let body = resp.text().await.ok()?;
    let line = format!("leader_election_master_status{{name=\"{lease}\"}} ");
    let value = body.lines().find_map(|l| l.strip_prefix(line.as_str()));
    Some(value == Some("1"))
}

async fn holder(server: &Server, lease: &str) -> Option<Value> {
    let url = format!(
        "{}/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/{lease}",
        server.url
    );
    let resp = server
        .http()
        .get(url)
        .timeout(Duration::from_secs(2))
        .send()
        .await
        .ok()?;
    if !resp.status().is_success() {
        return None;
    }
    let lease: Value = resp.json().await.ok()?;
    Some(lease["spec"].clone())
}

/// Polls `check` every 50 ms until it holds; the instant it was first seen to hold.
async fn when(what: &str, secs: u64, mut check: impl AsyncFnMut() -> bool) -> Instant {
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        if check().await {
            return Instant::now();
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn leads_all(server: &Server, who: &str) -> bool {
    for lease in LEASES {
        let holds = holder(server, lease)
            .await
            .is_some_and(|s| s["holderIdentity"] == who);
        if !holds || leading(server, lease).await != Some(true) {
            return false;
        }
    }
    true
}

async fn leads_none(server: &Server) -> bool {
    for lease in LEASES {
        if leading(server, lease).await != Some(false) {
            return false;
        }
    }
    true
}

/// The addresses of the `kubernetes` Endpoints and its EndpointSlice (which must agree).
async fn kubernetes_endpoints(server: &Server) -> Vec<String> {
    let eps = server
        .get_json("/api/v1/namespaces/default/endpoints/kubernetes")
        .await;
    let ips: Vec<String> = eps["subsets"][0]["addresses"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|a| a["ip"].as_str().unwrap().to_string())
                .collect()
        })
        .unwrap_or_default();
    let slice = server
        .get_json("/apis/discovery.k8s.io/v1/namespaces/default/endpointslices/kubernetes")
        .await;
    let slice_ips: Vec<String> = slice["endpoints"]
        .as_array()
        .map(|e| {
            e.iter()
                .map(|e| e["addresses"][0].as_str().unwrap().to_string())
                .collect()
        })
        .unwrap_or_default();
    if ips == slice_ips {
        ips
    } else {
        Vec::new()
    }
}

/// Messages of the LeaderElection Events on the Leases.
async fn election_events(server: &Server) -> Vec<String> {
    let events = server
        .get_json("/api/v1/namespaces/kube-system/events")
        .await;
    events["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["reason"] == "LeaderElection" && e["involvedObject"]["kind"] == "Lease")
        .map(|e| {
            format!(
                "{} {}",
                e["involvedObject"]["name"].as_str().unwrap(),
                e["message"].as_str().unwrap()
            )
        })
        .collect()
}

/// A ReplicaSet `name` whose controller made its pod (no nodes: the pod stays pending).
async fn replicaset_gets_its_pod(server: &Server, name: &str) {
    let rs = json!({"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": name},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "c", "image": "busybox"}]}}}});
    let url = format!("{}/apis/apps/v1/namespaces/default/replicasets", server.url);
    let resp = server.http().post(url).json(&rs).send().await.unwrap();
    assert_eq!(resp.status().as_u16(), 201);
    let pods = format!("/api/v1/namespaces/default/pods?labelSelector=app%3D{name}");
    when(&format!("a pod of {name}"), 30, async || {
        let list = server.get_json(&pods).await;
        list["items"].as_array().is_some_and(|i| i.len() == 1)
    })
    .await;
}

/// A node's kind of client (cairn-kubeclient) that knows both replicas, the stopped one
/// first, lists through the live one and prefers it from then on.
async fn fails_over_from_b_to_a(stopped: &Server, live: &Server) {
    use cairn_kubeclient::failover::Servers;
    let admin = cairn_kubeclient::EmbeddedKubeconfig::read(&live.kubeconfig).unwrap();
    let authority = |s: &Server| -> http::uri::Authority {
        s.url.trim_start_matches("https://").parse().unwrap()
    };
    let servers = Servers::new(authority(stopped));
    servers.learn([authority(live)]);
    let certs = cairn_kubeclient::ClientCerts::new(&admin.cert_pem, &admin.key_pem).unwrap();
    let client = cairn_kubeclient::client_with(
        &stopped.url.parse().unwrap(),
        std::sync::Arc::clone(&servers),
        &admin.ca_pem,
        std::sync::Arc::new(certs),
    )
    .unwrap();
    let namespaces: kube::Api<k8s_openapi::api::core::v1::Namespace> = kube::Api::all(client);
    let listed = namespaces.list(&Default::default()).await.unwrap();
    assert!(listed
        .items
        .iter()
        .any(|n| n.metadata.name.as_deref() == Some("kube-system")));
    assert_eq!(
        servers.in_order()[0],
        authority(live),
        "the live replica goes first now"
    );
}

fn terminate(server: &mut Server) {
    let pid = server.child.id().to_string();
    assert!(std::process::Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .unwrap()
        .success());
    let status = server.child.wait().unwrap();
    assert!(status.success(), "cairn-control after SIGTERM: {status}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_replica_leads_a_cut_off_leader_stops_before_another_takes_over() {
    let etcd = common::start_etcd().await;
    let etcd_addr: SocketAddr = etcd
        .client_url()
        .trim_start_matches("http://")
        .parse()
        .unwrap();
    let partition = Partition::start(etcd_addr).await;
    let a_dir = tempfile::tempdir().unwrap();
    let b_dir = tempfile::tempdir().unwrap();
    let a_url = format!("http://{}", partition.addr);
    let a = Server::start_with(a_dir.path(), &on_etcd(&a_url));
    let a_id = identity(&a);
    when("a to lead both leases", 30, async || {
        leads_all(&a, &a_id).await
    })
    .await;
    share_identity(a_dir.path(), b_dir.path());
    let mut b_args = on_etcd(etcd.client_url());
    b_args.extend(["--advertise-address", "127.0.0.2"]);
    let mut b = Server::start_with(b_dir.path(), &b_args);
    let b_id = identity(&b);
    assert_ne!(a_id, b_id);
    when(
        "the kubernetes Endpoints to list both replicas",
        30,
        async || kubernetes_endpoints(&a).await.len() == 2,
    )
    .await;
    let both = kubernetes_endpoints(&a).await;
    assert!(both.contains(&"127.0.0.2".to_string()), "{both:?}");
    let a_ip = both.iter().find(|ip| *ip != "127.0.0.2").unwrap().clone();
    replicaset_gets_its_pod(&b, "before").await;
    assert!(leads_none(&b).await, "b campaigns while a leads");

    partition.cut();
    let (a_stopped, b_took) = tokio::join!(
        when("a to stop leading", 20, async || leads_none(&a).await),
        when("b to take both leases", 30, async || leads_all(&b, &b_id)
            .await),
    );
    assert!(
        a_stopped < b_took,
        "a stopped {:?} after b took over",
        a_stopped - b_took
    );
    eprintln!(
        "a stopped leading {:?} before b took over",
        b_took - a_stopped
    );
    replicaset_gets_its_pod(&b, "after").await;
    for lease in LEASES {
        assert_eq!(
            holder(&b, lease).await.unwrap()["leaseTransitions"],
            1,
            "{lease}"
        );
    }

    // Healed, a is a candidate again; b stopped with SIGTERM releases and a takes over.
    partition.heal();
    terminate(&mut b);
    when("a to lead again", 10, async || leads_all(&a, &a_id).await).await;
    // b removed its address as it stopped (a's own reconcile may put it back once, until
    // the next one sees b's lease gone).
    when("the kubernetes Endpoints to list only a", 30, async || {
        kubernetes_endpoints(&a).await == [a_ip.clone()]
    })
    .await;
    fails_over_from_b_to_a(&b, &a).await;
    let events = election_events(&a).await;
    for lease in LEASES {
        // (a's "stopped leading" was due while a could not reach etcd.)
        for what in [
            format!("{a_id} became leader"),
            format!("{b_id} became leader"),
        ] {
            assert!(
                events.contains(&format!("{lease} {what}")),
                "{lease} {what}: {events:?}"
            );
        }
    }
}

/// The pods of ReplicaSets owned by Deployment `name`: (pod names, owner uids).
async fn deployment_pods(server: &Server, app: &str) -> (Vec<String>, Vec<String>) {
    let pods = server
        .get_json(&format!(
            "/api/v1/namespaces/default/pods?labelSelector=app%3D{app}"
        ))
        .await;
    let items = pods["items"].as_array().cloned().unwrap_or_default();
    let names = items
        .iter()
        .map(|p| p["metadata"]["name"].as_str().unwrap().to_string())
        .collect();
    let owners = items
        .iter()
        .map(|p| {
            p["metadata"]["ownerReferences"][0]["uid"]
                .as_str()
                .unwrap_or("")
                .to_string()
        })
        .collect();
    (names, owners)
}

/// SIGKILL of the leading replica during a 200-replica scale-up (a 2 s lease): the other
/// replica takes every lease (the time it took is printed), the scale-up converges on one
/// ReplicaSet's 200 pods and no pod is made twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_leader_is_replaced_and_its_scale_up_converges() {
    let etcd = common::start_etcd().await;
    let timing = [
        "--leader-elect-lease-duration",
        "2s",
        "--leader-elect-renew-deadline",
        "1s",
        "--leader-elect-retry-period",
        "500ms",
    ];
    let mut args = vec!["--store", "etcd", "--etcd-servers", etcd.client_url()];
    args.extend(timing);
    let a_dir = tempfile::tempdir().unwrap();
    let b_dir = tempfile::tempdir().unwrap();
    let mut a = Server::start_with(a_dir.path(), &args);
    let a_id = identity(&a);
    when("a to lead", 30, async || leads_all(&a, &a_id).await).await;
    share_identity(a_dir.path(), b_dir.path());
    let b = Server::start_with(b_dir.path(), &args);
    let b_id = identity(&b);
    let deployment = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "big"},
        "spec": {"replicas": 200, "selector": {"matchLabels": {"app": "big"}},
            "template": {"metadata": {"labels": {"app": "big"}},
                "spec": {"containers": [{"name": "c", "image": "busybox"}]}}}});
    let url = format!("{}/apis/apps/v1/namespaces/default/deployments", b.url);
    let resp = b.http().post(url).json(&deployment).send().await.unwrap();
    assert_eq!(resp.status().as_u16(), 201);
    when("a's controllers to start the scale-up", 30, async || {
        !deployment_pods(&b, "big").await.0.is_empty()
    })
    .await;

    a.kill();
    let killed = std::time::Instant::now();
    let took = when("b to take every lease", 30, async || {
        leads_all(&b, &b_id).await
    })
    .await;
    eprintln!(
        "takeover after SIGKILL of the leader (2 s lease, 500 ms retry): {:?}",
        took - killed
    );
    when("the scale-up to converge on 200 pods", 60, async || {
        deployment_pods(&b, "big").await.0.len() >= 200
    })
    .await;
    let (names, owners) = deployment_pods(&b, "big").await;
    let unique: std::collections::BTreeSet<&String> = names.iter().collect();
    assert_eq!(
        (names.len(), unique.len()),
        (200, 200),
        "one pod per replica"
    );
    let owners: std::collections::BTreeSet<&String> = owners.iter().collect();
    assert_eq!(owners.len(), 1, "one ReplicaSet owns them all: {owners:?}");
}
