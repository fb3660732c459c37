//! Each pod's effective policy: which policies isolate it for ingress and egress, and what
//! each of their rules allows, with peers resolved to addresses and named ports to
//! numbers. Ingress named ports are resolved on the pod itself (the port it serves);
//! egress named ports on each destination pod, so one egress rule may become one allowance
//! per port number. A named port cannot be resolved on an `ipBlock` peer and matches
//! nothing there (as Calico and Cilium do).

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::net::IpAddr;

use crate::compile::{Block, CompiledPolicy, Peer, PolicyKey, PortNumber, PortSpec, Rule};
use crate::model::{Cluster, Pod, PodKey, Protocol};

/// A pod's policy in both directions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodPolicy {
    pub pod: PodKey,
    pub ips: Vec<IpAddr>,
    pub ingress: Isolation,
    pub egress: Isolation,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Isolation {
    /// No policy selects the pod for this direction: everything is allowed.
    Open,
    /// By `policies`; allowed is what any allowance allows, nothing when there is none.
    Isolated {
        policies: Vec<PolicyKey>,
        allowed: Vec<Allowance>,
    },
}

/// What one rule of one policy allows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Allowance {
    pub policy: PolicyKey,
    /// Which rule: its peers are the same for every pod the policy selects, so a
    /// dataplane keeps one set of them per origin.
    pub origin: Origin,
    pub peers: Peers,
    pub ports: Ports,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Direction {
    Ingress,
    Egress,
}

/// A rule of a policy, and for an egress named port the number it resolved to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Origin {
    pub direction: Direction,
    pub rule: usize,
    pub named: Option<PortRange>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Peers {
    Any,
    Listed {
        addresses: BTreeSet<IpAddr>,
        blocks: Vec<Block>,
    },
}

