//! One service port's part of the ruleset: its service chains with their endpoint picks,
//! its affinity sets, and its map elements — added, or removed as it was applied.

use super::batch::Batch;
use super::{endpoint_id, service_id, NftConfig};

/// Marks a packet for masquerading in postrouting. A statement, not a jump to a marking
/// chain: a partial sync whose rules jump nowhere spares the kernel the validation of the
/// whole ruleset's jump graph at commit (~20 ms at 10,000 services).
const MARK: &str = "meta mark set meta mark | 0x00004000";

/// Endpoint counts worth a warning: the pick is a cascade of rules, linear in them.
const LARGE: usize = 1000;
use crate::model::*;

/// What one service port programs: its chains' names, map keys and endpoints.
struct Shape<'a> {
    id: String,
    proto: &'static str,
    cluster: &'a [Endpoint],
    external: &'a [Endpoint],
    /// `service-ips` keys of external traffic (external and load-balancer addresses).
    external_ips: Vec<std::net::Ipv4Addr>,
    exposed: bool,
    /// The verdict for external traffic without endpoints.
    external_refusal: &'static str,
}

fn shape<'a>(name: &ServicePortName, e: &'a ServiceEntry) -> Shape<'a> {
    let mut external_ips = e.port.external_ips.clone();
    external_ips.extend(e.port.load_balancer_ips.iter().copied());
    Shape {
        id: service_id(name),
        proto: name.protocol.as_str(),
        cluster: &e.cluster,
        external: &e.external,
        exposed: !external_ips.is_empty() || e.port.node_port.is_some(),
        external_ips,
        external_refusal: if e.port.external_local && !e.cluster.is_empty() {
            "drop"
        } else {
            "goto reject-packet"
        },
    }
}

/// The endpoints of both kinds, once each.
fn all_endpoints<'a>(s: &Shape<'a>) -> Vec<&'a Endpoint> {
    let mut v: Vec<&Endpoint> = s.cluster.iter().chain(s.external.iter()).collect();
    v.sort();
    v.dedup_by(|a, b| a.ip == b.ip && a.port == b.port);
    v
}

/// A service chain: `first` (its masquerade rule, if any), hairpin marking, affinity,
/// then the pick.
struct PickChain<'a> {
    chain: String,
    first: Option<String>,
    eps: &'a [Endpoint],
    affinity: bool,
    proto: &'a str,
}

/// The chain DNATs itself: endpoint i of n is taken with probability 1/(n-i) among those
/// left (uniform, as iptables' `statistic` cascade). Endpoints get no chains of their own:
/// every nft transaction reads the table's chain list, so 30,000 chains at 10,000 services
/// cost ~100 ms per change and 1.9 s per full load, 10,000 chains ~25 ms and 0.7 s. Hairpin
/// traffic is marked when it comes from any endpoint of the service (kube-proxy marks only
/// a pod reaching itself).
fn chain_with_pick(b: &mut Batch, c: &PickChain<'_>, id: &str) {
    b.chain(&c.chain);
    let marks_all = c.first.as_deref() == Some(MARK);
    if let Some(rule) = &c.first {
        b.rule(&c.chain, rule.clone());
    }
    if !marks_all {
        for e in c.eps {
            b.rule(&c.chain, format!("ip saddr {} {MARK}", e.ip));
        }
    }
    let dnat = |e: &Endpoint| format!("dnat to {}:{}", e.ip, e.port);
    let update = |e: &Endpoint| {
        let set = format!("affinity-{}", endpoint_id(id, e));
        format!("update @{set} {{ ip saddr }} ")
    };
    if c.affinity {
        for e in c.eps {
            let set = format!("affinity-{}", endpoint_id(id, e));
            let rule = format!(
                "ip saddr @{set} meta l4proto {} {}{}",
                c.proto,
                update(e),
                dnat(e)
            );
            b.rule(&c.chain, rule);
        }
    }
    let n = c.eps.len();
    for (i, e) in c.eps.iter().enumerate() {
        let pick = match n - i {
            1 => String::new(),
            left => format!("numgen random mod {left} == 0 "),
        };
        let remember = if c.affinity { update(e) } else { String::new() };
        let rule = format!("meta l4proto {} {pick}{remember}{}", c.proto, dnat(e));
        b.rule(&c.chain, rule);
    }
}

fn affinity_sets(b: &mut Batch, s: &Shape<'_>, affinity: Option<u32>) {
    let Some(t) = affinity else {
        return;
    };
    for ep in all_endpoints(s) {
        let eid = endpoint_id(&s.id, ep);
        let def = format!("type ipv4_addr; flags dynamic,timeout; timeout {t}s;");
        b.set(format!("affinity-{eid}"), def);
    }
}

