//! NetworkPolicy enforced on a 2-node lab (host-gw, nftables proxy): pods x/a (a server
//! with a readiness probe) and y/b on node-1, x/b and y/a on node-2 (clients). A default deny in x
//! closes x/a to every pod while its kubelet probe (node-local) still passes; an allow
//! from namespace y opens it to y's pods only, through its ClusterIP too (policy applies
//! after DNAT); an egress deny in y closes y/b's way out; deleting the policies opens
//! everything again. Each change is waited for and the time it took printed.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::time::{Duration, Instant};

use common::{eventually, Lab};

const MINUTE: Duration = Duration::from_secs(60);

/// x/a serves (httpd, with a readiness probe); the others are busybox clients.
fn run_pod(lab: &Lab, ns: &str, name: &str, node: &str) {
    let server = name == "a" && ns == "x";
    let container = match server {
        true => serde_json::json!({"name": name, "image": "httpd",
            "readinessProbe": {"httpGet": {"path": "/", "port": 80}, "periodSeconds": 1, "failureThreshold": 2}}),
        false => {
            serde_json::json!({"name": name, "image": "busybox", "command": ["sleep", "3600"]})
        }
    };
    let spec = serde_json::json!({"spec": {"nodeName": node, "containers": [container]}});
    let image = if server {
        "--image=httpd"
    } else {
        "--image=busybox"
    };
    lab.kubectl(&[
        "-n",
        ns,
        "run",
        name,
        image,
        &format!("--labels=pod={name}"),
        "--overrides",
        &spec.to_string(),
    ]);
}

fn ready(lab: &Lab, ns: &str, pod: &str) -> bool {
    let path = "jsonpath={.status.conditions[?(@.type==\"Ready\")].status}";
    lab.try_kubectl(&["-n", ns, "get", "pod", pod, "-o", path])
        .is_ok_and(|s| s == "True")
}

/// Whether `from` (`ns/pod`) gets x/a's page from `ip` on port 80 within 2 s.
fn reaches(lab: &Lab, from: &str, ip: &str) -> bool {
    let (ns, pod) = from.split_once('/').unwrap();
    let url = format!("http://{ip}/");
    // busybox's own `-T` misbehaves; `timeout` bounds a connection that is dropped.
    let wget = ["timeout", "2", "wget", "-qO-", &url];
    let args = [&["-n", ns, "exec", pod, "--"][..], &wget[..]].concat();
    lab.try_kubectl(&args)
        .is_ok_and(|page| page.contains("It works!"))
}

/// Waits until every `(from, reachable)` holds for `ip`; the time it took.
fn expect(lab: &Lab, what: &str, ip: &str, cases: &[(&str, bool)]) -> Duration {
    let start = Instant::now();
    eventually(what, MINUTE, || {
        cases
            .iter()
            .all(|(from, want)| reaches(lab, from, ip) == *want)
            .then_some(())
    });
    let took = start.elapsed();
    println!("{what}: {took:.1?}");
    took
}

fn apply(lab: &Lab, policy: serde_json::Value) {
    let file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(file.path(), policy.to_string()).unwrap();
    lab.kubectl(&["apply", "-f", &file.path().display().to_string()]);
}

fn policy(ns: &str, name: &str, spec: serde_json::Value) -> serde_json::Value {
    serde_json::json!({"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
        "metadata": {"namespace": ns, "name": name}, "spec": spec})
}

#[test]
fn network_policies_are_enforced_on_every_node() {
    let lab = Lab::up("e2epol", 16503, &["--nodes=2"]);
    for ns in ["x", "y"] {
        lab.kubectl(&["create", "namespace", ns]);
    }
    for (ns, name, node) in [
        ("x", "a", "node-1"),
        ("x", "b", "node-2"),
        ("y", "a", "node-2"),
        ("y", "b", "node-1"),
    ] {
        run_pod(&lab, ns, name, node);
    }
    for (ns, name) in [("x", "a"), ("x", "b"), ("y", "a"), ("y", "b")] {
        eventually(&format!("{ns}/{name} ready"), 2 * MINUTE, || {
            ready(&lab, ns, name).then_some(())
        });
    }
    let ip = lab.kubectl(&[
        "-n",
        "x",
        "get",
        "pod",
        "a",
        "-o",
        "jsonpath={.status.podIP}",
    ]);
    let everyone = [("x/b", true), ("y/a", true), ("y/b", true)];
    expect(&lab, "x/a open to all", &ip, &everyone);

    apply(
        &lab,
        policy(
            "x",
            "deny",
            serde_json::json!({"podSelector": {}, "policyTypes": ["Ingress"]}),
        ),
    );
    let nobody = [("x/b", false), ("y/a", false), ("y/b", false)];
    expect(&lab, "default deny in x enforced", &ip, &nobody);
    assert!(
        ready(&lab, "x", "a"),
        "the kubelet's probe of x/a must pass under a deny"
    );

    let from_y = serde_json::json!({"podSelector": {"matchLabels": {"pod": "a"}}, "ingress": [{"from": [
        {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "y"}}}]}]});
    apply(&lab, policy("x", "allow-from-y", from_y));
    let only_y = [("x/b", false), ("y/a", true), ("y/b", true)];
    expect(&lab, "allow from y enforced", &ip, &only_y);

    lab.kubectl(&["-n", "x", "expose", "pod", "a", "--port=80", "--name=web"]);
    let cluster_ip = lab.kubectl(&[
        "-n",
        "x",
        "get",
        "svc",
        "web",
        "-o",
        "jsonpath={.spec.clusterIP}",
    ]);
    expect(
        &lab,
        "the ClusterIP obeys x/a's policy",
        &cluster_ip,
        &only_y,
    );

    let deny_egress = serde_json::json!({"podSelector": {"matchLabels": {"pod": "b"}}, "policyTypes": ["Egress"]});
    apply(&lab, policy("y", "deny-egress", deny_egress));
    expect(
        &lab,
        "egress deny of y/b enforced",
        &ip,
        &[("y/a", true), ("y/b", false)],
    );
    assert!(ready(&lab, "x", "a"));

    for ns in ["x", "y"] {
        lab.kubectl(&["-n", ns, "delete", "networkpolicy", "--all"]);
    }
    expect(&lab, "policies deleted, all open", &ip, &everyone);
}
