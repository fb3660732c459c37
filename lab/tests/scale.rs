//! A 3-node lab, once per driver (netns with the iptables proxy and vxlan, docker with
//! nftables and host-gw): 60 pods (20 per node, by a hard topology spread) behind one
//! Service. Every pod reaches every other pod and the
//! Service, and every node reaches the Service; a NetworkPolicy then closes web pods on
//! the other nodes and the Service to an unlabelled pod and opens them once it has the
//! label (policy on vxlan with the iptables proxy, and on host-gw with nftables);
//! then `down` leaves no process behind.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::collections::BTreeMap;
use std::process::Command;
use std::time::{Duration, Instant};

use common::{eventually, output, processes_mentioning, Lab};
use serde_json::{json, Value};

const REPLICAS: usize = 60;

fn deployment() -> Value {
    json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web"},
        "spec": {
            "replicas": REPLICAS,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {
                    "topologySpreadConstraints": [{
                        "maxSkew": 1,
                        "topologyKey": "kubernetes.io/hostname",
                        "whenUnsatisfiable": "DoNotSchedule",
                        "labelSelector": {"matchLabels": {"app": "web"}}
                    }],
                    "containers": [{"name": "httpd", "image": "httpd"}]
                }
            }
        }
    })
}

/// pod name → (node, pod IP, container ID) once all replicas run.
fn running_pods(lab: &Lab) -> Option<BTreeMap<String, (String, String, String)>> {
    let list: Value =
        serde_json::from_str(&lab.kubectl(&["get", "pods", "-l", "app=web", "-o", "json"])).ok()?;
    let pods: BTreeMap<_, _> = list["items"]
        .as_array()?
        .iter()
        .filter(|p| p["status"]["phase"] == "Running")
        .filter_map(|p| {
            let id = p["status"]["containerStatuses"][0]["containerID"].as_str()?;
            Some((
                p["metadata"]["name"].as_str()?.to_string(),
                (
                    p["spec"]["nodeName"].as_str()?.to_string(),
                    p["status"]["podIP"].as_str()?.to_string(),
                    id.trim_start_matches("containerd://").to_string(),
                ),
            ))
        })
        .collect();
    (pods.len() == REPLICAS).then_some(pods)
}

/// PID of each running container on a node, from its containerd.
fn task_pids(lab: &Lab, node: &str) -> BTreeMap<String, String> {
    let socket = lab.roots().join(format!(
        "run/{}/nodes/{node}/containerd/containerd.sock",
        lab.name
    ));
    let out = output(
        Command::new("ctr")
            .arg("--address")
            .arg(&socket)
            .args(["-n", "cairn", "tasks", "ls"]),
    )
    .unwrap();
    out.lines()
        .skip(1)
        .filter_map(|l| {
            let mut f = l.split_whitespace();
            Some((f.next()?.to_string(), f.next()?.to_string()))
        })
        .collect()
}

/// From inside the network namespace of process `pid` on `node`: one parallel curl to
/// every URL, each given `secs`; each URL's curl exit code and HTTP status (`0 200`
/// answered, `28 000` timed out).
fn outcomes(
    lab: &Lab,
    node: &str,
    pid: &str,
    urls: &[String],
    secs: u32,
) -> BTreeMap<String, String> {
    // Through the node (docker nodes have PID namespaces of their own; ctr's PIDs are
    // theirs), then into the pod's network namespace.
    let mut cmd = lab.cmd();
    cmd.args([
        "exec",
        node,
        "--",
        "nsenter",
        &format!("--net=/proc/{pid}/ns/net"),
    ])
    .args([
        "curl",
        "-s",
        "-Z",
        "--parallel-max",
        "8",
        "-m",
        &secs.to_string(),
    ])
    .args(["-w", "%{url_effective} %{exitcode} %{http_code}\n"]);
    for u in urls {
        cmd.args(["-o", "/dev/null", u]);
    }
    let out = cmd.output().unwrap();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split_once(' '))
        .map(|(url, outcome)| (url.to_string(), outcome.to_string()))
        .collect()
}

/// The URLs that did not answer 200 from `pid`'s namespace.
fn unreachable_from(lab: &Lab, node: &str, pid: &str, urls: &[String]) -> Vec<String> {
    let seen = outcomes(lab, node, pid, urls, 5);
    urls.iter()
        .filter(|u| !seen.get(*u).is_some_and(|o| o.ends_with(" 200")))
        .cloned()
        .collect()
}

/// Every URL answers from `pid`'s namespace, URLs that missed the first pass retried for up
/// to 30 s: a burst of fresh pods all resolving each other at once sometimes loses ARP
/// exchanges on the node's bridge (the neighbour entry then sits FAILED for a few seconds;
/// see the issue 13 note). Returns (first-pass misses, URLs never reached).
fn reach_all(lab: &Lab, node: &str, pid: &str, urls: &[String]) -> (usize, Vec<String>) {
    let mut missed = unreachable_from(lab, node, pid, urls);
    let first = missed.len();
    let deadline = Instant::now() + Duration::from_secs(30);
    while !missed.is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_secs(1));
        missed = unreachable_from(lab, node, pid, &missed);
    }
    (first, missed)
}

