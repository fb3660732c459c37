//! The audit log (`--audit-policy-file`, `--audit-log-*`): a scripted kubectl run is
//! recorded once per mutating request with its user, verb, object and code; a `None`
//! rule silences what it names; the log rotates by size and keeps its backups.

// Test code: a failed setup step should fail the test loudly.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::collections::BTreeSet;
use std::path::Path;

use common::{wait_for, Kubectl, Server};
use serde_json::Value;

const POLICY: &str = r#"
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: None
  resources: [{group: "", resources: [configmaps]}]
- level: RequestResponse
  namespaces: [bulk]
- level: Metadata
"#;

fn events(path: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    // The writer may be mid-line: only whole lines count.
    text.lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

const MUTATING: &[&str] = &["create", "update", "patch", "delete", "deletecollection"];

/// `(verb, resource, namespace, name, code)` of `user`'s mutating requests in order.
fn mutations(events: &[Value], user: &str) -> Vec<(String, String, String, String, u64)> {
    let s = |v: &Value| v.as_str().unwrap_or_default().to_string();
    events
        .iter()
        .filter(|e| e["user"]["username"] == user)
        .filter(|e| MUTATING.contains(&e["verb"].as_str().unwrap_or_default()))
        .map(|e| {
            let r = &e["objectRef"];
            let code = e["responseStatus"]["code"].as_u64().unwrap_or_default();
            (
                s(&e["verb"]),
                s(&r["resource"]),
                s(&r["namespace"]),
                s(&r["name"]),
                code,
            )
        })
        .collect()
}

fn kubectl_run(k: &Kubectl) {
    k.ok(&["create", "namespace", "audited"]);
    let ns = ["-n", "audited"];
    let run = |args: &[&str]| k.ok(&[args, &ns[..]].concat());
    run(&["create", "configmap", "quiet", "--from-literal=a=b"]);
    run(&["create", "secret", "generic", "s1", "--from-literal=a=b"]);
    run(&["label", "secret", "s1", "tier=one"]);
    run(&["create", "serviceaccount", "robot"]);
    run(&["delete", "secret", "s1"]);
    let again = k.fails(&[&["create", "serviceaccount", "robot"], &ns[..]].concat());
    assert!(again.contains("already exists"), "{again}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn audit_log_records_each_mutation_once_and_rotates() {
    let dir = tempfile::tempdir().unwrap();
    let policy = dir.path().join("policy.yaml");
    std::fs::write(&policy, POLICY).unwrap();
    let log = dir.path().join("audit/audit.log");
    let server = Server::start_with(
        &dir.path().join("data"),
        &[
            "--audit-policy-file",
            policy.to_str().unwrap(),
            "--audit-log-path",
            log.to_str().unwrap(),
            "--audit-log-maxsize",
            "1",
            "--audit-log-maxbackup",
            "2",
        ],
    );
    let k = Kubectl::new(33, &server);
    let me = k.ok(&[
        "auth",
        "whoami",
        "-o",
        "jsonpath={.status.userInfo.username}",
    ]);
    kubectl_run(&k);
    let o = |s: &str| s.to_string();
    let want = vec![
        (o("create"), o("selfsubjectreviews"), o(""), o(""), 201),
        (o("create"), o("namespaces"), o(""), o("audited"), 201),
        (o("create"), o("secrets"), o("audited"), o("s1"), 201),
        (o("patch"), o("secrets"), o("audited"), o("s1"), 200),
        (
            o("create"),
            o("serviceaccounts"),
            o("audited"),
            o("robot"),
            201,
        ),
        (o("delete"), o("secrets"), o("audited"), o("s1"), 200),
        (
            o("create"),
            o("serviceaccounts"),
            o("audited"),
            o("robot"),
            409,
        ),
    ];
    let seen = wait_for("the run's mutations in the audit log", 15, || {
        let got = mutations(&events(&log), &me);
        (got.len() >= want.len()).then_some(got)
    });
    assert_eq!(
        seen, want,
        "each mutation once, in order; configmaps silenced"
    );
    let all = events(&log);
    let ids: BTreeSet<String> = all.iter().map(|e| e["auditID"].to_string()).collect();
    assert_eq!(
        ids.len(),
        all.len(),
        "RequestReceived is omitted: one event each"
    );
    assert!(all
        .iter()
        .all(|e| e["objectRef"]["resource"] != "configmaps"));
    let patch = all.iter().find(|e| e["verb"] == "patch").unwrap();
    assert_eq!(patch["stage"], "ResponseComplete");
    assert_eq!(patch["level"], "Metadata");
    assert_eq!(
        patch["annotations"]["authorization.k8s.io/decision"],
        "allow"
    );
    assert!(patch.get("requestObject").is_none());
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&log).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600);
    audit_id_is_echoed(&server, &log).await;
    rotates_by_size(&k, &log);
}

