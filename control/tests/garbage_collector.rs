//! Acceptance for deletion propagation: the API server records Orphan and Foreground as
//! the `orphan` / `foregroundDeletion` finalizers and the garbage collector in
//! cairn-controllers carries them out; Background deletes the owner at once and the
//! collector removes dependents left without owners. Through kubectl and raw HTTP.

// Test code: a failed setup step should fail the test loudly.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::time::{Duration, Instant};

use common::sim::{add_node, start_kubelet};
use common::{Kubectl, Server};

fn wait_until(what: &str, secs: u64, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(secs);
    while !f() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn count(k: &Kubectl, what: &str, selector: &str) -> usize {
    k.ok(&["get", what, "-l", selector, "-o", "name"])
        .lines()
        .count()
}

fn deploy(k: &Kubectl, name: &str) {
    k.ok(&[
        "create",
        "deployment",
        name,
        "--image=busybox",
        "--replicas=2",
    ]);
    wait_until(&format!("{name} pods"), 30, || {
        count(k, "pods", &format!("app={name}")) == 2
    });
}

#[test]
fn background_foreground_and_orphan_propagation() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path());
    let _kubelet = start_kubelet(&server);
    let k = Kubectl::new(33, &server);
    add_node(&k, "node-1", "8");

    background(&k);
    foreground(&k);
    orphan(&k);
    job_default_orphan(&k, &server);
}

/// Background: the Deployment goes at once, its ReplicaSet and pods after it.
fn background(k: &Kubectl) {
    deploy(k, "bg");
    k.ok(&[
        "delete",
        "deployment",
        "bg",
        "--cascade=background",
        "--wait=false",
    ]);
    assert!(!k.output(&["get", "deployment", "bg"]).status.success());
    wait_until("bg dependents collected", 30, || {
        count(k, "rs", "app=bg") == 0 && count(k, "pods", "app=bg") == 0
    });
}

/// Foreground: the Deployment stays (with the finalizer) until its dependents are gone.
/// One pod holds a finalizer of the test's own, so the owner provably waits for it
/// (without it the simulated kubelet can finish the whole cascade before kubectl looks).
fn foreground(k: &Kubectl) {
    deploy(k, "fg");
    let held = k.ok(&["get", "pods", "-l", "app=fg", "-o", "name"]);
    let held = held.lines().next().unwrap().to_string();
    let hold = r#"{"metadata":{"finalizers":["test.cairn.io/hold"]}}"#;
    k.ok(&["patch", &held, "--type=merge", "-p", hold]);
    k.ok(&[
        "delete",
        "deployment",
        "fg",
        "--cascade=foreground",
        "--wait=false",
    ]);
    let finalizers = k.ok(&[
        "get",
        "deployment",
        "fg",
        "-o",
        "jsonpath={.metadata.finalizers}",
    ]);
    assert!(finalizers.contains("foregroundDeletion"), "{finalizers}");
    wait_until("the held pod alone left", 30, || {
        count(k, "pods", "app=fg") == 1
    });
    std::thread::sleep(Duration::from_millis(500));
    assert!(
        k.output(&["get", "deployment", "fg"]).status.success(),
        "the owner left while a dependent remained"
    );
    let release = r#"{"metadata":{"finalizers":null}}"#;
    k.ok(&["patch", &held, "--type=merge", "-p", release]);
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let owner_gone = !k.output(&["get", "deployment", "fg"]).status.success();
        let pods = count(k, "pods", "app=fg");
        if owner_gone {
            assert_eq!(pods, 0, "the owner left before its pods");
            break;
        }
        assert!(Instant::now() < deadline, "fg never finished");
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(count(k, "rs", "app=fg"), 0);
}

/// Orphan: the ReplicaSet and pods stay, without the owner reference.
fn orphan(k: &Kubectl) {
    deploy(k, "or");
    k.ok(&["delete", "deployment", "or", "--cascade=orphan"]);
    assert_eq!(count(k, "rs", "app=or"), 1);
    let owners = k.ok(&[
        "get",
        "rs",
        "-l",
        "app=or",
        "-o",
        "jsonpath={.items[*].metadata.ownerReferences}",
    ]);
    assert!(owners.is_empty(), "released: {owners}");
    std::thread::sleep(Duration::from_secs(1));
    assert_eq!(count(k, "pods", "app=or"), 2);
}

/// A Job deleted without a policy keeps its pods, with kube-apiserver's warning.
fn job_default_orphan(k: &Kubectl, server: &Server) {
    let url = &server.url;
    k.ok(&[
        "create",
        "job",
        "keep",
        "--image=busybox",
        "--",
        "sleep",
        "1000",
    ]);
    wait_until("keep's pod", 30, || count(k, "pods", "job-name=keep") == 1);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let warning = rt.block_on(async {
        let resp = server
            .http()
            .delete(format!("{url}/apis/batch/v1/namespaces/default/jobs/keep"))
            .send()
            .await
            .unwrap();
        assert!(resp.status().is_success(), "{}", resp.status());
        resp.headers()
            .get("warning")
            .map(|w| w.to_str().unwrap().to_string())
            .unwrap_or_default()
    });
    assert!(
        warning.contains("child pods are preserved by default when jobs are deleted"),
        "{warning}"
    );
    wait_until("keep gone", 30, || {
        !k.output(&["get", "job", "keep"]).status.success()
    });
    assert_eq!(
        count(k, "pods", "job-name=keep"),
        1,
        "the Job's pod is kept"
    );
}
