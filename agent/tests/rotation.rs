//! Certificate rotation under load (issue 28): with every leaf certificate living
//! [`LIFETIME`] seconds, the API server's serving and kubelet-client certificates and
//! the agent's client (joined by token) and serving certificates are all replaced while
//! a pod runs and a watch opened before stays open; the node never leaves Ready, and
//! logs and exec (API server → agent, both on new certificates) keep working. A
//! cairn-proxy on the node's own kubeconfig (as on a joined node) follows the renewed
//! certificate and still programs a Service created after the old one expired.

// Test code: a failed setup step should fail the test loudly.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::*;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, PostParams};
use serde_json::json;

const LIFETIME: u64 = 15;

/// The node's Ready condition: (status, lastTransitionTime, lastHeartbeatTime).
async fn ready(cluster: &Cluster) -> (String, String, String) {
    let nodes: Api<Node> = Api::all(cluster.client.clone());
    let node = nodes.get(NODE).await.unwrap();
    let conditions = node.status.and_then(|s| s.conditions).unwrap_or_default();
    let c = conditions.into_iter().find(|c| c.type_ == "Ready").unwrap();
    let time = |t: Option<k8s_openapi::apimachinery::pkg::apis::meta::v1::Time>| {
        t.map(|t| t.0.to_string()).unwrap_or_default()
    };
    (
        c.status,
        time(c.last_transition_time),
        time(c.last_heartbeat_time),
    )
}

/// `kubectl get pod steady -w`, printing the `rotated` label of each event it sees.
fn watch_label(cluster: &Cluster) -> (std::process::Child, Arc<Mutex<Vec<String>>>) {
    let mut child = Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(&cluster.kubeconfig)
        .args(["get", "pod", "steady", "-w", "-o"])
        .arg("jsonpath={.metadata.labels.rotated}{\"\\n\"}")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let lines = Arc::new(Mutex::new(Vec::new()));
    let (out, seen) = (child.stdout.take().unwrap(), Arc::clone(&lines));
    std::thread::spawn(move || {
        for line in BufReader::new(out).lines().map_while(Result::ok) {
            seen.lock().unwrap().push(line);
        }
    });
    (child, lines)
}

fn ok(cluster: &Cluster, args: &[&str]) -> String {
    let out = cluster.kubectl(args);
    assert!(
        out.status.success(),
        "kubectl {args:?}: {}\nagent log tail:\n{}",
        String::from_utf8_lossy(&out.stderr),
        tail(&cluster.agent_log())
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn tail(text: &str) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(40)..].join("\n")
}

/// cairn-proxy in nftables mode on the node's kubeconfig, which the agent renews.
fn start_proxy(cluster: &Cluster) -> (std::process::Child, std::path::PathBuf) {
    let log = cluster.path("proxy.log");
    let child = Command::new(bin("cairn-proxy"))
        .arg("--kubeconfig")
        .arg(cluster.path("root/kubeconfig"))
        .args(["--hostname-override", NODE, "--mode", "nftables"])
        .args(["--healthz-bind-address", "", "--metrics-bind-address", ""])
        .arg("--ingress=false")
        .env("RUST_LOG", "info")
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    (child, log)
}

/// Whether the kernel holds a rule for `ip` (the proxy's nftables tables).
fn programmed(ip: &str) -> bool {
    let out = Command::new("nft")
        .args(["list", "ruleset"])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).contains(ip)
}