/// A client's `Audit-ID` names its event and comes back on the response.
async fn audit_id_is_echoed(server: &Server, log: &Path) {
    let response = server
        .http()
        .get(format!(
            "{}/api/v1/namespaces/audited/serviceaccounts",
            server.url
        ))
        .header("Audit-ID", "chosen-by-the-client")
        .send()
        .await
        .unwrap();
    assert_eq!(response.headers()["audit-id"], "chosen-by-the-client");
    let event = wait_for("the list's event", 15, || {
        events(log)
            .into_iter()
            .find(|e| e["auditID"] == "chosen-by-the-client")
    });
    assert_eq!(event["verb"], "list");
    assert_eq!(event["responseStatus"]["code"], 200);
}

/// Namespace `bulk` is audited at RequestResponse: four ~700 kB Secrets put two
/// events past 1 MB each, so the log rotates and keeps two backups.
fn rotates_by_size(k: &Kubectl, log: &Path) {
    k.ok(&["create", "namespace", "bulk"]);
    let value = log.with_file_name("value");
    std::fs::write(&value, "x".repeat(500_000)).unwrap();
    for i in 0..4 {
        let name = format!("big-{i}");
        k.ok(&[
            "create",
            "secret",
            "generic",
            &name,
            "-n",
            "bulk",
            &format!("--from-file=v={}", value.display()),
        ]);
    }
    let dir = log.parent().unwrap();
    let backups = || {
        std::fs::read_dir(dir)
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with("audit-") && n.ends_with(".log"))
            .count()
    };
    // Any later event (a Lease renewal) may rotate big-3's event into a backup: it is
    // looked for in the log and its backups.
    let logged = || {
        let mut all = events(log);
        for entry in std::fs::read_dir(dir).unwrap().flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if name.starts_with("audit-") && name.ends_with(".log") {
                all.extend(events(&entry.path()));
            }
        }
        all
    };
    let rotated = wait_for("rotation", 15, || {
        let created = logged()
            .iter()
            .any(|e| e["objectRef"]["name"] == "big-3" && e["verb"] == "create");
        (created && backups() > 0).then(backups)
    });
    assert_eq!(rotated, 2, "--audit-log-maxbackup 2 keeps two");
    let last = logged()
        .into_iter()
        .find(|e| e["objectRef"]["name"] == "big-3")
        .unwrap();
    assert_eq!(last["level"], "RequestResponse");
    assert_eq!(last["responseObject"]["metadata"]["name"], "big-3");
    // kubectl 1.33 sent protobuf; the event holds it as JSON.
    assert_eq!(last["requestObject"]["metadata"]["name"], "big-3");
    assert!(last["requestObject"]["data"]["v"].as_str().is_some());
}

