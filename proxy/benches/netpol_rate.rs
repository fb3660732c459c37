//! NetworkPolicy's cost on the data plane (issue 32's benchmark): new TCP connections per
//! second and connect latency from a client pod to a server pod on another node's
//! address range, through the node's forward hook, with no policy table and with the
//! table of a cluster of 1,000 pods and 200 policies, 50 of them selecting the server
//! (the one that admits the client sorts last, so a SYN walks the other 49 rules first).
//! The namespaces are conn_rate's: a "node", a server "pod" and a client pod, each pod
//! joined to the node by a veth; the node has the service proxy's nftables tables (with no
//! Services) in every round, so conntrack is on in every round, as on any node. Rounds with and without the table alternate and are
//! pooled, so a drift in the machine's speed falls on both alike; each round starts at the
//! next row, and a second no-policy row shows how much two measurements of the same rules
//! differ in the run. Goal: ≥ 0.9× the rate without policies.
//!
//! The peer: the same policies in kube-router's iptables + ipset shape (see
//! [`kube_router`]), measured in the same rounds.
//!
//! Also printed: the time to compute the node's state from the cluster (what every
//! change costs before the diff), p50/p99 over 20 runs, and the table's size.
//!
//! `cargo bench -p cairn-proxy --bench netpol_rate` (root). `NETPOL_RATE_SECONDS` per
//! round (default 2), `NETPOL_RATE_ROUNDS` (default 6: each row once in each position).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::Instant;

use cairn_netpol::nft::{full_script, Desired};
use cairn_netpol::{
    for_node, Allowance, Cluster, CompiledPolicy, Isolation, Namespace, Peers, Pod, PodKey,
    PodPolicy, PolicyKey, Ports,
};
use cairn_serviceproxy::nftables::{NftConfig, Renderer};
use cairn_serviceproxy::ProxyState;
use cairn_testsupport::NetNs;
use serde_json::json;
use support::{hammer, pct, serve};

mod support;

const SERVER: Ipv4Addr = Ipv4Addr::new(10, 244, 1, 2);
const CLIENT: Ipv4Addr = Ipv4Addr::new(10, 244, 200, 2);
const PORT: u16 = 8080;

fn pod(ns: &str, name: &str, ip: Ipv4Addr, node: &str, app: &str) -> Pod {
    Pod {
        key: PodKey::new(ns, name),
        labels: BTreeMap::from([("app".to_string(), app.to_string())]),
        ips: vec![ip.into()],
        node: Some(node.into()),
        host_network: false,
        finished: false,
        named_ports: Vec::new(),
    }
}

fn policy(ns: &str, name: &str, spec: serde_json::Value) -> CompiledPolicy {
    let p = json!({"metadata": {"namespace": ns, "name": name}, "spec": spec});
    CompiledPolicy::compile(&serde_json::from_value(p).unwrap()).unwrap()
}

fn from_pods(app: &str, team: &str, ports: &[u16]) -> serde_json::Value {
    let ports: Vec<_> = ports.iter().map(|p| json!({"port": p})).collect();
    json!([{"from": [{"podSelector": {"matchLabels": {"app": app}},
                      "namespaceSelector": {"matchLabels": {"team": team}}}],
            "ports": ports}])
}

