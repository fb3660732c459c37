//! The seed's scenario on a fresh lab of 2 worker nodes (nftables proxy, host-gw network),
//! through stock kubectl only. On the netns driver the control plane is highly available,
//! as the seeds' etcd under the API server: 3 etcd members and 3 cairn-control replicas on
//! nodes 1–3, node-3 tainted for the control plane only; on the docker driver it is one
//! replica on the embedded store. Then: `kubectl create deployment httpd-app --image=httpd --replicas=2`
//! → 2/2 on two nodes with IPs from each node's podCIDR → reachable through a ClusterIP
//! from pods on both nodes and through a NodePort from outside the nodes; then
//! self-healing (a deleted pod, a killed agent, a node taken down), a rolling update under
//! a client loop, logs and deletions; finally `cairn-lab down` restores the host exactly.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::{eventually, processes_mentioning, Claim, HostSnapshot, Lab};
use serde_json::Value;

const PAGE: &str = "It works!";
const MINUTE: Duration = Duration::from_secs(60);

fn json(lab: &Lab, args: &[&str]) -> Value {
    let mut a = args.to_vec();
    a.extend(["-o", "json"]);
    serde_json::from_str(&lab.kubectl(&a)).unwrap()
}

/// name → (node, IP, phase) of the pods matching `selector`, not terminating.
fn pods(lab: &Lab, selector: &str) -> BTreeMap<String, (String, String, String)> {
    let list = json(lab, &["get", "pods", "-l", selector]);
    list["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["metadata"]["deletionTimestamp"].is_null())
        .map(|p| {
            let s = |v: &Value| v.as_str().unwrap_or("").to_string();
            (
                s(&p["metadata"]["name"]),
                (
                    s(&p["spec"]["nodeName"]),
                    s(&p["status"]["podIP"]),
                    s(&p["status"]["phase"]),
                ),
            )
        })
        .collect()
}

/// `kubectl get deployment NAME` once 2/2, with exactly two live pods, both Ready: the
/// Deployment's status alone can lag behind a deletion.
fn deployment_ready(lab: &Lab, name: &str) -> Option<String> {
    let out = lab
        .try_kubectl(&["get", "deployment", name, "--no-headers"])
        .ok()?;
    if out.split_whitespace().nth(1)? != "2/2" {
        return None;
    }
    let list: Value = serde_json::from_str(
        &lab.try_kubectl(&["get", "pods", "-l", &format!("app={name}"), "-o", "json"])
            .ok()?,
    )
    .ok()?;
    let live: Vec<&Value> = list["items"]
        .as_array()?
        .iter()
        .filter(|p| p["metadata"]["deletionTimestamp"].is_null())
        .collect();
    let ready = |p: &&Value| {
        p["status"]["conditions"].as_array().is_some_and(|cs| {
            cs.iter()
                .any(|c| c["type"] == "Ready" && c["status"] == "True")
        })
    };
    (live.len() == 2 && live.iter().all(ready)).then_some(out)
}

fn in_cidr(ip: &str, cidr: &str) -> bool {
    let (net, len) = cidr.split_once('/').unwrap();
    let (ip, net): (std::net::Ipv4Addr, std::net::Ipv4Addr) =
        (ip.parse().unwrap(), net.parse().unwrap());
    let mask = u32::MAX << (32 - len.parse::<u32>().unwrap());
    u32::from(ip) & mask == u32::from(net) & mask
}

/// A pod pinned to `node` that fetches `url` `times` times and exits.
fn fetch_from_pod(lab: &Lab, node: &str, url: &str, times: usize) -> String {
    let name = format!("client-{node}");
    let overrides = serde_json::json!({"spec": {"nodeName": node}}).to_string();
    let script =
        format!("for i in $(seq {times}); do timeout 5 wget -qO- {url} || echo FAILED; done");
    lab.kubectl(&[
        "run",
        &name,
        "--image=busybox",
        "--restart=Never",
        "--overrides",
        &overrides,
        "--",
        "sh",
        "-c",
        &script,
    ]);
    eventually(&format!("{name} to finish"), 2 * MINUTE, || {
        let phase = lab.kubectl(&["get", "pod", &name, "-o", "jsonpath={.status.phase}"]);
        matches!(phase.as_str(), "Succeeded" | "Failed").then_some(())
    });
    let logs = lab.kubectl(&["logs", &name]);
    lab.kubectl(&["delete", "pod", &name, "--wait=false"]);
    eventually(&format!("{name} gone"), MINUTE, || {
        lab.try_kubectl(&["get", "pod", &name])
            .is_err()
            .then_some(())
    });
    logs
}

fn node_pod_cidrs(lab: &Lab) -> BTreeMap<String, String> {
    let nodes = json(lab, &["get", "nodes"]);
    nodes["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| {
            (
                n["metadata"]["name"].as_str().unwrap().to_string(),
                n["spec"]["podCIDR"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

/// One lab at a time: each test compares the whole host before and after.
static ONE_LAB: std::sync::Mutex<()> = std::sync::Mutex::new(());

#[test]
fn seed_scenario_on_netns_nodes_and_down_leaves_nothing() {
    let ha = ["--nodes=3", "--control-replicas=3", "--store=etcd"];
    seed_scenario("e2eseed", 16481, &[&["--driver=netns"], &ha[..]].concat());
}

/// The same on privileged containers (kind-style), whose lab also makes a Docker network
/// and the node image; `down` removes them again.
#[test]
fn seed_scenario_on_docker_nodes_and_down_leaves_nothing() {
    seed_scenario("e2edock", 16484, &["--driver=docker", "--nodes=2"]);
}

fn seed_scenario(name: &str, port: u16, lab_args: &[&str]) {
    let _one = ONE_LAB.lock().unwrap_or_else(|e| e.into_inner());
    let claim = Claim::take(name);
    let before = HostSnapshot::take();
    let control_args = [
        "--control-arg=--node-monitor-grace-period=20",
        "--control-arg=--node-monitor-period=1",
        "--control-arg=--default-unreachable-toleration-seconds=2",
        "--control-arg=--default-not-ready-toleration-seconds=2",
    ];
    let mut lab = Lab::up_claimed(claim, port, &[lab_args, &control_args[..]].concat());
    let roots = lab.roots().to_path_buf();
    if lab_args.contains(&"--nodes=3") {
        // The third node runs a control replica and an etcd member, and no workloads.
        let taint = "node-role.kubernetes.io/control-plane:NoSchedule";
        lab.kubectl(&["taint", "node", "node-3", taint]);
    }

    scenario_deployment_on_two_nodes(&lab);
    scenario_audit_log(&lab);
    let cluster_ip = scenario_service_reachable(&lab);
    scenario_deleted_pod_replaced(&lab);
    scenario_killed_agent_readopts(&lab, &cluster_ip);
    scenario_node_down_moves_pods(&lab, &cluster_ip);
    scenario_rolling_update_without_failures(&lab);
    scenario_logs_and_deletions(&lab);

    lab.down();
    let after = HostSnapshot::take();
    assert_eq!(before, after, "cairn-lab down left the host changed");
    let leftovers = processes_mentioning(&roots.display().to_string());
    assert!(leftovers.is_empty(), "processes left: {leftovers:?}");
    assert!(processes_mentioning(&format!("cl-{name}-")).is_empty());
    for hierarchy in ["", "memory/"] {
        let dir = format!("/sys/fs/cgroup/{hierarchy}cairn-lab/{name}");
        assert!(!std::path::Path::new(&dir).exists(), "{dir} left");
    }
}

fn scenario_deployment_on_two_nodes(lab: &Lab) {
    lab.kubectl(&[
        "create",
        "deployment",
        "httpd-app",
        "--image=httpd",
        "--replicas=2",
    ]);
    let line = eventually("deployment httpd-app 2/2", 2 * MINUTE, || {
        deployment_ready(lab, "httpd-app")
    });
    println!("kubectl get deployment: {line}");
    let wide = lab.kubectl(&["get", "pod", "-o", "wide"]);
    println!("{wide}");
    let cidrs = node_pod_cidrs(lab);
    let pods = pods(lab, "app=httpd-app");
    let nodes: BTreeSet<&str> = pods.values().map(|(n, _, _)| n.as_str()).collect();
    assert_eq!(nodes, BTreeSet::from(["node-1", "node-2"]), "{wide}");
    for (name, (node, ip, phase)) in &pods {
        assert_eq!(phase, "Running", "{name}");
        assert!(
            in_cidr(ip, &cidrs[node]),
            "{name} has {ip}, not from {node}'s {}",
            cidrs[node]
        );
        assert!(wide.contains(ip.as_str()) && wide.contains("Running"));
    }
}

/// The lab audits every request at Metadata level: the admin's create of the
/// deployment and the nodes' own requests, each under its user, in the log of the replica
/// that answered.
fn scenario_audit_log(lab: &Lab) {
    let nodes = lab.roots().join("data").join(&lab.name).join("nodes");
    let logs: Vec<_> = (1..=3)
        .map(|i| nodes.join(format!("node-{i}/control/audit.log")))
        .collect();
    let events: Vec<Value> = eventually("the audit log", MINUTE, || {
        let text: String = logs
            .iter()
            .filter_map(|log| std::fs::read_to_string(log).ok())
            .collect();
        let events: Vec<Value> = text
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect();
        let node_seen = events.iter().any(|e| {
            e["user"]["username"]
                .as_str()
                .is_some_and(|u| u.starts_with("system:node:"))
        });
        (node_seen && !events.is_empty()).then_some(events)
    });
    let created = events
        .iter()
        .find(|e| e["verb"] == "create" && e["objectRef"]["resource"] == "deployments")
        .expect("the deployment's create is audited");
    assert_eq!(created["objectRef"]["name"], "httpd-app");
    assert_eq!(created["level"], "Metadata");
    assert_eq!(created["responseStatus"]["code"], 201);
    let groups = created["user"]["groups"].to_string();
    assert!(groups.contains("system:masters"), "{created}");
}

/// ClusterIP from a pod on each node and from a node; NodePort from the switch.
fn scenario_service_reachable(lab: &Lab) -> String {
    lab.kubectl(&["expose", "deployment", "httpd-app", "--port=80"]);
    let ip = lab.kubectl(&[
        "get",
        "svc",
        "httpd-app",
        "-o",
        "jsonpath={.spec.clusterIP}",
    ]);
    // Each node's proxy programs the new Service within a sync or so.
    for node in ["node-1", "node-2"] {
        let direct = eventually(
            &format!("the ClusterIP answering on {node}"),
            MINUTE,
            || {
                lab.on_node(node, &["curl", "-fsS", "-m", "3", &format!("http://{ip}/")])
                    .ok()
            },
        );
        assert!(direct.contains(PAGE), "from {node} itself: {direct}");
    }
    for node in ["node-1", "node-2"] {
        let out = fetch_from_pod(lab, node, &format!("http://{ip}/"), 6);
        assert_eq!(out.matches(PAGE).count(), 6, "from a pod on {node}: {out}");
    }
    // Both pods served: busybox httpd -v logs each request.
    for name in pods(lab, "app=httpd-app").keys() {
        let log = lab.kubectl(&["logs", name]);
        assert!(log.contains("response:200"), "{name} served nothing: {log}");
    }
    // The `kubernetes` Service (its EndpointSlice written by cairn-control) reaches the
    // API on node-1 from the other node.
    let ca = lab.cluster_ca();
    let version = eventually("the kubernetes Service from node-2", MINUTE, || {
        lab.on_node(
            "node-2",
            &[
                "curl",
                "-fsS",
                "-m",
                "3",
                "--cacert",
                &ca,
                "https://10.96.0.1:443/version",
            ],
        )
        .ok()
    });
    assert!(version.contains("gitVersion"), "{version}");
    lab.kubectl(&[
        "expose",
        "deployment",
        "httpd-app",
        "--name=httpd-np",
        "--type=NodePort",
        "--port=80",
    ]);
    let port = lab.kubectl(&[
        "get",
        "svc",
        "httpd-np",
        "-o",
        "jsonpath={.spec.ports[0].nodePort}",
    ]);
    for node_ip in [lab.node_ip("node-1"), lab.node_ip("node-2")] {
        let url = format!("http://{node_ip}:{port}/");
        let page = eventually(&format!("NodePort {url} from the switch"), MINUTE, || {
            lab.on_switch(&["curl", "-fsS", "-m", "3", &url]).ok()
        });
        assert!(page.contains(PAGE));
    }
    ip
}

fn scenario_deleted_pod_replaced(lab: &Lab) {
    let before = pods(lab, "app=httpd-app");
    let victim = before.keys().next().unwrap().clone();
    lab.kubectl(&["delete", "pod", &victim, "--wait=false"]);
    eventually("a replacement pod and 2/2 again", 2 * MINUTE, || {
        let now = pods(lab, "app=httpd-app");
        (!now.contains_key(&victim)
            && now.len() == 2
            && deployment_ready(lab, "httpd-app").is_some())
        .then_some(())
    });
}

fn container_ids_on(lab: &Lab, node: &str) -> BTreeMap<String, (String, i64)> {
    let list = json(
        lab,
        &[
            "get",
            "pods",
            "-l",
            "app=httpd-app",
            "--field-selector",
            &format!("spec.nodeName={node}"),
        ],
    );
    list["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["metadata"]["deletionTimestamp"].is_null())
        .map(|p| {
            let cs = &p["status"]["containerStatuses"][0];
            (
                p["metadata"]["name"].as_str().unwrap().to_string(),
                (
                    cs["containerID"].as_str().unwrap_or("").to_string(),
                    cs["restartCount"].as_i64().unwrap_or(-1),
                ),
            )
        })
        .collect()
}

fn scenario_killed_agent_readopts(lab: &Lab, cluster_ip: &str) {
    let before = container_ids_on(lab, "node-2");
    assert!(!before.is_empty(), "no httpd-app pod on node-2");
    lab.lab(&["stop", "node-2", "agent", "--kill"]);
    lab.lab(&["start", "node-2", "agent"]);
    // The agent reports again (a fresh status write) with the same containers.
    std::thread::sleep(Duration::from_secs(3));
    let after = eventually("node-2's pod reported Running again", MINUTE, || {
        let now = container_ids_on(lab, "node-2");
        (now.len() == before.len() && deployment_ready(lab, "httpd-app").is_some()).then_some(now)
    });
    assert_eq!(
        before, after,
        "the restarted agent replaced or restarted containers"
    );
    let page = fetch_on(lab, "node-1", cluster_ip);
    assert!(page.contains(PAGE));
}

/// The page from `http://IP/`, fetched on a node.
fn fetch_on(lab: &Lab, node: &str, ip: &str) -> String {
    lab.on_node(node, &["curl", "-fsS", "-m", "3", &format!("http://{ip}/")])
        .unwrap_or_else(|e| panic!("{e}"))
}

/// A node's Ready condition status (True, False, Unknown).
fn ready_status(lab: &Lab, node: &str) -> String {
    let jsonpath = "jsonpath={.status.conditions[?(@.type==\"Ready\")].status}";
    lab.kubectl(&["get", "node", node, "-o", jsonpath])
}

fn scenario_node_down_moves_pods(lab: &Lab, cluster_ip: &str) {
    lab.lab(&["stop", "node-2", "agent", "proxy"]);
    let moved = eventually(
        "both pods on node-1 after node-2 went silent",
        3 * MINUTE,
        || {
            let now = pods(lab, "app=httpd-app");
            let running_on_1 = now
                .values()
                .filter(|(n, _, p)| n == "node-1" && p == "Running")
                .count();
            (running_on_1 == 2 && deployment_ready(lab, "httpd-app").is_some()).then_some(now)
        },
    );
    println!("after node-2 went down: {moved:?}");
    let status = ready_status(lab, "node-2");
    assert_eq!(status, "Unknown");
    // The Service follows: only node-1's pods answer, every time.
    for _ in 0..6 {
        let page = fetch_on(lab, "node-1", cluster_ip);
        assert!(page.contains(PAGE));
    }
    lab.lab(&["start", "node-2", "agent", "proxy"]);
    eventually("node-2 Ready again", 2 * MINUTE, || {
        let s = ready_status(lab, "node-2");
        (s == "True").then_some(())
    });
    // The evicted pods are finished off by the returning agent.
    eventually("the evicted pods gone", 2 * MINUTE, || {
        let all = lab.kubectl(&["get", "pods", "-l", "app=httpd-app", "--no-headers"]);
        (all.lines().count() == 2).then_some(())
    });
}

/// `kubectl set image` while a client loop hits the NodePort: with a readiness probe and a
/// preStop pause (what a Kubernetes user gives a Deployment for this), no request fails.
fn scenario_rolling_update_without_failures(lab: &Lab) {
    let patch = serde_json::json!({"spec": {"template": {"spec": {"containers": [{
        "name": "httpd",
        "readinessProbe": {"httpGet": {"path": "/", "port": 80}, "periodSeconds": 1},
        "lifecycle": {"preStop": {"exec": {"command": ["sleep", "3"]}}}
    }]}}}});
    lab.kubectl(&["patch", "deployment", "httpd-app", "-p", &patch.to_string()]);
    lab.kubectl(&[
        "rollout",
        "status",
        "deployment/httpd-app",
        "--timeout=180s",
    ]);
    // The pods replaced by this first rollout had no preStop pause: let them go, and the
    // proxies catch up, before the client starts.
    eventually("only the patched pods left", 2 * MINUTE, || {
        let all = lab.kubectl(&["get", "pods", "-l", "app=httpd-app", "--no-headers"]);
        (all.lines().count() == 2 && deployment_ready(lab, "httpd-app").is_some()).then_some(())
    });
    std::thread::sleep(Duration::from_secs(2));
    let port = lab.kubectl(&[
        "get",
        "svc",
        "httpd-np",
        "-o",
        "jsonpath={.spec.ports[0].nodePort}",
    ]);
    let stop = Arc::new(AtomicBool::new(false));
    let url = format!("http://{}:{port}/", lab.node_ip("node-1"));
    let client = client_loop(lab.switch_prefix(), url, stop.clone());
    std::thread::sleep(Duration::from_secs(2));
    lab.kubectl(&["set", "image", "deployment/httpd-app", "httpd=httpd:latest"]);
    lab.kubectl(&[
        "rollout",
        "status",
        "deployment/httpd-app",
        "--timeout=180s",
    ]);
    // The old pods' preStop pause and termination run past the rollout's end.
    std::thread::sleep(Duration::from_secs(5));
    stop.store(true, Ordering::Relaxed);
    let (ok, failed) = client.join().unwrap();
    println!(
        "rolling update: {ok} requests answered, {} failed",
        failed.len()
    );
    assert!(ok > 20, "too few requests to mean anything: {ok}");
    assert!(
        failed.is_empty(),
        "requests failed during the rollout: {failed:?}"
    );
    let images = lab.kubectl(&[
        "get",
        "pods",
        "-l",
        "app=httpd-app",
        "-o",
        "jsonpath={.items[*].spec.containers[0].image}",
    ]);
    assert_eq!(
        images.split_whitespace().collect::<Vec<_>>(),
        ["httpd:latest", "httpd:latest"]
    );
}

/// Fetches `url` from the switch every 20 ms until `stop`; (answered, failures).
fn client_loop(
    switch: Vec<String>,
    url: String,
    stop: Arc<AtomicBool>,
) -> std::thread::JoinHandle<(usize, Vec<String>)> {
    std::thread::spawn(move || {
        let (mut ok, mut failed) = (0, Vec::new());
        while !stop.load(Ordering::Relaxed) {
            let out = std::process::Command::new(&switch[0])
                .args(&switch[1..])
                .args(["curl", "-fsS", "-m", "3", url.as_str()])
                .output()
                .unwrap();
            if out.status.success() && String::from_utf8_lossy(&out.stdout).contains(PAGE) {
                ok += 1;
            } else {
                let at = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .unwrap();
                failed.push(format!(
                    "at {:.3}: {}",
                    at.as_secs_f64(),
                    String::from_utf8_lossy(&out.stderr)
                ));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        (ok, failed)
    })
}

fn scenario_logs_and_deletions(lab: &Lab) {
    let logs = lab.kubectl(&["logs", "deployment/httpd-app"]);
    assert!(logs.contains("response:200"), "{logs}");
    lab.kubectl(&["delete", "deployment", "httpd-app"]);
    eventually("the deployment's pods gone", 2 * MINUTE, || {
        lab.kubectl(&["get", "pods", "-l", "app=httpd-app", "--no-headers"])
            .trim()
            .is_empty()
            .then_some(())
    });
    lab.kubectl(&["create", "namespace", "scratch"]);
    lab.kubectl(&[
        "-n",
        "scratch",
        "run",
        "sleeper",
        "--image=busybox",
        "--",
        "sleep",
        "3600",
    ]);
    eventually("the pod in scratch Running", 2 * MINUTE, || {
        let p = lab.kubectl(&[
            "-n",
            "scratch",
            "get",
            "pod",
            "sleeper",
            "-o",
            "jsonpath={.status.phase}",
        ]);
        (p == "Running").then_some(())
    });
    lab.kubectl(&["delete", "namespace", "scratch", "--wait=false"]);
    eventually("namespace scratch gone", 3 * MINUTE, || {
        lab.try_kubectl(&["get", "namespace", "scratch"])
            .is_err()
            .then_some(())
    });
}
