//! A node's policy as nftables state: sets, pod chains, the two pod maps and the counters.

use std::collections::{BTreeMap, BTreeSet};
use std::net::{IpAddr, Ipv4Addr};

use super::ranges::{merge_touching, normalized, AddrRange};
use crate::compile::{Block, PolicyKey};
use crate::model::Protocol;
use crate::resolve::{Allowance, Direction, Isolation, Origin, Peers, PodPolicy, Ports};

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Desired {
    /// Interval sets of peers, by name.
    pub sets: BTreeMap<String, BTreeSet<AddrRange>>,
    /// Pod chains and their rules, in order.
    pub chains: BTreeMap<String, Vec<String>>,
    /// An isolated pod's address to its ingress (egress) chain.
    pub ingress: BTreeMap<Ipv4Addr, String>,
    pub egress: BTreeMap<Ipv4Addr, String>,
    /// The named counters, one per policy isolating a pod here: what they count.
    pub counters: BTreeMap<String, PolicyKey>,
    /// Every local pod's address whose policy is here, isolated or not.
    pub programmed: BTreeSet<AddrRange>,
    /// The node's pod ranges, while any policy exists: traffic to an address there that is
    /// not programmed (a pod newer than the last sync) is dropped, so a new pod is never
    /// reachable before its policy is in force. Empty: no guard.
    pub guarded: BTreeSet<AddrRange>,
    /// Addresses more than one local pod claims (an address reused before the old pod's
    /// object is gone): neither pod is programmed, so the guard closes the address for
    /// ingress and the egress map drops what it sends, rather than give one pod the
    /// other's policy.
    pub shared: BTreeSet<Ipv4Addr>,
}

/// FNV-1a: names must stay the same across agent versions and restarts.
fn fnv(parts: &[&str]) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for part in parts {
        for byte in part.bytes().chain(std::iter::once(0)) {
            hash ^= u64::from(byte);
            hash = hash.wrapping_mul(0x0100_0000_01b3);
        }
    }
    hash
}

/// The set of an allowance's peers: named after its policy and rule.
pub fn set_name(policy: &PolicyKey, origin: &Origin) -> String {
    let direction = match origin.direction {
        Direction::Ingress => "ingress",
        Direction::Egress => "egress",
    };
    let named = origin
        .named
        .map(|r| format!("{}:{}", r.protocol, r.first))
        .unwrap_or_default();
    let rule = origin.rule.to_string();
    let parts = [
        policy.namespace.as_str(),
        &policy.name,
        direction,
        &rule,
        &named,
    ];
    format!("peers_{:016x}", fnv(&parts))
}

pub fn counter_name(policy: &PolicyKey) -> String {
    format!("drops_{:016x}", fnv(&[&policy.namespace, &policy.name]))
}

pub fn chain_name(direction: Direction, ip: Ipv4Addr) -> String {
    let prefix = match direction {
        Direction::Ingress => "in",
        Direction::Egress => "eg",
    };
    format!("{prefix}_{}", ip.to_string().replace('.', "_"))
}

fn ipv4s(ips: &[IpAddr]) -> Vec<Ipv4Addr> {
    ips.iter()
        .filter_map(|ip| match ip {
            IpAddr::V4(v4) => Some(*v4),
            IpAddr::V6(_) => None,
        })
        .collect()
}