/// 1,000 pods (the server on node-1, the client on node-2, 998 spread over 3 nodes and
/// 10 namespaces) and 200 policies: 50 select the server (the last admits the client's
/// namespace), 150 select other pods, 20 of those with an `ipBlock`.
fn cluster() -> (Cluster, Vec<CompiledPolicy>) {
    let mut c = Cluster::default();
    let team = |t: &str| BTreeMap::from([("team".to_string(), t.to_string())]);
    for ns in ["target", "client"] {
        c.add_namespace(Namespace::new(ns, team(ns)));
    }
    for n in 0..10 {
        let ns = format!("ns-{n}");
        c.add_namespace(Namespace::new(&ns, team(&ns)));
    }
    c.add_pod(pod("target", "server", SERVER, "node-1", "server"));
    c.add_pod(pod("client", "client", CLIENT, "node-2", "client"));
    for i in 0..998u32 {
        let ip = Ipv4Addr::from(u32::from(Ipv4Addr::new(10, 244, 2, 2)) + i);
        let node = format!("node-{}", 1 + i % 3);
        let (ns, app) = (format!("ns-{}", i % 10), format!("app-{}", i % 20));
        c.add_pod(pod(&ns, &format!("p-{i}"), ip, &node, &app));
    }
    let server = json!({"matchLabels": {"app": "server"}});
    let mut policies = Vec::new();
    for k in 0..49 {
        let rules = from_pods(&format!("app-{}", k % 20), &format!("ns-{}", k % 10), &[80]);
        let spec = json!({"podSelector": server, "ingress": rules});
        policies.push(policy("target", &format!("p-{k:02}"), spec));
    }
    let admit = json!([{"from": [{"namespaceSelector": {"matchLabels": {"team": "client"}}}],
                        "ports": [{"port": PORT}]}]);
    policies.push(policy(
        "target",
        "p-49",
        json!({"podSelector": server, "ingress": admit}),
    ));
    for j in 0..150 {
        let ns = format!("ns-{}", j % 10);
        let selector = json!({"matchLabels": {"app": format!("app-{}", j % 20)}});
        let mut rules = from_pods(&format!("app-{}", (j + 1) % 20), &ns, &[80, 443]);
        if j < 20 {
            rules[0]["from"].as_array_mut().unwrap().push(
                json!({"ipBlock": {"cidr": "10.0.0.0/8", "except": [format!("10.{j}.0.0/16")]}}),
            );
        }
        let spec = json!({"podSelector": selector, "ingress": rules});
        policies.push(policy(&ns, &format!("q-{j:03}"), spec));
    }
    policies.sort_by(|a, b| a.key.cmp(&b.key));
    (c, policies)
}

/// The same policy in kube-router's shape (its `pkg/controllers/netpol` layout, from its
/// documentation and source; not its code): FORWARD jumps to KUBE-ROUTER-FORWARD, which
/// has one rule per isolated local pod (`-d POD -j KUBE-POD-FW-…`); a pod chain accepts
/// established traffic, drops invalid, accepts the node's own, jumps to each selecting
/// policy's KUBE-NWPLCY-… chain, and rejects what no policy marked; a policy chain marks
/// and returns per rule and port, matching ipsets of sources (hash:net, `except` as
/// `nomatch`) and of the policy's targets. kube-router's NFLOG rules before the reject
/// are left out (the measured traffic is allowed). Returns (ipset restore, iptables-restore).
fn kube_router(pods: &BTreeMap<PodKey, PodPolicy>) -> (String, String) {
    let (mut ipsets, mut chains, mut rules) = (String::new(), Vec::new(), Vec::new());
    let mut policies: BTreeMap<PolicyKey, (String, Vec<Allowance>, Vec<IpAddr>)> = BTreeMap::new();
    for (i, pod) in pods.values().enumerate() {
        let Isolation::Isolated {
            policies: isolating,
            allowed,
        } = &pod.ingress
        else {
            continue;
        };
        let (ip, fw) = (pod.ips[0], format!("KUBE-POD-FW-{i:06}"));
        rules.push(format!("-A KUBE-ROUTER-FORWARD -d {ip} -j {fw}"));
        rules.push(format!(
            "-A {fw} -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT"
        ));
        rules.push(format!("-A {fw} -m conntrack --ctstate INVALID -j DROP"));
        rules.push(format!(
            "-A {fw} -d {ip} -m addrtype --src-type LOCAL -j ACCEPT"
        ));
        for key in isolating {
            let next = policies.len();
            let entry = policies.entry(key.clone()).or_insert_with(|| {
                let own = allowed
                    .iter()
                    .filter(|a| a.policy == *key)
                    .cloned()
                    .collect();
                (format!("KUBE-NWPLCY-{next:06}"), own, Vec::new())
            });
            entry.2.push(ip);
            rules.push(format!("-A {fw} -d {ip} -j {}", entry.0));
        }
        rules.push(format!(
            "-A {fw} -m mark ! --mark 0x10000/0x10000 -j REJECT"
        ));
        rules.push(format!("-A {fw} -j MARK --set-xmark 0x0/0x10000"));
        chains.push(fw);
    }
    for (chain, allowances, targets) in policies.values() {
        let dst = chain.replace("KUBE-NWPLCY", "KUBE-DST");
        ipsets.push_str(&format!("create {dst} hash:ip\n"));
        for ip in targets {
            ipsets.push_str(&format!("add {dst} {ip}\n"));
        }
        for (r, a) in allowances.iter().enumerate() {
            let src = match &a.peers {
                Peers::Any => String::new(),
                Peers::Listed { addresses, blocks } => {
                    let set = format!("{}-{r}", chain.replace("KUBE-NWPLCY", "KUBE-SRC"));
                    ipsets.push_str(&format!("create {set} hash:net\n"));
                    for ip in addresses {
                        ipsets.push_str(&format!("add {set} {ip}\n"));
                    }
                    for b in blocks {
                        ipsets.push_str(&format!("add {set} {}\n", b.cidr));
                        for e in &b.except {
                            ipsets.push_str(&format!("add {set} {e} nomatch\n"));
                        }
                    }
                    format!("-m set --match-set {set} src ")
                }
            };
            let ports: Vec<String> = match &a.ports {
                Ports::Any => vec![String::new()],
                Ports::Listed(ranges) => ranges
                    .iter()
                    .map(|p| format!("-p {} --dport {}:{} ", p.protocol.as_str(), p.first, p.last))
                    .collect(),
            };
            for port in ports {
                let matches = format!("{src}-m set --match-set {dst} dst {port}");
                rules.push(format!(
                    "-A {chain} {matches}-j MARK --set-xmark 0x10000/0x10000"
                ));
                rules.push(format!(
                    "-A {chain} {matches}-m mark --mark 0x10000/0x10000 -j RETURN"
                ));
            }
        }
        chains.push(chain.clone());
    }
    let mut restore = String::from("*filter\n:KUBE-ROUTER-FORWARD - [0:0]\n");
    for chain in &chains {
        restore.push_str(&format!(":{chain} - [0:0]\n"));
    }
    restore.push_str("-A FORWARD -j KUBE-ROUTER-FORWARD\n");
    for rule in &rules {
        restore.push_str(rule);
        restore.push('\n');
    }
    restore.push_str("COMMIT\n");
    (ipsets, restore)
}

