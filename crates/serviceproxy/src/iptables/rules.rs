//! One service port's rules, and the fixed chains around them. Every rule is written in
//! the canonical form `iptables-save` prints, so a full sync can compare what the kernel
//! has with what it wants chain by chain.

use std::collections::BTreeMap;

use super::{
    IptConfig, Table, MARK_MASQ, NODEPORTS, NO_ENDPOINTS, NO_ENDPOINT_NODEPORTS, SERVICES,
};
use crate::ids::{endpoint_id, service_id};
use crate::model::*;

const REJECT: &str = "-j REJECT --reject-with icmp-port-unreachable";

/// What one service port owns, and its rules in the shared dispatch chains.
#[derive(Debug, Default, PartialEq, Eq)]
pub(super) struct EntryRules {
    /// Its own chains (nat table): the cluster and external pick chains.
    pub chains: Vec<(String, Vec<String>)>,
    /// `(table, dispatch chain, rule)`.
    pub dispatch: Vec<(Table, &'static str, String)>,
}

fn dport(proto: &str, port: u16) -> String {
    format!("-p {proto} -m {proto} --dport {port}")
}

/// `statistic` keeps the probability as a 31-bit fraction and prints it with 11
/// decimals; rendering the same rounded value keeps saved and wanted rules equal.
fn probability(left: usize) -> String {
    let scaled = (2f64.powi(31) / left as f64).round();
    format!("{:.11}", scaled / 2f64.powi(31))
}

/// The `recent` list that remembers the clients of an endpoint under ClientIP affinity.
fn affinity_list(svc_id: &str, e: &Endpoint) -> String {
    format!("CAIRN-AFF-{}", endpoint_id(svc_id, e))
}

/// A pick chain: `first` (masquerade marking), then hairpin marking (a connection from an
/// endpoint of the service; unless `first` marks everything), affinity, and the cascade
/// that DNATs to endpoint i of n with probability 1/(n-i) among those left: uniform.
/// Endpoints have no chains of their own (kube-proxy's `KUBE-SEP-*`): iptables-nft looks
/// chains up by a linear search when restoring with `--noflush`, so every chain costs
/// time quadratic in their number (30,000 chains at 10,000 services: ~6 s).
fn pick_chain(
    first: Option<String>,
    id: &str,
    proto: &str,
    eps: &[Endpoint],
    affinity: Option<u32>,
) -> Vec<String> {
    let marks_all = first.as_deref() == Some(&format!("-j {MARK_MASQ}"));
    let mut rules: Vec<String> = first.into_iter().collect();
    if !marks_all {
        for e in eps {
            rules.push(format!("-s {}/32 -j {MARK_MASQ}", e.ip));
        }
    }
    let dnat = |e: &Endpoint| format!("-j DNAT --to-destination {}:{}", e.ip, e.port);
    let remember = |e: &Endpoint, how: &str| {
        let list = affinity_list(id, e);
        format!("-m recent {how} --name {list} --mask 255.255.255.255 --rsource ")
    };
    if let Some(t) = affinity {
        for e in eps {
            let update = remember(e, &format!("--update --seconds {t} --reap"));
            rules.push(format!("-p {proto} {update}{}", dnat(e)));
        }
    }
    let n = eps.len();
    for (i, e) in eps.iter().enumerate() {
        let pick = match n - i {
            1 => String::new(),
            left => format!(
                "-m statistic --mode random --probability {} ",
                probability(left)
            ),
        };
        let set = affinity.map(|_| remember(e, "--set")).unwrap_or_default();
        rules.push(format!("-p {proto} {pick}{set}{}", dnat(e)));
    }
    rules
}

/// The rules of one service port.
pub(super) fn entry_rules(cfg: &IptConfig, name: &ServicePortName, e: &ServiceEntry) -> EntryRules {
    let mut out = EntryRules::default();
    let (id, proto, port) = (service_id(name), name.protocol.as_str(), e.port.port);
    let affinity = e.port.affinity_seconds;
    if let Some(vip) = e.port.cluster_ip {
        let matches = format!("-d {vip}/32 {}", dport(proto, port));
        if e.cluster.is_empty() {
            out.dispatch
                .push((Table::Filter, NO_ENDPOINTS, format!("{matches} {REJECT}")));
        } else {
            let svc = format!("CAIRN-SVC-{id}");
            let first = cfg
                .cluster_cidr
                .map(|cidr| format!("! -s {cidr} {matches} -j {MARK_MASQ}"));
            let rules = pick_chain(first, &id, proto, &e.cluster, affinity);
            out.chains.push((svc.clone(), rules));
            out.dispatch
                .push((Table::Nat, SERVICES, format!("{matches} -j {svc}")));
        }
    }
    let external_ips: Vec<_> = e
        .port
        .external_ips
        .iter()
        .chain(e.port.load_balancer_ips.iter())
        .collect();
    if !external_ips.is_empty() || e.port.node_port.is_some() {
        let (ips_chain, ports_chain, verdict) = if e.external.is_empty() {
            let refusal = if e.port.external_local && !e.cluster.is_empty() {
                "-j DROP".to_string()
            } else {
                REJECT.to_string()
            };
            (
                (Table::Filter, NO_ENDPOINTS),
                (Table::Filter, NO_ENDPOINT_NODEPORTS),
                refusal,
            )
        } else {
            let ext = format!("CAIRN-EXT-{id}");
            let first = (!e.port.external_local).then(|| format!("-j {MARK_MASQ}"));
            let rules = pick_chain(first, &id, proto, &e.external, affinity);
            out.chains.push((ext.clone(), rules));
            (
                (Table::Nat, SERVICES),
                (Table::Nat, NODEPORTS),
                format!("-j {ext}"),
            )
        };
        for ip in external_ips {
            let rule = format!("-d {ip}/32 {} {verdict}", dport(proto, port));
            out.dispatch.push((ips_chain.0, ips_chain.1, rule));
        }
        if let Some(np) = e.port.node_port {
            let rule = format!("{} {verdict}", dport(proto, np));
            out.dispatch.push((ports_chain.0, ports_chain.1, rule));
        }
    }
    out
}

/// The whole ruleset the proxy wants: every chain it owns with its rules, and the jumps
/// from the built-in chains into them.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Ruleset {
    pub chains: BTreeMap<(Table, String), Vec<String>>,
    /// `(table, built-in chain, rule)`, in the order they should appear.
    pub jumps: Vec<(Table, &'static str, String)>,
}

impl Ruleset {
    pub fn build(cfg: &IptConfig, state: &ProxyState) -> Ruleset {
        let mut r = Ruleset::default();
        for (table, chain, rules) in super::fixed_chains() {
            r.chains.insert((table, chain.to_string()), rules);
        }
        r.jumps = super::builtin_jumps(cfg);
        for (name, entry) in state {
            let rules = entry_rules(cfg, name, entry);
            for (chain, body) in rules.chains {
                r.chains.insert((Table::Nat, chain), body);
            }
            for (table, chain, rule) in rules.dispatch {
                r.chains
                    .entry((table, chain.to_string()))
                    .or_default()
                    .push(rule);
            }
        }
        r
    }
}

#[cfg(test)]
pub(super) fn probability_for_test(left: usize) -> String {
    probability(left)
}
