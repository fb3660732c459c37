//! NetworkPolicy enforced on a 2-node lab (host-gw, nftables proxy), on upstream's netpol
//! model: namespaces x, y, z with pods a, b, c each (label `pod: <name>`), every pod
//! serving HTTP on ports 80 and 81 and probing the others; a and c on node-1, b on
//! node-2.
//!
//! First the behaviours one by one: a default deny in x closes x/a to every pod while its
//! kubelet probe (node-local) still passes, its drops count on the proxy's `/metrics` and
//! `/network-policy/x/a` shows the policy; it stays closed while its node's agent and
//! proxy are killed and restarted, and pods started meanwhile stay closed until the
//! proxy has programmed them; an allow from namespace y opens it to y's pods
//! only, through its ClusterIP too (policy applies after DNAT), and closes its NodePort
//! to the switch (outside the cluster) on both nodes; an egress deny closes a
//! pod's way out; deleting the policies opens everything again.
//!
//! Then the truth tables: for each of upstream's cases (`test/e2e/network/netpol`) the
//! policies are applied and every pod probes every other on TCP and UDP, ports 80 and 81,
//! until the whole 9×9 matrix is what `cairn-netpol`'s model says (loopback not graded, as
//! upstream); the model is checked against upstream's expected tables by that crate's unit
//! tests. A probe counts as closed only when it timed out, as a policy's drop does.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

#[path = "netpol/cases.rs"]
mod cases;
mod common;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use cairn_netpol::{reachable, Cluster, CompiledPolicy, Namespace, Pod, PodKey, Protocol};
use cases::cases;
use common::{eventually, Lab};
use serde_json::{json, Value};

const MINUTE: Duration = Duration::from_secs(60);
const NAMESPACES: [&str; 3] = ["x", "y", "z"];
const PODS: [&str; 3] = ["a", "b", "c"];
const NS_NAME: &str = "kubernetes.io/metadata.name";

/// The host's socat and python3, for the UDP side: Debian's busybox has no UDP server or
/// client. The pods mount the node's `/usr` (netns driver: the host's) read-only, with
/// its libraries at `/lib` and `/lib64` where the loader looks for them.
const SOCAT: &str = "/host/usr/bin/socat";

/// A UDP echo server on 80 and 81: one process, one socket per port. (socat's forking
/// UDP servers lost datagrams under many concurrent peers.)
const UDP_ECHO: &str = r#"/host/usr/bin/python3 -c '
import selectors, socket
sel = selectors.DefaultSelector()
for port in (80, 81):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind(("0.0.0.0", port))
    sel.register(s, selectors.EVENT_READ)
while True:
    for key, _ in sel.select():
        data, peer = key.fileobj.recvfrom(2048)
        key.fileobj.sendto(data, peer)
' &"#;