impl Desired {
    /// The state for these pods' policies (a node's: [`crate::for_node`]).
    pub fn from_pods<'a>(pods: impl IntoIterator<Item = &'a PodPolicy>) -> Desired {
        let pods: Vec<&PodPolicy> = pods.into_iter().collect();
        let mut claims: BTreeMap<Ipv4Addr, usize> = BTreeMap::new();
        for ip in pods.iter().flat_map(|p| ipv4s(&p.ips)) {
            *claims.entry(ip).or_default() += 1;
        }
        let mut desired = Desired {
            shared: claims
                .into_iter()
                .filter_map(|(ip, n)| (n > 1).then_some(ip))
                .collect(),
            ..Desired::default()
        };
        for pod in pods {
            if !ipv4s(&pod.ips).iter().any(|ip| desired.shared.contains(ip)) {
                desired.add_pod(pod);
            }
        }
        desired
    }

    /// Guards `ranges` (the node's pod CIDRs), as [`Desired::guarded`] says.
    pub fn guarding(mut self, ranges: &[ipnetwork::IpNetwork]) -> Desired {
        let blocks: Vec<Block> = ranges
            .iter()
            .map(|cidr| Block {
                cidr: *cidr,
                except: Vec::new(),
            })
            .collect();
        self.guarded = normalized(&[], &blocks).into_iter().collect();
        self
    }

    fn add_pod(&mut self, pod: &PodPolicy) {
        let ips = ipv4s(&pod.ips);
        let Some(first) = ips.first().copied() else {
            return;
        };
        self.programmed
            .extend(ips.iter().map(|ip| AddrRange(*ip, *ip)));
        for (direction, isolation) in [
            (Direction::Ingress, &pod.ingress),
            (Direction::Egress, &pod.egress),
        ] {
            let Isolation::Isolated { policies, allowed } = isolation else {
                continue;
            };
            let chain = chain_name(direction, first);
            let mut rules: Vec<String> = allowed
                .iter()
                .flat_map(|a| self.allowance_rules(direction, a))
                .collect();
            rules.push(self.drop_rule(policies));
            self.chains.insert(chain.clone(), rules);
            let map = match direction {
                Direction::Ingress => &mut self.ingress,
                Direction::Egress => &mut self.egress,
            };
            for ip in &ips {
                map.insert(*ip, chain.clone());
            }
        }
    }

    fn allowance_rules(&mut self, direction: Direction, a: &Allowance) -> Vec<String> {
        let field = match direction {
            Direction::Ingress => "saddr",
            Direction::Egress => "daddr",
        };
        let peers = match &a.peers {
            Peers::Any => None,
            Peers::Listed { addresses, blocks } => {
                let name = set_name(&a.policy, &a.origin);
                // A rule's peers are the same for every pod it applies to: merged once.
                if !self.sets.contains_key(&name) {
                    let elements = normalized(addresses, blocks).into_iter().collect();
                    self.sets.insert(name.clone(), elements);
                }
                Some(format!("ip {field} @{name}"))
            }
        };
        // Ingress is the last check, so an allowance accepts (the guard after the map
        // must not see it); an egress allowance returns to the ingress check.
        let verdict = match direction {
            Direction::Ingress => "accept",
            Direction::Egress => "return",
        };
        port_matches(&a.ports)
            .into_iter()
            .map(|ports| {
                // The port first: a compare is cheaper than a set lookup, and a SYN walks
                // every allowance of its pod until one matches.
                let parts: Vec<&str> = [ports.as_deref(), peers.as_deref(), Some(verdict)]
                    .into_iter()
                    .flatten()
                    .collect();
                parts.join(" ")
            })
            .collect()
    }

    fn drop_rule(&mut self, policies: &[PolicyKey]) -> String {
        let mut rule = String::new();
        for policy in policies {
            let name = counter_name(policy);
            rule.push_str(&format!("counter name {name} "));
            self.counters.insert(name, policy.clone());
        }
        rule.push_str("drop");
        rule
    }
}

/// One match per protocol (`None`: any port of any protocol); none at all when the port
/// list resolved to nothing, so the allowance allows nothing.
fn port_matches(ports: &Ports) -> Vec<Option<String>> {
    let Ports::Listed(ranges) = ports else {
        return vec![None];
    };
    let mut by_protocol: BTreeMap<Protocol, Vec<(u16, u16)>> = BTreeMap::new();
    for r in ranges {
        by_protocol
            .entry(r.protocol)
            .or_default()
            .push((r.first, r.last));
    }
    by_protocol
        .into_iter()
        .map(|(protocol, ranges)| {
            let name = protocol.as_str();
            let ranges = merged(ranges);
            if ranges.iter().any(|r| r.0 <= 1 && r.1 == u16::MAX) {
                return Some(format!("meta l4proto {name}"));
            }
            let items: Vec<String> = ranges
                .iter()
                .map(|r| match r.0 == r.1 {
                    true => r.0.to_string(),
                    false => format!("{}-{}", r.0, r.1),
                })
                .collect();
            let ports = match items.len() {
                1 => items.join(""),
                _ => format!("{{ {} }}", items.join(", ")),
            };
            Some(format!("meta l4proto {name} th dport {ports}"))
        })
        .collect()
}

/// Sorted port ranges with overlapping and touching ones merged: an anonymous interval
/// set refuses overlaps.
fn merged(ranges: Vec<(u16, u16)>) -> Vec<(u16, u16)> {
    merge_touching(ranges, |port| port.saturating_add(1))
}