/// A create of ConfigMap `slow` whose body stops half-way until the sender fires.
fn slow_create(
    writer: &reqwest::Client,
    url: &str,
) -> (
    tokio::task::JoinHandle<reqwest::Result<reqwest::Response>>,
    tokio::sync::oneshot::Sender<()>,
) {
    let (rest_tx, rest_rx) = tokio::sync::oneshot::channel::<()>();
    let head = futures::stream::once(async {
        Ok::<_, std::io::Error>(bytes::Bytes::from_static(
            br#"{"metadata":{"name":"slow"},"#,
        ))
    });
    let tail = futures::stream::once(async move {
        let _ = rest_rx.await;
        Ok(bytes::Bytes::from_static(br#""data":{"k":"v"}}"#))
    });
    let slow = tokio::spawn(
        writer
            .post(url)
            .bearer_auth("writer-token")
            .header("content-type", "application/json")
            .body(reqwest::Body::wrap_stream(futures::StreamExt::chain(
                head, tail,
            )))
            .send(),
    );
    (slow, rest_tx)
}

/// At `Request` level a create's body is read under the in-flight limit, as upstream
/// reads it in the handler: a client still sending its body holds the one mutating
/// slot, another create gets 429, and that 429 is recorded without a request object.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_over_the_inflight_limit_is_refused_before_its_body_is_read() {
    let dir = tempfile::tempdir().unwrap();
    let policy = dir.path().join("policy.yaml");
    std::fs::write(&policy, "apiVersion: audit.k8s.io/v1\nkind: Policy\nomitStages: [RequestReceived]\nrules:\n- level: Request\n").unwrap();
    let tokens = dir.path().join("tokens.csv");
    std::fs::write(&tokens, "writer-token,writer,1001,writers\n").unwrap();
    let log = dir.path().join("audit.log");
    let server = Server::start_with(
        &dir.path().join("data"),
        &[
            "--scheduler=false",
            "--controllers=",
            "--token-auth-file",
            tokens.to_str().unwrap(),
            "--max-mutating-requests-inflight",
            "1",
            "--audit-policy-file",
            policy.to_str().unwrap(),
            "--audit-log-path",
            log.to_str().unwrap(),
        ],
    );
    // The admin is exempt from the limit: the writer is an ordinary user with `edit`.
    let k = Kubectl::new(33, &server);
    k.ok(&[
        "create",
        "rolebinding",
        "writer",
        "--clusterrole=edit",
        "--user=writer",
        "-n",
        "default",
    ]);
    let mut creds =
        cairn_testsupport::api_client::Credentials::from_kubeconfig(&server.kubeconfig).unwrap();
    creds.client_cert_pem = None;
    creds.client_key_pem = None;
    let writer = creds.reqwest().unwrap();
    let url = format!("{}/api/v1/namespaces/default/configmaps", server.url);

    // Until the slow create holds the slot, the others go through. The slow one can
    // lose the race for the slot to a quick one and be refused itself: then it starts
    // again.
    let (mut slow, mut rest_tx) = slow_create(&writer, &url);
    let mut attempt = 0;
    loop {
        attempt += 1;
        if slow.is_finished() {
            let refused = slow.await.unwrap().unwrap().status().as_u16();
            assert_eq!(refused, 429, "the slow create ended before its body did");
            (slow, rest_tx) = slow_create(&writer, &url);
        }
        let name = format!("quick-{attempt}");
        let body = serde_json::json!({"metadata": {"name": name}, "data": {"k": "v"}});
        let code = writer
            .post(&url)
            .bearer_auth("writer-token")
            .json(&body)
            .send()
            .await
            .unwrap()
            .status()
            .as_u16();
        if code == 429 && !slow.is_finished() {
            break;
        }
        assert!(code == 201 || code == 429, "{name}: {code}");
        assert!(
            attempt < 300,
            "no 429 while a create's body was still arriving"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    rest_tx.send(()).unwrap();
    let done = slow.await.unwrap().unwrap();
    assert_eq!(done.status().as_u16(), 201);

    let (refused, slow_event) = wait_for("both creates in the audit log", 15, || {
        let all = events(&log);
        let of = |code: u64| {
            all.iter()
                .find(|e| {
                    e["verb"] == "create"
                        && e["user"]["username"] == "writer"
                        && e["responseStatus"]["code"] == code
                        && (code == 201) == (e["objectRef"]["name"] == "slow")
                })
                .cloned()
        };
        Some((of(429)?, of(201)?))
    });
    assert!(refused.get("requestObject").is_none(), "{refused}");
    assert_eq!(refused["level"], "Request");
    assert_eq!(slow_event["requestObject"]["data"]["k"], "v");
}
