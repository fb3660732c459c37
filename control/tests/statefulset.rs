//! Acceptance for the StatefulSet controller in cairn-control, through stock kubectl
//! against simulated nodes (`common::sim`): ordered start, claims, scale-down from the
//! highest ordinal, rolling updates by descending ordinal with a partition, revisions.

// Test code: a failed setup step should fail the test loudly.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::time::{Duration, Instant};

use common::sim::{add_node, start_kubelet, NOT_READY_LABEL};
use common::{Kubectl, Server};
use serde_json::Value;

fn wait_until(what: &str, secs: u64, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(secs);
    while !f() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn names(k: &Kubectl, what: &str, selector: &str) -> Vec<String> {
    let out = k.ok(&[
        "get",
        what,
        "-l",
        selector,
        "-o",
        "jsonpath={.items[*].metadata.name}",
    ]);
    let mut v: Vec<String> = out.split_whitespace().map(str::to_string).collect();
    v.sort();
    v
}

fn images(k: &Kubectl) -> Vec<String> {
    let out = k.ok(&["get", "pods", "-l", "app=web", "-o", "json"]);
    let v: Value = serde_json::from_str(&out).unwrap();
    let mut pods: Vec<(String, String)> = v["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p["metadata"]["name"].as_str().unwrap().to_string(),
                p["spec"]["containers"][0]["image"]
                    .as_str()
                    .unwrap()
                    .to_string(),
            )
        })
        .collect();
    pods.sort();
    pods.into_iter().map(|(n, i)| format!("{n}={i}")).collect()
}

const WEB: &str = r#"{"apiVersion":"apps/v1","kind":"StatefulSet","metadata":{"name":"web"},
  "spec":{"serviceName":"web","replicas":3,"selector":{"matchLabels":{"app":"web"}},
    "template":{"metadata":{"labels":{"app":"web","sim.cairn.dev/ready":"false"}},
      "spec":{"containers":[{"name":"nginx","image":"nginx:1"}]}},
    "volumeClaimTemplates":[{"metadata":{"name":"www"},
      "spec":{"accessModes":["ReadWriteOnce"],"resources":{"requests":{"storage":"1Gi"}}}}]}}"#;

#[test]
fn statefulset_orders_claims_scales_and_rolls() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start_with(dir.path(), &[]);
    let _kubelet = start_kubelet(&server);
    let k = Kubectl::new(33, &server);
    add_node(&k, "node-1", "8");
    k.ok_stdin(&["apply", "-f", "-"], WEB);

    ordered_ready(&k);
    rolling_update(&k);
    scale_down(&k);
    partition(&k);
    history_and_undo(&k);
    parallel_when_scaled(&k);
}

/// OrderedReady: web-1 only once web-0 is Running and Ready, and so on.
fn ordered_ready(k: &Kubectl) {
    for (i, pod) in ["web-0", "web-1", "web-2"].iter().enumerate() {
        wait_until(pod, 30, || names(k, "pods", "app=web").len() == i + 1);
        std::thread::sleep(Duration::from_millis(1500));
        assert_eq!(
            names(k, "pods", "app=web").len(),
            i + 1,
            "{pod} not ready: nothing after it"
        );
        let claim = format!("www-{pod}");
        assert!(k.ok(&["get", "pvc", &claim, "-o", "name"]).contains(&claim));
        k.ok(&[
            "label",
            "pod",
            pod,
            &format!("{NOT_READY_LABEL}=true"),
            "--overwrite",
        ]);
    }
    wait_until("3/3", 30, || {
        k.ok(&[
            "get",
            "sts",
            "web",
            "-o",
            "jsonpath={.status.readyReplicas}",
        ]) == "3"
    });
    let hostname = k.ok(&["get", "pod", "web-1", "-o", "jsonpath={.spec.hostname}/{.spec.subdomain}/{.spec.volumes[0].persistentVolumeClaim.claimName}"]);
    assert_eq!(hostname, "web-1/web/www-web-1");
}

