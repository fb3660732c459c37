#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
//! The truth tables of upstream's netpol e2e suite (`test/e2e/network/netpol`), on its
//! model: namespaces x, y, z with pods a, b, c each (label `pod: <name>`), every pod
//! serving ports 80 and 81 (and 53) on TCP, UDP and SCTP under upstream's port names
//! (`serve-80-tcp`). Every ordered pair is evaluated and the whole matrix compared;
//! loopback cells are not graded, as upstream does not grade them.

mod compile;
mod nft;
mod truth_tables;

use std::collections::BTreeMap;
use std::net::IpAddr;

use serde_json::Value;

use crate::compile::{CompiledPolicy, PolicyKey};
use crate::model::{Cluster, NamedPort, Namespace, Pod, PodKey, Protocol};
use crate::verdict::reachable;

pub(crate) const NAMESPACES: [&str; 3] = ["x", "y", "z"];
pub(crate) const PODS: [&str; 3] = ["a", "b", "c"];

/// The pod's address: 10.244.<namespace 1..3>.<10 + pod>.
pub(crate) fn ip_of(pod: &str) -> IpAddr {
    let (ns, name) = pod.split_once('/').unwrap();
    let n = NAMESPACES.iter().position(|x| *x == ns).unwrap() + 1;
    let p = PODS.iter().position(|x| *x == name).unwrap() + 10;
    format!("10.244.{n}.{p}").parse().unwrap()
}

pub(crate) struct Model {
    pub cluster: Cluster,
    pub policies: BTreeMap<PolicyKey, CompiledPolicy>,
}

fn named_ports(ports: &[u16]) -> Vec<NamedPort> {
    let mut out = Vec::new();
    for &port in ports {
        for (protocol, lower) in [
            (Protocol::Tcp, "tcp"),
            (Protocol::Udp, "udp"),
            (Protocol::Sctp, "sctp"),
        ] {
            out.push(NamedPort {
                name: format!("serve-{port}-{lower}"),
                protocol,
                port,
            });
        }
    }
    out
}

impl Model {
    /// Upstream's model, each pod serving `ports`.
    pub fn serving(ports: &[u16]) -> Model {
        let mut cluster = Cluster::default();
        for ns in NAMESPACES {
            cluster.add_namespace(Namespace::new(ns, BTreeMap::new()));
            for name in PODS {
                cluster.add_pod(Pod {
                    key: PodKey::new(ns, name),
                    labels: BTreeMap::from([("pod".to_string(), name.to_string())]),
                    ips: vec![ip_of(&format!("{ns}/{name}"))],
                    node: Some("node-1".into()),
                    host_network: false,
                    finished: false,
                    named_ports: named_ports(ports),
                });
            }
        }
        Model {
            cluster,
            policies: BTreeMap::new(),
        }
    }

    pub fn new() -> Model {
        Model::serving(&[53, 80, 81])
    }

    /// Creates or replaces the policy `spec` named `name` in `ns`.
    pub fn apply(&mut self, ns: &str, name: &str, spec: Value) -> &mut Model {
        let policy = serde_json::json!({"metadata": {"namespace": ns, "name": name}, "spec": spec});
        let compiled = CompiledPolicy::compile(&serde_json::from_value(policy).unwrap()).unwrap();
        self.policies.insert(compiled.key.clone(), compiled);
        self
    }

    pub fn delete_all_policies(&mut self) {
        self.policies.clear();
    }

    /// Sets `pod`'s labels to exactly `labels`.
    pub fn label_pod(&mut self, pod: &str, labels: &[(&str, &str)]) {
        let (ns, name) = pod.split_once('/').unwrap();
        let pod = self.cluster.pods.get_mut(&PodKey::new(ns, name)).unwrap();
        pod.labels = labels
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
    }

