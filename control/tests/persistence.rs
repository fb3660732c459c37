//! Durability: restarts keep objects and resourceVersions, resumed watches get exactly
//! the missed events (or 410 once compacted), and SIGKILL never loses an acknowledged write.

// Test code: a failed setup step should fail the test loudly.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::Server;
use serde_json::{json, Value};

fn client(server: &Server) -> reqwest::Client {
    server
        .http_builder()
        .timeout(Duration::from_secs(20))
        .build()
        .unwrap()
}

async fn create_cm(
    c: &reqwest::Client,
    url: &str,
    name: &str,
) -> reqwest::Result<reqwest::Response> {
    c.post(format!("{url}/api/v1/namespaces/default/configmaps"))
        .json(&json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {"k": name}}))
        .send()
        .await
}

async fn watch_events(c: &reqwest::Client, url: &str, rv: &str) -> (u16, Vec<Value>) {
    let resp = c
        .get(format!(
            "{url}/api/v1/namespaces/default/configmaps?watch=true&resourceVersion={rv}&timeoutSeconds=2"
        ))
        .send()
        .await
        .unwrap();
    let code = resp.status().as_u16();
    let body = resp.text().await.unwrap();
    if code != 200 {
        return (code, vec![serde_json::from_str(&body).unwrap()]);
    }
    (
        code,
        body.lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect(),
    )
}

