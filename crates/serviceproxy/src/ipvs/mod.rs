//! IPVS mode's desired state (pure): the virtual servers and their real servers, the
//! addresses the dummy link `cairn-ipvs0` must hold so the node accepts service traffic
//! as its own (kube-proxy's `kube-ipvs0`), and the small nftables table IPVS needs next
//! to it ([`rules`]): masquerade marks, hairpin masquerade, and a filter that refuses
//! connections to a service address on a port no service uses.
//!
//! Virtual servers: every cluster IP, external IP and load-balancer address at the service
//! port (cluster IP → the port's cluster endpoints, the rest → its external ones), and a
//! node port on every local address the node-port addresses allow. A service port without
//! endpoints keeps its virtual server with no real server, and IPVS refuses its
//! connections at once (ICMP port unreachable). ClientIP affinity is IPVS persistence
//! with the affinity timeout.

pub mod rules;

use std::collections::{BTreeMap, BTreeSet};
use std::net::Ipv4Addr;

use ipnetwork::Ipv4Network;

use crate::model::*;

/// The dummy link holding the service addresses.
pub const DUMMY_LINK: &str = "cairn-ipvs0";
/// The nftables table of the IPVS mode's helper rules.
pub const TABLE: &str = "cairn-proxy-ipvs";

#[derive(Debug, Clone, Default)]
pub struct IpvsConfig {
    /// Traffic from outside it to a cluster IP is masqueraded.
    pub cluster_cidr: Option<Ipv4Network>,
    /// The IPVS scheduler (`rr` when empty).
    pub scheduler: String,
    /// Node ports answer on the local addresses in these ranges; empty: every local
    /// address but loopback and the dummy link's.
    pub nodeport_cidrs: Vec<Ipv4Network>,
}

impl IpvsConfig {
    pub fn scheduler(&self) -> &str {
        if self.scheduler.is_empty() {
            "rr"
        } else {
            &self.scheduler
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct VirtualKey {
    pub address: Ipv4Addr,
    pub protocol: Protocol,
    pub port: u16,
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Virtual {
    /// ClientIP affinity timeout (IPVS persistence).
    pub persistent_timeout: Option<u32>,
    /// `ip:port` of each real server.
    pub real_servers: BTreeSet<(Ipv4Addr, u16)>,
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct IpvsState {
    pub services: BTreeMap<VirtualKey, Virtual>,
    /// What the dummy link holds: cluster, external and load-balancer addresses.
    pub addresses: BTreeSet<Ipv4Addr>,
}

/// The local addresses node ports answer on: `local` is every address of the node with
/// its link's name.
pub fn node_port_addresses(cfg: &IpvsConfig, local: &[(String, Ipv4Addr)]) -> Vec<Ipv4Addr> {
    let mut out: Vec<Ipv4Addr> = local
        .iter()
        .filter(|(link, ip)| link != DUMMY_LINK && !ip.is_loopback())
        .filter(|(_, ip)| {
            cfg.nodeport_cidrs.is_empty() || cfg.nodeport_cidrs.iter().any(|c| c.contains(*ip))
        })
        .map(|(_, ip)| *ip)
        .collect();
    out.sort();
    out.dedup();
    out
}

fn add(out: &mut IpvsState, key: VirtualKey, affinity: Option<u32>, endpoints: &[Endpoint]) {
    let v = out.services.entry(key).or_default();
    v.persistent_timeout = affinity;
    v.real_servers = endpoints.iter().map(|e| (e.ip, e.port)).collect();
}

/// The virtual servers and dummy addresses of `state`, node ports on `node_ips`.
pub fn desired(state: &ProxyState, node_ips: &[Ipv4Addr]) -> IpvsState {
    let mut out = IpvsState::default();
    for (name, e) in state {
        let (protocol, port, affinity) = (name.protocol, e.port.port, e.port.affinity_seconds);
        if let Some(vip) = e.port.cluster_ip {
            out.addresses.insert(vip);
            let key = VirtualKey {
                address: vip,
                protocol,
                port,
            };
            add(&mut out, key, affinity, &e.cluster);
        }
        for ip in e.port.external_ips.iter().chain(&e.port.load_balancer_ips) {
            out.addresses.insert(*ip);
            let key = VirtualKey {
                address: *ip,
                protocol,
                port,
            };
            add(&mut out, key, affinity, &e.external);
        }
        if let Some(np) = e.port.node_port {
            for ip in node_ips {
                let key = VirtualKey {
                    address: *ip,
                    protocol,
                    port: np,
                };
                add(&mut out, key, affinity, &e.external);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests;