    /// Sets namespace `ns`'s labels to `labels` (its name label kept).
    pub fn label_namespace(&mut self, ns: &str, labels: &[(&str, &str)]) {
        let labels = labels
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        self.cluster.add_namespace(Namespace::new(ns, labels));
    }

    /// The whole matrix for `protocol`/`port`.
    pub fn probe(&self, protocol: Protocol, port: u16) -> Reachability {
        let policies: Vec<CompiledPolicy> = self.policies.values().cloned().collect();
        let mut r = Reachability::all(true);
        for from in all_pods() {
            for to in all_pods() {
                let key = |p: &str| {
                    let (ns, name) = p.split_once('/').unwrap();
                    PodKey::new(ns, name)
                };
                let ok = reachable(
                    &policies,
                    &self.cluster,
                    (&key(&from), &key(&to)),
                    protocol,
                    port,
                );
                r.cells.insert((from.clone(), to.clone()), ok.unwrap());
            }
        }
        r
    }

    /// Asserts the matrix for `protocol`/`port` is `want` (loopback not graded).
    pub fn expect(&self, protocol: Protocol, port: u16, want: &Reachability) {
        let got = self.probe(protocol, port);
        let wrong: Vec<String> = got
            .cells
            .iter()
            .filter(|((f, t), v)| f != t && want.cells[&(f.clone(), t.clone())] != **v)
            .map(|((f, t), v)| format!("{f} -> {t}: got {v}"))
            .collect();
        assert!(
            wrong.is_empty(),
            "{protocol}/{port}: {} wrong cells: {wrong:?}\nexpected:\n{}\ngot:\n{}",
            wrong.len(),
            want.table(),
            got.table()
        );
    }
}

pub(crate) fn all_pods() -> Vec<String> {
    NAMESPACES
        .iter()
        .flat_map(|ns| PODS.iter().map(move |p| format!("{ns}/{p}")))
        .collect()
}

/// Upstream's `Peer`: a namespace, a pod, or (empty) every pod; `"x"`, `"x/a"` or `""`.
fn peer_matches(peer: &str, pod: &str) -> bool {
    let ns = pod.split_once('/').unwrap().0;
    if peer.contains('/') {
        peer == pod
    } else {
        peer.is_empty() || peer == ns
    }
}

/// Expected reachability, built as upstream's `Reachability` is: a default, then
/// `expect_*` calls in order, later ones overwriting earlier ones.
#[derive(Clone)]
pub(crate) struct Reachability {
    cells: BTreeMap<(String, String), bool>,
}

impl Reachability {
    pub fn all(value: bool) -> Reachability {
        let mut cells = BTreeMap::new();
        for f in all_pods() {
            for t in all_pods() {
                cells.insert((f.clone(), t), value);
            }
        }
        Reachability { cells }
    }

    /// `ExpectPeer(from, to, value)`.
    pub fn peer(mut self, from: &str, to: &str, value: bool) -> Reachability {
        for ((f, t), v) in self.cells.iter_mut() {
            if peer_matches(from, f) && peer_matches(to, t) {
                *v = value;
            }
        }
        self
    }

    /// `ExpectAllIngress(pod, value)`: the pod's column.
    pub fn ingress(self, pod: &str, value: bool) -> Reachability {
        self.peer("", pod, value)
    }

    /// `ExpectAllEgress(pod, value)`: the pod's row.
    pub fn egress(self, pod: &str, value: bool) -> Reachability {
        self.peer(pod, "", value)
    }

    /// Upstream's truth table: `.` reachable, `X` not, sources down, destinations across.
    pub fn table(&self) -> String {
        let pods = all_pods();
        let mut out = format!("-\t{}\n", pods.join("\t"));
        for f in &pods {
            let row: Vec<&str> = pods
                .iter()
                .map(|t| {
                    if self.cells[&(f.clone(), t.clone())] {
                        "."
                    } else {
                        "X"
                    }
                })
                .collect();
            out.push_str(&format!("{f}\t{}\n", row.join("\t")));
        }
        out
    }
}
