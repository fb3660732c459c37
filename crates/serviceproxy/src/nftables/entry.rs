//! One service port's part of the ruleset: its service chains with their endpoint picks,
//! its affinity sets, and its map elements — added, or removed as it was applied.

use std::net::Ipv4Addr;

use cairn_nft::{AddrField, DynamicAddrSet, Key, Op, Proto, Rule, Stmt, Verdict};

use super::batch::Batch;
use super::{endpoint_id, service_id, NftConfig};

/// Marks a packet for masquerading in postrouting. A statement, not a jump to a marking
/// chain: a partial sync whose rules jump nowhere spares the kernel the validation of the
/// whole ruleset's jump graph at commit (~20 ms at 10,000 services).
const MARK: Stmt = Stmt::MarkOr(0x4000);

/// Endpoint counts worth a warning: the pick is a cascade of rules, linear in them.
const LARGE: usize = 1000;
use crate::model::*;

/// What one service port programs: its chains' names, map keys and endpoints.
struct Shape<'a> {
    id: String,
    proto: Proto,
    cluster: &'a [Endpoint],
    external: &'a [Endpoint],
    /// `service-ips` keys of external traffic (external and load-balancer addresses).
    external_ips: Vec<Ipv4Addr>,
    exposed: bool,
    /// The verdict for external traffic without endpoints.
    external_refusal: Verdict,
}

fn nft_proto(p: Protocol) -> Proto {
    match p {
        Protocol::Tcp => Proto::Tcp,
        Protocol::Udp => Proto::Udp,
        Protocol::Sctp => Proto::Sctp,
    }
}

fn goto(chain: &str) -> Verdict {
    Verdict::Goto(chain.to_string())
}

fn shape<'a>(name: &ServicePortName, e: &'a ServiceEntry) -> Shape<'a> {
    let mut external_ips = e.port.external_ips.clone();
    external_ips.extend(e.port.load_balancer_ips.iter().copied());
    Shape {
        id: service_id(name),
        proto: nft_proto(name.protocol),
        cluster: &e.cluster,
        external: &e.external,
        exposed: !external_ips.is_empty() || e.port.node_port.is_some(),
        external_ips,
        external_refusal: if e.port.external_local && !e.cluster.is_empty() {
            Verdict::Drop
        } else {
            goto("reject-packet")
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
    first: Option<Rule>,
    eps: &'a [Endpoint],
    affinity: bool,
    proto: Proto,
}

/// The chain DNATs itself: endpoint i of n is taken with probability 1/(n-i) among those
/// left (uniform, as iptables' `statistic` cascade). Endpoints get no chains of their own:
/// every nft transaction reads the table's chain list, so 30,000 chains at 10,000 services
/// cost ~100 ms per change and 1.9 s per full load, 10,000 chains ~25 ms and 0.7 s. Hairpin
/// traffic is marked when it comes from any endpoint of the service (kube-proxy marks only
/// a pod reaching itself).
fn chain_with_pick(b: &mut Batch, c: &PickChain<'_>, id: &str) {
    b.chain(&c.chain);
    let marks_all = c.first.as_ref().is_some_and(|r| r.0 == [MARK]);
    if let Some(rule) = &c.first {
        b.rule(&c.chain, rule.clone());
    }
    if !marks_all {
        for e in c.eps {
            let hairpin = Rule::new([Stmt::addr_is(AddrField::Saddr, e.ip), MARK]);
            b.rule(&c.chain, hairpin);
        }
    }
    let set = |e: &Endpoint| format!("affinity-{}", endpoint_id(id, e));
    if c.affinity {
        for e in c.eps {
            let rule = Rule::new([
                Stmt::SaddrInSet(set(e)),
                Stmt::L4Proto(c.proto),
                Stmt::RememberSaddr(set(e)),
                Stmt::Dnat(e.ip, e.port),
            ]);
            b.rule(&c.chain, rule);
        }
    }
    let n = c.eps.len();
    for (i, e) in c.eps.iter().enumerate() {
        let mut rule = vec![Stmt::L4Proto(c.proto)];
        if n - i > 1 {
            rule.push(Stmt::OneIn((n - i) as u32));
        }
        if c.affinity {
            rule.push(Stmt::RememberSaddr(set(e)));
        }
        rule.push(Stmt::Dnat(e.ip, e.port));
        b.rule(&c.chain, Rule(rule));
    }
}

fn affinity_sets(b: &mut Batch, s: &Shape<'_>, affinity: Option<u32>) {
    let Some(t) = affinity else {
        return;
    };
    for ep in all_endpoints(s) {
        let eid = endpoint_id(&s.id, ep);
        let def = DynamicAddrSet { timeout_seconds: t };
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
        let key = Key::AddrProtoPort(vip, proto, port);
        if s.cluster.is_empty() {
            b.element("no-endpoint-services", key, goto("reject-packet"));
        } else {
            let first = cfg.cluster_cidr.map(|cidr| {
                let outside = Stmt::Addr {
                    field: AddrField::Saddr,
                    equal: false,
                    net: cidr,
                };
                Rule::new([Stmt::addr_is(AddrField::Daddr, vip), outside, MARK])
            });
            let pick = PickChain {
                chain: format!("svc-{id}"),
                first,
                eps: s.cluster,
                affinity,
                proto,
            };
            chain_with_pick(b, &pick, id);
            b.element("service-ips", key, goto(&format!("svc-{id}")));
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
        s.external_refusal.clone()
    } else {
        let first = (!e.port.external_local).then(|| Rule::new([MARK]));
        let affinity = e.port.affinity_seconds.is_some();
        let pick = PickChain {
            chain: format!("ext-{id}"),
            first,
            eps: s.external,
            affinity,
            proto: s.proto,
        };
        chain_with_pick(b, &pick, id);
        goto(&format!("ext-{id}"))
    };
    let (ips_map, ports_map) = maps(s);
    for ip in &s.external_ips {
        b.element(
            ips_map,
            Key::AddrProtoPort(*ip, proto, port),
            verdict.clone(),
        );
    }
    if let Some(np) = e.port.node_port {
        b.element(ports_map, Key::ProtoPort(proto, np), verdict);
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
        if kind == "chain" {
            b.delete(Op::FlushChain {
                table: table.clone(),
                chain: object.clone(),
            });
            b.delete(Op::DeleteChain {
                table,
                chain: object,
            });
        } else {
            b.delete(Op::DeleteSet { table, set: object });
        }
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
            ("no-endpoint-services", goto("reject-packet"))
        } else {
            ("service-ips", goto(&format!("svc-{id}")))
        };
        b.delete_element(map, Key::AddrProtoPort(vip, proto, port), verdict);
    }
    if !s.exposed {
        return;
    }
    let verdict = if s.external.is_empty() {
        s.external_refusal.clone()
    } else {
        goto(&format!("ext-{id}"))
    };
    let (ips_map, ports_map) = maps(s);
    for ip in &s.external_ips {
        let key = Key::AddrProtoPort(*ip, proto, port);
        b.delete_element(ips_map, key, verdict.clone());
    }
    if let Some(np) = e.port.node_port {
        b.delete_element(ports_map, Key::ProtoPort(proto, np), verdict);
    }
}
