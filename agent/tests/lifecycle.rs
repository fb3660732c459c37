//! Container lifecycle hooks (postStart, preStop) and probes (liveness, readiness, startup)
//! against the real stack: cairn-control, containerd + runc, cairn-cni and cairn-agent in a
//! private network namespace (root only). Containers report what happened to them in files of
//! a hostPath directory, so every check reads an outcome rather than timing.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use common::*;
use k8s_openapi::api::core::v1::Pod;
use kube::api::DeleteParams;
use serde_json::{json, Value};

/// A pod on our node whose containers all mount `shared` at `/shared`.
fn pod(name: &str, shared: &Path, grace: i64, containers: Value) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "nodeName": NODE,
            "terminationGracePeriodSeconds": grace,
            "containers": containers,
            "volumes": [{"name": "shared", "hostPath": {"path": shared, "type": "Directory"}}],
        }
    })
}

/// A container running `script` with `/shared` mounted, plus `extra` fields.
fn container(image: &str, script: &str, extra: Value) -> Value {
    let mut c = json!({
        "name": "main",
        "image": image,
        "command": ["sh", "-c", script],
        "volumeMounts": [{"name": "shared", "mountPath": "/shared"}],
    });
    for (k, v) in extra.as_object().unwrap() {
        c[k] = v.clone();
    }
    c
}

/// A main process that records SIGTERM in `/shared/<file>` and exits (PID 1 ignores
/// signals it has no handler for, so without the trap only SIGKILL would stop it).
fn trap_term(file: &str) -> String {
    format!("trap 'echo term >> /shared/{file}; exit 0' TERM; sleep 3600 & wait")
}

