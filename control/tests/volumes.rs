//! Acceptance for persistent volumes against cairn-control with the scheduler, the
//! binder and protection controllers and a simulated node, through stock kubectl:
//! invalid objects refused; the default `local-path` class; static binding (smallest fit,
//! pre-bound volumes); claim protection while a pod uses the claim; Retain keeps a
//! released volume, Delete without a provisioner fails it; a `WaitForFirstConsumer` claim
//! is placed by the scheduler (the test plays the node's provisioner, the simulated node
//! paused) and the pod is bound only once its claim is.

// Test code: a failed setup step should fail the test loudly.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::sim::{add_node, start_kubelet};
use common::{wait_for, Kubectl, Server};
use serde_json::{json, Value};

fn pv(name: &str, size: &str, class: &str, policy: &str) -> String {
    json!({"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": name},
        "spec": {"capacity": {"storage": size}, "accessModes": ["ReadWriteOnce"],
            "storageClassName": class, "persistentVolumeReclaimPolicy": policy,
            "hostPath": {"path": format!("/tmp/{name}")}}})
    .to_string()
}

fn pvc(name: &str, size: &str, class: Option<&str>) -> String {
    let mut spec =
        json!({"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": size}}});
    if let Some(c) = class {
        spec["storageClassName"] = json!(c);
    }
    json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": name}, "spec": spec})
        .to_string()
}

fn jsonpath(k: &Kubectl, what: &[&str], path: &str) -> String {
    let p = format!("jsonpath={path}");
    let mut args = what.to_vec();
    args.extend(["-o", &p]);
    k.ok(&["get"]
        .iter()
        .chain(args.iter())
        .copied()
        .collect::<Vec<_>>())
}

fn wait_jsonpath(k: &Kubectl, what: &[&str], path: &str, want: &str) {
    wait_for(&format!("{what:?} {path} = {want}"), 30, || {
        (jsonpath(k, what, path) == want).then_some(())
    });
}

fn pod_with_claim(name: &str, claim: &str) -> String {
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
        "spec": {"containers": [{"name": "c", "image": "busybox",
                "volumeMounts": [{"name": "data", "mountPath": "/data"}]}],
            "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": claim}}]}})
    .to_string()
}

#[test]
fn volumes_bind_protect_and_release() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path());
    let kubelet = start_kubelet(&server);
    let k = Kubectl::new(33, &server);
    add_node(&k, "node-1", "4");
    invalid_objects(&k);
    let classes = k.ok(&["get", "sc"]);
    assert!(
        classes.contains("local-path (default)") && classes.contains("cairn.io/local-path"),
        "{classes}"
    );
    assert!(classes.contains("WaitForFirstConsumer"), "{classes}");
    static_binding(&k);
    protection_and_release(&k);
    wait_for_first_consumer(&k, &kubelet);
}

