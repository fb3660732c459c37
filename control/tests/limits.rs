//! Acceptance for LimitRanges in cairn-control through stock kubectl: defaults for
//! containers that say nothing, min/max/ratio refusals in upstream's words, and invalid
//! ranges refused.

// Test code: a failed setup step should fail the test loudly.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::{Kubectl, Server};
use serde_json::{json, Value};

fn pod(name: &str, resources: Value) -> String {
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
        "spec": {"containers": [{"name": "c", "image": "nginx", "resources": resources}]}})
    .to_string()
}

#[test]
fn limit_ranges_default_and_bound_containers() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start_with(dir.path(), &["--controllers=", "--scheduler=false"]);
    let k = Kubectl::new(33, &server);
    let bad = json!({"apiVersion": "v1", "kind": "LimitRange", "metadata": {"name": "bad"},
        "spec": {"limits": [{"type": "Container", "min": {"cpu": "2"}, "max": {"cpu": "1"}}]}});
    let err = k.fails_stdin(&["apply", "-f", "-"], &bad.to_string());
    assert!(err.contains(r#"spec.limits[0].min[cpu]: Invalid value: "2": min value 2 is greater than max value 1"#), "{err}");

    let lr = json!({"apiVersion": "v1", "kind": "LimitRange", "metadata": {"name": "limits"},
        "spec": {"limits": [{"type": "Container",
            "default": {"cpu": "500m", "memory": "128Mi"}, "defaultRequest": {"cpu": "100m"},
            "max": {"cpu": "1"}, "min": {"cpu": "50m"}, "maxLimitRequestRatio": {"cpu": "10"}}]}});
    k.ok_stdin(&["apply", "-f", "-"], &lr.to_string());
    let stored: Value =
        serde_json::from_str(&k.ok(&["get", "limitrange", "limits", "-o", "json"])).unwrap();
    assert_eq!(
        stored["spec"]["limits"][0]["defaultRequest"]["memory"], "128Mi",
        "defaulted from the default limit"
    );
    assert!(k.ok(&["get", "limits"]).contains("limits"));

    // Nothing said: the defaults, noted in the annotation.
    k.ok_stdin(&["apply", "-f", "-"], &pod("plain", json!({})));
    let p: Value = serde_json::from_str(&k.ok(&["get", "pod", "plain", "-o", "json"])).unwrap();
    let r = &p["spec"]["containers"][0]["resources"];
    assert_eq!(
        r["limits"],
        json!({"cpu": "500m", "memory": "128Mi"}),
        "{r}"
    );
    assert_eq!(
        r["requests"],
        json!({"cpu": "100m", "memory": "128Mi"}),
        "{r}"
    );
    assert_eq!(
        p["metadata"]["annotations"]["kubernetes.io/limit-ranger"],
        "LimitRanger plugin set: cpu, memory request for container c; cpu, memory limit for container c"
    );
    assert_eq!(p["status"]["qosClass"], "Burstable");

    // Over the max, and over the ratio: refused with upstream's words.
    let err = k.fails_stdin(
        &["apply", "-f", "-"],
        &pod(
            "big",
            json!({"limits": {"cpu": "2"}, "requests": {"cpu": "1"}}),
        ),
    );
    assert!(
        err.contains(
            r#"pods "big" is forbidden: maximum cpu usage per Container is 1, but limit is 2"#
        ),
        "{err}"
    );
    let err = k.fails_stdin(
        &["apply", "-f", "-"],
        &pod(
            "skewed",
            json!({"limits": {"cpu": "1"}, "requests": {"cpu": "50m"}}),
        ),
    );
    assert!(
        err.contains(
            "cpu max limit to request ratio per Container is 10, but provided ratio is 20.000000"
        ),
        "{err}"
    );
    let err = k.fails_stdin(
        &["apply", "-f", "-"],
        &pod("tiny", json!({"requests": {"cpu": "10m"}})),
    );
    assert!(
        err.contains("minimum cpu usage per Container is 50m, but request is 10m"),
        "{err}"
    );

    // Claims: bounded by their requested size.
    let storage = json!({"apiVersion": "v1", "kind": "LimitRange", "metadata": {"name": "storage"},
        "spec": {"limits": [{"type": "PersistentVolumeClaim", "max": {"storage": "5Gi"}}]}});
    k.ok_stdin(&["apply", "-f", "-"], &storage.to_string());
    let claim = |name: &str, size: &str| {
        json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": name},
            "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": size}}}})
        .to_string()
    };
    k.ok_stdin(&["apply", "-f", "-"], &claim("small", "1Gi"));
    let err = k.fails_stdin(&["apply", "-f", "-"], &claim("huge", "10Gi"));
    assert!(err.contains(r#"persistentvolumeclaims "huge" is forbidden: maximum storage usage per PersistentVolumeClaim is 5Gi, but request is 10Gi"#), "{err}");
}
