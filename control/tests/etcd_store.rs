//! cairn-control on etcd (`--store etcd`; Debian's etcd-server, private, on loopback).
//!
//! Objects live in etcd under the store's keys and their resourceVersions are etcd's
//! revisions; a restart keeps objects and resourceVersions, a watch resumed from before
//! the restart gets exactly the missed events, and a compacted revision is 410 Gone. A
//! second replica on the same etcd (the first one's CA and encryption key, no scheduler or
//! controllers) serves the first one's objects, and a watch on it from before it started
//! (read from etcd, past its short watch history) sees the first one's writes.

// Test code: a failed setup step should fail the test loudly.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use cairn_store::Backend;
use cairn_store_etcd::testing::EtcdServer;
use common::{create_cm, share_identity, start_etcd, Server};
use futures::StreamExt;
use serde_json::{json, Value};

fn on_etcd<'a>(etcd: &'a EtcdServer, extra: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec!["--store", "etcd", "--etcd-servers", etcd.client_url()];
    args.extend(extra);
    args
}

async fn get_cm(server: &Server, name: &str) -> Value {
    let url = format!("{}/api/v1/namespaces/default/configmaps/{name}", server.url);
    let resp = server.http().get(url).send().await.unwrap();
    assert_eq!(resp.status().as_u16(), 200, "get {name}");
    resp.json().await.unwrap()
}

