//! `cairn-control snapshot save|restore`.
//!
//! On SQLite a snapshot is saved while the server runs. A restore is refused while the
//! server runs. After a restore the objects are as saved, a watch from a resourceVersion
//! after the snapshot is 410 Gone (clients relist) and new resourceVersions are higher
//! than any before. On etcd the snapshot is etcd's own, which `etcdctl` reads.
//! `migrate --to etcd://` moves a SQLite cluster into etcd with the same guarantees.

// Test code: a failed setup step should fail the test loudly.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::path::Path;
use std::process::{Command, Output};

use common::Server;
use serde_json::Value;

fn cli(args: &[&str], paths: &[&Path]) -> Output {
    Command::new(common::BIN)
        .args(args)
        .args(paths)
        .output()
        .unwrap()
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// Creates ConfigMap `name`; its resourceVersion.
async fn create_cm(server: &Server, name: &str) -> u64 {
    let cm = common::create_cm(server, name).await;
    cm["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap()
}

async fn status_of(server: &Server, path: &str) -> u16 {
    let resp = server
        .http()
        .get(format!("{}{path}", server.url))
        .send()
        .await
        .unwrap();
    resp.status().as_u16()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_snapshots_restore_with_revisions_moved_on() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let file = dir.path().join("snap.db");
    let mut server = Server::start(&data);
    create_cm(&server, "cm-1").await;
    let save = cli(&["snapshot", "save", "--data-dir"], &[&data, &file]);
    assert!(save.status.success(), "{}", text(&save));
    assert!(
        text(&save).contains("saved the store at revision"),
        "{}",
        text(&save)
    );
    let after = create_cm(&server, "cm-2").await;

    let refused = cli(&["snapshot", "restore", "--data-dir"], &[&data, &file]);
    assert_eq!(refused.status.code(), Some(1));
    assert!(
        text(&refused).contains("in use by another process"),
        "{}",
        text(&refused)
    );
    server.kill();
    let junk = dir.path().join("junk");
    std::fs::write(&junk, "not a store").unwrap();
    let refused = cli(&["snapshot", "restore", "--data-dir"], &[&data, &junk]);
    assert_eq!(refused.status.code(), Some(1));
    assert!(
        text(&refused).contains("not a SQLite database"),
        "{}",
        text(&refused)
    );
    let restore = cli(&["snapshot", "restore", "--data-dir"], &[&data, &file]);
    assert!(restore.status.success(), "{}", text(&restore));

    let server = Server::start(&data);
    let cm = "/api/v1/namespaces/default/configmaps";
    assert_eq!(status_of(&server, &format!("{cm}/cm-1")).await, 200);
    assert_eq!(
        status_of(&server, &format!("{cm}/cm-2")).await,
        404,
        "made after the snapshot"
    );
    let watch = format!("{cm}?watch=true&resourceVersion={after}&timeoutSeconds=1");
    assert_eq!(status_of(&server, &watch).await, 410);
    let next = create_cm(&server, "cm-3").await;
    assert!(next > 1_000_000_000 + after, "{next}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn etcd_snapshots_are_etcds_own() {
    let etcd = common::start_etcd().await;
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let args = ["--store", "etcd", "--etcd-servers", etcd.client_url()];
    let server = Server::start_with(&data, &args);
    create_cm(&server, "cm-1").await;
    let file = dir.path().join("etcd.snap");
    let mut save_args = vec!["snapshot", "save"];
    save_args.extend(args);
    let save = cli(&save_args, &[&file]);
    assert!(save.status.success(), "{}", text(&save));
    let status = Command::new("etcdctl")
        .args(["snapshot", "status", "-w", "json"])
        .arg(&file)
        .output()
        .unwrap();
    assert!(status.status.success(), "etcdctl: {}", text(&status));
    let status: Value = serde_json::from_slice(&status.stdout).unwrap();
    assert!(status["revision"].as_i64().unwrap() > 1, "{status}");
}

/// Every object of `path` (a list URL) by name, without its resourceVersion; and the
/// highest resourceVersion among them.
async fn objects_of(server: &Server, path: &str) -> (Vec<(String, Value)>, u64) {
    let list = server.get_json(path).await;
    let mut max = 0;
    let mut objects = Vec::new();
    for item in list["items"].as_array().unwrap() {
        let mut item = item.clone();
        let meta = item["metadata"].as_object_mut().unwrap();
        let rv: u64 = meta
            .remove("resourceVersion")
            .unwrap()
            .as_str()
            .unwrap()
            .parse()
            .unwrap();
        max = max.max(rv);
        let name = meta["name"].as_str().unwrap().to_string();
        objects.push((name, item));
    }
    objects.sort_by(|a, b| a.0.cmp(&b.0));
    (objects, max)
}

const MIGRATED: [&str; 3] = [
    "/api/v1/namespaces/mig/configmaps",
    "/api/v1/namespaces/mig/secrets",
    "/api/v1/namespaces/mig/services",
];

async fn make_objects(server: &Server) {
    let http = server.http();
    let post = |path: &str, body: Value| {
        let request = http.post(format!("{}{path}", server.url)).json(&body);
        async move {
            let resp = request.send().await.unwrap();
            assert_eq!(
                resp.status().as_u16(),
                201,
                "{}",
                resp.text().await.unwrap()
            );
        }
    };
    post(
        "/api/v1/namespaces",
        serde_json::json!({"metadata": {"name": "mig"}}),
    )
    .await;
    for i in 0..150 {
        let cm = serde_json::json!({"metadata": {"name": format!("cm-{i}"), "labels": {"i": i.to_string()}}, "data": {"k": "v".repeat(i * 10)}});
        post(MIGRATED[0], cm).await;
    }
    let secret =
        serde_json::json!({"metadata": {"name": "s"}, "stringData": {"password": "hunter2"}});
    post(MIGRATED[1], secret).await;
    let svc = serde_json::json!({"metadata": {"name": "web"}, "spec": {"type": "NodePort", "selector": {"app": "web"}, "ports": [{"port": 80}]}});
    post(MIGRATED[2], svc).await;
}

/// `migrate --to etcd://` moves a SQLite cluster to etcd: refused while serving, every
/// object equal afterwards, resourceVersions only higher, old watches 410, a second
/// migration into the same etcd refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_migrates_to_etcd_with_objects_equal_and_versions_monotonic() {
    let etcd = common::start_etcd().await;
    let to = etcd.client_url().replace("http://", "etcd://");
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let mut server = Server::start(&data);
    make_objects(&server).await;
    let mut before = Vec::new();
    let mut newest = 0;
    for path in MIGRATED {
        let (objects, max) = objects_of(&server, path).await;
        before.push(objects);
        newest = newest.max(max);
    }
    let migrate = |data: &Path| cli(&["migrate", "--to", &to, "--data-dir"], &[data]);
    let refused = migrate(&data);
    assert_eq!(refused.status.code(), Some(1));
    assert!(
        text(&refused).contains("must be stopped"),
        "{}",
        text(&refused)
    );
    server.kill();

    let done = migrate(&data);
    assert!(done.status.success(), "{}", text(&done));
    assert!(text(&done).contains("migrated "), "{}", text(&done));
    let again = migrate(&data);
    assert_eq!(again.status.code(), Some(1));
    assert!(
        text(&again).contains("etcd already holds"),
        "{}",
        text(&again)
    );

    let args = ["--store", "etcd", "--etcd-servers", etcd.client_url()];
    let server = Server::start_with(&data, &args);
    for (path, before) in MIGRATED.iter().zip(before) {
        let (after, _) = objects_of(&server, path).await;
        assert_eq!(after, before, "{path}");
        let list = server.get_json(path).await;
        for item in list["items"].as_array().unwrap() {
            let rv: u64 = item["metadata"]["resourceVersion"]
                .as_str()
                .unwrap()
                .parse()
                .unwrap();
            assert!(rv > newest, "{path}: {rv} not above {newest}");
        }
    }
    let secret = server.get_json("/api/v1/namespaces/mig/secrets/s").await;
    assert_eq!(secret["data"]["password"], "aHVudGVyMg==", "{secret}");
    let cm = MIGRATED[0];
    let watch = format!("{cm}?watch=true&resourceVersion={newest}&timeoutSeconds=1");
    assert_eq!(status_of(&server, &watch).await, 410);
    let next = create_cm(&server, "after-migration").await;
    assert!(next > newest, "{next} not above {newest}");
}
