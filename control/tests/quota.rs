//! Acceptance for ResourceQuotas in cairn-control through stock kubectl: admission
//! refuses what would go over a quota in upstream's words, requires the requests and
//! limits a quota constrains, honours scopes, and the quota controller keeps
//! `status.used` right after creates and deletes; invalid quotas are refused.

// Test code: a failed setup step should fail the test loudly.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::{wait_for, Kubectl, Server};
use serde_json::{json, Value};

fn pod(ns: &str, name: &str, spec_extra: Value, resources: Value) -> String {
    let mut spec =
        json!({"containers": [{"name": name, "image": "busybox", "resources": resources}]});
    if let (Some(s), Some(extra)) = (spec.as_object_mut(), spec_extra.as_object()) {
        s.extend(extra.clone());
    }
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": ns}, "spec": spec})
        .to_string()
}

/// Waits until the quota's `status.used[resource]` reads `want`.
fn wait_used(k: &Kubectl, ns: &str, quota: &str, resource: &str, want: &str) {
    let path = format!(
        "jsonpath={{.status.used['{}']}}",
        resource.replace('.', "\\.")
    );
    wait_for(&format!("{ns}/{quota} used {resource}={want}"), 20, || {
        let got = k.ok(&["-n", ns, "get", "quota", quota, "-o", &path]);
        (got == want).then_some(())
    });
}

#[test]
fn quotas_refuse_excess_and_track_usage() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start_with(
        dir.path(),
        &["--controllers=resourcequota", "--scheduler=false"],
    );
    let k = Kubectl::new(33, &server);
    invalid_quotas(&k);
    counts(&k);
    compute(&k);
    scopes(&k);
}

fn invalid_quotas(k: &Kubectl) {
    let bad = json!({"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "bad"},
        "spec": {"hard": {"gpus": "1", "pods": "-1", "services": "1500m"},
                 "scopes": ["BestEffort", "NotBestEffort"]}});
    let err = k.fails_stdin(&["apply", "-f", "-"], &bad.to_string());
    for want in [
        r#"spec.hard[gpus]: Invalid value: "gpus": must be a standard resource for quota"#,
        r#"spec.hard[pods]: Invalid value: "-1": must be greater than or equal to 0"#,
        r#"spec.hard[services]: Invalid value: "1500m": must be an integer"#,
        "conflicting scopes",
    ] {
        assert!(err.contains(want), "{want} in {err}");
    }
}

/// Object counts: pods, services and a `count/` name with a group.
fn counts(k: &Kubectl) {
    k.ok(&["create", "namespace", "counts"]);
    k.ok(&[
        "-n",
        "counts",
        "create",
        "quota",
        "q",
        "--hard=pods=2,services=1,count/deployments.apps=1",
    ]);
    wait_used(k, "counts", "q", "pods", "0");
    assert!(k
        .ok(&["-n", "counts", "get", "quota"])
        .contains("pods: 0/2"));
    for name in ["a", "b"] {
        k.ok_stdin(
            &["apply", "-f", "-"],
            &pod("counts", name, json!({}), json!({})),
        );
    }
    let err = k.fails_stdin(
        &["apply", "-f", "-"],
        &pod("counts", "c", json!({}), json!({})),
    );
    assert!(
        err.contains(r#"pods "c" is forbidden: exceeded quota: q, requested: pods=1, used: pods=2, limited: pods=2"#),
        "{err}"
    );
    wait_used(k, "counts", "q", "pods", "2");
    k.ok(&["-n", "counts", "delete", "pod", "a"]);
    wait_used(k, "counts", "q", "pods", "1");
    k.ok_stdin(
        &["apply", "-f", "-"],
        &pod("counts", "c", json!({}), json!({})),
    );

    k.ok(&[
        "-n",
        "counts",
        "create",
        "service",
        "clusterip",
        "one",
        "--tcp=80",
    ]);
    let err = k.fails(&[
        "-n",
        "counts",
        "create",
        "service",
        "clusterip",
        "two",
        "--tcp=80",
    ]);
    assert!(
        err.contains(
            "exceeded quota: q, requested: services=1, used: services=1, limited: services=1"
        ),
        "{err}"
    );

    k.ok(&[
        "-n",
        "counts",
        "create",
        "deployment",
        "d1",
        "--image=busybox",
    ]);
    let err = k.fails(&[
        "-n",
        "counts",
        "create",
        "deployment",
        "d2",
        "--image=busybox",
    ]);
    assert!(
        err.contains("exceeded quota: q, requested: count/deployments.apps=1, used: count/deployments.apps=1, limited: count/deployments.apps=1"),
        "{err}"
    );
    k.ok(&["-n", "counts", "delete", "deployment", "d1"]);
    wait_used(k, "counts", "q", "count/deployments.apps", "0");
    storage(k);
}

/// Claims: storage in total and per class.
fn storage(k: &Kubectl) {
    k.ok(&["create", "namespace", "storage"]);
    let hard = "--hard=requests.storage=1Gi,local-path.storageclass.storage.k8s.io/persistentvolumeclaims=1";
    k.ok(&["-n", "storage", "create", "quota", "s", hard]);
    wait_used(k, "storage", "s", "requests.storage", "0");
    let claim = |name: &str, size: &str| {
        json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": name, "namespace": "storage"},
            "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": size}}}})
        .to_string()
    };
    k.ok_stdin(&["apply", "-f", "-"], &claim("a", "600Mi"));
    let err = k.fails_stdin(&["apply", "-f", "-"], &claim("b", "100Mi"));
    assert!(
        err.contains("exceeded quota: s, requested: local-path.storageclass.storage.k8s.io/persistentvolumeclaims=1, used: local-path.storageclass.storage.k8s.io/persistentvolumeclaims=1, limited: local-path.storageclass.storage.k8s.io/persistentvolumeclaims=1"),
        "{err}"
    );
    let mut manual: Value = serde_json::from_str(&claim("c", "600Mi")).unwrap();
    manual["spec"]["storageClassName"] = json!("manual");
    let err = k.fails_stdin(&["apply", "-f", "-"], &manual.to_string());
    assert!(
        err.contains("exceeded quota: s, requested: requests.storage=600Mi, used: requests.storage=600Mi, limited: requests.storage=1Gi"),
        "{err}"
    );
    wait_used(k, "storage", "s", "requests.storage", "600Mi");
}