/// Runs `cmd` in `ns` with `input` on its stdin.
fn feed(ns: &NetNs, cmd: &[&str], input: &str) {
    let mut child = ns
        .command(cmd[0])
        .args(&cmd[1..])
        .stdin(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    assert!(child.wait().unwrap().success(), "{cmd:?} failed");
}

/// The node's state, and the time each of 20 computations took (ms).
fn compute(cluster: &Cluster, policies: &[CompiledPolicy]) -> (Desired, Vec<f64>) {
    let mut times = Vec::new();
    let mut desired = Desired::default();
    for _ in 0..20 {
        let t = Instant::now();
        desired = Desired::from_pods(for_node(policies, cluster, "node-1").values())
            .guarding(&["10.244.1.0/24".parse().unwrap()]);
        times.push(t.elapsed().as_secs_f64() * 1000.0);
    }
    (desired, times)
}

fn env_or<T: std::str::FromStr>(key: &str, default: T) -> T {
    std::env::var(key)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

/// The rules a round runs under: none, cairn's table, or kube-router's shape.
#[derive(Clone, Copy, PartialEq)]
enum Rules {
    None,
    /// No policy again: how far two measurements of the same rules differ in this run.
    NoneAgain,
    /// cairn's table with no pod isolated: the hook and the guard alone.
    CairnEmpty,
    /// Only the policy that admits the client selects the server.
    CairnOne,
    Cairn,
    KubeRouter,
}

/// What the rounds load.
struct Scripts {
    all: String,
    one: String,
    empty: String,
    peer: (String, String),
}

impl Rules {
    const ALL: [Rules; 6] = [
        Rules::None,
        Rules::NoneAgain,
        Rules::CairnEmpty,
        Rules::CairnOne,
        Rules::Cairn,
        Rules::KubeRouter,
    ];

    fn label(self) -> &'static str {
        match self {
            Rules::None => "no policy (the service proxy's tables: conntrack on)",
            Rules::NoneAgain => "no policy, measured again (the run's noise)",
            Rules::CairnEmpty => "cairn nftables, every local pod programmed, none isolated",
            Rules::CairnOne => "cairn nftables, 1 policy (admitting the client)",
            Rules::Cairn => "cairn nftables, 200 policies (50 selecting the server)",
            Rules::KubeRouter => "kube-router shape (iptables-nft + ipset), the same policies",
        }
    }

    fn load(self, node: &NetNs, scripts: &Scripts) {
        let nft = |script: &str| feed(node, &["nft", "-f", "-"], script);
        match self {
            Rules::None | Rules::NoneAgain => {}
            Rules::CairnEmpty => nft(&scripts.empty),
            Rules::CairnOne => nft(&scripts.one),
            Rules::Cairn => nft(&scripts.all),
            Rules::KubeRouter => {
                feed(node, &["ipset", "restore"], &scripts.peer.0);
                feed(node, &["iptables-restore", "--noflush"], &scripts.peer.1);
            }
        }
    }

    fn unload(self, node: &NetNs) {
        match self {
            Rules::None | Rules::NoneAgain => {}
            Rules::CairnEmpty | Rules::CairnOne | Rules::Cairn => {
                feed(node, &["nft", "-f", "-"], "delete table ip cairn-netpol\n")
            }
            Rules::KubeRouter => {
                feed(node, &["iptables-restore"], "*filter\nCOMMIT\n");
                feed(node, &["ipset", "destroy"], "");
            }
        }
    }
}

fn main() {
    let secs: f64 = env_or("NETPOL_RATE_SECONDS", 2.0);
    let rounds: u32 = env_or("NETPOL_RATE_ROUNDS", 6).max(1);
    let (cluster, policies) = cluster();
    let (desired, mut times) = compute(&cluster, &policies);
    let script = full_script(&desired);
    println!(
        "node-1's state at 1,000 pods / 200 policies: {} chains, {} sets, {} set elements, script {} KiB; computed in p50 {:.1} ms, p99 {:.1} ms",
        desired.chains.len(),
        desired.sets.len(),
        desired.sets.values().map(|s| s.len()).sum::<usize>(),
        script.len() / 1024,
        pct(&mut times, 0.5),
        pct(&mut times, 0.99)
    );
    let pods = for_node(&policies, &cluster, "node-1");
    let peer = kube_router(&pods);
    println!(
        "kube-router shape for node-1: {} ipset lines, {} iptables rules",
        peer.0.lines().count(),
        peer.1.lines().filter(|l| l.starts_with("-A")).count()
    );
    let guard = ["10.244.1.0/24".parse().unwrap()];
    let admitting: Vec<CompiledPolicy> = policies
        .iter()
        .filter(|p| p.key.name == "p-49")
        .cloned()
        .collect();
    let one =
        Desired::from_pods(for_node(&admitting, &cluster, "node-1").values()).guarding(&guard);
    let scripts = Scripts {
        all: script,
        one: full_script(&one),
        empty: full_script(
            &Desired::from_pods(for_node(&[], &cluster, "node-1").values()).guarding(&guard),
        ),
        peer,
    };
    let (node, server, client) = support::pod_namespaces("np");
    serve(&server, PORT);
    let to = SocketAddr::from((SERVER, PORT));
    client.run_inside(|| hammer(to, 0.5));
    // Every node runs the service proxy, whose tables hold conntrack expressions (a
    // filter-forward `ct state new` check, masquerading), so conntrack tracks every
    // connection with or without policy. Its real tables, with no Services, are in every
    // round. (An empty NAT chain alone does not turn conntrack on: a baseline with only
    // that charged conntrack's whole cost, about a fifth of the rate here, to policy.)
    let service_proxy = Renderer::default().full(
        &NftConfig {
            cluster_cidr: Some("10.244.0.0/16".parse().unwrap()),
            ..Default::default()
        },
        &ProxyState::default(),
    );
    feed(&node, &["nft", "-f", "-"], &service_proxy);
    let mut results: Vec<(f64, Vec<f64>)> = vec![(0.0, Vec::new()); Rules::ALL.len()];
    // Each round starts one row later, so no row always follows the same one (a
    // table's deletion leaves the kernel work to finish), and each row is warmed up
    // before it is measured.
    let n = Rules::ALL.len();
    for round in 0..rounds as usize {
        for i in (0..n).map(|i| (i + round) % n) {
            let rules = Rules::ALL[i];
            rules.load(&node, &scripts);
            client.run_inside(|| hammer(to, 0.3));
            let (rate, lat) = client.run_inside(|| hammer(to, secs));
            rules.unload(&node);
            results[i].0 += rate;
            results[i].1.extend(lat);
        }
    }
    let rounds = f64::from(rounds);
    let base = results[0].0;
    for (rules, (rate, lat)) in Rules::ALL.into_iter().zip(&mut results) {
        println!(
            "{}: {:.0} conn/s, connect p50 {:.0} µs, p99 {:.0} µs, ratio to no policy {:.2}",
            rules.label(),
            *rate / rounds,
            pct(lat, 0.5),
            pct(lat, 0.99),
            *rate / base
        );
    }
    println!("goal: cairn's ratio ≥ 0.90");
}