impl Peers {
    pub fn contains(&self, ip: IpAddr) -> bool {
        match self {
            Peers::Any => true,
            Peers::Listed { addresses, blocks } => {
                addresses.contains(&ip) || blocks.iter().any(|b| b.contains(ip))
            }
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ports {
    Any,
    /// Matches nothing when empty (every named port failed to resolve).
    Listed(Vec<PortRange>),
}

impl Ports {
    pub fn contains(&self, protocol: Protocol, port: u16) -> bool {
        match self {
            Ports::Any => true,
            Ports::Listed(ranges) => ranges
                .iter()
                .any(|r| r.protocol == protocol && (r.first..=r.last).contains(&port)),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PortRange {
    pub protocol: Protocol,
    pub first: u16,
    pub last: u16,
}

impl Isolation {
    /// Whether traffic with `peer` on `protocol`/`port` is allowed in this direction.
    pub fn admits(&self, peer: IpAddr, protocol: Protocol, port: u16) -> bool {
        match self {
            Isolation::Open => true,
            Isolation::Isolated { allowed, .. } => allowed
                .iter()
                .any(|a| a.peers.contains(peer) && a.ports.contains(protocol, port)),
        }
    }

    pub fn is_isolated(&self) -> bool {
        matches!(self, Isolation::Isolated { .. })
    }
}

/// The effective policy of every pod on `node` that is on the pod network.
pub fn for_node(
    policies: &[CompiledPolicy],
    cluster: &Cluster,
    node: &str,
) -> BTreeMap<PodKey, PodPolicy> {
    let resolver = Resolver::new(policies, cluster);
    cluster
        .pods
        .values()
        .filter(|p| p.node.as_deref() == Some(node) && p.on_pod_network())
        .map(|p| (p.key.clone(), resolver.effective(p)))
        .collect()
}

/// `pod`'s effective policy. Host-network and finished pods are never isolated.
pub fn effective(policies: &[CompiledPolicy], cluster: &Cluster, pod: &Pod) -> PodPolicy {
    Resolver::new(policies, cluster).effective(pod)
}

/// A rule of a policy: (policy, direction, index).
type RuleKey = (PolicyKey, Direction, usize);

/// Resolves pods' policies over one cluster, each rule's peers once: a rule's peers are
/// the same for every pod it applies to (only ingress named ports differ per pod), and
/// finding them scans every pod.
struct Resolver<'c> {
    policies: &'c [CompiledPolicy],
    cluster: &'c Cluster,
    ingress_peers: RefCell<HashMap<RuleKey, Peers>>,
    egress: RefCell<HashMap<RuleKey, Vec<Allowance>>>,
}

impl<'c> Resolver<'c> {
    fn new(policies: &'c [CompiledPolicy], cluster: &'c Cluster) -> Self {
        Resolver {
            policies,
            cluster,
            ingress_peers: RefCell::default(),
            egress: RefCell::default(),
        }
    }

    fn effective(&self, pod: &Pod) -> PodPolicy {
        let selecting: Vec<&CompiledPolicy> = self
            .policies
            .iter()
            .filter(|p| pod.on_pod_network() && p.selects(&pod.key.namespace, &pod.labels))
            .collect();
        let ingress = isolation(
            &selecting,
            |p| p.ingress.as_deref(),
            |policy, i, rule| vec![self.ingress_allowance(policy, (i, rule), pod)],
        );
        let egress = isolation(
            &selecting,
            |p| p.egress.as_deref(),
            |policy, i, rule| self.egress_allowances(policy, (i, rule)),
        );
        PodPolicy {
            pod: pod.key.clone(),
            ips: pod.ips.clone(),
            ingress,
            egress,
        }
    }

    fn ingress_allowance(
        &self,
        policy: &PolicyKey,
        rule: (usize, &Rule),
        target: &Pod,
    ) -> Allowance {
        let key = (policy.clone(), Direction::Ingress, rule.0);
        let peers = self.ingress_peers.borrow().get(&key).cloned();
        let peers = peers.unwrap_or_else(|| {
            let peers = ingress_peers(rule.1, self.cluster);
            self.ingress_peers.borrow_mut().insert(key, peers.clone());
            peers
        });
        ingress_allowance(policy, rule, peers, target)
    }

    fn egress_allowances(&self, policy: &PolicyKey, rule: (usize, &Rule)) -> Vec<Allowance> {
        let key = (policy.clone(), Direction::Egress, rule.0);
        if let Some(cached) = self.egress.borrow().get(&key) {
            return cached.clone();
        }
        let allowances = egress_allowances(policy, rule, self.cluster);
        self.egress.borrow_mut().insert(key, allowances.clone());
        allowances
    }
}

fn isolation<'a>(
    selecting: &[&'a CompiledPolicy],
    rules_of: impl Fn(&'a CompiledPolicy) -> Option<&'a [Rule]>,
    allow: impl Fn(&PolicyKey, usize, &Rule) -> Vec<Allowance>,
) -> Isolation {
    let mut policies = Vec::new();
    let mut allowed = Vec::new();
    for policy in selecting {
        if let Some(rules) = rules_of(policy) {
            policies.push(policy.key.clone());
            for (i, rule) in rules.iter().enumerate() {
                allowed.extend(allow(&policy.key, i, rule));
            }
        }
    }
    match policies.is_empty() {
        true => Isolation::Open,
        false => Isolation::Isolated { policies, allowed },
    }
}

/// The pods a peer list names (every pod when `None`), and its address blocks.
fn peer_pods<'c>(peers: Option<&[Peer]>, cluster: &'c Cluster) -> (Vec<&'c Pod>, Vec<Block>) {
    let Some(peers) = peers else {
        let all = cluster
            .pods
            .values()
            .filter(|p| p.on_pod_network())
            .collect();
        return (all, Vec::new());
    };
    let mut blocks = Vec::new();
    let mut selectors = Vec::new();
    for peer in peers {
        match peer {
            Peer::Block(b) => blocks.push(b.clone()),
            Peer::Pods { namespaces, pods } => selectors.push((namespaces, pods)),
        }
    }
    let mut ns_labels = BTreeMap::new();
    let pods = cluster
        .pods
        .values()
        .filter(|p| p.on_pod_network())
        .filter(|p| {
            let ns = p.key.namespace.as_str();
            let labels = ns_labels
                .entry(ns)
                .or_insert_with(|| cluster.namespace_labels(ns));
            selectors
                .iter()
                .any(|(n, s)| n.matches(ns, labels) && s.matches(&p.labels))
        })
        .collect();
    (pods, blocks)
}

fn addresses(pods: &[&Pod]) -> BTreeSet<IpAddr> {
    pods.iter().flat_map(|p| p.ips.iter().copied()).collect()
}

/// An ingress rule's peers: every address, or its pods' addresses and its blocks.
fn ingress_peers(rule: &Rule, cluster: &Cluster) -> Peers {
    match &rule.peers {
        None => Peers::Any,
        Some(list) => {
            let (pods, blocks) = peer_pods(Some(list), cluster);
            Peers::Listed {
                addresses: addresses(&pods),
                blocks,
            }
        }
    }
}

fn ingress_allowance(
    policy: &PolicyKey,
    (index, rule): (usize, &Rule),
    peers: Peers,
    target: &Pod,
) -> Allowance {
    let ports = match &rule.ports {
        None => Ports::Any,
        Some(specs) => Ports::Listed(specs.iter().filter_map(|s| resolve_on(s, target)).collect()),
    };
    Allowance {
        policy: policy.clone(),
        origin: Origin {
            direction: Direction::Ingress,
            rule: index,
            named: None,
        },
        peers,
        ports,
    }
}

/// A numbered port spec as a range; `None` for a named one.
fn numbered(spec: &PortSpec) -> Option<PortRange> {
    let (first, last) = match &spec.port {
        PortNumber::All => (1, u16::MAX),
        PortNumber::Range(a, b) => (*a, *b),
        PortNumber::Named(_) => return None,
    };
    Some(PortRange {
        protocol: spec.protocol,
        first,
        last,
    })
}

/// A port spec as a range on `pod` (a named port by the pod's container ports).
fn resolve_on(spec: &PortSpec, pod: &Pod) -> Option<PortRange> {
    match &spec.port {
        PortNumber::Named(name) => pod.named_port(name, spec.protocol).map(|n| PortRange {
            protocol: spec.protocol,
            first: n,
            last: n,
        }),
        _ => numbered(spec),
    }
}

/// An egress rule's allowances: one for its numbered ports to every peer, and one per
/// (named port, number) to the peer pods that serve that name on that number.
fn egress_allowances(
    policy: &PolicyKey,
    (index, rule): (usize, &Rule),
    cluster: &Cluster,
) -> Vec<Allowance> {
    let allowance = |named, peers, ports| Allowance {
        policy: policy.clone(),
        origin: Origin {
            direction: Direction::Egress,
            rule: index,
            named,
        },
        peers,
        ports,
    };
    let (pods, blocks) = peer_pods(rule.peers.as_deref(), cluster);
    let all_peers = || match rule.peers {
        None => Peers::Any,
        Some(_) => Peers::Listed {
            addresses: addresses(&pods),
            blocks: blocks.clone(),
        },
    };
    let Some(specs) = &rule.ports else {
        return vec![allowance(None, all_peers(), Ports::Any)];
    };
    let mut out = Vec::new();
    let numbered: Vec<PortRange> = specs.iter().filter_map(numbered).collect();
    if !numbered.is_empty() {
        out.push(allowance(None, all_peers(), Ports::Listed(numbered)));
    }
    let mut by_number: BTreeMap<PortRange, BTreeSet<IpAddr>> = BTreeMap::new();
    for spec in specs
        .iter()
        .filter(|s| matches!(s.port, PortNumber::Named(_)))
    {
        for pod in &pods {
            if let Some(range) = resolve_on(spec, pod) {
                by_number
                    .entry(range)
                    .or_default()
                    .extend(pod.ips.iter().copied());
            }
        }
    }
    for (range, addresses) in by_number {
        let peers = Peers::Listed {
            addresses,
            blocks: Vec::new(),
        };
        out.push(allowance(Some(range), peers, Ports::Listed(vec![range])));
    }
    out
}
