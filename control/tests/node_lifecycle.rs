//! Acceptance for the node lifecycle, taint eviction and pod GC controllers in
//! cairn-control, through stock kubectl against simulated nodes whose kubelet keeps their
//! Leases alive until the test makes a node go dark.

// Test code: a failed setup step should fail the test loudly.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::time::{Duration, Instant};

use common::sim::{add_node, start_kubelet, FakeKubelet};
use common::{wait_for, Kubectl, Server};
use serde_json::{json, Value};

fn ready_status(node: &Value) -> String {
    node["status"]["conditions"]
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["type"] == "Ready"))
        .and_then(|c| c["status"].as_str())
        .unwrap_or("")
        .to_string()
}

fn taint_keys(node: &Value) -> Vec<String> {
    node["spec"]["taints"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|t| {
            format!(
                "{}:{}",
                t["key"].as_str().unwrap_or(""),
                t["effect"].as_str().unwrap_or("")
            )
        })
        .collect()
}

/// `(name, node, ready)` of the app's pods that are not being deleted.
fn pods(k: &Kubectl) -> Vec<(String, String, bool)> {
    let list = k.json(&["get", "pods", "-l", "app=web"]);
    list["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|p| p["metadata"]["deletionTimestamp"].is_null())
        .map(|p| {
            let ready = p["status"]["conditions"].as_array().is_some_and(|cs| {
                cs.iter()
                    .any(|c| c["type"] == "Ready" && c["status"] == "True")
            });
            (
                p["metadata"]["name"].as_str().unwrap_or("").to_string(),
                p["spec"]["nodeName"].as_str().unwrap_or("").to_string(),
                ready,
            )
        })
        .collect()
}

#[test]
fn a_silent_node_is_tainted_its_pods_evicted_and_replaced() {
    let dir = tempfile::tempdir().unwrap();
    let args = [
        "--node-monitor-grace-period",
        "4",
        "--node-monitor-period",
        "0.5",
        "--node-eviction-rate",
        "10",
        // The configured default toleration the pods get at admission.
        "--default-unreachable-toleration-seconds",
        "6",
    ];
    let server = Server::start_with(dir.path(), &args);
    let kubelet = start_kubelet(&server);
    let k = Kubectl::new(33, &server);
    for n in ["node-1", "node-2", "node-3"] {
        add_node(&k, n, "4");
    }
    let running = three_ready_pods_with_default_tolerations(&k);

    let dark = running[0].1.clone();
    let victims: Vec<String> = running
        .iter()
        .filter(|p| p.1 == dark)
        .map(|p| p.0.clone())
        .collect();
    silent_node_is_tainted_and_its_pods_turn_unready(&k, &kubelet, &dark, &victims);
    victims_are_evicted_and_replaced(&k, &dark, &victims);

    // The node comes back: untainted.
    kubelet.resume(&dark);
    wait_for("the node back and untainted", 30, || {
        let node = k.json(&["get", "node", &dark]);
        (ready_status(&node) == "True" && taint_keys(&node).is_empty()).then_some(())
    });

    all_nodes_dark_evicts_nobody(&k, &kubelet);
}

/// The app's three pods, ready, with their tolerations; healthy nodes stay untainted.
fn three_ready_pods_with_default_tolerations(k: &Kubectl) -> Vec<(String, String, bool)> {
    let deployment = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
        "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}});
    k.ok_stdin(&["apply", "-f", "-"], &deployment.to_string());
    let running = wait_for("3 ready pods", 60, || {
        let p = pods(k);
        (p.len() == 3 && p.iter().all(|p| p.2)).then_some(p)
    });
    let pod0 = k.json(&["get", "pod", &running[0].0]);
    let seconds = |key: &str| {
        pod0["spec"]["tolerations"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["key"] == key)
            .unwrap()["tolerationSeconds"]
            .clone()
    };
    assert_eq!(
        seconds("node.kubernetes.io/unreachable"),
        6,
        "the configured default"
    );
    assert_eq!(seconds("node.kubernetes.io/not-ready"), 300);
    // Healthy nodes stay untainted well past the grace period.
    std::thread::sleep(Duration::from_secs(5));
    for n in ["node-1", "node-2", "node-3"] {
        let node = k.json(&["get", "node", n]);
        assert_eq!(ready_status(&node), "True", "{node}");
        assert!(taint_keys(&node).is_empty(), "{node}");
    }
    running
}

fn silent_node_is_tainted_and_its_pods_turn_unready(
    k: &Kubectl,
    kubelet: &FakeKubelet,
    dark: &str,
    victims: &[String],
) {
    let went_dark = Instant::now();
    kubelet.pause(dark);
    let node = wait_for("the silent node Unknown and tainted", 30, || {
        let node = k.json(&["get", "node", dark]);
        (ready_status(&node) == "Unknown"
            && taint_keys(&node).contains(&"node.kubernetes.io/unreachable:NoExecute".to_string()))
        .then_some(node)
    });
    assert!(taint_keys(&node).contains(&"node.kubernetes.io/unreachable:NoSchedule".to_string()));
    let reason = node["status"]["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["type"] == "Ready")
        .unwrap()["reason"]
        .clone();
    assert_eq!(reason, "NodeStatusUnknown");
    // Its pods turn not ready at once, long before the eviction.
    wait_for("the dark node's pods not ready", 10, || {
        let p = pods(k);
        victims
            .iter()
            .all(|v| p.iter().any(|p| &p.0 == v && !p.2))
            .then_some(())
    });
    assert!(
        went_dark.elapsed() < Duration::from_secs(12),
        "pods marked not ready only after {:?}",
        went_dark.elapsed()
    );
}

fn victims_are_evicted_and_replaced(k: &Kubectl, dark: &str, victims: &[String]) {
    // After the configured 6 s toleration they are evicted and replaced elsewhere.
    let replaced = wait_for("replacements on the other nodes", 60, || {
        let p = pods(k);
        let gone = victims.iter().all(|v| !p.iter().any(|p| &p.0 == v));
        (gone && p.len() == 3 && p.iter().all(|p| p.2 && p.1 != dark)).then_some(p)
    });
    assert!(replaced.iter().all(|p| p.1 != dark));
    let events = k.ok(&[
        "get",
        "events",
        "--field-selector",
        "reason=TaintManagerEviction",
    ]);
    assert!(events.contains("Marking for deletion Pod"), "{events}");
}

fn all_nodes_dark_evicts_nobody(k: &Kubectl, kubelet: &FakeKubelet) {
    // Every node dark at once (the control plane cut off): nobody is evicted.
    let before: Vec<String> = pods(k).into_iter().map(|p| p.0).collect();
    for n in ["node-1", "node-2", "node-3"] {
        kubelet.pause(n);
    }
    wait_for("all nodes Unknown", 30, || {
        let nodes = k.json(&["get", "nodes"]);
        nodes["items"]
            .as_array()
            .unwrap()
            .iter()
            .all(|n| ready_status(n) == "Unknown")
            .then_some(())
    });
    std::thread::sleep(Duration::from_secs(10));
    let nodes = k.json(&["get", "nodes"]);
    for n in nodes["items"].as_array().unwrap() {
        assert!(
            !taint_keys(n).iter().any(|t| t.ends_with(":NoExecute")),
            "no eviction taints: {n}"
        );
    }
    let after: Vec<String> = pods(k).into_iter().map(|p| p.0).collect();
    assert_eq!(before, after, "no pod was evicted");
}

#[test]
fn pods_of_a_deleted_node_are_collected() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start_with(dir.path(), &[]);
    let _kubelet = start_kubelet(&server);
    let k = Kubectl::new(33, &server);
    add_node(&k, "node-1", "4");
    let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "orphan"},
        "spec": {"nodeName": "node-1", "containers": [{"name": "c", "image": "nginx"}]}});
    k.ok_stdin(&["apply", "-f", "-"], &pod.to_string());
    wait_for("the pod running", 30, || {
        let p = k.json(&["get", "pod", "orphan"]);
        (p["status"]["phase"] == "Running").then_some(())
    });
    k.ok(&["delete", "node", "node-1"]);
    // Two pod GC passes (20 s apart) find the node missing.
    wait_for("the orphaned pod collected", 70, || {
        (!k.output(&["get", "pod", "orphan"]).status.success()).then_some(())
    });
}