pub(super) fn add(
    b: &mut Batch,
    cfg: &NftConfig,
    name: &ServicePortName,
    e: &ServiceEntry,
    warnings: &mut Vec<String>,
) {
    let s = shape(name, e);
    if e.cluster.len().max(e.external.len()) > LARGE {
        warnings.push(format!(
            "{name}: {} endpoints; each new connection walks up to that many rules",
            e.cluster.len().max(e.external.len())
        ));
    }
    affinity_sets(b, &s, e.port.affinity_seconds);
    let affinity = e.port.affinity_seconds.is_some();
    let (id, proto, port) = (&s.id, s.proto, e.port.port);
    if let Some(vip) = e.port.cluster_ip {
        let key = format!("{vip} . {proto} . {port}");
        if s.cluster.is_empty() {
            b.element("no-endpoint-services", key, "goto reject-packet");
        } else {
            let first = cfg
                .cluster_cidr
                .map(|cidr| format!("ip daddr {vip} ip saddr != {cidr} {MARK}"));
            let pick = PickChain {
                chain: format!("svc-{id}"),
                first,
                eps: s.cluster,
                affinity,
                proto,
            };
            chain_with_pick(b, &pick, id);
            b.element("service-ips", key, &format!("goto svc-{id}"));
        }
    }
    if s.exposed {
        add_external(b, &s, e);
    }
}

/// Node-port, external and load-balancer traffic of one service port.
fn add_external(b: &mut Batch, s: &Shape<'_>, e: &ServiceEntry) {
    let (id, proto, port) = (&s.id, s.proto, e.port.port);
    let verdict = if s.external.is_empty() {
        s.external_refusal.to_string()
    } else {
        let first = (!e.port.external_local).then(|| MARK.to_string());
        let affinity = e.port.affinity_seconds.is_some();
        let pick = PickChain {
            chain: format!("ext-{id}"),
            first,
            eps: s.external,
            affinity,
            proto: s.proto,
        };
        chain_with_pick(b, &pick, id);
        format!("goto ext-{id}")
    };
    let (ips_map, ports_map) = maps(s);
    for ip in &s.external_ips {
        b.element(ips_map, format!("{ip} . {proto} . {port}"), &verdict);
    }
    if let Some(np) = e.port.node_port {
        b.element(ports_map, format!("{proto} . {np}"), &verdict);
    }
}

fn maps(s: &Shape<'_>) -> (&'static str, &'static str) {
    if s.external.is_empty() {
        ("no-endpoint-services", "no-endpoint-nodeports")
    } else {
        ("service-ips", "service-nodeports")
    }
}

/// Undoes [`add`] of the entry as it was applied — elements first, then the chains that
/// referred to endpoints, then the endpoint chains and sets — except the chains and sets
/// `next` (the same service port's new entry) uses again: those are emptied and refilled,
/// which keeps the transaction small.
pub(super) fn remove(
    b: &mut Batch,
    name: &ServicePortName,
    e: &ServiceEntry,
    next: Option<&ServiceEntry>,
) {
    let s = shape(name, e);
    remove_elements(b, &s, e);
    let keep = next.map(|n| owned(&shape(name, n), n)).unwrap_or_default();
    for (kind, object) in owned(&s, e) {
        if keep.contains(&(kind, object.clone())) {
            continue;
        }
        let table = b.table().name();
        b.delete(match kind {
            "chain" => format!("flush chain ip {table} {object}\ndelete chain ip {table} {object}"),
            _ => format!("delete set ip {table} {object}"),
        });
    }
}

/// The chains and sets an applied entry owns, in the order they can be deleted.
fn owned(s: &Shape<'_>, e: &ServiceEntry) -> Vec<(&'static str, String)> {
    let mut out = Vec::new();
    if e.port.cluster_ip.is_some() && !s.cluster.is_empty() {
        out.push(("chain", format!("svc-{}", s.id)));
    }
    if s.exposed && !s.external.is_empty() {
        out.push(("chain", format!("ext-{}", s.id)));
    }
    if e.port.affinity_seconds.is_some() {
        for ep in all_endpoints(s) {
            out.push(("set", format!("affinity-{}", endpoint_id(&s.id, ep))));
        }
    }
    out
}

/// The elements [`add`] wrote, each with the verdict it had (an element that comes back
/// unchanged is left alone, see [`Batch::render_partial`]).
fn remove_elements(b: &mut Batch, s: &Shape<'_>, e: &ServiceEntry) {
    let (id, proto, port) = (&s.id, s.proto, e.port.port);
    if let Some(vip) = e.port.cluster_ip {
        let (map, verdict) = if s.cluster.is_empty() {
            ("no-endpoint-services", "goto reject-packet".to_string())
        } else {
            ("service-ips", format!("goto svc-{id}"))
        };
        b.delete_element(map, format!("{vip} . {proto} . {port}"), verdict);
    }
    if !s.exposed {
        return;
    }
    let verdict = if s.external.is_empty() {
        s.external_refusal.to_string()
    } else {
        format!("goto ext-{id}")
    };
    let (ips_map, ports_map) = maps(s);
    for ip in &s.external_ips {
        let key = format!("{ip} . {proto} . {port}");
        b.delete_element(ips_map, key, verdict.clone());
    }
    if let Some(np) = e.port.node_port {
        b.delete_element(ports_map, format!("{proto} . {np}"), verdict.clone());
    }
}