/// NetworkPolicy on this lab's network and proxy mode: web pods admit only `role=client`
/// pods. A web pod on node-1 finds a web pod on node-2 and on node-3 and the Service
/// closed (timed out: dropped, not refused) until it gets the label, then open.
fn policy_holds_across_nodes(
    lab: &Lab,
    pods: &BTreeMap<String, (String, String, String)>,
    pids: &BTreeMap<String, String>,
    cluster_ip: &str,
) {
    let on = |node: &str| pods.iter().find(|(_, (n, _, _))| n == node).unwrap();
    let (source, (_, _, container)) = on("node-1");
    let pid = &pids[container];
    let mut urls: Vec<String> = ["node-2", "node-3"]
        .iter()
        .map(|n| format!("http://{}/", on(n).1 .1))
        .collect();
    urls.push(format!("http://{cluster_ip}/"));
    let policy = json!({"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
        "metadata": {"name": "web-from-clients"},
        "spec": {"podSelector": {"matchLabels": {"app": "web"}},
            "ingress": [{"from": [{"podSelector": {"matchLabels": {"role": "client"}}}], "ports": [{"port": 80}]}]}});
    let file = lab.roots().join("web-policy.json");
    std::fs::write(&file, policy.to_string()).unwrap();
    let start = Instant::now();
    lab.kubectl(&["apply", "-f", file.to_str().unwrap()]);
    let expect = |what: &str, want: &str| {
        eventually(
            &format!("the web pods {what}"),
            Duration::from_secs(60),
            || {
                let seen = outcomes(lab, "node-1", pid, &urls, 2);
                let off: Vec<_> = seen.iter().filter(|(_, o)| o.as_str() != want).collect();
                if !off.is_empty() {
                    println!(
                        "{:.1}s: not yet {want}: {off:?}",
                        start.elapsed().as_secs_f64()
                    );
                }
                (seen.len() == urls.len() && off.is_empty()).then_some(())
            },
        );
        println!(
            "web pods {what} after {:.1}s",
            start.elapsed().as_secs_f64()
        );
    };
    expect("closed to an unlabelled pod", "28 000");
    lab.kubectl(&["label", "pod", source, "role=client"]);
    expect("open to a client", "0 200");
    lab.kubectl(&["delete", "networkpolicy", "web-from-clients"]);
}

/// One lab at a time: 60 pods each are what two cores carry.
static ONE_LAB: std::sync::Mutex<()> = std::sync::Mutex::new(());

#[test]
fn sixty_pods_on_three_netns_nodes_with_iptables_and_vxlan() {
    sixty_pods(
        "e2escale",
        16482,
        &["--driver=netns", "--proxy-mode=iptables", "--network=vxlan"],
    );
}

#[test]
fn sixty_pods_on_three_docker_nodes_with_nftables_and_host_gw() {
    sixty_pods(
        "e2edscal",
        16485,
        &[
            "--driver=docker",
            "--proxy-mode=nftables",
            "--network=host-gw",
        ],
    );
}

fn sixty_pods(name: &str, port: u16, options: &[&str]) {
    let _one = ONE_LAB.lock().unwrap_or_else(|e| e.into_inner());
    let mut args = vec!["--nodes=3"];
    args.extend_from_slice(options);
    let mut lab = Lab::up(name, port, &args);
    let roots = lab.roots().to_path_buf();
    let started = Instant::now();
    let manifest = lab.roots().join("web.json");
    std::fs::write(&manifest, deployment().to_string()).unwrap();
    lab.kubectl(&["apply", "-f", manifest.to_str().unwrap()]);
    lab.kubectl(&["expose", "deployment", "web", "--port=80"]);
    let pods = eventually("60 pods Running", Duration::from_secs(300), || {
        running_pods(&lab)
    });
    println!(
        "60 pods Running after {:.1}s",
        started.elapsed().as_secs_f64()
    );
    let mut per_node: BTreeMap<&str, usize> = BTreeMap::new();
    for (node, _, _) in pods.values() {
        *per_node.entry(node.as_str()).or_default() += 1;
    }
    assert_eq!(
        per_node,
        BTreeMap::from([("node-1", 20), ("node-2", 20), ("node-3", 20)])
    );

    let cluster_ip = lab.kubectl(&["get", "svc", "web", "-o", "jsonpath={.spec.clusterIP}"]);
    let service = format!("http://{cluster_ip}/");
    for node in ["node-1", "node-2", "node-3"] {
        eventually(
            &format!("the Service from {node}"),
            Duration::from_secs(60),
            || {
                lab.on_node(node, &["curl", "-fsS", "-m", "3", &service])
                    .ok()
            },
        );
    }
    let mut urls: Vec<String> = pods
        .values()
        .map(|(_, ip, _)| format!("http://{ip}/"))
        .collect();
    urls.push(service);
    let pids: BTreeMap<String, String> = ["node-1", "node-2", "node-3"]
        .iter()
        .flat_map(|n| task_pids(&lab, n))
        .collect();
    let checked = Instant::now();
    let (mut failures, mut retried) = (Vec::new(), 0);
    for (name, (node, _, container)) in &pods {
        let pid = pids
            .get(container)
            .unwrap_or_else(|| panic!("no task for {name}'s container {container}"));
        let (first_misses, never) = reach_all(&lab, node, pid, &urls);
        retried += first_misses;
        if !never.is_empty() {
            failures.push(format!("{name} on {node} could not reach {never:?}"));
        }
    }
    println!(
        "{} pod-to-pod and pod-to-Service fetches in {:.1}s ({retried} answered only on a retry)",
        pods.len() * urls.len(),
        checked.elapsed().as_secs_f64()
    );
    assert!(failures.is_empty(), "{failures:#?}");
    policy_holds_across_nodes(&lab, &pods, &pids, &cluster_ip);

    lab.down();
    assert!(processes_mentioning(&roots.display().to_string()).is_empty());
    assert!(processes_mentioning(&format!("cl-{name}-")).is_empty());
}