fn rv(object: &Value) -> String {
    object["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_string()
}

/// The ConfigMaps a watch from `from` reports (status, names in order), ours only.
async fn watched(server: &Server, from: &str) -> (u16, Vec<String>) {
    let resp = server
        .http()
        .get(format!(
            "{}/api/v1/namespaces/default/configmaps?watch=true&resourceVersion={from}&timeoutSeconds=2",
            server.url
        ))
        .send()
        .await
        .unwrap();
    let code = resp.status().as_u16();
    let body = resp.text().await.unwrap();
    let names = body
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter_map(|e| e["object"]["metadata"]["name"].as_str().map(String::from))
        .filter(|n| n.starts_with("cm-"))
        .collect();
    (code, names)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn control_on_etcd_keeps_objects_resumes_watches_and_shares_them_with_a_replica() {
    let etcd = start_etcd().await;
    let a_dir = tempfile::tempdir().unwrap();
    let mut a = Server::start_with(a_dir.path(), &on_etcd(&etcd, &[]));
    let mut rvs = Vec::new();
    for i in 0..4 {
        rvs.push(rv(&create_cm(&a, &format!("cm-{i}")).await));
    }
    // In etcd, under the store's key, at the revision the API reported.
    let store = cairn_store_etcd::EtcdBackend::connect(&etcd.config(""))
        .await
        .unwrap();
    let kv = store
        .get("/registry/core/configmaps/default/cm-3")
        .await
        .unwrap()
        .expect("cm-3 in etcd");
    assert_eq!(kv.mod_revision.to_string(), rvs[3]);
    assert!(
        !a_dir.path().join("store.db").exists(),
        "no SQLite store beside etcd"
    );

    a.kill();
    let a = Server::start_with(a_dir.path(), &on_etcd(&etcd, &[]));
    let got = get_cm(&a, "cm-2").await;
    assert_eq!(rv(&got), rvs[2], "cm-2 kept its resourceVersion");
    let (code, names) = watched(&a, &rvs[1]).await;
    assert_eq!(
        (code, names),
        (200, vec!["cm-2".to_string(), "cm-3".to_string()])
    );

    let b_dir = tempfile::tempdir().unwrap();
    share_identity(a_dir.path(), b_dir.path());
    let b = Server::start_with(
        b_dir.path(),
        // A short watch history: b's watches from before it started read etcd itself.
        &on_etcd(
            &etcd,
            &[
                "--scheduler=false",
                "--controllers=",
                "--watch-history",
                "2",
            ],
        ),
    );
    let mark = rvs[3].clone();
    let later = rv(&create_cm(&a, "cm-4").await);
    let (code, names) = watched(&b, &mark).await;
    assert_eq!((code, names), (200, vec!["cm-4".to_string()]), "replica b");
    let got = get_cm(&b, "cm-4").await;
    assert_eq!(rv(&got), later);

    // Compacted history is 410 Gone (older than b's watch cache: etcd answers).
    store.compact(later.parse().unwrap()).await.unwrap();
    let (code, _) = watched(&b, &rvs[0]).await;
    assert_eq!(code, 410);
}

async fn create_service(server: &Server, name: &str, cluster_ip: Option<&str>) -> (u16, Value) {
    create_service_with(&server.http(), &server.url, name, cluster_ip).await
}

async fn create_service_with(
    http: &reqwest::Client,
    url: &str,
    name: &str,
    cluster_ip: Option<&str>,
) -> (u16, Value) {
    let mut spec = json!({"type": "NodePort", "ports": [{"port": 80}]});
    if let Some(ip) = cluster_ip {
        spec["clusterIP"] = json!(ip);
    }
    let resp = http
        .post(format!("{url}/api/v1/namespaces/default/services"))
        .json(&json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": name}, "spec": spec}))
        .send()
        .await
        .unwrap();
    (resp.status().as_u16(), resp.json().await.unwrap())
}

/// Two replicas creating 1,000 Services at once on one etcd never hand out a ClusterIP or
/// a NodePort twice; a requested address another replica's Service holds is refused as
/// upstream refuses it, and is granted once that Service is deleted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicas_never_allocate_the_same_cluster_ip_or_node_port() {
    let etcd = start_etcd().await;
    let ranges = [
        "--service-cluster-ip-range",
        "10.96.0.0/21",
        "--service-node-port-range",
        "30000-31999",
    ];
    let a_dir = tempfile::tempdir().unwrap();
    let a = Server::start_with(a_dir.path(), &on_etcd(&etcd, &ranges));
    let b_dir = tempfile::tempdir().unwrap();
    share_identity(a_dir.path(), b_dir.path());
    let b = Server::start_with(b_dir.path(), &on_etcd(&etcd, &ranges));
    // 1,000 creates, alternating between the replicas, 64 at a time.
    let clients = [(a.http(), a.url.clone()), (b.http(), b.url.clone())];
    let creates = (0..1000).map(|i| {
        let (http, url) = &clients[i % 2];
        let name = format!("svc-{i}");
        async move { create_service_with(http, url, &name, None).await }
    });
    let created: Vec<(u16, Value)> = futures::stream::iter(creates)
        .buffer_unordered(64)
        .collect()
        .await;
    let created_first = created
        .iter()
        .find(|(_, svc)| svc["metadata"]["name"] == "svc-0")
        .cloned()
        .unwrap();
    let mut ips = std::collections::BTreeSet::new();
    let mut ports = std::collections::BTreeSet::new();
    for (code, svc) in &created {
        assert_eq!(*code, 201, "{svc}");
        assert!(
            ips.insert(svc["spec"]["clusterIP"].as_str().unwrap().to_string()),
            "{svc}"
        );
        assert!(
            ports.insert(svc["spec"]["ports"][0]["nodePort"].as_u64().unwrap()),
            "{svc}"
        );
    }

    // svc-0 (made by a) holds its address; b refuses it as upstream does.
    let held = created_first.1["spec"]["clusterIP"]
        .as_str()
        .unwrap()
        .to_string();
    let (code, status) = create_service(&b, "wants-held", Some(&held)).await;
    assert_eq!(code, 422, "{status}");
    let message = status["message"].as_str().unwrap();
    assert!(
        message.contains("provided IP is already allocated"),
        "{message}"
    );
    let resp = a
        .http()
        .delete(format!(
            "{}/api/v1/namespaces/default/services/svc-0",
            a.url
        ))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 200);
    let (code, svc) = create_service(&b, "wants-held", Some(&held)).await;
    assert_eq!(code, 201, "released by a, granted by b: {svc}");
}

/// Creates ConfigMaps `w-0`, `w-1`, … one after another until told to stop, counting
/// failures in `failed`; the names whose create was acknowledged (201), in order.
fn counter_writer(
    server: &Server,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    failed: std::sync::Arc<std::sync::atomic::AtomicUsize>,
) -> (
    std::sync::Arc<std::sync::Mutex<Vec<String>>>,
    tokio::task::JoinHandle<()>,
) {
    let acked = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let (http, url, list) = (server.http(), server.url.clone(), acked.clone());
    let task = tokio::spawn(async move {
        let mut i = 0;
        while !stop.load(std::sync::atomic::Ordering::SeqCst) {
            let name = format!("w-{i}");
            i += 1;
            let body = json!({"metadata": {"name": name}, "data": {"i": i.to_string()}});
            let resp = http
                .post(format!("{url}/api/v1/namespaces/default/configmaps"))
                .json(&body)
                .send()
                .await;
            if resp.is_ok_and(|r| r.status().as_u16() == 201) {
                list.lock().unwrap().push(name);
            } else {
                failed.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            }
        }
    });
    (acked, task)
}

/// Waits (up to `secs`) until the writer has `more` acknowledged creates beyond `from`.
async fn acked_beyond(
    acked: &std::sync::Mutex<Vec<String>>,
    from: usize,
    more: usize,
    secs: u64,
) -> usize {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(secs);
    loop {
        let n = acked.lock().unwrap().len();
        if n >= from + more {
            return n;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "only {} acknowledged creates after {from} within {secs}s",
            n - from
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

/// A 3-member etcd: with one member killed everything keeps working; with two, a write
/// answers a 5xx Status before the request timeout and lists from the watch cache keep
/// answering; once the members return writes go on, and every acknowledged create is
/// there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn etcd_member_loss_keeps_serving_and_quorum_loss_fails_writes_promptly() {
    let mut etcd = tokio::task::spawn_blocking(|| EtcdServer::start_cluster(3))
        .await
        .unwrap()
        .unwrap();
    let urls = etcd.client_urls().join(",");
    let dir = tempfile::tempdir().unwrap();
    let args = [
        "--store",
        "etcd",
        "--etcd-servers",
        &urls,
        "--request-timeout",
        "20s",
    ];
    let server = Server::start_with(&dir.path().join("a"), &args);
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let failed = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let (acked, writer) = counter_writer(&server, stop.clone(), failed.clone());
    let n = acked_beyond(&acked, 0, 20, 30).await;
    let failed_before = failed.load(std::sync::atomic::Ordering::SeqCst);

    let killed = std::time::Instant::now();
    etcd.kill(0);
    let n = acked_beyond(&acked, n, 50, 30).await;
    println!(
        "one member killed: 50 creates acknowledged in {:?}, {} failed ({} before the kill)",
        killed.elapsed(),
        failed.load(std::sync::atomic::Ordering::SeqCst) - failed_before,
        failed_before
    );

    etcd.kill(1);
    let started = std::time::Instant::now();
    let resp = server
        .http()
        .post(format!(
            "{}/api/v1/namespaces/default/configmaps",
            server.url
        ))
        .json(&json!({"metadata": {"name": "no-quorum"}}))
        .send()
        .await
        .unwrap();
    let took = started.elapsed();
    let code = resp.status().as_u16();
    let status: Value = resp.json().await.unwrap();
    println!(
        "write without quorum: {code} after {took:?}: {}",
        status["message"]
    );
    assert!((500..600).contains(&code), "{code} {status}");
    assert_eq!(status["kind"], "Status", "{status}");
    assert!(took < std::time::Duration::from_secs(22), "{took:?}");
    let cached = server
        .get_json("/api/v1/namespaces/default/configmaps?resourceVersion=0")
        .await;
    let names: Vec<&str> = cached["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|cm| cm["metadata"]["name"].as_str())
        .collect();
    assert!(names.contains(&"w-0"), "{cached}");

    tokio::task::block_in_place(|| {
        etcd.spawn(0).unwrap();
        etcd.spawn(1).unwrap();
        etcd.wait_healthy(0).unwrap();
        etcd.wait_healthy(1).unwrap();
    });
    let now = acked.lock().unwrap().len();
    acked_beyond(&acked, now.max(n), 20, 60).await;
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    writer.await.unwrap();

    let stored = server
        .get_json("/api/v1/namespaces/default/configmaps")
        .await;
    let stored: std::collections::HashSet<&str> = stored["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|cm| cm["metadata"]["name"].as_str())
        .collect();
    let acked = acked.lock().unwrap();
    let lost: Vec<&String> = acked
        .iter()
        .filter(|n| !stored.contains(n.as_str()))
        .collect();
    println!(
        "{} creates acknowledged, none lost: {}",
        acked.len(),
        lost.is_empty()
    );
    assert!(lost.is_empty(), "acknowledged but gone: {lost:?}");
}

/// A claim no Service holds (as a replica that crashed between claim and write leaves
/// it) refuses its value until the repair has seen it leaked three passes in a row, then
/// goes; the claim of a live Service stays.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leaked_allocation_claims_are_repaired_and_held_ones_kept() {
    let etcd = start_etcd().await;
    let dir = tempfile::tempdir().unwrap();
    let args = on_etcd(&etcd, &["--allocation-repair-interval-seconds", "1"]);
    let server = Server::start_with(&dir.path().join("a"), &args);
    let (code, kept) = create_service(&server, "kept", None).await;
    assert_eq!(code, 201, "{kept}");
    let kept_ip = kept["spec"]["clusterIP"].as_str().unwrap().to_string();

    let mut raw = etcd_client::Client::connect([etcd.client_url()], None)
        .await
        .unwrap();
    let ghost = "/cairn.io/allocations/clusterips/10.96.0.77";
    raw.put(ghost, r#"{"service":"default/ghost"}"#, None)
        .await
        .unwrap();
    let (code, status) = create_service(&server, "wants-leaked", Some("10.96.0.77")).await;
    assert_eq!(code, 422, "{status}");

    let leaked_at = std::time::Instant::now();
    let created = loop {
        let (code, svc) = create_service(&server, "wants-leaked", Some("10.96.0.77")).await;
        if code == 201 {
            break svc;
        }
        assert_eq!(code, 422, "{svc}");
        assert!(
            leaked_at.elapsed() < std::time::Duration::from_secs(30),
            "never repaired"
        );
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    };
    println!("leaked claim released after {:?}", leaked_at.elapsed());
    assert_eq!(created["spec"]["clusterIP"], "10.96.0.77");
    let held = raw.get(ghost, None).await.unwrap();
    let owner = String::from_utf8_lossy(held.kvs()[0].value()).to_string();
    assert!(owner.contains("default/wants-leaked"), "{owner}");
    let kept_claim = format!("/cairn.io/allocations/clusterips/{kept_ip}");
    let kept_claim = raw.get(kept_claim.as_str(), None).await.unwrap();
    assert_eq!(kept_claim.kvs().len(), 1, "a held claim stays");
}
