//! Acceptance for the scheduler embedded in cairn-control, driven through stock kubectl
//! against simulated nodes (Node objects only; no agent runs, so pods stay Pending once
//! bound, and the test reads where they were bound).

// Test code: a failed setup step should fail the test loudly.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{Kubectl, Server};
use serde_json::{json, Value};

fn node_yaml(name: &str, cpu: &str, labels: &[(&str, &str)]) -> String {
    let mut l = json!({"kubernetes.io/hostname": name});
    for (k, v) in labels {
        l[*k] = json!(v);
    }
    json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": l},
        "status": {
            "capacity": {"cpu": cpu, "memory": "8Gi", "pods": "110"},
            "allocatable": {"cpu": cpu, "memory": "8Gi", "pods": "110"},
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    })
    .to_string()
}

/// (name, cpu, labels)
type NodeSpec<'a> = (&'a str, &'a str, &'a [(&'a str, &'a str)]);

fn add_nodes(k: &Kubectl, nodes: &[NodeSpec]) {
    for (name, cpu, labels) in nodes {
        k.ok_stdin(&["apply", "-f", "-"], &node_yaml(name, cpu, labels));
    }
}

fn pod_json(name: &str, spec_extra: Value) -> String {
    let mut spec = json!({"containers": [{"name": "c", "image": "busybox"}]});
    if let (Some(s), Some(extra)) = (spec.as_object_mut(), spec_extra.as_object()) {
        for (k, v) in extra {
            s.insert(k.clone(), v.clone());
        }
    }
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": {"app": name}}, "spec": spec}).to_string()
}

fn create_pod(k: &Kubectl, name: &str, spec_extra: Value) {
    k.ok_stdin(&["create", "-f", "-"], &pod_json(name, spec_extra));
}

fn node_of(k: &Kubectl, pod: &str) -> String {
    k.ok(&["get", "pod", pod, "-o", "jsonpath={.spec.nodeName}"])
}