/// Waits until an event with `reason` whose message contains `text` exists; returns its type.
async fn wait_event(cluster: &Cluster, pod: &str, reason: &str, text: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let all = cluster.events(pod).await;
        if let Some((kind, _, _)) = all.iter().find(|(_, r, m)| r == reason && m.contains(text)) {
            return kind.clone();
        }
        assert!(
            Instant::now() < deadline,
            "pod {pod}: no {reason} event containing {text:?}; events: {all:?}\nagent log tail:\n{}",
            log_tail(cluster)
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

fn log_tail(cluster: &Cluster) -> String {
    let log = cluster.agent_log();
    let lines: Vec<&str> = log.lines().collect();
    lines[lines.len().saturating_sub(60)..].join("\n")
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
}

/// Waits until `path` holds at least `lines` lines.
async fn wait_lines(cluster: &Cluster, path: &Path, lines: usize) -> String {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let text = read(path);
        if text.lines().count() >= lines {
            return text;
        }
        assert!(
            Instant::now() < deadline,
            "{} has {text:?}, wanted {lines} lines; agent log tail:\n{}",
            path.display(),
            log_tail(cluster)
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn wait_gone(cluster: &Cluster, name: &str) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while cluster.pods().get_opt(name).await.unwrap().is_some() {
        assert!(
            Instant::now() < deadline,
            "pod {name} was not removed; agent log tail:\n{}",
            log_tail(cluster)
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

fn restarts(p: &Pod, name: &str) -> i32 {
    container_status(p, name).map_or(0, |c| c.restart_count)
}

fn running(p: &Pod, name: &str) -> bool {
    container_status(p, name)
        .and_then(|c| c.state)
        .is_some_and(|s| s.running.is_some())
}

fn condition(p: &Pod, kind: &str) -> Option<String> {
    p.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == kind)
        .map(|c| c.status.clone())
}

fn write_cgi(dir: &Path, name: &str, body: &str) {
    let path = dir.join(name);
    std::fs::write(
        &path,
        format!("#!/bin/sh\n{body}\nprintf 'Content-Type: text/plain\\r\\n\\r\\nok\\n'\n"),
    )
    .unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

fn shared_dir(cluster: &Cluster) -> PathBuf {
    let shared = cluster.path("shared");
    std::fs::create_dir_all(shared.join("www/cgi-bin")).unwrap();
    shared
}

#[tokio::test]
async fn hooks_run_in_kubelet_order() {
    let _cgroups;
    let cluster = Cluster::start().await;
    _cgroups = CgroupCleanup(cluster.cgroup_root.clone());
    let img = cluster.image.clone();
    let shared = shared_dir(&cluster);
    let cgi = shared.join("www/cgi-bin");
    write_cgi(&cgi, "ping", "");
    write_cgi(&cgi, "start", "echo poststart-http >> /shared/web-post");
    write_cgi(
        &cgi,
        "stop",
        "echo \"prestop-http $HTTP_X_HOOK\" >> /shared/web",
    );

    create_order_and_web_pods(&cluster, &img, &shared).await;
    create_slow_badstop_and_poststart_pods(&cluster, &img, &shared).await;
    poststart_holds_container_until_it_returns(&cluster, &shared).await;
    http_poststart_reached_and_all_run(&cluster, &shared).await;
    failing_poststart_kills_and_restarts(&cluster).await;
    prestop_hooks_run_before_sigterm(&cluster, &shared).await;
}

async fn create_order_and_web_pods(cluster: &Cluster, img: &str, shared: &Path) {
    // preStop exec runs before SIGTERM (postStart sleep on the way in).
    cluster
        .create(pod(
            "order",
            shared,
            10,
            json!([container(
                img,
                &trap_term("order"),
                json!({"lifecycle": {
                    "postStart": {"sleep": {"seconds": 1}},
                    "preStop": {"exec": {"command": ["sh", "-c", "echo prestop >> /shared/order"]}},
                }})
            )]),
        ))
        .await;
    // httpGet hooks against busybox httpd in the pod. The web container's postStart waits
    // until httpd answers, and the client container only starts once that hook returned, so
    // the client's postStart httpGet finds httpd listening. preStop goes by port name, with
    // a header the CGI script records.
    let httpd =
        "trap 'echo term >> /shared/web; exit 0' TERM; httpd -f -p 8080 -h /shared/www & wait";
    let mut web = container(
        img,
        httpd,
        json!({
            "ports": [{"name": "http", "containerPort": 8080}],
            "readinessProbe": {"tcpSocket": {"port": "http"}, "periodSeconds": 1},
            "lifecycle": {
                "postStart": {"exec": {"command": ["sh", "-c", "until wget -q -O /dev/null http://127.0.0.1:8080/cgi-bin/ping; do sleep 0.1; done"]}},
                "preStop": {"httpGet": {"path": "/cgi-bin/stop", "port": "http", "httpHeaders": [{"name": "X-Hook", "value": "bye"}]}},
            },
        }),
    );
    web["name"] = json!("web");
    let mut client = container(
        img,
        "exec sleep 3600",
        json!({"lifecycle": {"postStart": {"httpGet": {"path": "/cgi-bin/start", "port": 8080}}}}),
    );
    client["name"] = json!("client");
    cluster
        .create(pod("web", shared, 10, json!([web, client])))
        .await;
}

async fn create_slow_badstop_and_poststart_pods(cluster: &Cluster, img: &str, shared: &Path) {
    // A preStop sleep longer than the grace period is cut short; SIGTERM still comes.
    cluster
        .create(pod(
            "slow",
            shared,
            2,
            json!([container(
                img,
                &trap_term("slow"),
                json!({"lifecycle": {
                    "preStop": {"sleep": {"seconds": 3600}},
                }})
            )]),
        ))
        .await;
    // A failing preStop hook is reported and the container is still stopped.
    cluster
        .create(pod(
            "badstop",
            shared,
            10,
            json!([container(
                img,
                &trap_term("badstop"),
                json!({"lifecycle": {
                    "preStop": {"exec": {"command": ["sh", "-c", "exit 3"]}},
                }})
            )]),
        ))
        .await;
    // postStart exec: writes a file the main process waits for, then blocks until the test
    // releases it; until then the container must not be reported running.
    cluster
        .create(pod(
            "poststart",
            shared,
            2,
            json!([container(
                img,
                "until [ -f /tmp/post ]; do sleep 0.1; done; cat /tmp/post > /shared/main-saw; exec sleep 3600",
                json!({"lifecycle": {"postStart": {"exec": {"command": ["sh", "-c",
                    "echo from-hook > /tmp/post; touch /shared/hook-running; until [ -f /shared/release ]; do sleep 0.1; done"]}}}}),
            )]),
        ))
        .await;
    // A failing postStart hook kills the container, which restarts.
    cluster
        .create(pod(
            "badpost",
            shared,
            1,
            json!([container(
                img,
                "exec sleep 3600",
                json!({"lifecycle": {"postStart": {"exec": {"command": ["sh", "-c", "exit 7"]}}}}),
            )]),
        ))
        .await;
}

async fn poststart_holds_container_until_it_returns(cluster: &Cluster, shared: &Path) {
    // postStart ordering: the hook ran inside the container (the main process read its
    // file) and holds the container out of Running until it returns.
    wait_lines(cluster, &shared.join("main-saw"), 1).await;
    assert_eq!(read(&shared.join("main-saw")), "from-hook\n");
    let deadline = Instant::now() + Duration::from_secs(60);
    while !shared.join("hook-running").exists() {
        assert!(Instant::now() < deadline, "postStart hook never ran");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let held = cluster.pods().get("poststart").await.unwrap();
    assert!(
        !running(&held, "main") && condition(&held, "Ready").as_deref() != Some("True"),
        "container reported running while its postStart hook runs: {:?}",
        held.status
    );
    if let Some(c) = container_status(&held, "main") {
        let waiting = c.state.and_then(|s| s.waiting).and_then(|w| w.reason);
        assert_eq!(waiting.as_deref(), Some("ContainerCreating"));
    }
    std::fs::write(shared.join("release"), "").unwrap();
    cluster
        .wait_for("poststart", "Running after its postStart hook", 60, |p| {
            running(p, "main") && is_ready(p)
        })
        .await;
}

async fn http_poststart_reached_and_all_run(cluster: &Cluster, shared: &Path) {
    // httpGet postStart reached httpd; web and client both run.
    cluster
        .wait_for("web", "Running and Ready", 60, |p| {
            phase(p) == "Running" && is_ready(p)
        })
        .await;
    assert_eq!(read(&shared.join("web-post")), "poststart-http\n");
    cluster
        .wait_for("order", "Running", 60, |p| running(p, "main"))
        .await;
    for name in ["slow", "badstop"] {
        cluster
            .wait_for(name, "Running", 60, |p| running(p, "main"))
            .await;
    }
}

async fn failing_poststart_kills_and_restarts(cluster: &Cluster) {
    // Failing postStart: event, kill, restart.
    let kind = wait_event(cluster, "badpost", "FailedPostStartHook", "").await;
    assert_eq!(kind, "Warning");
    wait_event(cluster, "badpost", "Killing", "FailedPostStartHook").await;
    let restarted = cluster
        .wait_for(
            "badpost",
            "restarted after its postStart hook failed",
            90,
            |p| restarts(p, "main") >= 1,
        )
        .await;
    let c = container_status(&restarted, "main").unwrap();
    assert!(
        c.last_state.and_then(|s| s.terminated).is_some(),
        "no lastState.terminated: {:?}",
        restarted.status
    );
    assert!(
        cluster
            .agent_log()
            .contains(r#"Exec lifecycle hook ([sh -c exit 7]) for Container "main""#),
        "hook failure message missing from the agent log"
    );
}

async fn prestop_hooks_run_before_sigterm(cluster: &Cluster, shared: &Path) {
    // Delete the preStop pods together; each must run its hook before SIGTERM.
    for name in ["order", "web", "slow", "badstop"] {
        cluster
            .pods()
            .delete(name, &DeleteParams::default())
            .await
            .unwrap();
    }
    for name in ["order", "web", "slow", "badstop"] {
        wait_gone(cluster, name).await;
    }
    assert_eq!(read(&shared.join("order")), "prestop\nterm\n");
    assert_eq!(read(&shared.join("web")), "prestop-http bye\nterm\n");
    assert_eq!(read(&shared.join("slow")), "term\n");
    assert_eq!(read(&shared.join("badstop")), "term\n");
    let kind = wait_event(cluster, "badstop", "FailedPreStopHook", "").await;
    assert_eq!(kind, "Warning");
    assert!(
        !cluster
            .events("order")
            .await
            .iter()
            .any(|(_, r, _)| r.starts_with("Failed")),
        "unexpected failure events for order: {:?}",
        cluster.events("order").await
    );
}

#[tokio::test]
async fn probes_restart_mark_ready_and_wait_for_startup() {
    let _cgroups;
    let cluster = Cluster::start().await;
    _cgroups = CgroupCleanup(cluster.cgroup_root.clone());
    let img = cluster.image.clone();
    let shared = shared_dir(&cluster);
    let idle = "trap 'exit 0' TERM; sleep 3600 & wait";

    create_probe_pods(&cluster, &img, &shared, idle).await;
    liveness_restarts_the_container(&cluster).await;
    readiness_toggles_without_restart(&cluster).await;
    startup_probe_holds_off_liveness(&cluster, &shared).await;
    failing_startup_probe_restarts(&cluster).await;
    grpc_liveness_passes_then_restarts(&cluster).await;
}

async fn create_probe_pods(cluster: &Cluster, img: &str, shared: &Path, idle: &str) {
    cluster
        .create(pod(
            "live",
            shared,
            5,
            json!([container(img, &format!("touch /tmp/healthy; {idle}"), json!({
                "livenessProbe": {"exec": {"command": ["cat", "/tmp/healthy"]}, "periodSeconds": 1, "failureThreshold": 2},
            }))]),
        ))
        .await;
    cluster
        .create(pod(
            "ready",
            shared,
            5,
            json!([container(img, idle, json!({
                "readinessProbe": {"exec": {"command": ["cat", "/tmp/ready"]}, "periodSeconds": 1, "failureThreshold": 1},
            }))]),
        ))
        .await;
    // The startup probe counts its runs; the liveness probe would fail at once if it ran.
    cluster
        .create(pod(
            "startup",
            shared,
            2,
            json!([container(img, idle, json!({
                "startupProbe": {"exec": {"command": ["sh", "-c", "echo s >> /shared/startup-runs; cat /tmp/started"]}, "periodSeconds": 1, "failureThreshold": 600},
                "livenessProbe": {"exec": {"command": ["sh", "-c", "echo l >> /shared/liveness-runs; exit 1"]}, "periodSeconds": 1, "failureThreshold": 1},
            }))]),
        ))
        .await;
    // A startup probe that never succeeds restarts the container.
    cluster
        .create(pod(
            "neverstarts",
            shared,
            1,
            json!([container(img, idle, json!({
                "startupProbe": {"exec": {"command": ["cat", "/tmp/never"]}, "periodSeconds": 1, "failureThreshold": 2},
            }))]),
        ))
        .await;

    // gRPC: a server speaking grpc.health.v1 that answers SERVING for 8 s, then NOT_SERVING
    // (a startup probe gates the liveness probe until it answers).
    cluster.create(grpc_pod(img)).await;
}

async fn liveness_restarts_the_container(cluster: &Cluster) {
    // Liveness: remove the file, the container is killed and restarted.
    let live = cluster
        .wait_for("live", "Running", 60, |p| running(p, "main"))
        .await;
    let out = cluster.exec(&container_id(&live, "main"), &["rm", "/tmp/healthy"]);
    assert!(out.status.success(), "{out:?}");
    // The message carries the probe command's own output, as the kubelet's does.
    let kind = wait_event(
        cluster,
        "live",
        "Unhealthy",
        "Liveness probe failed: cat: can't open '/tmp/healthy': No such file or directory",
    )
    .await;
    assert_eq!(kind, "Warning");
    wait_event(
        cluster,
        "live",
        "Killing",
        "Container main failed liveness probe, will be restarted",
    )
    .await;
    cluster
        .wait_for("live", "restarted by its liveness probe", 90, |p| {
            restarts(p, "main") >= 1 && running(p, "main")
        })
        .await;
}

async fn readiness_toggles_without_restart(cluster: &Cluster) {
    // Readiness: False until the file exists, True with it, False again without it; never
    // a restart.
    let unready = cluster
        .wait_for("ready", "Running", 60, |p| running(p, "main"))
        .await;
    let first_id = container_id(&unready, "main");
    wait_event(cluster, "ready", "Unhealthy", "Readiness probe failed").await;
    let unready = cluster
        .wait_for("ready", "Ready=False after a failed probe", 30, |p| {
            condition(p, "Ready").as_deref() == Some("False")
        })
        .await;
    assert_eq!(
        container_status(&unready, "main").map(|c| c.ready),
        Some(false)
    );
    let out = cluster.exec(&first_id, &["touch", "/tmp/ready"]);
    assert!(out.status.success(), "{out:?}");
    cluster
        .wait_for("ready", "Ready=True once the file exists", 30, is_ready)
        .await;
    let out = cluster.exec(&first_id, &["rm", "/tmp/ready"]);
    assert!(out.status.success(), "{out:?}");
    let again = cluster
        .wait_for("ready", "Ready=False once the file is gone", 30, |p| {
            condition(p, "Ready").as_deref() == Some("False")
        })
        .await;
    assert_eq!(restarts(&again, "main"), 0);
    assert_eq!(container_id(&again, "main"), first_id);
}

async fn startup_probe_holds_off_liveness(cluster: &Cluster, shared: &Path) {
    // Startup: liveness does not run while the startup probe fails, then it does.
    wait_lines(cluster, &shared.join("startup-runs"), 3).await;
    let waiting = cluster.pods().get("startup").await.unwrap();
    assert!(
        !shared.join("liveness-runs").exists(),
        "liveness probe ran before the startup probe succeeded"
    );
    assert_eq!(restarts(&waiting, "main"), 0);
    let c = container_status(&waiting, "main").unwrap();
    assert_eq!(c.started, Some(false), "{c:?}");
    assert!(!c.ready);
    let out = cluster.exec(&container_id(&waiting, "main"), &["touch", "/tmp/started"]);
    assert!(out.status.success(), "{out:?}");
    cluster
        .wait_for("startup", "restarted by liveness after startup", 90, |p| {
            restarts(p, "main") >= 1
        })
        .await;
    assert!(read(&shared.join("liveness-runs")).starts_with("l\n"));
    wait_event(
        cluster,
        "startup",
        "Killing",
        "Container main failed liveness probe",
    )
    .await;
}

async fn failing_startup_probe_restarts(cluster: &Cluster) {
    // A startup probe that keeps failing restarts the container.
    wait_event(
        cluster,
        "neverstarts",
        "Killing",
        "Container main failed startup probe, will be restarted",
    )
    .await;
    cluster
        .wait_for("neverstarts", "restarted by its startup probe", 90, |p| {
            restarts(p, "main") >= 1
        })
        .await;
}

async fn grpc_liveness_passes_then_restarts(cluster: &Cluster) {
    // gRPC liveness: passes while the server serves, then restarts it once it stops.
    let kind = wait_event(
        cluster,
        "grpc",
        "Unhealthy",
        "Liveness probe failed: service unhealthy (responded with \"NOT_SERVING\")",
    )
    .await;
    assert_eq!(kind, "Warning");
    let early = cluster.events("grpc").await;
    assert!(
        !early.iter().any(|(_, r, m)| r == "Unhealthy"
            && m.starts_with("Liveness probe failed")
            && m.contains("connect")),
        "the liveness probe could not reach the server: {early:?}"
    );
    wait_event(
        cluster,
        "grpc",
        "Killing",
        "Container main failed liveness probe, will be restarted",
    )
    .await;
    let restarted = cluster
        .wait_for("grpc", "restarted by its gRPC liveness probe", 90, |p| {
            restarts(p, "main") >= 1
        })
        .await;
    // The first instance lived through its 8 serving seconds: the probe passed meanwhile.
    let last = container_status(&restarted, "main")
        .and_then(|c| c.last_state)
        .and_then(|s| s.terminated)
        .expect("the killed instance as lastState");
    let (started, finished) = (last.started_at.unwrap().0, last.finished_at.unwrap().0);
    let lived = finished.duration_since(started).as_secs_f64();
    assert!(
        lived >= 8.0,
        "killed after {lived} s, while it still served"
    );
}

/// A pod running the `grpc_health_server` example from the build's examples directory, with
/// the host's C library mounted (the busybox image has none), probed by a gRPC liveness probe.
fn grpc_pod(image: &str) -> Value {
    let examples = bin_dir().join("examples");
    assert!(
        examples.join("grpc_health_server").exists(),
        "build the examples first (cargo test --workspace does)"
    );
    let host_path = |name: &str, path: &str| json!({"name": name, "hostPath": {"path": path}});
    let mount = |name: &str, path: &str| json!({"name": name, "mountPath": path, "readOnly": true});
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "grpc", "namespace": "default"},
        "spec": {
            "nodeName": NODE,
            "terminationGracePeriodSeconds": 1,
            "containers": [{
                "name": "main",
                "image": image,
                "command": ["/examples/grpc_health_server", "8090", "8"],
                "volumeMounts": [mount("examples", "/examples"), mount("libs", "/lib/x86_64-linux-gnu"), mount("lib64", "/lib64")],
                // Liveness probing starts once the server answers (a slow start on a busy
                // machine would otherwise meet a first probe before it listens).
                "startupProbe": {"grpc": {"port": 8090}, "periodSeconds": 1, "failureThreshold": 60},
                "livenessProbe": {"grpc": {"port": 8090}, "periodSeconds": 1, "failureThreshold": 2},
            }],
            "volumes": [
                host_path("examples", examples.to_str().unwrap()),
                host_path("libs", "/lib/x86_64-linux-gnu"),
                host_path("lib64", "/lib64"),
            ],
        }
    })
}

/// Kills and reaps a child process when the test ends, however it ends.
struct KillOnDrop(std::process::Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// httpGet probes and hooks with `scheme: HTTPS` reach a server whose certificate nobody
/// signed, as the kubelet's do (it skips verification).
#[tokio::test]
async fn https_targets_need_no_trusted_certificate() {
    use std::io::BufRead;
    use std::process::{Command, Stdio};

    // No process-wide rustls provider is installed here: the probe client brings its own.
    let dir = tempfile::tempdir().unwrap();
    let (cert, key) = (dir.path().join("cert.pem"), dir.path().join("key.pem"));
    let made = Command::new("openssl")
        .args([
            "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
        ])
        .args(["-subj", "/CN=self-signed-probe-target", "-keyout"])
        .arg(&key)
        .arg("-out")
        .arg(&cert)
        .output()
        .unwrap();
    assert!(made.status.success(), "{made:?}");
    let mut server = KillOnDrop(
        Command::new("openssl")
            .args(["s_server", "-accept", "127.0.0.1:0", "-www", "-cert"])
            .arg(&cert)
            .arg("-key")
            .arg(&key)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    // openssl prints the port it bound: "ACCEPT 127.0.0.1:<port>".
    let stdout = server.0.stdout.take().unwrap();
    let port: u16 = std::io::BufReader::new(stdout)
        .lines()
        .map_while(Result::ok)
        .find_map(|l| l.strip_prefix("ACCEPT 127.0.0.1:")?.trim().parse().ok())
        .expect("openssl s_server did not say which port it bound");

    let c: k8s_openapi::api::core::v1::Container = serde_json::from_value(
        json!({"name": "c", "ports": [{"name": "https", "containerPort": port}]}),
    )
    .unwrap();
    let action: k8s_openapi::api::core::v1::HTTPGetAction = serde_json::from_value(
        json!({"scheme": "HTTPS", "port": "https", "path": "/", "httpHeaders": [{"name": "X-Probe", "value": "1"}]}),
    )
    .unwrap();
    let url = cairn_agent::probes::http_url(&c, &action, Some("127.0.0.1")).unwrap();
    assert_eq!(url, format!("https://127.0.0.1:{port}/"));
    let status =
        cairn_agent::probes::http_get(&url, &action, "kube-probe", Duration::from_secs(10))
            .await
            .map_err(|e| e.message)
            .unwrap();
    assert_eq!(status, 200);
    // Plain HTTP against the TLS port gets no HTTP answer: a failure, not a success.
    let plain = format!("http://127.0.0.1:{port}/");
    assert!(
        cairn_agent::probes::http_get(&plain, &action, "kube-probe", Duration::from_secs(5))
            .await
            .is_err()
    );
}
