//! The nftables table IPVS needs beside it (one table, replaced whole each sync; sets
//! only, no per-service chains, so it loads in linear time):
//! - masquerade marks, set in the NAT hooks before IPVS (which runs at local-in and
//!   local-out): a cluster IP reached from outside `--cluster-cidr`, an external or
//!   load-balancer address or a node port without `externalTrafficPolicy: Local`;
//! - masquerade in postrouting of what carries the mark, and of hairpin traffic (a pod
//!   that IPVS sent to itself: destination `ip . proto . port . source ip` is in a set);
//! - a filter before IPVS refusing new connections to a service address on a port no
//!   service uses (the dummy link makes those addresses local to every socket).
//!
//! IPVS needs `net.ipv4.vs.conntrack=1` for the NAT hooks to see its traffic; the backend
//! sets it.

use std::collections::BTreeSet;
use std::fmt::Write;

use super::{IpvsConfig, TABLE};
use crate::model::*;

#[derive(Debug, Default)]
struct Sets {
    cluster: BTreeSet<String>,
    masq_frontends: BTreeSet<String>,
    masq_node_ports: BTreeSet<String>,
    hairpin: BTreeSet<String>,
    addresses: BTreeSet<String>,
    frontends: BTreeSet<String>,
}

fn collect(state: &ProxyState) -> Sets {
    let mut s = Sets::default();
    for (name, e) in state {
        let (proto, port) = (name.protocol.as_str(), e.port.port);
        if let Some(vip) = e.port.cluster_ip {
            s.cluster.insert(format!("{vip} . {proto} . {port}"));
            s.addresses.insert(vip.to_string());
            s.frontends.insert(format!("{vip} . {proto} . {port}"));
        }
        for ip in e.port.external_ips.iter().chain(&e.port.load_balancer_ips) {
            let key = format!("{ip} . {proto} . {port}");
            if !e.port.external_local {
                s.masq_frontends.insert(key.clone());
            }
            s.addresses.insert(ip.to_string());
            s.frontends.insert(key);
        }
        if let (Some(np), false) = (e.port.node_port, e.port.external_local) {
            s.masq_node_ports.insert(format!("{proto} . {np}"));
        }
        for ep in e.cluster.iter().chain(&e.external) {
            let ip = ep.ip;
            s.hairpin
                .insert(format!("{ip} . {proto} . {} . {ip}", ep.port));
        }
    }
    s
}

fn set(out: &mut String, name: &str, ty: &str, elements: &BTreeSet<String>) {
    // Writing to a String cannot fail.
    let _ = writeln!(out, "\tset {name} {{\n\t\ttype {ty}");
    if !elements.is_empty() {
        let items: Vec<&str> = elements.iter().map(String::as_str).collect();
        let _ = writeln!(out, "\t\telements = {{ {} }}", items.join(", "));
    }
    out.push_str("\t}\n");
}

/// The whole table, replacing the previous one in one transaction.
pub fn render(cfg: &IpvsConfig, state: &ProxyState) -> String {
    let s = collect(state);
    let triple = "ipv4_addr . inet_proto . inet_service";
    let mut out = format!("add table ip {TABLE}\ndelete table ip {TABLE}\ntable ip {TABLE} {{\n");
    set(&mut out, "cluster-frontends", triple, &s.cluster);
    set(&mut out, "masq-frontends", triple, &s.masq_frontends);
    set(
        &mut out,
        "masq-node-ports",
        "inet_proto . inet_service",
        &s.masq_node_ports,
    );
    set(
        &mut out,
        "hairpin",
        &format!("{triple} . ipv4_addr"),
        &s.hairpin,
    );
    set(&mut out, "service-addresses", "ipv4_addr", &s.addresses);
    set(&mut out, "frontends", triple, &s.frontends);
    let cluster_masq = match cfg.cluster_cidr {
        Some(cidr) => format!(
            "\t\tip daddr . meta l4proto . th dport @cluster-frontends ip saddr != {cidr} jump mark-for-masquerade\n"
        ),
        None => String::new(),
    };
    let marks = format!(
        "{cluster_masq}\t\tip daddr . meta l4proto . th dport @masq-frontends jump mark-for-masquerade\n\
         \t\tfib daddr type local ip daddr != 127.0.0.0/8 meta l4proto . th dport @masq-node-ports jump mark-for-masquerade\n"
    );
    let _ = write!(
        out,
        "\tchain mark-for-masquerade {{\n\t\tmeta mark set meta mark | 0x4000\n\t}}\n\
         \tchain nat-prerouting {{\n\t\ttype nat hook prerouting priority dstnat; policy accept;\n{marks}\t}}\n\
         \tchain nat-output {{\n\t\ttype nat hook output priority -100; policy accept;\n{marks}\t}}\n\
         \tchain nat-postrouting {{\n\t\ttype nat hook postrouting priority srcnat; policy accept;\n\
         \t\tip daddr . meta l4proto . th dport . ip saddr @hairpin masquerade\n\
         \t\tmeta mark & 0x4000 == 0 return\n\
         \t\tmeta mark set meta mark ^ 0x4000\n\
         \t\tmasquerade fully-random\n\t}}\n\
         \tchain filter-input {{\n\t\ttype filter hook input priority -110; policy accept;\n\
         \t\tct state new ip daddr @service-addresses ip daddr . meta l4proto . th dport != @frontends reject\n\t}}\n\
         }}\n"
    );
    out
}