fn wait_bound(k: &Kubectl, pod: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let n = node_of(k, pod);
        if !n.is_empty() {
            return n;
        }
        assert!(Instant::now() < deadline, "pod {pod} was never bound");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The FailedScheduling message for the pod, once there is one.
fn wait_failed(k: &Kubectl, pod: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let out = k.ok(&[
            "get",
            "events",
            "--field-selector",
            &format!("involvedObject.name={pod},reason=FailedScheduling"),
            "-o",
            "jsonpath={.items[*].message}",
        ]);
        if !out.is_empty() {
            return out;
        }
        assert!(
            Instant::now() < deadline,
            "no FailedScheduling event for {pod}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn assert_stays_unbound(k: &Kubectl, pod: &str) {
    std::thread::sleep(Duration::from_millis(1500));
    assert_eq!(node_of(k, pod), "", "{pod} should not be bound");
}

#[test]
fn pods_spread_obey_selectors_and_report_why_not() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path());
    let k = Kubectl::new(33, &server);
    add_nodes(
        &k,
        &[
            ("n1", "4", &[("disk", "ssd")]),
            ("n2", "4", &[]),
            ("n3", "4", &[]),
        ],
    );
    // Equal pods spread evenly (least allocated).
    for i in 0..6 {
        k.ok(&["run", &format!("p{i}"), "--image=busybox", "--overrides",
            r#"{"spec":{"containers":[{"name":"c","image":"busybox","resources":{"requests":{"cpu":"500m"}}}]}}"#]);
    }
    let mut per_node = std::collections::BTreeMap::<String, usize>::new();
    for i in 0..6 {
        *per_node
            .entry(wait_bound(&k, &format!("p{i}")))
            .or_default() += 1;
    }
    assert_eq!(
        per_node.values().copied().collect::<Vec<_>>(),
        [2, 2, 2],
        "{per_node:?}"
    );
    // The node selector pins the pod to n1.
    create_pod(&k, "ssd", json!({"nodeSelector": {"disk": "ssd"}}));
    assert_eq!(wait_bound(&k, "ssd"), "n1");
    // Too big for every node: Pending with upstream's message and condition.
    create_pod(
        &k,
        "huge",
        json!({"containers": [{"name": "c", "image": "busybox", "resources": {"requests": {"cpu": "5"}}}], "nodeSelector": {"disk": "ssd"}}),
    );
    let msg = wait_failed(&k, "huge");
    assert_eq!(msg, "0/3 nodes are available: 1 Insufficient cpu, 2 node(s) didn't match Pod's node affinity/selector. preemption: 0/3 nodes are available: 1 No preemption victims found for incoming pod, 2 Preemption is not helpful for scheduling.");
    let cond = k.ok(&[
        "get",
        "pod",
        "huge",
        "-o",
        "jsonpath={.status.conditions[?(@.type==\"PodScheduled\")].reason}",
    ]);
    assert_eq!(cond, "Unschedulable");
    // A node change retries the pod (after its back-off); the same failure is counted on
    // the one event rather than written again.
    k.ok(&["label", "node", "n3", "retry=1"]);
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let counts = k.ok(&[
            "get",
            "events",
            "--field-selector",
            "involvedObject.name=huge,reason=FailedScheduling",
            "-o",
            "jsonpath={.items[*].count}",
        ]);
        if counts == "2" {
            break;
        }
        assert!(
            counts == "1" && Instant::now() < deadline,
            "FailedScheduling counts: {counts:?}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    let describe = k.ok(&["describe", "pod", "huge"]);
    assert!(
        describe.contains("FailedScheduling") && describe.contains("default-scheduler"),
        "{describe}"
    );
    // Scheduled events name the node.
    let ev = k.ok(&[
        "get",
        "events",
        "--field-selector",
        "involvedObject.name=ssd,reason=Scheduled",
        "-o",
        "jsonpath={.items[0].message}",
    ]);
    assert_eq!(ev, "Successfully assigned default/ssd to n1");
    // Cordon stops placements; a cordoned cluster says so.
    k.ok(&["cordon", "n1", "n2"]);
    create_pod(&k, "after-cordon", json!({}));
    assert_eq!(wait_bound(&k, "after-cordon"), "n3");
    k.ok(&["cordon", "n3"]);
    create_pod(&k, "nowhere", json!({}));
    assert_eq!(
        wait_failed(&k, "nowhere"),
        "0/3 nodes are available: 3 node(s) were unschedulable. preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling."
    );
    // Uncordoning is a node event: the waiting pod is retried without any poke.
    k.ok(&["uncordon", "n2"]);
    assert_eq!(wait_bound(&k, "nowhere"), "n2");
}

#[test]
fn affinity_spread_and_gates() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path());
    let k = Kubectl::new(33, &server);
    add_nodes(
        &k,
        &[
            ("a1", "4", &[("topology.kubernetes.io/zone", "a")]),
            ("a2", "4", &[("topology.kubernetes.io/zone", "a")]),
            ("b1", "4", &[("topology.kubernetes.io/zone", "b")]),
        ],
    );
    // Required anti-affinity on hostname: one per node, the fourth waits.
    let anti = json!({"affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"group": "solo"}}, "topologyKey": "kubernetes.io/hostname"}]}}});
    let mut nodes = std::collections::BTreeSet::new();
    for i in 0..4 {
        let mut p: Value =
            serde_json::from_str(&pod_json(&format!("solo{i}"), anti.clone())).unwrap();
        p["metadata"]["labels"]["group"] = json!("solo");
        k.ok_stdin(&["create", "-f", "-"], &p.to_string());
        if i < 3 {
            nodes.insert(wait_bound(&k, &format!("solo{i}")));
        }
    }
    assert_eq!(nodes.len(), 3);
    // The placed pods' own anti-affinity is checked first, as upstream does.
    assert_eq!(
        wait_failed(&k, "solo3"),
        "0/3 nodes are available: 3 node(s) didn't satisfy existing pods anti-affinity rules. preemption: 0/3 nodes are available: 3 No preemption victims found for incoming pod."
    );
    // Zone spread with maxSkew 1: two pods land in different zones.
    let spread = json!({"topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone",
        "whenUnsatisfiable": "DoNotSchedule", "labelSelector": {"matchLabels": {"tier": "spread"}}}]});
    let mut zones = std::collections::BTreeSet::new();
    for i in 0..2 {
        let mut p: Value =
            serde_json::from_str(&pod_json(&format!("sp{i}"), spread.clone())).unwrap();
        p["metadata"]["labels"]["tier"] = json!("spread");
        k.ok_stdin(&["create", "-f", "-"], &p.to_string());
        let n = wait_bound(&k, &format!("sp{i}"));
        zones.insert(if n.starts_with('a') { "a" } else { "b" });
    }
    assert_eq!(zones.len(), 2, "one pod per zone");
    // Scheduling gates hold a pod until removed.
    create_pod(
        &k,
        "gated",
        json!({"schedulingGates": [{"name": "example.com/hold"}]}),
    );
    assert_stays_unbound(&k, "gated");
    let status = k.ok(&["get", "pod", "gated", "-o", "jsonpath={.status.conditions}"]);
    assert!(
        !status.contains("Unschedulable"),
        "a gated pod is not attempted: {status}"
    );
    k.ok(&[
        "patch",
        "pod",
        "gated",
        "--type=json",
        "-p",
        r#"[{"op":"remove","path":"/spec/schedulingGates"}]"#,
    ]);
    wait_bound(&k, "gated");
    // Required affinity to a label no pod has: waits. Labelling a bound pod is a cluster
    // event that updates the scheduler's view and retries the waiting pod.
    create_pod(
        &k,
        "needs-friend",
        json!({"affinity": {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"friend": "yes"}}, "topologyKey": "kubernetes.io/hostname"}]}}}),
    );
    assert!(wait_failed(&k, "needs-friend")
        .starts_with("0/3 nodes are available: 3 node(s) didn't match pod affinity rules."));
    k.ok(&["label", "pod", "sp0", "friend=yes"]);
    assert_eq!(wait_bound(&k, "needs-friend"), node_of(&k, "sp0"));
    // An invalid operator never reaches the scheduler: 422 at admission.
    let bad = pod_json(
        "bad",
        json!({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [{"key": "a", "operator": "Near", "values": ["x"]}]}]}}}}),
    );
    let out = k
        .command(&["create", "-f", "-"])
        .stdin(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = finish_with_stdin(out, &bad);
    assert!(
        stderr.contains("operator: Invalid value: \"Near\": not a valid selector operator"),
        "{stderr}"
    );
}