/// Compute: constrained resources must be stated; sums are checked and tracked; a
/// LimitRange's defaults (admitted first) satisfy the quota.
fn compute(k: &Kubectl) {
    k.ok(&["create", "namespace", "compute"]);
    k.ok(&[
        "-n",
        "compute",
        "create",
        "quota",
        "c",
        "--hard=requests.cpu=1,limits.memory=1Gi",
    ]);
    wait_used(k, "compute", "c", "requests.cpu", "0");
    let err = k.fails_stdin(
        &["apply", "-f", "-"],
        &pod("compute", "bare", json!({}), json!({})),
    );
    assert!(
        err.contains(r#"pods "bare" is forbidden: failed quota: c: must specify limits.memory for: bare; must specify requests.cpu for: bare"#),
        "{err}"
    );
    let sized = json!({"requests": {"cpu": "600m"}, "limits": {"memory": "512Mi"}});
    k.ok_stdin(
        &["apply", "-f", "-"],
        &pod("compute", "one", json!({}), sized.clone()),
    );
    let err = k.fails_stdin(
        &["apply", "-f", "-"],
        &pod("compute", "two", json!({}), sized),
    );
    assert!(
        err.contains("exceeded quota: c, requested: requests.cpu=600m, used: requests.cpu=600m, limited: requests.cpu=1"),
        "{err}"
    );
    wait_used(k, "compute", "c", "limits.memory", "512Mi");
    let table = k.ok(&["-n", "compute", "get", "quota", "c"]);
    assert!(
        table.contains("requests.cpu: 600m/1") && table.contains("limits.memory: 512Mi/1Gi"),
        "{table}"
    );

    let lr = json!({"apiVersion": "v1", "kind": "LimitRange", "metadata": {"name": "l", "namespace": "compute"},
        "spec": {"limits": [{"type": "Container", "default": {"memory": "256Mi"}, "defaultRequest": {"cpu": "100m"}}]}});
    k.ok_stdin(&["apply", "-f", "-"], &lr.to_string());
    k.ok_stdin(
        &["apply", "-f", "-"],
        &pod("compute", "defaulted", json!({}), json!({})),
    );
    wait_used(k, "compute", "c", "requests.cpu", "700m");
}

/// Scopes: a BestEffort quota ignores pods with resources; a PriorityClass selector
/// counts only that class's pods.
fn scopes(k: &Kubectl) {
    k.ok(&["create", "namespace", "scopes"]);
    k.ok(&["create", "priorityclass", "high", "--value=1000"]);
    let quotas = json!({"apiVersion": "v1", "kind": "List", "items": [
        {"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "be", "namespace": "scopes"},
         "spec": {"hard": {"pods": "1"}, "scopes": ["BestEffort"]}},
        {"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "prio", "namespace": "scopes"},
         "spec": {"hard": {"pods": "1"}, "scopeSelector": {"matchExpressions": [
            {"scopeName": "PriorityClass", "operator": "In", "values": ["high"]}]}}}]});
    k.ok_stdin(&["apply", "-f", "-"], &quotas.to_string());
    wait_used(k, "scopes", "be", "pods", "0");
    wait_used(k, "scopes", "prio", "pods", "0");
    let sized = json!({"requests": {"cpu": "10m"}});
    k.ok_stdin(
        &["apply", "-f", "-"],
        &pod("scopes", "be1", json!({}), json!({})),
    );
    let err = k.fails_stdin(
        &["apply", "-f", "-"],
        &pod("scopes", "be2", json!({}), json!({})),
    );
    assert!(
        err.contains("exceeded quota: be, requested: pods=1"),
        "{err}"
    );
    k.ok_stdin(
        &["apply", "-f", "-"],
        &pod("scopes", "burst", json!({}), sized.clone()),
    );
    let high = json!({"priorityClassName": "high"});
    k.ok_stdin(
        &["apply", "-f", "-"],
        &pod("scopes", "high1", high.clone(), sized.clone()),
    );
    let err = k.fails_stdin(&["apply", "-f", "-"], &pod("scopes", "high2", high, sized));
    assert!(
        err.contains("exceeded quota: prio, requested: pods=1, used: pods=1, limited: pods=1"),
        "{err}"
    );
    wait_used(k, "scopes", "be", "pods", "1");
    wait_used(k, "scopes", "prio", "pods", "1");
}