/// Names of the ConfigMaps in `default`.
async fn configmap_names(c: &reqwest::Client, url: &str) -> BTreeSet<String> {
    let list: Value = c
        .get(format!("{url}/api/v1/namespaces/default/configmaps"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["metadata"]["name"].as_str().unwrap().to_string())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restart_keeps_objects_and_resumes_watches() {
    let dir = tempfile::tempdir().unwrap();
    let c;
    let mut rvs = Vec::new();
    let mark;
    {
        let mut server = Server::start(dir.path());
        c = client(&server);
        for i in 0..5 {
            let resp = create_cm(&c, &server.url, &format!("cm-{i}"))
                .await
                .unwrap();
            assert_eq!(resp.status().as_u16(), 201);
            let v: Value = resp.json().await.unwrap();
            rvs.push(
                v["metadata"]["resourceVersion"]
                    .as_str()
                    .unwrap()
                    .to_string(),
            );
        }
        mark = rvs[1].clone();
        server.kill();
    }
    let server = Server::start(dir.path());
    for (i, rv) in rvs.iter().enumerate() {
        let v: Value = c
            .get(format!(
                "{}/api/v1/namespaces/default/configmaps/cm-{i}",
                server.url
            ))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert_eq!(
            v["metadata"]["resourceVersion"].as_str().unwrap(),
            rv,
            "cm-{i} kept its resourceVersion"
        );
        assert_eq!(v["data"]["k"], format!("cm-{i}"));
    }
    let (code, events) = watch_events(&c, &server.url, &mark).await;
    assert_eq!(code, 200);
    // The root CA publisher's kube-root-ca.crt is written at start: not one of ours.
    let names: Vec<(String, String)> = events
        .iter()
        .filter(|e| e["object"]["metadata"]["name"] != "kube-root-ca.crt")
        .map(|e| {
            (
                e["type"].as_str().unwrap().to_string(),
                e["object"]["metadata"]["name"]
                    .as_str()
                    .unwrap()
                    .to_string(),
            )
        })
        .collect();
    assert_eq!(
        names,
        vec![
            ("ADDED".to_string(), "cm-2".to_string()),
            ("ADDED".to_string(), "cm-3".to_string()),
            ("ADDED".to_string(), "cm-4".to_string())
        ],
        "exactly the missed events"
    );
    for e in &events {
        assert_eq!(e["object"]["kind"], "ConfigMap");
        assert_eq!(e["object"]["apiVersion"], "v1");
    }
    // A write after the restart continues the revision sequence.
    let v: Value = create_cm(&c, &server.url, "after")
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let after: i64 = v["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!(after > rvs[4].parse::<i64>().unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_from_compacted_revision_is_gone() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start_with(
        dir.path(),
        &[
            "--compaction-interval-seconds",
            "1",
            "--watch-history",
            "10",
        ],
    );
    let c = client(&server);
    let first: Value = create_cm(&c, &server.url, "old")
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let old_rv = first["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_string();
    for i in 0..30 {
        create_cm(&c, &server.url, &format!("filler-{i}"))
            .await
            .unwrap();
    }
    // Two compaction rounds: the second compacts to what the first saw.
    tokio::time::sleep(Duration::from_millis(2600)).await;
    let (code, body) = watch_events(&c, &server.url, &old_rv).await;
    assert_eq!(code, 410, "{body:?}");
    assert_eq!(body[0]["reason"], "Expired");
    assert_eq!(body[0]["kind"], "Status");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_loses_no_acknowledged_write() {
    let dir = tempfile::tempdir().unwrap();
    let acked: Arc<Mutex<BTreeSet<String>>> = Arc::default();
    // The CA outlives the restarts: one client for all of them.
    let mut client_once: Option<reqwest::Client> = None;
    for round in 0..6 {
        let mut server = Server::start(dir.path());
        let c = client_once.get_or_insert_with(|| client(&server)).clone();
        let url = server.url.clone();
        // Everything acknowledged so far survived the previous kill.
        let present = configmap_names(&c, &url).await;
        let missing: Vec<String> = acked
            .lock()
            .unwrap()
            .difference(&present)
            .cloned()
            .collect();
        assert!(
            missing.is_empty(),
            "round {round}: acknowledged but lost: {missing:?}"
        );

        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let mut writers = Vec::new();
        for w in 0..8 {
            let (c, url, acked, stop) = (c.clone(), url.clone(), acked.clone(), stop.clone());
            writers.push(tokio::spawn(async move {
                let mut i = 0;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    let name = format!("r{round}-w{w}-{i}");
                    i += 1;
                    match create_cm(&c, &url, &name).await {
                        Ok(resp) if resp.status().as_u16() == 201 => {
                            acked.lock().unwrap().insert(name);
                        }
                        _ => break,
                    }
                }
            }));
        }
        tokio::time::sleep(Duration::from_millis(300 + 150 * round)).await;
        server.kill();
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        for w in writers {
            w.await.unwrap();
        }
    }
    let server = Server::start(dir.path());
    let c = client(&server);
    let present = configmap_names(&c, &server.url).await;
    let acked = acked.lock().unwrap();
    assert!(
        acked.len() > 100,
        "the writers made progress ({} writes)",
        acked.len()
    );
    assert!(
        acked.is_subset(&present),
        "acknowledged writes lost after SIGKILL"
    );
    println!(
        "crash test: {} acknowledged writes across 6 kills, all present",
        acked.len()
    );
}

/// Every byte of the store's files (the database and its write-ahead log).
fn store_bytes(data: &std::path::Path) -> Vec<u8> {
    let mut all = Vec::new();
    for entry in std::fs::read_dir(data).unwrap().flatten() {
        if entry.file_name().to_string_lossy().starts_with("store.db") {
            all.extend(std::fs::read(entry.path()).unwrap());
        }
    }
    all
}

fn holds(haystack: &[u8], needle: &str) -> bool {
    haystack
        .windows(needle.len())
        .any(|w| w == needle.as_bytes())
}

fn secret_value(k: &common::Kubectl, name: &str) -> String {
    k.ok(&["get", "secret", name, "-o", "jsonpath={.data.v}"])
}

/// Secrets are encrypted at rest by default (a secretbox key made on first start), and
/// upstream's key rotation works: add a new key first, rewrite every Secret, drop the
/// old key; every Secret reads back at each step.
#[test]
fn secrets_are_encrypted_at_rest_and_keys_rotate() {
    use base64::Engine;
    let b64 = |s: &[u8]| base64::engine::general_purpose::STANDARD.encode(s);
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("control");
    let marker = "cairn-at-rest-marker-one";
    let config = data.join("encryption-config.yaml");
    {
        let server = Server::start(&data);
        let k = common::Kubectl::new(33, &server);
        k.ok(&[
            "create",
            "secret",
            "generic",
            "one",
            &format!("--from-literal=v={marker}"),
        ]);
        assert_eq!(secret_value(&k, "one"), b64(marker.as_bytes()));
    }
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&config).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600);
    let stored = store_bytes(&data);
    assert!(holds(&stored, "k8s:enc:secretbox:v1:key1:"));
    assert!(!holds(&stored, marker) && !holds(&stored, &b64(marker.as_bytes())));

    let text = std::fs::read_to_string(&config).unwrap();
    let key1 = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("secret: "))
        .unwrap()
        .to_string();
    let key2 = b64(&[7u8; 32]);
    let write_config = |keys: &[(&str, &str)]| {
        let keys: Vec<String> = keys
            .iter()
            .map(|(n, s)| format!("      - name: {n}\n        secret: {s}\n"))
            .collect();
        let doc = format!(
            "apiVersion: apiserver.config.k8s.io/v1\nkind: EncryptionConfiguration\nresources:\n- resources: [secrets]\n  providers:\n  - secretbox:\n      keys:\n{}  - identity: {{}}\n",
            keys.concat()
        );
        std::fs::write(&config, doc).unwrap();
    };
    write_config(&[("key2", &key2), ("key1", &key1)]);
    {
        let server = Server::start(&data);
        let k = common::Kubectl::new(33, &server);
        k.ok(&[
            "create",
            "secret",
            "generic",
            "two",
            "--from-literal=v=second",
        ]);
        assert_eq!(secret_value(&k, "one"), b64(marker.as_bytes()));
        assert_eq!(secret_value(&k, "two"), b64(b"second"));
        assert!(holds(&store_bytes(&data), "k8s:enc:secretbox:v1:key2:"));
        // Rewrite every Secret under the new first key.
        let all = k.ok(&["get", "secrets", "-A", "-o", "json"]);
        k.ok_stdin(&["replace", "-f", "-"], &all);
    }
    write_config(&[("key2", &key2)]);
    {
        let server = Server::start(&data);
        let k = common::Kubectl::new(33, &server);
        assert_eq!(secret_value(&k, "one"), b64(marker.as_bytes()));
        assert_eq!(secret_value(&k, "two"), b64(b"second"));
    }
    // A lost configuration is not replaced by a new key that could read nothing.
    std::fs::remove_file(&config).unwrap();
    let out = std::process::Command::new(common::BIN)
        .args(["serve", "--data-dir"])
        .arg(&data)
        .args(["--bind", "127.0.0.1:0"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "started without its key: {stderr}");
    assert!(
        stderr.contains(&format!(
            "{}: missing, but the store holds encrypted Secrets",
            config.display()
        )),
        "{stderr}"
    );
    assert!(!config.exists(), "no new key may be written");
}
