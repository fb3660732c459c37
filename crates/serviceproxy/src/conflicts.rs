//! Frontends two service ports claim at once (the same external or load-balancer address
//! and port, a node port, a cluster IP and port): the first in name order keeps it, the
//! others lose only that frontend, with a warning. nftables refuses a map key twice and
//! would fail the whole sync; iptables would silently let the first rule win.

use std::collections::BTreeMap;
use std::net::Ipv4Addr;

use crate::model::{Protocol, ProxyState, ServicePortName};

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Frontend {
    Address(Ipv4Addr, Protocol, u16),
    NodePort(Protocol, u16),
}

impl std::fmt::Display for Frontend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Frontend::Address(ip, p, port) => write!(f, "{ip}:{port}/{}", p.as_str()),
            Frontend::NodePort(p, port) => write!(f, "node port {port}/{}", p.as_str()),
        }
    }
}

/// Leaves every frontend to one service port.
pub(crate) fn resolve(state: &mut ProxyState, warnings: &mut Vec<String>) {
    let mut owners: BTreeMap<Frontend, ServicePortName> = BTreeMap::new();
    for (name, entry) in state.iter_mut() {
        let proto = name.protocol;
        let port = entry.port.port;
        let mut claim = |f: Frontend| match owners.get(&f) {
            None => {
                owners.insert(f, name.clone());
                true
            }
            // Listed twice by the same port (an external IP that is also its LB address).
            Some(owner) if owner == name => false,
            Some(owner) => {
                warnings.push(format!("{name}: {f} is already {owner}'s; left out"));
                false
            }
        };
        let p = &mut entry.port;
        if let Some(ip) = p.cluster_ip {
            if !claim(Frontend::Address(ip, proto, port)) {
                p.cluster_ip = None;
            }
        }
        p.external_ips
            .retain(|ip| claim(Frontend::Address(*ip, proto, port)));
        p.load_balancer_ips
            .retain(|ip| claim(Frontend::Address(*ip, proto, port)));
        if let Some(np) = p.node_port {
            if !claim(Frontend::NodePort(proto, np)) {
                p.node_port = None;
            }
        }
    }
}