fn invalid_objects(k: &Kubectl) {
    let err = k.fails_stdin(&["apply", "-f", "-"], &pvc("neg", "-1Gi", Some("manual")));
    assert!(
        err.contains(
            r#"spec.resources[storage]: Invalid value: "-1Gi": must be greater than zero"#
        ),
        "{err}"
    );
    let mut bad_mode: Value = serde_json::from_str(&pvc("mode", "1Gi", Some("manual"))).unwrap();
    bad_mode["spec"]["accessModes"] = json!(["ReadWriteSometimes"]);
    let err = k.fails_stdin(&["apply", "-f", "-"], &bad_mode.to_string());
    assert!(
        err.contains(r#"spec.accessModes: Unsupported value: "ReadWriteSometimes""#),
        "{err}"
    );
    let err = k.fails_stdin(
        &["apply", "-f", "-"],
        &pv("recycled", "1Gi", "manual", "Recycle"),
    );
    assert!(
        err.contains("spec.persistentVolumeReclaimPolicy: Forbidden: Recycle is deprecated"),
        "{err}"
    );
    let sc = json!({"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": "bad"},
        "provisioner": "x.io/y", "volumeBindingMode": "Eventually"});
    let err = k.fails_stdin(&["apply", "-f", "-"], &sc.to_string());
    assert!(
        err.contains(r#"volumeBindingMode: Unsupported value: "Eventually""#),
        "{err}"
    );
}

/// The smallest fitting volume; a volume pre-bound by `claimRef` goes to its claim only.
fn static_binding(k: &Kubectl) {
    k.ok_stdin(
        &["apply", "-f", "-"],
        &pv("pv-big", "10Gi", "manual", "Retain"),
    );
    k.ok_stdin(
        &["apply", "-f", "-"],
        &pv("pv-small", "1Gi", "manual", "Retain"),
    );
    let mut reserved: Value =
        serde_json::from_str(&pv("pv-reserved", "1Gi", "manual", "Retain")).unwrap();
    reserved["spec"]["claimRef"] = json!({"namespace": "default", "name": "mine"});
    k.ok_stdin(&["apply", "-f", "-"], &reserved.to_string());
    wait_jsonpath(k, &["pv", "pv-small"], "{.status.phase}", "Available");
    k.ok_stdin(&["apply", "-f", "-"], &pvc("data", "500Mi", Some("manual")));
    wait_jsonpath(k, &["pvc", "data"], "{.status.phase}", "Bound");
    assert_eq!(
        jsonpath(k, &["pvc", "data"], "{.spec.volumeName}"),
        "pv-small"
    );
    assert_eq!(
        jsonpath(k, &["pvc", "data"], "{.status.capacity.storage}"),
        "1Gi"
    );
    wait_jsonpath(k, &["pv", "pv-small"], "{.status.phase}", "Bound");
    assert_eq!(
        jsonpath(k, &["pv", "pv-small"], "{.spec.claimRef.name}"),
        "data"
    );
    k.ok_stdin(&["apply", "-f", "-"], &pvc("mine", "1Gi", Some("manual")));
    wait_jsonpath(k, &["pvc", "mine"], "{.spec.volumeName}", "pv-reserved");
    let table = k.ok(&["get", "pv"]);
    assert!(
        table.contains("default/data") && table.contains("RWO") && table.contains("Retain"),
        "{table}"
    );
    // Nothing left that fits: the claim waits.
    k.ok_stdin(&["apply", "-f", "-"], &pvc("huge", "50Gi", Some("manual")));
    std::thread::sleep(std::time::Duration::from_millis(500));
    assert_eq!(jsonpath(k, &["pvc", "huge"], "{.status.phase}"), "Pending");
    k.ok(&["delete", "pvc", "huge"]);
}

/// A claim in use stays until its pod is gone; then Retain keeps the volume Released,
/// and Delete without a provisioner fails it.
fn protection_and_release(k: &Kubectl) {
    assert!(jsonpath(k, &["pvc", "data"], "{.metadata.finalizers}")
        .contains("kubernetes.io/pvc-protection"));
    k.ok_stdin(&["apply", "-f", "-"], &pod_with_claim("user", "data"));
    wait_jsonpath(k, &["pod", "user"], "{.status.phase}", "Running");
    k.ok(&["delete", "pvc", "data", "--wait=false"]);
    std::thread::sleep(std::time::Duration::from_secs(1));
    assert_eq!(
        jsonpath(k, &["pvc", "data"], "{.status.phase}"),
        "Bound",
        "still there, in use"
    );
    assert!(k.ok(&["get", "pvc", "data"]).contains("Terminating"));
    k.ok(&["delete", "pod", "user"]);
    wait_for("the claim gone", 30, || {
        (!k.output(&["get", "pvc", "data"]).status.success()).then_some(())
    });
    wait_jsonpath(k, &["pv", "pv-small"], "{.status.phase}", "Released");

    k.ok_stdin(
        &["apply", "-f", "-"],
        &pv("pv-del", "2Gi", "gone", "Delete"),
    );
    k.ok_stdin(&["apply", "-f", "-"], &pvc("short", "2Gi", Some("gone")));
    wait_jsonpath(k, &["pvc", "short"], "{.status.phase}", "Bound");
    k.ok(&["delete", "pvc", "short"]);
    wait_jsonpath(k, &["pv", "pv-del"], "{.status.phase}", "Failed");
    assert!(jsonpath(k, &["pv", "pv-del"], "{.status.message}")
        .contains("no deletable volume plugin matched"));
    // An unbound volume can go; its finalizer is removed at once.
    k.ok(&["delete", "pv", "pv-big"]);
}

/// The default class waits for a consumer; the scheduler names the node, the
/// provisioner (played here) makes a volume, the binder binds, and only then the pod is
/// bound to the node.
fn wait_for_first_consumer(k: &Kubectl, kubelet: &common::sim::FakeKubelet) {
    // The simulated node provisions local-path claims itself; paused, it leaves this one
    // to the test, so the moment before the claim is bound can be observed.
    kubelet.pause("node-1");
    k.ok_stdin(&["apply", "-f", "-"], &pvc("late", "1Gi", None));
    assert_eq!(
        jsonpath(k, &["pvc", "late"], "{.spec.storageClassName}"),
        "local-path"
    );
    wait_for("the WaitForFirstConsumer event", 30, || {
        let events = k.ok(&[
            "get",
            "events",
            "--field-selector",
            "involvedObject.name=late",
        ]);
        events.contains("WaitForFirstConsumer").then_some(())
    });
    k.ok_stdin(&["apply", "-f", "-"], &pod_with_claim("consumer", "late"));
    let selected = "{.metadata.annotations.volume\\.kubernetes\\.io/selected-node}";
    wait_jsonpath(k, &["pvc", "late"], selected, "node-1");
    let provisioner = "{.metadata.annotations.volume\\.kubernetes\\.io/storage-provisioner}";
    wait_jsonpath(k, &["pvc", "late"], provisioner, "cairn.io/local-path");
    assert_eq!(
        jsonpath(k, &["pod", "consumer"], "{.spec.nodeName}"),
        "",
        "not bound before its claim"
    );
    let uid = jsonpath(k, &["pvc", "late"], "{.metadata.uid}");
    let made = json!({"apiVersion": "v1", "kind": "PersistentVolume",
        "metadata": {"name": format!("pvc-{uid}"), "annotations": {"pv.kubernetes.io/provisioned-by": "cairn.io/local-path"}},
        "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"], "storageClassName": "local-path",
            "persistentVolumeReclaimPolicy": "Delete", "local": {"path": "/tmp/late"},
            "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                {"key": "kubernetes.io/hostname", "operator": "In", "values": ["node-1"]}]}]}},
            "claimRef": {"namespace": "default", "name": "late", "uid": uid}}});
    k.ok_stdin(&["apply", "-f", "-"], &made.to_string());
    wait_jsonpath(k, &["pvc", "late"], "{.status.phase}", "Bound");
    wait_jsonpath(k, &["pod", "consumer"], "{.spec.nodeName}", "node-1");
    kubelet.resume("node-1");
    // A second pod of the same claim goes where the local volume is.
    add_node(k, "node-2", "4");
    k.ok_stdin(&["apply", "-f", "-"], &pod_with_claim("second", "late"));
    wait_jsonpath(k, &["pod", "second"], "{.spec.nodeName}", "node-1");
}
