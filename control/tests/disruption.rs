//! Acceptance for PodDisruptionBudgets and the `pods/eviction` subresource, through stock
//! kubectl against simulated nodes: `kubectl drain` with a `minAvailable: 1` budget over
//! two pods evicts one at a time and waits in between.

// Test code: a failed setup step should fail the test loudly.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::sim::{add_node, start_kubelet};
use common::{wait_for, Kubectl, Server};
use serde_json::json;

/// `(name, node)` of the ready web pods not being deleted.
fn ready_pods(k: &Kubectl) -> Vec<(String, String)> {
    let list = k.json(&["get", "pods", "-l", "app=web"]);
    list["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|p| p["metadata"]["deletionTimestamp"].is_null())
        .filter(|p| {
            p["status"]["conditions"].as_array().is_some_and(|cs| {
                cs.iter()
                    .any(|c| c["type"] == "Ready" && c["status"] == "True")
            })
        })
        .map(|p| {
            (
                p["metadata"]["name"].as_str().unwrap_or("").to_string(),
                p["spec"]["nodeName"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect()
}

fn allowed(k: &Kubectl, pdb: &str) -> i64 {
    k.json(&["get", "pdb", pdb])["status"]["disruptionsAllowed"]
        .as_i64()
        .unwrap_or(-1)
}

#[test]
fn drain_respects_the_disruption_budget() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start_with(dir.path(), &[]);
    let _kubelet = start_kubelet(&server);
    let k = Kubectl::new(33, &server);
    add_node(&k, "node-1", "4");
    let deployment = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
        "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}});
    k.ok_stdin(&["apply", "-f", "-"], &deployment.to_string());
    let pdb = json!({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "web"},
        "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "web"}}}});
    k.ok_stdin(&["apply", "-f", "-"], &pdb.to_string());
    wait_for("2 ready pods on node-1", 60, || {
        let p = ready_pods(&k);
        (p.len() == 2).then_some(())
    });
    wait_for("the budget allowing 1 disruption", 30, || {
        (allowed(&k, "web") == 1).then_some(())
    });
    let table = k.ok(&["get", "pdb"]);
    assert!(
        table.contains("MIN AVAILABLE") && table.contains("ALLOWED DISRUPTIONS"),
        "{table}"
    );
    let row: Vec<&str> = table.lines().nth(1).unwrap().split_whitespace().collect();
    assert_eq!(&row[..4], ["web", "1", "N/A", "1"], "{table}");

    evict_through_the_api(&k);

    // Drain with a second node to move to: one at a time, waiting for the budget.
    add_node(&k, "node-2", "4");
    wait_for("2 ready pods again", 60, || {
        (ready_pods(&k).len() == 2).then_some(())
    });
    let out = k
        .command(&["drain", "node-1", "--ignore-daemonsets", "--timeout=120s"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "drain failed: {stdout}\n{stderr}");
    assert!(stdout.contains("node/node-1 drained"), "{stdout}");
    let on_node_1 = ready_pods(&k)
        .into_iter()
        .filter(|p| p.1 == "node-1")
        .count();
    assert_eq!(on_node_1, 0);
    let node = k.json(&["get", "node", "node-1"]);
    assert_eq!(node["spec"]["unschedulable"], true, "cordoned");
    wait_for("2 ready pods on node-2", 60, || {
        let p = ready_pods(&k);
        (p.len() == 2 && p.iter().all(|p| p.1 == "node-2")).then_some(())
    });
    // Both pods were evicted, the second only after the budget let it: drain waited.
    assert_eq!(stdout.matches("evicted").count(), 2, "{stdout}");
    assert!(
        stderr.contains("Cannot evict pod as it would violate the pod's disruption budget"),
        "{stderr}"
    );
}

/// Straight through the API: one eviction is allowed, the next answers 429. Over bare
/// pods, so no replacement can become ready in between and allow the second.
fn evict_through_the_api(k: &Kubectl) {
    for name in ["solo-a", "solo-b"] {
        let pod = json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "labels": {"app": "solo"}},
            "spec": {"containers": [{"name": "c", "image": "nginx"}]}});
        k.ok_stdin(&["apply", "-f", "-"], &pod.to_string());
    }
    let pdb = json!({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "solo"},
        "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "solo"}}}});
    k.ok_stdin(&["apply", "-f", "-"], &pdb.to_string());
    wait_for("the solo budget allowing 1 disruption", 60, || {
        (allowed(k, "solo") == 1).then_some(())
    });
    let eviction = |name: &str| {
        json!({"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name, "namespace": "default"}})
            .to_string()
    };
    let path = |name: &str| format!("/api/v1/namespaces/default/pods/{name}/eviction");
    k.ok_stdin(
        &["create", "--raw", &path("solo-a"), "-f", "-"],
        &eviction("solo-a"),
    );
    let refused = k.output_stdin(
        &["create", "--raw", &path("solo-b"), "-f", "-"],
        &eviction("solo-b"),
    );
    assert!(!refused.status.success());
    let err = String::from_utf8_lossy(&refused.stderr);
    assert!(
        err.contains("Error from server (TooManyRequests): Cannot evict pod as it would violate the pod's disruption budget."),
        "{err}"
    );
    k.ok(&["delete", "pdb", "solo"]);
    k.ok(&["delete", "pod", "solo-b", "--wait=false"]);
    // Gone before the drain, which would refuse bare pods.
    wait_for("the solo pods gone", 60, || {
        let left = k.ok(&["get", "pods", "-l", "app=solo", "-o", "name"]);
        left.trim().is_empty().then_some(())
    });
}

#[test]
fn invalid_budgets_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start_with(dir.path(), &["--controllers="]);
    let k = Kubectl::new(33, &server);
    let both = json!({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "both"},
        "spec": {"minAvailable": 1, "maxUnavailable": 1, "selector": {"matchLabels": {"app": "web"}}}});
    let err = k.fails_stdin(&["apply", "-f", "-"], &both.to_string());
    assert!(
        err.contains("minAvailable and maxUnavailable cannot be both set"),
        "{err}"
    );
    let pct = json!({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "pct"},
        "spec": {"maxUnavailable": "150%", "selector": {"matchLabels": {"app": "web"}}}});
    let err = k.fails_stdin(&["apply", "-f", "-"], &pct.to_string());
    assert!(
        err.contains("spec.maxUnavailable: Invalid value: \"150%\": must not be greater than 100%"),
        "{err}"
    );
}
