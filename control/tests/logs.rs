//! `kubectl logs` through cairn-control: the pod's Node points at a log server on this
//! machine (cairn-podlogs' `containerLogs` router over fixture files, over HTTPS with a
//! certificate from the cluster CA, as an agent's port), and stock kubectl
//! (1.33 and 1.27) reads, tails, follows and gets kube-apiserver's errors.

// Test code: a failed setup step should fail the test loudly.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use cairn_podlogs::{router, LocateError, LogLocation, LogSource};
use common::{Kubectl, Server, Streaming};

/// Logs under `<dir>/<pod>/<container>/<n>.log`; instance 1 is current, 0 the previous one.
struct FixtureNode {
    dir: PathBuf,
    running: Arc<AtomicBool>,
}

impl LogSource for FixtureNode {
    fn locate(
        &self,
        ns: &str,
        pod: &str,
        container: &str,
        previous: bool,
    ) -> Result<LogLocation, LocateError> {
        let dir = self.dir.join(pod);
        if ns != "default" || !dir.exists() {
            return Err(LocateError::PodNotFound(pod.into()));
        }
        let dir = dir.join(container);
        if !dir.exists() {
            return Err(LocateError::ContainerNotFound {
                pod: pod.into(),
                container: container.into(),
            });
        }
        if previous {
            let path = dir.join("0.log");
            if !path.exists() {
                return Err(LocateError::NoPreviousInstance {
                    pod: pod.into(),
                    container: container.into(),
                });
            }
            return Ok(LogLocation::exited(path));
        }
        let running = Arc::clone(&self.running);
        Ok(LogLocation::running_while(dir.join("1.log"), move || {
            running.load(Ordering::SeqCst)
        }))
    }
}

/// The fixture's listener: TLS with a serving certificate the cluster CA signed for
/// 127.0.0.1, as an agent's port has (the API server checks it).
struct TlsListener {
    tcp: tokio::net::TcpListener,
    acceptor: tokio_rustls::TlsAcceptor,
}

impl axum::serve::Listener for TlsListener {
    type Io = tokio_rustls::server::TlsStream<tokio::net::TcpStream>;
    type Addr = std::net::SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        loop {
            let Ok((tcp, addr)) = self.tcp.accept().await else {
                continue;
            };
            if let Ok(tls) = self.acceptor.accept(tcp).await {
                return (tls, addr);
            }
        }
    }

    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        self.tcp.local_addr()
    }
}

fn agent_tls(data_dir: &Path) -> Arc<rustls::ServerConfig> {
    use cairn_pki::tls;
    let pki = cairn_pki::ClusterPki::load(data_dir, Default::default()).unwrap();
    let names = ["127.0.0.1".to_string()];
    let year = std::time::Duration::from_secs(365 * 86400);
    let issued = pki
        .cluster_ca
        .issue_serving("node-logs", &names, year)
        .unwrap();
    let key = tls::certified_key(&issued.cert_pem, &issued.key_pem).unwrap();
    let clients = tls::client_chain_verifier(pki.client_ca.cert_pem()).unwrap();
    tls::server_config(tls::SwappableCert::new(key), clients).unwrap()
}

/// Serves the fixture on 127.0.0.1 over HTTPS from a thread of its own; returns the port.
fn start_log_server(node: FixtureNode, control_data_dir: &Path) -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    let acceptor = tokio_rustls::TlsAcceptor::from(agent_tls(control_data_dir));
    std::thread::spawn(move || {
        let rt = tokio::runtime::Runtime::new().unwrap();
        rt.block_on(async move {
            let tcp = tokio::net::TcpListener::from_std(listener).unwrap();
            let listener = TlsListener { tcp, acceptor };
            axum::serve(listener, router(Arc::new(node))).await.unwrap();
        });
    });
    port
}

fn record(sec: u32, stream: &str, tag: &str, content: &str) -> String {
    format!("2024-03-04T05:06:{sec:02}.25Z {stream} {tag} {content}\n")
}