/// A busybox pod serving its page over TCP on 80 and 81 and echoing datagrams on UDP 80
/// and 81 (ports named as upstream's: `serve-80-tcp`, `serve-80-udp`), ready once TCP 80
/// answers.
fn run_pod(lab: &Lab, ns: &str, name: &str) {
    let node = if name == "b" { "node-2" } else { "node-1" };
    let serve = format!(
        "{UDP_ECHO} \
         mkdir -p /w && echo 'It works!' > /w/index.html && httpd -p 80 -h /w && \
         httpd -p 81 -h /w && exec sleep 100000"
    );
    let ports: Vec<Value> = [80, 81]
        .iter()
        .flat_map(|p| {
            [
                json!({"name": format!("serve-{p}-tcp"), "containerPort": p}),
                json!({"name": format!("serve-{p}-udp"), "containerPort": p, "protocol": "UDP"}),
            ]
        })
        .collect();
    let mounts = [
        ("host-usr", "/usr", "/host/usr"),
        ("host-lib", "/usr/lib", "/lib"),
        ("host-lib64", "/usr/lib64", "/lib64"),
    ];
    let volumes: Vec<Value> = mounts
        .iter()
        .map(|(n, path, _)| json!({"name": n, "hostPath": {"path": path}}))
        .collect();
    let volume_mounts: Vec<Value> = mounts
        .iter()
        .map(|(n, _, at)| json!({"name": n, "mountPath": at, "readOnly": true}))
        .collect();
    let container = json!({"name": name, "image": "busybox", "command": ["sh", "-c", serve], "ports": ports,
        "volumeMounts": volume_mounts,
        "readinessProbe": {"httpGet": {"path": "/", "port": 80}, "periodSeconds": 1, "failureThreshold": 2}});
    let spec = json!({"spec": {"nodeName": node, "containers": [container], "volumes": volumes}});
    lab.kubectl(&[
        "-n",
        ns,
        "run",
        name,
        "--image=busybox",
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

/// Shell run in a pod that probes `addr` (`ip:port`) over `proto` and prints one word:
/// `open` (the page or the UDP answer came back), `closed` (nothing came back within
/// `secs`: a policy's silent drop) or `error:RC` (anything else, such as a refused
/// connection, which a policy never causes and so never counts as closed).
fn probe_sh(proto: &str, addr: &str, secs: u32) -> String {
    // busybox's own `wget -T` misbehaves; `timeout` bounds a dropped connection (143).
    let (run, open, closed) = match proto {
        "tcp" => (
            format!("timeout {secs} wget -qO- http://{addr}/"),
            "*'It works!'*",
            "143:*",
        ),
        // The server echoes the datagram back.
        _ => (
            format!(
                "echo udp-probe | timeout {} {SOCAT} -t {secs} - UDP4:{addr}",
                secs + 1
            ),
            "*udp-probe*",
            "0:|143:*",
        ),
    };
    format!(
        "out=$({run} 2>&1); rc=$?; case \"$rc:$out\" in {open}) echo open;; {closed}) echo closed;; *) echo error:$rc;; esac"
    )
}

/// Whether `from` (`ns/pod`) gets the page from `ip` on TCP port 80 within 2 s; only a
/// timeout counts as closed, anything else is probed again.
fn reaches(lab: &Lab, from: &str, ip: &str) -> bool {
    let (ns, pod) = from.split_once('/').unwrap();
    let script = probe_sh("tcp", &format!("{ip}:80"), 2);
    eventually(&format!("a verdict from {from} for {ip}"), MINUTE, || {
        let out = lab.try_kubectl(&["-n", ns, "exec", pod, "--", "sh", "-c", &script]);
        match out.as_deref().map(str::trim) {
            Ok("open") => Some(true),
            Ok("closed") => Some(false),
            other => {
                println!("{from} -> {ip}: no verdict: {other:?}");
                None
            }
        }
    })
}

/// Waits until every `(from, reachable)` holds for `ip`; prints how long it took.
fn expect(lab: &Lab, what: &str, ip: &str, cases: &[(&str, bool)]) {
    let start = Instant::now();
    eventually(what, MINUTE, || {
        cases
            .iter()
            .all(|(from, want)| reaches(lab, from, ip) == *want)
            .then_some(())
    });
    println!("{what}: {:.1?}", start.elapsed());
}

fn policy(ns: &str, name: &str, spec: &Value) -> Value {
    json!({"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
        "metadata": {"namespace": ns, "name": name}, "spec": spec})
}

fn apply(lab: &Lab, policies: &[Value]) {
    let list = json!({"apiVersion": "v1", "kind": "List", "items": policies});
    let file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(file.path(), list.to_string()).unwrap();
    lab.kubectl(&["apply", "-f", &file.path().display().to_string()]);
}

fn delete_policies(lab: &Lab) {
    for ns in NAMESPACES {
        lab.kubectl(&["-n", ns, "delete", "networkpolicy", "--all"]);
    }
}

#[test]
fn network_policies_are_enforced_on_every_node() {
    let lab = Lab::up("e2epol", 16503, &["--nodes=2"]);
    for ns in NAMESPACES {
        lab.kubectl(&["create", "namespace", ns]);
        for name in PODS {
            run_pod(&lab, ns, name);
        }
    }
    for ns in NAMESPACES {
        for name in PODS {
            eventually(&format!("{ns}/{name} ready"), 2 * MINUTE, || {
                ready(&lab, ns, name).then_some(())
            });
        }
    }
    behaviours(&lab);
    truth_tables(&lab);
}

fn behaviours(lab: &Lab) {
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
    expect(lab, "x/a open to all", &ip, &everyone);
    lab.kubectl(&[
        "-n",
        "x",
        "expose",
        "pod",
        "a",
        "--port=80",
        "--name=web",
        "--type=NodePort",
    ]);
    let node_port = lab.kubectl(&[
        "-n",
        "x",
        "get",
        "svc",
        "web",
        "-o",
        "jsonpath={.spec.ports[0].nodePort}",
    ]);
    // From outside the cluster (the switch) through each node's NodePort: node-2's hands
    // the connection on to node-1 from its own address.
    let node_ports: Vec<String> = ["node-1", "node-2"]
        .iter()
        .map(|n| format!("http://{}:{node_port}/", lab.node_ip(n)))
        .collect();
    expect_from_switch(lab, "the NodePort open to all", &node_ports, true);

    let deny = json!({"podSelector": {}, "policyTypes": ["Ingress"]});
    let targets = [
        ("node-1", pod_ip(lab, "x", "a")),
        ("node-2", pod_ip(lab, "x", "b")),
    ];
    apply(lab, &[policy("x", "deny", &deny)]);
    programmed_on_both_nodes(lab, &targets);
    let nobody = [("x/b", false), ("y/a", false), ("y/b", false)];
    expect(lab, "default deny in x enforced", &ip, &nobody);
    assert!(
        ready(lab, "x", "a"),
        "the kubelet's probe of x/a must pass under a deny"
    );
    observability(lab, &ip);
    // The rules outlive node-1's agent and proxy: killed, no window opens; a pod started
    // while the proxy is down is closed until its policy is in force (the guard).
    lab.lab(&["stop", "node-1", "agent", "proxy", "--kill"]);
    assert!(
        !reaches(lab, "y/b", &ip),
        "open while node-1's agent and proxy are down"
    );
    lab.lab(&["start", "node-1", "agent"]);
    unprogrammed_pods_are_closed(lab);
    assert!(
        !reaches(lab, "y/b", &ip),
        "open after node-1's agent and proxy restarted"
    );

    let from_y = json!({"podSelector": {"matchLabels": {"pod": "a"}}, "ingress": [{"from": [
        {"namespaceSelector": {"matchLabels": {NS_NAME: "y"}}}]}]});
    apply(lab, &[policy("x", "allow-from-y", &from_y)]);
    let only_y = [("x/b", false), ("y/a", true), ("y/b", true)];
    expect(lab, "allow from y enforced", &ip, &only_y);

    expect_from_switch(lab, "the NodePort obeys x/a's policy", &node_ports, false);
    let svc = lab.kubectl(&[
        "-n",
        "x",
        "get",
        "svc",
        "web",
        "-o",
        "jsonpath={.spec.clusterIP}",
    ]);
    expect(lab, "the ClusterIP obeys x/a's policy", &svc, &only_y);

    let deny_egress =
        json!({"podSelector": {"matchLabels": {"pod": "b"}}, "policyTypes": ["Egress"]});
    apply(lab, &[policy("y", "deny-egress", &deny_egress)]);
    expect(
        lab,
        "egress deny of y/b enforced",
        &ip,
        &[("y/a", true), ("y/b", false)],
    );
    assert!(ready(lab, "x", "a"));

    delete_policies(lab);
    expect(lab, "policies deleted, all open", &ip, &everyone);
    expect_from_switch(lab, "the NodePort open again", &node_ports, true);
}

/// Waits until every URL answers from the switch (`open`) or none does.
fn expect_from_switch(lab: &Lab, what: &str, urls: &[String], open: bool) {
    let start = Instant::now();
    eventually(what, MINUTE, || {
        urls.iter()
            .all(|url| {
                // Closed means timed out (curl's 28), as a dropped connection does.
                let verdict = match lab.on_switch(&["curl", "-fsS", "-m", "2", url]) {
                    Ok(page) if page.contains("It works!") => Some(true),
                    Err(e) if e.contains("curl: (28)") => Some(false),
                    _ => None,
                };
                verdict == Some(open)
            })
            .then_some(())
    });
    println!("{what}: {:.1?}", start.elapsed());
}

/// The deny's drops on node-1's `/metrics`, and x/a's effective policy on the proxy's
/// `/network-policy/x/a`.
fn observability(lab: &Lab, ip: &str) {
    assert!(!reaches(lab, "y/a", ip));
    let metrics = lab
        .on_node(
            "node-1",
            &["curl", "-fsS", "http://127.0.0.1:10249/metrics"],
        )
        .unwrap();
    let drops = metrics
        .lines()
        .find(|l| {
            l.starts_with("cairn_netpol_dropped_packets_total{namespace=\"x\",policy=\"deny\"}")
        })
        .unwrap_or_else(|| panic!("no drop counter for x/deny in {metrics}"));
    let count: u64 = drops.rsplit(' ').next().unwrap().parse().unwrap();
    assert!(count > 0, "{drops}");
    let url = "http://127.0.0.1:10249/network-policy/x/a";
    let text: Value =
        serde_json::from_str(&lab.on_node("node-1", &["curl", "-fsS", url]).unwrap()).unwrap();
    assert_eq!(text["ingress"]["policies"], json!(["x/deny"]), "{text}");
    assert_eq!(text["ingress"]["programmed"], json!(true), "{text}");
    assert_eq!(text["egress"]["isolated"], json!(false), "{text}");
}

/// With node-1's proxy down and a deny in x, new pods x/new and z/new on node-1 (z has
/// no policy) are both closed to y/b: their addresses are not programmed, so the guard
/// drops them. Once the proxy is back z/new opens and x/new stays closed.
fn unprogrammed_pods_are_closed(lab: &Lab) {
    for ns in ["x", "z"] {
        run_pod(lab, ns, "new");
    }
    for ns in ["x", "z"] {
        eventually(&format!("{ns}/new ready"), 2 * MINUTE, || {
            ready(lab, ns, "new").then_some(())
        });
    }
    let (x_new, z_new) = (pod_ip(lab, "x", "new"), pod_ip(lab, "z", "new"));
    let before = guard_drops(lab);
    assert!(!reaches(lab, "y/b", &x_new), "x/new open before its policy");
    assert!(
        !reaches(lab, "y/b", &z_new),
        "z/new open before the proxy saw it"
    );
    let after = guard_drops(lab);
    assert!(
        after > before,
        "the guard dropped nothing: {before} then {after}"
    );
    lab.lab(&["start", "node-1", "proxy"]);
    expect(lab, "z/new open once programmed", &z_new, &[("y/b", true)]);
    assert!(!reaches(lab, "y/b", &x_new), "x/new open after its policy");
    for ns in ["x", "z"] {
        lab.kubectl(&["-n", ns, "delete", "pod", "new", "--wait"]);
    }
}

/// Packets node-1's guard has dropped (the `unprogrammed` counter).
fn guard_drops(lab: &Lab) -> u64 {
    let counter = [
        "nft",
        "list",
        "counter",
        "ip",
        "cairn-netpol",
        "unprogrammed",
    ];
    let listing = lab.on_node("node-1", &counter).unwrap();
    let packets = listing
        .split_once("packets ")
        .and_then(|(_, rest)| rest.split_whitespace().next())
        .and_then(|n| n.parse().ok());
    packets.unwrap_or_else(|| panic!("no packet count in {listing}"))
}

fn pod_ip(lab: &Lab, ns: &str, pod: &str) -> String {
    lab.kubectl(&[
        "-n",
        ns,
        "get",
        "pod",
        pod,
        "-o",
        "jsonpath={.status.podIP}",
    ])
}

/// Waits until each `(node, pod IP)`'s ingress chain is in its node's table; prints the
/// time since `kubectl apply` returned, polled every 20 ms.
fn programmed_on_both_nodes(lab: &Lab, targets: &[(&str, String)]) {
    let start = Instant::now();
    for (node, ip) in targets {
        let element = format!("{ip} : jump in_{}", ip.replace('.', "_"));
        let list = ["nft", "list", "map", "ip", "cairn-netpol", "ingress_pods"];
        let deadline = start + MINUTE;
        while !lab.on_node(node, &list).is_ok_and(|m| m.contains(&element)) {
            assert!(Instant::now() < deadline, "{node} never programmed {ip}");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    println!(
        "deny in x programmed on both nodes {:.0?} after the write",
        start.elapsed()
    );
}

/// Every pod and namespace as the model reads them, and each pod's address.
fn cluster(lab: &Lab) -> (Cluster, BTreeMap<String, String>) {
    let mut cluster = Cluster::default();
    let namespaces: Value =
        serde_json::from_str(&lab.kubectl(&["get", "ns", "-o", "json"])).unwrap();
    for ns in namespaces["items"].as_array().unwrap() {
        let ns: k8s_openapi::api::core::v1::Namespace = serde_json::from_value(ns.clone()).unwrap();
        cluster.add_namespace(Namespace::from_k8s(&ns));
    }
    let pods: Value =
        serde_json::from_str(&lab.kubectl(&["get", "pods", "-A", "-o", "json"])).unwrap();
    let mut ips = BTreeMap::new();
    for pod in pods["items"].as_array().unwrap() {
        let pod: k8s_openapi::api::core::v1::Pod = serde_json::from_value(pod.clone()).unwrap();
        let pod = Pod::from_k8s(&pod);
        if let Some(ip) = pod.ips.first() {
            ips.insert(
                format!("{}/{}", pod.key.namespace, pod.key.name),
                ip.to_string(),
            );
        }
        cluster.add_pod(pod);
    }
    (cluster, ips)
}

fn model_pods() -> Vec<String> {
    NAMESPACES
        .iter()
        .flat_map(|ns| PODS.iter().map(move |p| format!("{ns}/{p}")))
        .collect()
}

/// The probed ports, as upstream's matrix: TCP and UDP on 80 and 81.
const PORTS: [(&str, Protocol, u16); 4] = [
    ("tcp", Protocol::Tcp, 80),
    ("tcp", Protocol::Tcp, 81),
    ("udp", Protocol::Udp, 80),
    ("udp", Protocol::Udp, 81),
];

/// `from`'s row: each other model pod's cell (`to:port/proto`) to whether it answered; a
/// probe with no verdict (see `probe_sh`) leaves its cell out, so it never matches.
fn probe_row(lab: &Lab, from: &str, ips: &BTreeMap<String, String>) -> BTreeMap<String, bool> {
    let probes: Vec<String> = model_pods()
        .into_iter()
        .filter(|t| t != from)
        .flat_map(|t| {
            PORTS.map(|(proto, _, port)| {
                // Two cores run 9 rows of 32 probes at once: UDP gets 2 s to answer.
                let secs = if proto == "udp" { 2 } else { 1 };
                let sh = probe_sh(proto, &format!("{}:{port}", ips[&t]), secs);
                format!("(v=$({sh}); echo \"{t}:{port}/{proto} $v\") &")
            })
        })
        .collect();
    let script = format!("{}\nwait", probes.join("\n"));
    let (ns, pod) = from.split_once('/').unwrap();
    let out = lab
        .try_kubectl(&["-n", ns, "exec", pod, "--", "sh", "-c", &script])
        .unwrap_or_default();
    out.lines()
        .filter_map(|l| match l.split_once(' ')? {
            (cell, "open") => Some((cell.to_string(), true)),
            (cell, "closed") => Some((cell.to_string(), false)),
            _ => None,
        })
        .collect()
}

/// The whole matrix, every row probed at once; cells `from -> to:port/proto`.
fn observe(lab: &Lab, ips: &BTreeMap<String, String>) -> BTreeMap<String, bool> {
    let rows: Vec<(String, BTreeMap<String, bool>)> = std::thread::scope(|s| {
        let handles: Vec<_> = model_pods()
            .into_iter()
            .map(|from| s.spawn(move || (from.clone(), probe_row(lab, &from, ips))))
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let mut cells = BTreeMap::new();
    for (from, row) in rows {
        for (to, ok) in row {
            cells.insert(format!("{from} -> {to}"), ok);
        }
    }
    cells
}

/// What the model says of every cell, for `policies` in force.
fn expected(policies: &[Value], cluster: &Cluster) -> BTreeMap<String, bool> {
    let compiled: Vec<CompiledPolicy> = policies
        .iter()
        .map(|p| CompiledPolicy::compile(&serde_json::from_value(p.clone()).unwrap()).unwrap())
        .collect();
    let key = |p: &str| {
        let (ns, name) = p.split_once('/').unwrap();
        PodKey::new(ns, name)
    };
    let mut cells = BTreeMap::new();
    for from in model_pods() {
        for to in model_pods().into_iter().filter(|t| *t != from) {
            for (name, protocol, port) in PORTS {
                let ok = reachable(&compiled, cluster, (&key(&from), &key(&to)), protocol, port);
                cells.insert(format!("{from} -> {to}:{port}/{name}"), ok.unwrap());
            }
        }
    }
    cells
}

fn truth_tables(lab: &Lab) {
    let (_, ips) = cluster(lab);
    for (name, policies, labels) in cases(&ips) {
        delete_policies(lab);
        for args in &labels {
            lab.kubectl(&args.iter().map(String::as_str).collect::<Vec<_>>());
        }
        apply(lab, &policies);
        let (cluster, _) = cluster(lab);
        let want = expected(&policies, &cluster);
        let start = Instant::now();
        let mut last = BTreeMap::new();
        let converged = (0..20).any(|_| {
            last = observe(lab, &ips);
            last == want
        });
        let wrong: Vec<String> = want
            .iter()
            .filter(|(cell, v)| last.get(*cell) != Some(v))
            .map(|(cell, v)| format!("{cell}: want {v}, saw {:?}", last.get(cell)))
            .collect();
        assert!(
            converged,
            "{name}: {} cells differ: {wrong:#?}",
            wrong.len()
        );
        println!(
            "{name}: matrix as the model says after {:.1?}",
            start.elapsed()
        );
        for args in &labels {
            undo_label(lab, args);
        }
    }
    delete_policies(lab);
}

/// `kubectl label … k=v --overwrite` undone as `k-`.
fn undo_label(lab: &Lab, args: &[String]) {
    let undo: Vec<String> = args
        .iter()
        .filter(|a| *a != "--overwrite")
        .map(|a| match a.split_once('=') {
            Some((k, _)) if !a.starts_with('-') => format!("{k}-"),
            _ => a.clone(),
        })
        .collect();
    lab.kubectl(&undo.iter().map(String::as_str).collect::<Vec<_>>());
}
