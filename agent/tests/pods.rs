//! cairn-agent against real containerd + runc, cairn-cni and cairn-control in a private
//! network namespace (root only).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::time::{Duration, Instant};

use common::*;
use k8s_openapi::api::core::v1::{ConfigMap, Pod, Secret};
use kube::api::{Api, DeleteParams, PostParams};
use serde_json::json;

fn busybox_pod(
    name: &str,
    image: &str,
    containers: serde_json::Value,
    extra: serde_json::Value,
) -> serde_json::Value {
    let mut spec =
        json!({"nodeName": NODE, "containers": containers, "terminationGracePeriodSeconds": 2});
    if let (Some(s), Some(e)) = (spec.as_object_mut(), extra.as_object()) {
        for (k, v) in e {
            s.insert(k.clone(), v.clone());
        }
    }
    let _ = image;
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"}, "spec": spec})
}

#[tokio::test]
async fn pods_run_crash_finish_and_terminate() {
    let _cgroups;
    let cluster = Cluster::start().await;
    _cgroups = CgroupCleanup(cluster.cgroup_root.clone());
    let img = cluster.image.clone();

    daemons_say_ready_once_they_serve(&cluster);
    create_config_map_and_secret(&cluster).await;
    let web = start_web_pod(&cluster, &img).await;
    web_sees_env_files_and_network(&cluster, &web);
    qos_parents_carry_kubelet_cpu_weights(&cluster, &img).await;
    web_log_file_has_kubelet_layout(&cluster, &web).await;
    crash_loop_backs_off(&cluster, &img).await;
    restart_never_succeeds_and_fails(&cluster, &img).await;
    memory_limit_oom_kills(&cluster, &img).await;
    graceful_deletion_waits_for_grace_period(&cluster, &img).await;
    web_has_normal_start_events(&cluster).await;
}

/// `Type=notify` units: `READY=1` (with a status line) only once the API answers
/// `/readyz`, and once the agent's node is registered and its port answers.
fn daemons_say_ready_once_they_serve(cluster: &Cluster) {
    let agent = cluster.agent_ready.as_ref().unwrap();
    for (daemon, (message, served)) in [
        ("cairn-control", cluster.control_ready.wait()),
        ("cairn-agent", agent.wait()),
    ] {
        let lines: Vec<&str> = message.lines().collect();
        assert!(
            lines.contains(&"READY=1") && lines.iter().any(|l| l.starts_with("STATUS=")),
            "{daemon}: {message:?}"
        );
        assert_eq!(served, Ok(()), "{daemon} said READY=1 before it served");
    }
}

async fn create_config_map_and_secret(cluster: &Cluster) {
    // ConfigMap and Secret for env and volumes.
    let cms: Api<ConfigMap> = Api::namespaced(cluster.client.clone(), "default");
    cms.create(
        &PostParams::default(),
        &serde_json::from_value(
            json!({"metadata": {"name": "cfg"}, "data": {"greeting": "hi-from-cm"}}),
        )
        .unwrap(),
    )
    .await
    .unwrap();
    let secrets: Api<Secret> = Api::namespaced(cluster.client.clone(), "default");
    secrets
        .create(
            &PostParams::default(),
            &serde_json::from_value(
                json!({"metadata": {"name": "sec"}, "stringData": {"password": "hunter2"}}),
            )
            .unwrap(),
        )
        .await
        .unwrap();
}