fn write_log(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

const PODS: &str = r#"
apiVersion: v1
kind: Pod
metadata: {name: single}
spec:
  nodeName: node-logs
  containers: [{name: app, image: busybox}]
---
apiVersion: v1
kind: Pod
metadata: {name: multi}
spec:
  nodeName: node-logs
  initContainers: [{name: setup, image: busybox}]
  containers: [{name: web, image: busybox}, {name: sidecar, image: busybox}]
---
apiVersion: v1
kind: Pod
metadata: {name: unbound}
spec:
  containers: [{name: app, image: busybox}]
"#;

#[test]
fn kubectl_logs_through_the_api_server() {
    let tmp = tempfile::tempdir().unwrap();
    let logs = tmp.path().join("logs");
    write_fixture_logs(&logs);
    let running = Arc::new(AtomicBool::new(true));
    let server = Server::start(&tmp.path().join("control"));
    let port = start_log_server(
        FixtureNode {
            dir: logs.clone(),
            running: Arc::clone(&running),
        },
        &server.data_dir,
    );

    let k = Kubectl::new(33, &server);
    register_node_and_pods(&k, port);

    for minor in [33, 27] {
        let k = Kubectl::new(minor, &server);
        logs_options_and_errors(&k);
    }

    follow_sees_appended_lines_and_ends(&k, &logs, &running);
}

fn write_fixture_logs(logs: &Path) {
    write_log(
        &logs.join("single/app/1.log"),
        &(record(1, "stdout", "F", "one")
            + &record(2, "stderr", "F", "two")
            + &record(3, "stdout", "P", "thr")
            + &record(4, "stdout", "F", "ee")),
    );
    write_log(
        &logs.join("single/app/0.log"),
        &record(0, "stdout", "F", "before the restart"),
    );
    write_log(
        &logs.join("multi/web/1.log"),
        &record(1, "stdout", "F", "web"),
    );
    write_log(
        &logs.join("multi/sidecar/1.log"),
        &record(1, "stdout", "F", "sidecar"),
    );
    write_log(
        &logs.join("multi/setup/1.log"),
        &record(1, "stdout", "F", "init"),
    );
}

/// node-logs with the fixture log server as its kubelet endpoint, and the pods on it.
fn register_node_and_pods(k: &Kubectl, port: u16) {
    k.ok_stdin(
        &["create", "-f", "-"],
        "apiVersion: v1\nkind: Node\nmetadata: {name: node-logs}\n",
    );
    let status = format!(
        r#"{{"status":{{"addresses":[{{"type":"InternalIP","address":"127.0.0.1"}}],"daemonEndpoints":{{"kubeletEndpoint":{{"Port":{port}}}}}}}}}"#
    );
    k.ok(&[
        "patch",
        "node",
        "node-logs",
        "--subresource=status",
        "--type=merge",
        "-p",
        &status,
    ]);
    k.ok_stdin(&["create", "-f", "-"], PODS);
}

fn logs_options_and_errors(k: &Kubectl) {
    // Both streams, partial records joined.
    assert_eq!(k.ok(&["logs", "single"]), "one\ntwo\nthree\n");
    assert_eq!(k.ok(&["logs", "single", "--tail=2"]), "two\nthree\n");
    assert_eq!(k.ok(&["logs", "single", "--tail=0"]), "");
    assert_eq!(
        k.ok(&["logs", "single", "--timestamps", "--tail=1"]),
        "2024-03-04T05:06:03.250000000Z three\n"
    );
    assert_eq!(k.ok(&["logs", "single", "--limit-bytes=6"]), "one\ntw");
    assert_eq!(
        k.ok(&["logs", "single", "--since-time=2024-03-04T05:06:02Z"]),
        "two\nthree\n"
    );
    // The fixture is years old: nothing in the last hour.
    assert_eq!(k.ok(&["logs", "single", "--since=1h"]), "");
    assert_eq!(
        k.ok(&["logs", "single", "--previous"]),
        "before the restart\n"
    );
    assert_eq!(k.ok(&["logs", "multi", "-c", "sidecar"]), "sidecar\n");
    assert_eq!(k.ok(&["logs", "multi", "-c", "setup"]), "init\n");
    assert_eq!(k.ok(&["logs", "pod/multi", "-c", "web"]), "web\n");

    // kubectl itself picks the first container of a multi-container pod and says so (the
    // API server's own refusal is checked with raw requests below).
    let out = k.output(&["logs", "multi"]);
    assert!(out.status.success());
    assert_eq!(String::from_utf8_lossy(&out.stdout), "web\n");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains(r#"Defaulted container "web""#), "{err}");
    let err = k.fails(&["logs", "single", "-c", "nope"]);
    assert!(
        err.contains("container nope is not valid for pod single"),
        "{err}"
    );
    let err = k.fails(&["logs", "unbound"]);
    assert!(
        err.contains("pod unbound does not have a host assigned"),
        "{err}"
    );
    let err = k.fails(&["logs", "multi", "-c", "web", "--previous"]);
    assert!(
        err.contains(r#"previous terminated container "web" in pod "multi" not found"#),
        "{err}"
    );
    let err = k.fails(&["logs", "ghost"]);
    assert!(err.contains(r#"pods "ghost" not found"#), "{err}");
}

fn follow_sees_appended_lines_and_ends(k: &Kubectl, logs: &Path, running: &AtomicBool) {
    // follow: lines appended while kubectl waits show up, and kubectl exits 0 once the
    // container stops.
    let current = logs.join("single/app/1.log");
    let follower = Streaming::spawn(k.command(&["logs", "-f", "single", "--tail=1"]));
    follower.wait_for("the last line", |out| out == "three\n");
    std::fs::OpenOptions::new()
        .append(true)
        .open(&current)
        .unwrap()
        .write_all(record(5, "stdout", "F", "live line").as_bytes())
        .unwrap();
    follower.wait_for("the appended line", |out| out == "three\nlive line\n");
    running.store(false, Ordering::SeqCst);
    let mut follower = follower;
    let status = wait_child(&mut follower.child);
    assert!(status.success(), "kubectl logs -f ended with {status}");
    assert_eq!(*follower.output.lock().unwrap(), "three\nlive line\n");
}

fn wait_child(child: &mut std::process::Child) -> std::process::ExitStatus {
    // A guard against a follower that never ends, not a speed assertion.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        if let Some(s) = child.try_wait().unwrap() {
            return s;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "kubectl logs -f did not exit after the container stopped"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// What kube-apiserver answers to requests kubectl would not send.
#[tokio::test]
async fn raw_requests_get_kubernetes_statuses() {
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::start(&tmp.path().join("control"));
    let k = Kubectl::new(33, &server);
    k.ok_stdin(&["create", "-f", "-"], PODS);
    // A node without addresses and the same for the pods bound to it: the errors below come
    // before any connection is tried.
    let client = server.http();
    let get = |q: &str| {
        let url = format!("{}/api/v1/namespaces/default/pods/{q}", server.url);
        let client = client.clone();
        async move {
            let r = client.get(&url).send().await.unwrap();
            let code = r.status().as_u16();
            let v: serde_json::Value = r.json().await.unwrap();
            (code, v)
        }
    };
    let (code, v) = get("multi/log").await;
    assert_eq!(code, 400);
    assert_eq!(v["kind"], "Status");
    assert_eq!(v["reason"], "BadRequest");
    assert_eq!(
        v["message"],
        "a container name must be specified for pod multi, choose one of: [web sidecar] or one of the init containers: [setup]"
    );
    let (code, v) = get("single/log?tailLines=-1").await;
    assert_eq!(code, 422);
    assert_eq!(v["reason"], "Invalid");
    assert_eq!(v["details"]["kind"], "PodLogOptions");
    assert_eq!(v["details"]["causes"][0]["field"], "tailLines");
    let (code, v) = get("single/log?limitBytes=0&sinceSeconds=0").await;
    assert_eq!(code, 422, "{v}");
    let (code, v) = get("single/log?tailLines=ten").await;
    assert_eq!(
        (code, v["reason"].as_str()),
        (400, Some("BadRequest")),
        "{v}"
    );
    let (code, v) = get("single/log").await;
    // Bound to a node that does not exist.
    assert_eq!(code, 404, "{v}");
    assert_eq!(v["message"], "nodes \"node-logs\" not found");
    let (code, v) = get("ghost/log").await;
    assert_eq!(code, 404);
    assert_eq!(v["message"], "pods \"ghost\" not found");
}