#[test]
fn priority_classes_and_preemption() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path());
    let k = Kubectl::new(33, &server);
    let pcs = k.ok(&["get", "priorityclasses"]);
    assert!(
        pcs.contains("system-node-critical") && pcs.contains("2000001000"),
        "{pcs}"
    );
    k.ok(&[
        "create",
        "priorityclass",
        "high",
        "--value=1000",
        "--description=test",
    ]);
    let err = k.fails(&["create", "priorityclass", "system-mine", "--value=1"]);
    assert!(err.contains("reserved for system use only"), "{err}");
    add_nodes(&k, &[("n1", "2", &[])]);
    let cpu =
        |q: &str| json!([{"name": "c", "image": "busybox", "resources": {"requests": {"cpu": q}}}]);
    create_pod(&k, "low", json!({"containers": cpu("1500m")}));
    assert_eq!(wait_bound(&k, "low"), "n1");
    // An unknown class is refused at admission.
    let bad = pod_json("nope", json!({"priorityClassName": "missing"}));
    let child = k
        .command(&["create", "-f", "-"])
        .stdin(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = finish_with_stdin(child, &bad);
    assert!(
        stderr.contains("pods \"nope\" is forbidden: no PriorityClass with name missing was found"),
        "{stderr}"
    );
    // The high-priority pod fits only if `low` goes: it is nominated and `low` deleted.
    create_pod(
        &k,
        "urgent",
        json!({"priorityClassName": "high", "containers": cpu("1")}),
    );
    assert_eq!(
        k.ok(&["get", "pod", "urgent", "-o", "jsonpath={.spec.priority}"]),
        "1000"
    );
    let deadline = Instant::now() + Duration::from_secs(30);
    while k
        .ok(&[
            "get",
            "pod",
            "low",
            "-o",
            "jsonpath={.metadata.deletionTimestamp}",
        ])
        .is_empty()
    {
        assert!(Instant::now() < deadline, "low was never preempted");
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(
        k.ok(&[
            "get",
            "pod",
            "urgent",
            "-o",
            "jsonpath={.status.nominatedNodeName}"
        ]),
        "n1"
    );
    let ev = k.ok(&[
        "get",
        "events",
        "--field-selector",
        "involvedObject.name=low,reason=Preempted",
        "-o",
        "jsonpath={.items[0].message}",
    ]);
    assert!(
        ev.starts_with("Preempted by pod ") && ev.ends_with(" on node n1"),
        "{ev}"
    );
    // Acting as n1's agent: the victim's containers are gone, confirm the deletion.
    k.ok(&["delete", "pod", "low", "--grace-period=0", "--force"]);
    assert_eq!(wait_bound(&k, "urgent"), "n1");
    // Equal priority never preempts.
    create_pod(
        &k,
        "peer",
        json!({"priorityClassName": "high", "containers": cpu("1500m")}),
    );
    assert!(wait_failed(&k, "peer").ends_with(
        "preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod."
    ));
}

fn finish_with_stdin(mut child: std::process::Child, input: &str) -> String {
    use std::io::Write;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(!out.status.success());
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn profiles_route_by_scheduler_name_and_bad_config_stops_startup() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("sched.yaml");
    std::fs::write(
        &cfg,
        r#"apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: default-scheduler
- schedulerName: packer
  plugins:
    score:
      disabled: [{name: "*"}]
      enabled: [{name: NodeResourcesFit, weight: 1}]
  pluginConfig:
  - name: NodeResourcesFit
    args: {scoringStrategy: {type: MostAllocated}}
"#,
    )
    .unwrap();
    let server = Server::start_with(
        &dir.path().join("data"),
        &["--scheduler-config", cfg.to_str().unwrap()],
    );
    let k = Kubectl::new(33, &server);
    add_nodes(&k, &[("n1", "8", &[]), ("n2", "8", &[]), ("n3", "8", &[])]);
    let packed = json!({"schedulerName": "packer", "containers": [{"name": "c", "image": "busybox", "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}]});
    let mut used = std::collections::BTreeSet::new();
    for i in 0..4 {
        create_pod(&k, &format!("pk{i}"), packed.clone());
        used.insert(wait_bound(&k, &format!("pk{i}")));
    }
    assert_eq!(used.len(), 1, "MostAllocated packs onto one node: {used:?}");
    // A pod for a scheduler nobody runs is left alone: no binding, no event.
    create_pod(&k, "foreign", json!({"schedulerName": "someone-else"}));
    assert_stays_unbound(&k, "foreign");
    let ev = k.ok(&[
        "get",
        "events",
        "--field-selector",
        "involvedObject.name=foreign",
        "-o",
        "name",
    ]);
    assert_eq!(ev.trim(), "");

    let bad = dir.path().join("bad.yaml");
    std::fs::write(
        &bad,
        "profiles:\n- schedulerName: x\n  plugins:\n    score:\n      enabled: [{name: Bogus}]\n",
    )
    .unwrap();
    let out = std::process::Command::new(common::BIN)
        .args(["serve", "--bind", "127.0.0.1:0", "--data-dir"])
        .arg(dir.path().join("data2"))
        .args(["--scheduler-config", bad.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("profiles[0].plugins.score.enabled[0].name: unknown plugin \"Bogus\""),
        "{stderr}"
    );
}

/// A scheduler extender in the test process: filter rejects `n2`, prioritize prefers
/// `n3`, bind posts the Binding to the API itself and records it. `garbage`: the
/// filter answers something that is not JSON.
struct TestExtender {
    url: String,
    binds: Arc<Mutex<Vec<String>>>,
    _rt: tokio::runtime::Runtime,
}

fn start_extender(
    api: Arc<Mutex<Option<(String, reqwest::Client)>>>,
    garbage: bool,
) -> TestExtender {
    use axum::routing::post;
    let rt = tokio::runtime::Runtime::new().unwrap();
    let binds = Arc::new(Mutex::new(Vec::new()));
    let recorded = binds.clone();
    let listener = rt
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .unwrap();
    let url = format!("http://{}/sched", listener.local_addr().unwrap());
    let app = axum::Router::new()
        .route("/sched/filter", post(move |body: String| async move {
            let args: Value = serde_json::from_str(&body).unwrap();
            if garbage {
                return "this is not JSON".to_string();
            }
            let names: Vec<String> = args["nodenames"].as_array().unwrap().iter().map(|n| n.as_str().unwrap().to_string()).collect();
            let keep: Vec<&String> = names.iter().filter(|n| *n != "n2").collect();
            json!({"nodenames": keep, "failedNodes": {"n2": "extender says no"}}).to_string()
        }))
        .route("/sched/prioritize", post(|| async { json!([{"host": "n3", "score": 10}]).to_string() }))
        .route("/sched/bind", post(move |body: String| {
            let args: Value = serde_json::from_str(&body).unwrap();
            let (api, http) = api.lock().unwrap().clone().unwrap();
            let recorded = recorded.clone();
            async move {
                let ns = args["podNamespace"].as_str().unwrap().to_string();
                let name = args["podName"].as_str().unwrap().to_string();
                let binding = json!({"apiVersion": "v1", "kind": "Binding", "metadata": {"name": name},
                    "target": {"apiVersion": "v1", "kind": "Node", "name": args["node"]}});
                let r = http
                    .post(format!("{api}/api/v1/namespaces/{ns}/pods/{name}/binding"))
                    .json(&binding)
                    .send()
                    .await;
                match r {
                    Ok(resp) if resp.status().is_success() => {
                        recorded.lock().unwrap().push(name);
                        "{}".to_string()
                    }
                    other => json!({"error": format!("{other:?}")}).to_string(),
                }
            }
        }));
    rt.spawn(async move { axum::serve(listener, app).await });
    TestExtender {
        url,
        binds,
        _rt: rt,
    }
}

fn extender_config(dir: &std::path::Path, name: &str, body: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, body).unwrap();
    path.to_str().unwrap().to_string()
}

#[test]
fn extenders_filter_prioritize_bind_and_fail_clearly() {
    let dir = tempfile::tempdir().unwrap();
    let api = Arc::new(Mutex::new(None));
    let ext = start_extender(api.clone(), false);
    let cfg = extender_config(dir.path(), "sched.yaml", &format!(
        "extenders:\n- urlPrefix: {}\n  filterVerb: filter\n  prioritizeVerb: prioritize\n  bindVerb: bind\n  weight: 5\n  nodeCacheCapable: true\n  httpTimeout: 5s\n",
        ext.url
    ));
    let server = Server::start_with(&dir.path().join("data"), &["--scheduler-config", &cfg]);
    *api.lock().unwrap() = Some((server.url.clone(), server.http()));
    let k = Kubectl::new(33, &server);
    add_nodes(&k, &[("n1", "2", &[]), ("n2", "4", &[]), ("n3", "4", &[])]);
    let half_cpu = json!({"containers": [{"name": "c", "image": "busybox", "resources": {"requests": {"cpu": "500m"}}}]});
    for i in 0..3 {
        create_pod(&k, &format!("e{i}"), half_cpu.clone());
    }
    for i in 0..3 {
        assert_eq!(
            wait_bound(&k, &format!("e{i}")),
            "n3",
            "the extender's scores win"
        );
    }
    assert_eq!(
        ext.binds.lock().unwrap().len(),
        3,
        "the extender bound them"
    );
    // Too big for n1 (2 cpus) and n3 (1.5 of 4 used), n2 refused by the extender.
    create_pod(
        &k,
        "big",
        json!({"containers": [{"name": "c", "image": "busybox", "resources": {"requests": {"cpu": "3"}}}]}),
    );
    assert_eq!(
        wait_failed(&k, "big"),
        "0/3 nodes are available: 1 extender says no, 2 Insufficient cpu. preemption: 0/3 nodes are available: 3 No preemption victims found for incoming pod."
    );
    drop(server);

    // An ignorable extender that cannot be reached is skipped.
    let cfg = extender_config(dir.path(), "dead.yaml",
        "extenders:\n- urlPrefix: http://127.0.0.1:9/unreachable\n  filterVerb: filter\n  ignorable: true\n  httpTimeout: 1s\n");
    let server = Server::start_with(&dir.path().join("data2"), &["--scheduler-config", &cfg]);
    let k = Kubectl::new(33, &server);
    add_nodes(&k, &[("n1", "4", &[])]);
    create_pod(&k, "plain", json!({}));
    assert_eq!(wait_bound(&k, "plain"), "n1");
    drop(server);

    // One that answers garbage and is not ignorable fails the attempt with a clear event.
    let garbage = start_extender(api.clone(), true);
    let cfg = extender_config(
        dir.path(),
        "garbage.yaml",
        &format!(
            "extenders:\n- urlPrefix: {}\n  filterVerb: filter\n",
            garbage.url
        ),
    );
    let server = Server::start_with(&dir.path().join("data3"), &["--scheduler-config", &cfg]);
    let k = Kubectl::new(33, &server);
    add_nodes(&k, &[("n1", "4", &[])]);
    create_pod(&k, "victim", json!({}));
    let msg = wait_failed(&k, "victim");
    assert!(
        msg.contains("/sched/filter") && msg.contains("invalid answer"),
        "{msg}"
    );
    assert_stays_unbound(&k, "victim");
}

/// A standalone component's child process, killed when the test ends.
struct Component(std::process::Child);

impl Drop for Component {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn free_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().port()
}

/// `cairn-control <args>` with its secure port on loopback `port`.
fn component(server: &Server, args: &[&str], port: u16) -> Component {
    let child = std::process::Command::new(common::BIN)
        .args(args)
        .arg("--kubeconfig")
        .arg(&server.kubeconfig)
        .args(["--bind-address", "127.0.0.1", "--secure-port"])
        .arg(port.to_string())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    Component(child)
}

/// GET `path` on a component's port (its certificate is self-signed, as upstream's).
fn get(port: u16, path: &str, token: Option<&str>) -> (u16, String) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let client = reqwest::Client::builder()
            .tls_danger_accept_invalid_certs(true)
            .build()
            .unwrap();
        let mut req = client.get(format!("https://127.0.0.1:{port}{path}"));
        if let Some(token) = token {
            req = req.bearer_auth(token);
        }
        match req.send().await {
            Ok(r) => (r.status().as_u16(), r.text().await.unwrap_or_default()),
            Err(_) => (0, String::new()),
        }
    })
}

/// The standalone scheduler and controllers serve `/healthz` to anyone and `/metrics`
/// (upstream's names, parsed by a real parser) to whom a SubjectAccessReview allows: a
/// ServiceAccount bound to `system:monitoring`; one without the binding is refused in
/// upstream's words, and no credentials is a 401.
#[test]
fn standalone_scheduler_and_controllers_serve_metrics_to_whom_rbac_allows() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start_with(
        &dir.path().join("data"),
        &["--scheduler=false", "--controllers="],
    );
    let k = Kubectl::new(33, &server);
    let (sched_port, ctrl_port) = (free_port(), free_port());
    let _scheduler = component(&server, &["scheduler"], sched_port);
    let _controllers = component(&server, &["controllers", "--controllers=*"], ctrl_port);
    for port in [sched_port, ctrl_port] {
        common::wait_for("the secure port's /healthz", 30, || {
            (get(port, "/healthz", None) == (200, "ok".into())).then_some(())
        });
    }
    add_nodes(&k, &[("n1", "8", &[])]);
    create_pod(&k, "p0", json!({}));
    assert_eq!(wait_bound(&k, "p0"), "n1", "the standalone scheduler binds");
    k.ok(&["create", "serviceaccount", "prom"]);
    k.ok(&["create", "serviceaccount", "nobody"]);
    k.ok(&[
        "create",
        "clusterrolebinding",
        "prom",
        "--clusterrole=system:monitoring",
        "--serviceaccount=default:prom",
    ]);
    let prom = k.ok(&["create", "token", "prom"]);
    let nobody = k.ok(&["create", "token", "nobody"]);
    let scrapes = [
        (sched_port, "scheduler_schedule_attempts_total"),
        (ctrl_port, "workqueue_adds_total"),
    ];
    for (port, series) in scrapes {
        assert_eq!(get(port, "/metrics", None).0, 401);
        let refused = get(port, "/metrics", Some(nobody.trim()));
        assert_eq!(
            refused,
            (
                403,
                "forbidden: User \"system:serviceaccount:default:nobody\" cannot get path \"/metrics\"\n"
                    .into()
            )
        );
        let (status, text) = get(port, "/metrics", Some(prom.trim()));
        assert_eq!(status, 200, "{text}");
        let lines = text.lines().map(|l| Ok(l.to_string()));
        let scrape = prometheus_parse::Scrape::parse(lines).unwrap();
        assert!(
            scrape.samples.iter().any(|s| s.metric == series),
            "{series} missing:\n{text}"
        );
        assert_eq!(get(port, "/nothing", Some(prom.trim())).0, 404);
    }
}