async fn start_web_pod(cluster: &Cluster, img: &str) -> Pod {
    // 1. Two containers, env from every source, volumes of every kind.
    cluster
        .create(busybox_pod(
            "web",
            img,
            json!([
                {"name": "main", "image": img, "command": ["sh", "-c", "echo hello-$POD_NAME; exec sleep 3600"],
                 "env": [
                    {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
                    {"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
                    {"name": "GREETING", "valueFrom": {"configMapKeyRef": {"name": "cfg", "key": "greeting"}}},
                    {"name": "PASSWORD", "valueFrom": {"secretKeyRef": {"name": "sec", "key": "password"}}},
                    {"name": "COMBINED", "value": "$(GREETING)!"}
                 ],
                 "volumeMounts": [
                    {"name": "cfg", "mountPath": "/cfg"}, {"name": "sec", "mountPath": "/sec"},
                    {"name": "scratch", "mountPath": "/scratch"}, {"name": "info", "mountPath": "/info"}
                 ],
                 "readinessProbe": {"exec": {"command": ["cat", "/cfg/greeting"]}, "periodSeconds": 1}},
                {"name": "side", "image": img, "command": ["sh", "-c", "echo side > /scratch/side; exec sleep 3600"],
                 "volumeMounts": [{"name": "scratch", "mountPath": "/scratch"}]}
            ]),
            json!({"volumes": [
                {"name": "cfg", "configMap": {"name": "cfg"}},
                {"name": "sec", "secret": {"secretName": "sec"}},
                {"name": "scratch", "emptyDir": {}},
                {"name": "info", "downwardAPI": {"items": [{"path": "labels", "fieldRef": {"fieldPath": "metadata.labels"}}, {"path": "name", "fieldRef": {"fieldPath": "metadata.name"}}]}}
            ]}),
        ))
        .await;
    cluster
        .wait_for("web", "Running and Ready", 90, |p| {
            phase(p) == "Running" && is_ready(p)
        })
        .await
}

fn web_sees_env_files_and_network(cluster: &Cluster, web: &Pod) {
    let ip = web.status.as_ref().unwrap().pod_ip.clone().unwrap();
    assert!(ip.starts_with("10.244.7."), "pod IP {ip}");
    assert_eq!(
        web.status.as_ref().unwrap().host_ip.as_deref(),
        Some(NODE_IP)
    );
    let main_id = container_id(web, "main");
    let env = cluster.exec(&main_id, &["env"]);
    let env = String::from_utf8_lossy(&env.stdout).to_string();
    for want in [
        "POD_NAME=web",
        &format!("POD_IP={ip}"),
        "GREETING=hi-from-cm",
        "PASSWORD=hunter2",
        "COMBINED=hi-from-cm!",
        "KUBERNETES_SERVICE_HOST=",
    ] {
        assert!(env.contains(want), "{want} missing from env:\n{env}");
    }
    let files = cluster.exec(&main_id, &["sh", "-c", "cat /cfg/greeting /sec/password /info/name; echo; cat /scratch/side; hostname; cat /etc/hosts"]);
    let files = String::from_utf8_lossy(&files.stdout).to_string();
    assert!(
        files.starts_with("hi-from-cmhunter2web\nside\nweb\n"),
        "{files}"
    );
    assert!(files.contains(&format!("{ip}\tweb")), "{files}");
    // Pod network: the pod reaches its gateway and the agent's netns reaches the pod.
    let ping = std::process::Command::new("ping")
        .args(["-c1", "-W2", &ip])
        .output()
        .unwrap();
    assert!(
        ping.status.success(),
        "ping {ip}: {}",
        String::from_utf8_lossy(&ping.stdout)
    );
}

async fn qos_parents_carry_kubelet_cpu_weights(cluster: &Cluster, img: &str) {
    // QoS parents as the kubelet keeps them: besteffort at the minimum cpu weight,
    // burstable weighted by its pods' cpu requests, kubepods by the node's allocatable cpu.
    cluster
        .create(busybox_pod(
            "burst",
            img,
            json!([{"name": "c", "image": img, "command": ["sleep", "3600"],
                    "resources": {"requests": {"cpu": "300m"}}}]),
            json!({}),
        ))
        .await;
    cluster
        .wait_for("burst", "Running", 60, |p| phase(p) == "Running")
        .await;
    let v2 = std::path::Path::new("/sys/fs/cgroup/cgroup.controllers").exists();
    let cpu_weight = |qos: &str| {
        let (dir, file) = if v2 {
            ("/sys/fs/cgroup".to_string(), "cpu.weight")
        } else {
            ("/sys/fs/cgroup/cpu".to_string(), "cpu.shares")
        };
        let path = format!("{dir}{}/kubepods{qos}/{file}", cluster.cgroup_root);
        std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("{path}: {e}"))
            .trim()
            .parse::<u64>()
            .unwrap()
    };
    let expect = |shares: u64| {
        if v2 {
            cairn_runtime::cgroups::shares_to_weight(shares)
        } else {
            shares
        }
    };
    let cpus = std::thread::available_parallelism().unwrap().get() as u64;
    assert_eq!(cpu_weight("/besteffort"), expect(2));
    assert_eq!(cpu_weight("/burstable"), expect(300 * 1024 / 1000));
    assert_eq!(cpu_weight(""), expect(cpus * 1024));
}

async fn web_log_file_has_kubelet_layout(cluster: &Cluster, web: &Pod) {
    // CRI log file with the kubelet layout.
    let uid = web.metadata.uid.clone().unwrap();
    let log = cluster
        .path("logs")
        .join(format!("default_web_{uid}/main/0.log"));
    let deadline = Instant::now() + Duration::from_secs(10);
    while !std::fs::read_to_string(&log)
        .unwrap_or_default()
        .contains("stdout F hello-web")
    {
        assert!(
            Instant::now() < deadline,
            "log {} lacks the line: {:?}",
            log.display(),
            std::fs::read_to_string(&log)
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn crash_loop_backs_off(cluster: &Cluster, img: &str) {
    // 2. Crash loop with growing back-off.
    cluster
        .create(busybox_pod(
            "crash",
            img,
            json!([{"name": "c", "image": img, "command": ["sh", "-c", "echo boom; exit 3"]}]),
            json!({}),
        ))
        .await;
    let crashed = cluster
        .wait_for("crash", "CrashLoopBackOff after 2 restarts", 120, |p| {
            container_status(p, "c").is_some_and(|c| {
                c.restart_count >= 2
                    && c.state
                        .as_ref()
                        .and_then(|s| s.waiting.as_ref())
                        .and_then(|w| w.reason.as_deref())
                        == Some("CrashLoopBackOff")
            })
        })
        .await;
    let c = container_status(&crashed, "c").unwrap();
    let last = c.last_state.unwrap().terminated.unwrap();
    assert_eq!(last.exit_code, 3);
    assert_eq!(last.reason.as_deref(), Some("Error"));
    let msg = c.state.unwrap().waiting.unwrap().message.unwrap();
    assert!(
        msg.starts_with("back-off 40s") || msg.starts_with("back-off 80s"),
        "back-off grows: {msg}"
    );
    assert_eq!(phase(&crashed), "Running");
    assert!(cluster
        .events("crash")
        .await
        .iter()
        .any(|(_, r, _)| r == "BackOff"));
}

async fn restart_never_succeeds_and_fails(cluster: &Cluster, img: &str) {
    // 3. restartPolicy Never: success and failure.
    cluster
        .create(busybox_pod(
            "once-ok",
            img,
            json!([{"name": "c", "image": img, "command": ["true"]}]),
            json!({"restartPolicy": "Never"}),
        ))
        .await;
    cluster
        .create(busybox_pod(
            "once-fail",
            img,
            json!([{"name": "c", "image": img, "command": ["sh", "-c", "exit 7"]}]),
            json!({"restartPolicy": "Never"}),
        ))
        .await;
    cluster
        .wait_for("once-ok", "Succeeded", 60, |p| phase(p) == "Succeeded")
        .await;
    let failed = cluster
        .wait_for("once-fail", "Failed", 60, |p| phase(p) == "Failed")
        .await;
    let t = container_status(&failed, "c")
        .unwrap()
        .state
        .unwrap()
        .terminated
        .unwrap();
    assert_eq!(t.exit_code, 7);
}

async fn memory_limit_oom_kills(cluster: &Cluster, img: &str) {
    // 4. Memory limit enforced: OOMKilled.
    cluster
        .create(busybox_pod(
            "oom",
            img,
            json!([{"name": "c", "image": img, "command": ["sh", "-c", "dd if=/dev/zero of=/dev/null bs=128M count=1"],
                    "resources": {"limits": {"memory": "16Mi"}}}]),
            json!({"restartPolicy": "Never"}),
        ))
        .await;
    let oom = cluster
        .wait_for("oom", "Failed", 60, |p| phase(p) == "Failed")
        .await;
    let t = container_status(&oom, "c")
        .unwrap()
        .state
        .unwrap()
        .terminated
        .unwrap();
    assert_eq!(t.reason.as_deref(), Some("OOMKilled"), "{t:?}");
    assert_eq!(t.exit_code, 137);
}

async fn graceful_deletion_waits_for_grace_period(cluster: &Cluster, img: &str) {
    // 5. Graceful deletion: a SIGTERM-ignoring container dies at the deadline, not before.
    cluster
        .create(busybox_pod(
            "stubborn",
            img,
            json!([{"name": "c", "image": img, "command": ["sh", "-c", "trap '' TERM; while true; do sleep 1; done"]}]),
            json!({"terminationGracePeriodSeconds": 3}),
        ))
        .await;
    let stubborn = cluster
        .wait_for("stubborn", "Running", 60, |p| phase(p) == "Running")
        .await;
    let stubborn_id = container_id(&stubborn, "c");
    let started = Instant::now();
    cluster
        .pods()
        .delete("stubborn", &DeleteParams::default())
        .await
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(40);
    while cluster.pods().get_opt("stubborn").await.unwrap().is_some() {
        assert!(
            Instant::now() < deadline,
            "pod never went away:\n{}",
            cluster.agent_log()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        started.elapsed() >= Duration::from_millis(2500),
        "killed before its grace period: {:?}",
        started.elapsed()
    );
    assert!(
        !cluster
            .ctr(&["containers", "ls", "-q"])
            .contains(&stubborn_id),
        "container left behind"
    );
    assert!(cluster
        .events("stubborn")
        .await
        .iter()
        .any(|(_, r, _)| r == "Killing"));
}

async fn web_has_normal_start_events(cluster: &Cluster) {
    // Events of a normal start.
    let reasons: Vec<String> = cluster
        .events("web")
        .await
        .into_iter()
        .map(|(_, r, _)| r)
        .collect();
    for want in ["Pulled", "Created", "Started"] {
        assert!(
            reasons.iter().any(|r| r == want),
            "{want} event missing: {reasons:?}"
        );
    }
}

#[tokio::test]
async fn agent_restart_keeps_containers_and_cleans_up_after_downtime() {
    let _cgroups;
    let mut cluster = Cluster::start().await;
    _cgroups = CgroupCleanup(cluster.cgroup_root.clone());
    let img = cluster.image.clone();
    let sleeper = |name: &str| {
        busybox_pod(
            name,
            &img,
            json!([{"name": "c", "image": img, "command": ["sleep", "3600"]}]),
            json!({}),
        )
    };
    cluster.create(sleeper("steady")).await;
    cluster.create(sleeper("doomed")).await;
    cluster.create(sleeper("doomed-graceful")).await;
    let before = cluster
        .wait_for("steady", "Running", 90, |p| phase(p) == "Running")
        .await;
    let doomed = cluster
        .wait_for("doomed", "Running", 90, |p| phase(p) == "Running")
        .await;
    let graceful = cluster
        .wait_for("doomed-graceful", "Running", 90, |p| phase(p) == "Running")
        .await;
    let started = container_status(&before, "c")
        .unwrap()
        .state
        .unwrap()
        .running
        .unwrap()
        .started_at;
    let steady_id = container_id(&before, "c");
    let doomed_id = container_id(&doomed, "c");
    let graceful_id = container_id(&graceful, "c");

    kill_agent_and_delete_two_pods(&mut cluster).await;
    deleted_pods_cleaned_up_after_restart(&cluster, &doomed_id, &graceful_id).await;
    // Healthy containers were not restarted: same container, same start time, no restarts.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let after = cluster.pods().get("steady").await.unwrap();
    let status = container_status(&after, "c").unwrap();
    assert_eq!(container_id(&after, "c"), steady_id);
    assert_eq!(status.restart_count, 0);
    assert_eq!(status.state.unwrap().running.unwrap().started_at, started);
    assert!(is_ready(&after));

    let cue = stop_containerd_until_node_reports_runtime_down(&mut cluster, &img).await;
    restarted_containerd_still_sees_exit(&mut cluster, &cue).await;
    let after = cluster.pods().get("steady").await.unwrap();
    let status = container_status(&after, "c").unwrap();
    assert_eq!(container_id(&after, "c"), steady_id);
    assert_eq!(status.restart_count, 0);
    assert_eq!(status.state.unwrap().running.unwrap().started_at, started);
    cluster.wait_node_ready().await;
}

async fn kill_agent_and_delete_two_pods(cluster: &mut Cluster) {
    // Agent crashes; meanwhile one pod is force-deleted and one deleted gracefully.
    cluster.kill_agent();
    cluster
        .pods()
        .delete(
            "doomed",
            &DeleteParams {
                grace_period_seconds: Some(0),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    cluster
        .pods()
        .delete("doomed-graceful", &DeleteParams::default())
        .await
        .unwrap();
    assert!(cluster.pods().get_opt("doomed").await.unwrap().is_none());
    cluster.start_agent();
}

async fn deleted_pods_cleaned_up_after_restart(
    cluster: &Cluster,
    doomed_id: &str,
    graceful_id: &str,
) {
    // The graceful one is finished by the returning agent; the forced one is cleaned up.
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let gone_api = cluster
            .pods()
            .get_opt("doomed-graceful")
            .await
            .unwrap()
            .is_none();
        let ids = cluster.ctr(&["containers", "ls", "-q"]);
        if gone_api && !ids.contains(doomed_id) && !ids.contains(graceful_id) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "not cleaned up: api gone={gone_api}, containers:\n{ids}\n{}",
            cluster.agent_log()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

async fn stop_containerd_until_node_reports_runtime_down(cluster: &mut Cluster, img: &str) -> Pod {
    // containerd restarts (an upgrade): containers keep running under their shims, and an
    // exit that happens after the restart is still noticed and recorded.
    cluster
        .create(busybox_pod(
            "exits-on-cue",
            img,
            json!([{"name": "c", "image": img, "command": ["sh", "-c", "while [ ! -f /tmp/go ]; do sleep 0.2; done; exit 3"]}]),
            json!({"restartPolicy": "Never"}),
        ))
        .await;
    let cue = cluster
        .wait_for("exits-on-cue", "Running", 60, |p| phase(p) == "Running")
        .await;
    cluster.containerd.stop_daemon().unwrap();
    // The node reports the runtime down while containerd is away.
    let nodes: Api<k8s_openapi::api::core::v1::Node> = Api::all(cluster.client.clone());
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let node = nodes.get(NODE).await.unwrap();
        let ready = node
            .status
            .and_then(|s| s.conditions)
            .unwrap_or_default()
            .into_iter()
            .find(|c| c.type_ == "Ready")
            .unwrap();
        if ready.status == "False" {
            assert!(
                ready
                    .message
                    .as_deref()
                    .unwrap_or_default()
                    .contains("container runtime is down"),
                "{ready:?}"
            );
            break;
        }
        assert!(
            Instant::now() < deadline,
            "node stayed Ready with containerd stopped"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    cue
}

async fn restarted_containerd_still_sees_exit(cluster: &mut Cluster, cue: &Pod) {
    cluster.containerd.start_daemon().unwrap();
    cluster.wait_node_ready().await;
    let out = cluster.exec(&container_id(cue, "c"), &["touch", "/tmp/go"]);
    assert!(out.status.success(), "{out:?}");
    let done = cluster
        .wait_for("exits-on-cue", "Failed after containerd restart", 60, |p| {
            phase(p) == "Failed"
        })
        .await;
    let t = container_status(&done, "c")
        .unwrap()
        .state
        .unwrap()
        .terminated
        .unwrap();
    assert_eq!(t.exit_code, 3, "{t:?}");
}

#[tokio::test]
async fn bad_input_gets_kubernetes_reasons_and_others_keep_running() {
    let _cgroups;
    let cluster = Cluster::start().await;
    _cgroups = CgroupCleanup(cluster.cgroup_root.clone());
    let img = cluster.image.clone();
    let private = cairn_testsupport::Registry::start_with_htpasswd("alice", "s3cret").unwrap();
    let (private_img, _) = private.push_busybox().await.unwrap();
    let registry = cluster.registry.addr().to_string();
    let one = |name: &str, container: serde_json::Value, extra: serde_json::Value| {
        busybox_pod(name, &img, json!([container]), extra)
    };

    create_bad_input_pods(&cluster, &img, &private_img, &registry, &one).await;
    pull_failures_get_pull_reasons(&cluster).await;
    start_mount_and_memory_failures_get_reasons(&cluster).await;
    failures_have_events_and_healthy_keeps_running(&cluster).await;
    private_image_runs_with_pull_secret(&cluster, &private, &private_img, &one).await;
}

fn waiting_reason(p: &Pod) -> String {
    container_status(p, "c")
        .and_then(|c| c.state)
        .and_then(|s| s.waiting)
        .and_then(|w| w.reason)
        .unwrap_or_default()
}

async fn create_bad_input_pods(
    cluster: &Cluster,
    img: &str,
    private_img: &str,
    registry: &str,
    one: &dyn Fn(&str, serde_json::Value, serde_json::Value) -> serde_json::Value,
) {
    cluster
        .create(one(
            "healthy",
            json!({"name": "c", "image": img, "command": ["sleep", "3600"]}),
            json!({}),
        ))
        .await;
    cluster
        .create(one(
            "unknown-image",
            json!({"name": "c", "image": format!("{registry}/cairn/nope:1")}),
            json!({}),
        ))
        .await;
    cluster
        .create(one(
            "private-image",
            json!({"name": "c", "image": private_img}),
            json!({}),
        ))
        .await;
    cluster
        .create(one(
            "bad-command",
            json!({"name": "c", "image": img, "command": ["/no/such/binary"]}),
            json!({}),
        ))
        .await;
    cluster
        .create(one(
            "bad-hostpath",
            json!({"name": "c", "image": img, "command": ["sleep", "3600"], "volumeMounts": [{"name": "h", "mountPath": "/h"}]}),
            json!({"volumes": [{"name": "h", "hostPath": {"path": "/no/such/dir", "type": "Directory"}}]}),
        ))
        .await;
    cluster
        .create(one(
            "too-big",
            json!({"name": "c", "image": img, "command": ["sleep", "3600"], "resources": {"requests": {"memory": "900Ti"}}}),
            json!({}),
        ))
        .await;
}

async fn pull_failures_get_pull_reasons(cluster: &Cluster) {
    let p = cluster
        .wait_for("unknown-image", "ErrImagePull/ImagePullBackOff", 60, |p| {
            matches!(
                waiting_reason(p).as_str(),
                "ErrImagePull" | "ImagePullBackOff"
            )
        })
        .await;
    let msg = container_status(&p, "c")
        .unwrap()
        .state
        .unwrap()
        .waiting
        .unwrap()
        .message
        .unwrap_or_default();
    assert!(msg.contains("not found"), "{msg}");
    let p = cluster
        .wait_for("private-image", "ErrImagePull/ImagePullBackOff", 60, |p| {
            matches!(
                waiting_reason(p).as_str(),
                "ErrImagePull" | "ImagePullBackOff"
            )
        })
        .await;
    let msg = container_status(&p, "c")
        .unwrap()
        .state
        .unwrap()
        .waiting
        .unwrap()
        .message
        .unwrap_or_default();
    assert!(
        msg.to_lowercase().contains("unauthorized") || msg.contains("401"),
        "{msg}"
    );
}

async fn start_mount_and_memory_failures_get_reasons(cluster: &Cluster) {
    let p = cluster
        .wait_for("bad-command", "StartError", 60, |p| {
            container_status(p, "c").is_some_and(|c| {
                let t = c
                    .state
                    .as_ref()
                    .and_then(|s| s.terminated.clone())
                    .or(c.last_state.as_ref().and_then(|s| s.terminated.clone()));
                t.is_some_and(|t| t.reason.as_deref() == Some("StartError") && t.exit_code == 128)
            })
        })
        .await;
    assert_eq!(phase(&p), "Running", "restartPolicy Always keeps trying");
    let p = cluster
        .wait_for("bad-hostpath", "ContainerCreating", 60, |p| {
            waiting_reason(p) == "ContainerCreating"
        })
        .await;
    assert!(container_status(&p, "c")
        .unwrap()
        .state
        .unwrap()
        .waiting
        .unwrap()
        .message
        .unwrap_or_default()
        .contains("/no/such/dir"));
    let p = cluster
        .wait_for("too-big", "Failed OutOfmemory", 60, |p| {
            phase(p) == "Failed"
        })
        .await;
    assert_eq!(
        p.status.as_ref().unwrap().reason.as_deref(),
        Some("OutOfmemory")
    );
}

async fn failures_have_events_and_healthy_keeps_running(cluster: &Cluster) {
    for (pod, reason) in [
        ("unknown-image", "Failed"),
        ("bad-hostpath", "FailedMount"),
        ("too-big", "OutOfmemory"),
        ("bad-command", "Failed"),
    ] {
        let evs = cluster.events(pod).await;
        assert!(
            evs.iter().any(|(_, r, _)| r == reason),
            "{pod}: no {reason} event in {evs:?}"
        );
    }
    let healthy = cluster
        .wait_for("healthy", "Running", 60, |p| {
            phase(p) == "Running" && is_ready(p)
        })
        .await;
    assert_eq!(container_status(&healthy, "c").unwrap().restart_count, 0);
}

async fn private_image_runs_with_pull_secret(
    cluster: &Cluster,
    private: &cairn_testsupport::Registry,
    private_img: &str,
    one: &dyn Fn(&str, serde_json::Value, serde_json::Value) -> serde_json::Value,
) {
    // The same private image with a kubernetes.io/dockerconfigjson pull secret runs.
    let docker_config =
        json!({"auths": {private.addr().to_string(): {"username": "alice", "password": "s3cret"}}});
    let secret: Secret = serde_json::from_value(json!({
        "metadata": {"name": "regcred"},
        "type": "kubernetes.io/dockerconfigjson",
        "stringData": {".dockerconfigjson": docker_config.to_string()}
    }))
    .unwrap();
    Api::<Secret>::namespaced(cluster.client.clone(), "default")
        .create(&Default::default(), &secret)
        .await
        .unwrap();
    cluster
        .create(one(
            "private-with-secret",
            json!({"name": "c", "image": private_img, "command": ["sleep", "3600"]}),
            json!({"imagePullSecrets": [{"name": "regcred"}]}),
        ))
        .await;
    cluster
        .wait_for("private-with-secret", "Running", 60, |p| {
            phase(p) == "Running"
        })
        .await;
}

#[path = "pods/logs_and_access.rs"]
mod logs_and_access;

#[path = "pods/node_join.rs"]
mod node_join;

#[path = "pods/disk_pressure.rs"]
mod disk_pressure;

#[tokio::test]
async fn embedded_network_controller_configures_pod_network() {
    let _cgroups;
    let cluster = Cluster::start_with(Some("host-gw")).await;
    _cgroups = CgroupCleanup(cluster.cgroup_root.clone());
    let img = cluster.image.clone();
    // The controller wrote the conflist from the podCIDR cairn-control allocated.
    let nodes: Api<k8s_openapi::api::core::v1::Node> = Api::all(cluster.client.clone());
    let node = nodes.get(NODE).await.unwrap();
    let cidr = node.spec.unwrap().pod_cidr.unwrap();
    assert!(cluster.path("net.d").join("10-cairn.conflist").exists());
    assert!(std::fs::read_to_string(cluster.path("subnet.env"))
        .unwrap()
        .contains(&cidr[..cidr.len() - 4]));
    cluster
        .create(busybox_pod(
            "netpod",
            &img,
            json!([{"name": "c", "image": img, "command": ["sleep", "3600"]}]),
            json!({}),
        ))
        .await;
    let p = cluster
        .wait_for("netpod", "Running", 60, |p| phase(p) == "Running")
        .await;
    let ip: std::net::Ipv4Addr = p.status.unwrap().pod_ip.unwrap().parse().unwrap();
    let net: ipnetwork::Ipv4Network = cidr.parse().unwrap();
    assert!(net.contains(ip), "{ip} not in {cidr}");
}

/// The image names containerd holds for the agent.
async fn image_names(cluster: &Cluster) -> Vec<String> {
    let channel = cluster.containerd.channel().await.unwrap();
    cairn_image::list(channel, "cairn-test")
        .await
        .unwrap()
        .into_iter()
        .map(|i| i.name)
        .collect()
}

/// Image GC at its thresholds (here 1 % high, 0 % low, 3 s minimum age, a pass a second):
/// once its pod is gone, an image no container uses is removed; the image of a running
/// container stays (it was weighed in the same pass).
#[tokio::test]
async fn image_gc_removes_unused_images_and_keeps_used_ones() {
    let _cgroups;
    let cluster = Cluster::start_opts(ClusterOptions {
        eager_image_gc: true,
        ..ClusterOptions::default()
    })
    .await;
    _cgroups = CgroupCleanup(cluster.cgroup_root.clone());
    let spec = cairn_testsupport::ImageSpec {
        labels: [("cairn.test/gc".to_string(), "victim".to_string())].into(),
        ..Default::default()
    };
    let built = cairn_testsupport::busybox_image(&spec).unwrap();
    let victim = cluster
        .registry
        .push_image("cairn/gc-victim", "v1", &built)
        .await
        .unwrap();
    let img = cluster.image.clone();
    let keeper = json!([{"name": "c", "image": img, "command": ["sleep", "3600"]}]);
    cluster
        .create(busybox_pod("keeper", &img, keeper, json!({})))
        .await;
    let once = json!([{"name": "c", "image": victim, "command": ["true"]}]);
    cluster
        .create(busybox_pod(
            "once",
            &victim,
            once,
            json!({"restartPolicy": "Never"}),
        ))
        .await;
    cluster
        .wait_for("keeper", "Running", 60, |p| phase(p) == "Running")
        .await;
    cluster
        .wait_for("once", "Succeeded", 60, |p| phase(p) == "Succeeded")
        .await;
    cluster
        .pods()
        .delete("once", &DeleteParams::default())
        .await
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    let names = loop {
        let names = image_names(&cluster).await;
        if !names.iter().any(|n| n.contains("cairn/gc-victim")) {
            break names;
        }
        assert!(
            Instant::now() < deadline,
            "the unused image stayed: {names:?}\n{}",
            cluster.agent_log()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert!(
        names.iter().any(|n| n.contains("cairn/busybox")),
        "the running pod's image went too: {names:?}"
    );
}