/// A template change (readiness label dropped) rolls every pod, highest first.
fn rolling_update(k: &Kubectl) {
    k.ok(&[
        "patch",
        "sts",
        "web",
        "--type=json",
        "-p",
        r#"[{"op":"remove","path":"/spec/template/metadata/labels/sim.cairn.dev~1ready"}]"#,
    ]);
    let out = k.ok(&["rollout", "status", "sts/web", "--timeout=60s"]);
    // kubectl says "partitioned" whenever a partition is set, as the default 0 is.
    assert!(
        out.contains("partitioned roll out complete: 3 new pods"),
        "{out}"
    );
}

/// Scale down: web-2 goes first, then web-1; the claims stay (Retain).
fn scale_down(k: &Kubectl) {
    k.ok(&["scale", "sts", "web", "--replicas=2"]);
    wait_until("web-2 gone", 30, || {
        names(k, "pods", "app=web") == ["web-0", "web-1"]
    });
    k.ok(&["scale", "sts", "web", "--replicas=3"]);
    wait_until("web-2 back", 30, || {
        k.ok(&[
            "get",
            "sts",
            "web",
            "-o",
            "jsonpath={.status.readyReplicas}",
        ]) == "3"
    });
    assert_eq!(
        names(k, "pvc", "app=web"),
        ["www-web-0", "www-web-1", "www-web-2"]
    );
}

/// Partition 2: only web-2 moves to the new image.
fn partition(k: &Kubectl) {
    k.ok(&[
        "patch",
        "sts",
        "web",
        "-p",
        r#"{"spec":{"updateStrategy":{"rollingUpdate":{"partition":2}}}}"#,
    ]);
    k.ok(&["set", "image", "sts/web", "nginx=nginx:2"]);
    let out = k.ok(&["rollout", "status", "sts/web", "--timeout=60s"]);
    assert!(out.contains("partitioned roll out complete"), "{out}");
    assert_eq!(
        images(k),
        ["web-0=nginx:1", "web-1=nginx:1", "web-2=nginx:2"]
    );
    k.ok(&[
        "patch",
        "sts",
        "web",
        "-p",
        r#"{"spec":{"updateStrategy":{"rollingUpdate":{"partition":0}}}}"#,
    ]);
    k.ok(&["rollout", "status", "sts/web", "--timeout=60s"]);
    assert_eq!(
        images(k),
        ["web-0=nginx:2", "web-1=nginx:2", "web-2=nginx:2"]
    );
}

/// Revisions: history and undo through ControllerRevisions.
fn history_and_undo(k: &Kubectl) {
    let history = k.ok(&["rollout", "history", "sts/web"]);
    assert!(history.contains('2') && history.contains('3'), "{history}");
    k.ok(&["rollout", "undo", "sts/web"]);
    k.ok(&["rollout", "status", "sts/web", "--timeout=60s"]);
    assert_eq!(
        images(k),
        ["web-0=nginx:1", "web-1=nginx:1", "web-2=nginx:1"]
    );
    let revisions = k.ok(&["get", "controllerrevisions", "-o", "name"]);
    assert!(revisions.lines().count() >= 2, "{revisions}");
    let table = k.ok(&["get", "controllerrevisions"]);
    assert!(table.contains("statefulset.apps/web"), "{table}");
}

/// Parallel with whenScaled: Delete: claims go with the removed pods.
fn parallel_when_scaled(k: &Kubectl) {
    let par = WEB
        .replace(r#""name":"web""#, r#""name":"par""#)
        .replace(r#""serviceName":"web""#, r#""serviceName":"par","podManagementPolicy":"Parallel","persistentVolumeClaimRetentionPolicy":{"whenScaled":"Delete"}"#)
        .replace("\"app\":\"web\"", "\"app\":\"par\"")
        .replace(r#","sim.cairn.dev/ready":"false""#, "");
    k.ok_stdin(&["apply", "-f", "-"], &par);
    wait_until("par 3 pods at once", 30, || {
        names(k, "pods", "app=par").len() == 3
    });
    k.ok(&["scale", "sts", "par", "--replicas=1"]);
    wait_until("par claims removed", 30, || {
        names(k, "pvc", "app=par") == ["www-par-0"]
    });
}