#[tokio::test]
async fn certificates_rotate_under_a_running_pod_and_a_watch() {
    let _cgroups;
    let cluster = Cluster::start_opts(ClusterOptions {
        cert_lifetime_seconds: Some(LIFETIME),
        join_by_token: true,
        ..ClusterOptions::default()
    })
    .await;
    _cgroups = CgroupCleanup(cluster.cgroup_root.clone());
    let pod = json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "steady", "namespace": "default"},
        "spec": {"nodeName": NODE, "terminationGracePeriodSeconds": 1, "containers": [{
            "name": "c", "image": cluster.image,
            "command": ["sh", "-c", "while true; do echo tick; sleep 1; done"]}]}});
    let pod: Pod = serde_json::from_value(pod).unwrap();
    cluster
        .pods()
        .create(&PostParams::default(), &pod)
        .await
        .unwrap();
    cluster.wait_for("steady", "Ready", 60, is_ready).await;
    let (mut watch, labels) = watch_label(&cluster);
    let (mut proxy, proxy_log) = start_proxy(&cluster);

    let files = [
        "control/pki/apiserver.crt",
        "control/pki/apiserver-kubelet-client.crt",
        "root/kubeconfig",
        "root/pki/kubelet-server.crt",
    ];
    let read = |f: &str| std::fs::read(cluster.path(f)).unwrap_or_default();
    let before: Vec<Vec<u8>> = files.iter().map(|f| read(f)).collect();
    let (status, since, _) = ready(&cluster).await;
    assert_eq!(status, "True");
    let deadline = Instant::now() + Duration::from_secs(4 * LIFETIME);
    loop {
        let (status, transition, _) = ready(&cluster).await;
        assert_eq!(
            (status.as_str(), transition.as_str()),
            ("True", since.as_str()),
            "the node left Ready\n{}",
            tail(&cluster.agent_log())
        );
        let stale: Vec<&str> = files
            .iter()
            .zip(&before)
            .filter(|(f, old)| read(f) == **old)
            .map(|(f, _)| *f)
            .collect();
        if stale.is_empty() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "not rotated: {stale:?}\n{}",
            tail(&cluster.agent_log())
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let rotated_at = chrono::Utc::now();

    // API server → agent on both sides' new certificates.
    assert!(ok(&cluster, &["logs", "steady", "--tail=1"]).contains("tick"));
    assert_eq!(
        ok(&cluster, &["exec", "steady", "--", "echo", "fine"]).trim(),
        "fine"
    );
    // The watch opened before every rotation still delivers.
    ok(&cluster, &["label", "pod", "steady", "rotated=yes"]);
    let deadline = Instant::now() + Duration::from_secs(20);
    while !labels.lock().unwrap().iter().any(|l| l == "yes") {
        assert!(watch.try_wait().unwrap().is_none(), "the watch ended");
        assert!(Instant::now() < deadline, "the watch did not see the label");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // The agent still renews its Lease after its old certificate expired (replaced with
    // a third of its life left, so gone by `rotated_at + LIFETIME / 3`).
    let old_expired = rotated_at + chrono::Duration::seconds(LIFETIME as i64 / 3 + 2);
    let leases: Api<Lease> = Api::namespaced(cluster.client.clone(), "kube-node-lease");
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (status, transition, _) = ready(&cluster).await;
        assert_eq!(
            (status.as_str(), transition.as_str()),
            ("True", since.as_str())
        );
        let lease = leases.get(NODE).await.unwrap();
        let renewed = lease
            .spec
            .and_then(|s| s.renew_time)
            .map(|t| t.0.to_string());
        let renewed = renewed.and_then(|t| chrono::DateTime::parse_from_rfc3339(&t).ok());
        if renewed.is_some_and(|t| t > old_expired) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "no Lease renewal since the rotation\n{}",
            tail(&cluster.agent_log())
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    proxy_follows_the_renewed_certificate(&cluster, &proxy_log);
    let _ = proxy.kill();
    let _ = proxy.wait();
    let _ = watch.kill();
    let _ = watch.wait();
}

/// The proxy swapped the renewed certificate in (which ends its old connections), and a
/// Service created now, after the old certificate expired, reaches the kernel.
fn proxy_follows_the_renewed_certificate(cluster: &Cluster, log: &std::path::Path) {
    let deadline = Instant::now() + Duration::from_secs(30);
    let said = || std::fs::read_to_string(log).unwrap_or_default();
    while !said().contains("client certificate changed; presenting the new one") {
        assert!(
            Instant::now() < deadline,
            "the proxy kept its old certificate:\n{}",
            tail(&said())
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    ok(
        cluster,
        &[
            "create",
            "service",
            "clusterip",
            "after-rotation",
            "--tcp=80:80",
        ],
    );
    let ip = ok(
        cluster,
        &[
            "get",
            "service",
            "after-rotation",
            "-o",
            "jsonpath={.spec.clusterIP}",
        ],
    );
    let deadline = Instant::now() + Duration::from_secs(30);
    while !programmed(ip.trim()) {
        assert!(
            Instant::now() < deadline,
            "{ip} never programmed:\n{}",
            tail(&said())
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}
