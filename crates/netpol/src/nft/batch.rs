//! From one desired state to the next: typed changes in the order one transaction needs
//! them (everything new before the pod maps point at it, the maps before anything old is
//! removed), printed as an `nft -f` script.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::net::Ipv4Addr;

use super::desired::Desired;
use super::ranges::AddrRange;
use super::{EGRESS_MAP, GUARDED_SET, INGRESS_MAP, TABLE, UNPROGRAMMED_COUNTER};

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    AddCounter(String),
    DeleteCounter(String),
    AddSet(String),
    DeleteSet(String),
    AddElements(String, Vec<AddrRange>),
    DeleteElements(String, Vec<AddrRange>),
    /// Adds the chain, or empties it when it exists, then its rules.
    ReplaceChain(String, Vec<String>),
    DeleteChain(String),
    /// A pod map's element: the address and its verdict (`jump CHAIN` or `accept`).
    MapAdd(&'static str, Ipv4Addr, String),
    MapDelete(&'static str, Ipv4Addr),
}

fn list<T: fmt::Display>(items: &[T]) -> String {
    let items: Vec<String> = items.iter().map(ToString::to_string).collect();
    items.join(", ")
}

impl fmt::Display for Change {
    /// The `nft` commands, one per line, without a final newline.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let t = format!("ip {TABLE}");
        match self {
            Change::AddCounter(c) => write!(f, "add counter {t} {c}"),
            Change::DeleteCounter(c) => write!(f, "delete counter {t} {c}"),
            Change::AddSet(s) => write!(f, "add set {t} {s} {{ type ipv4_addr; flags interval; }}"),
            Change::DeleteSet(s) => write!(f, "delete set {t} {s}"),
            Change::AddElements(s, e) => write!(f, "add element {t} {s} {{ {} }}", list(e)),
            Change::DeleteElements(s, e) => write!(f, "delete element {t} {s} {{ {} }}", list(e)),
            Change::ReplaceChain(c, rules) => {
                write!(f, "add chain {t} {c}\nflush chain {t} {c}")?;
                for rule in rules {
                    write!(f, "\nadd rule {t} {c} {rule}")?;
                }
                Ok(())
            }
            Change::DeleteChain(c) => write!(f, "delete chain {t} {c}"),
            Change::MapAdd(m, ip, c) => write!(f, "add element {t} {m} {{ {ip} : {c} }}"),
            Change::MapDelete(m, ip) => write!(f, "delete element {t} {m} {{ {ip} }}"),
        }
    }
}

/// The changes from `old` to `new`; none when they are equal.
pub fn diff(old: &Desired, new: &Desired) -> Vec<Change> {
    let mut out = Vec::new();
    for c in new
        .counters
        .keys()
        .filter(|c| !old.counters.contains_key(*c))
    {
        out.push(Change::AddCounter(c.clone()));
    }
    for (name, elements) in &new.sets {
        if !old.sets.contains_key(name) {
            out.push(Change::AddSet(name.clone()));
        }
        element_changes(name, old.sets.get(name), elements, &mut out);
    }
    element_changes(GUARDED_SET, Some(&old.guarded), &new.guarded, &mut out);
    for (name, rules) in &new.chains {
        if old.chains.get(name) != Some(rules) {
            out.push(Change::ReplaceChain(name.clone(), rules.clone()));
        }
    }
    for (map, before, after) in [
        (EGRESS_MAP, egress_verdicts(old), egress_verdicts(new)),
        (INGRESS_MAP, ingress_verdicts(old), ingress_verdicts(new)),
    ] {
        // A changed verdict is deleted, then added: nft refuses to add an existing key.
        for (ip, verdict) in &before {
            if after.get(ip) != Some(verdict) {
                out.push(Change::MapDelete(map, *ip));
            }
        }
        for (ip, verdict) in after {
            if before.get(&ip) != Some(&verdict) {
                out.push(Change::MapAdd(map, ip, verdict));
            }
        }
    }
    let chains = old.chains.keys().filter(|c| !new.chains.contains_key(*c));
    out.extend(chains.map(|c| Change::DeleteChain(c.clone())));
    let sets = old.sets.keys().filter(|s| !new.sets.contains_key(*s));
    out.extend(sets.map(|s| Change::DeleteSet(s.clone())));
    let counters = old
        .counters
        .keys()
        .filter(|c| !new.counters.contains_key(*c));
    out.extend(counters.map(|c| Change::DeleteCounter(c.clone())));
    out
}

fn jumps(chains: &BTreeMap<Ipv4Addr, String>) -> BTreeMap<Ipv4Addr, String> {
    chains
        .iter()
        .map(|(ip, chain)| (*ip, format!("jump {chain}")))
        .collect()
}

/// The egress map: an isolated pod jumps to its chain; while the node's ranges are
/// guarded, an address two local pods claim is dropped, as the guard closes it for
/// ingress (neither pod's policy may be the one that lets it out).
fn egress_verdicts(state: &Desired) -> BTreeMap<Ipv4Addr, String> {
    let mut verdicts = jumps(&state.egress);
    if !state.guarded.is_empty() {
        verdicts.extend(state.shared.iter().map(|ip| (*ip, "drop".to_string())));
    }
    verdicts
}

/// The ingress map: an isolated pod jumps to its chain, every other programmed pod is
/// accepted; so the guard after the map sees only addresses no sync has programmed, and
/// traffic to an open pod costs one lookup.
fn ingress_verdicts(state: &Desired) -> BTreeMap<Ipv4Addr, String> {
    let mut verdicts: BTreeMap<Ipv4Addr, String> = state
        .programmed
        .iter()
        .map(|range| (range.0, "accept".to_string()))
        .collect();
    verdicts.extend(jumps(&state.ingress));
    verdicts
}

/// The element changes of set `name` from `before` (none: a new set) to `after`.
fn element_changes(
    name: &str,
    before: Option<&BTreeSet<AddrRange>>,
    after: &BTreeSet<AddrRange>,
    out: &mut Vec<Change>,
) {
    let empty = BTreeSet::new();
    let before = before.unwrap_or(&empty);
    // Removed first: a merged range may overlap the ones it replaces.
    let gone: Vec<AddrRange> = before.difference(after).copied().collect();
    let added: Vec<AddrRange> = after.difference(before).copied().collect();
    if !gone.is_empty() {
        out.push(Change::DeleteElements(name.to_string(), gone));
    }
    if !added.is_empty() {
        out.push(Change::AddElements(name.to_string(), added));
    }
}

/// The changes as one `nft -f` transaction.
pub fn script(changes: &[Change]) -> String {
    let mut out = String::new();
    for change in changes {
        out.push_str(&change.to_string());
        out.push('\n');
    }
    out
}

/// The table's fixed part: the pod maps, the guard, and the hooks that send pod traffic
/// to them: forward, and output for what the node sends with a pod's source address
/// (IPVS hands a Service connection to its backend from the output hook; the node's own
/// traffic, from a local address, is never filtered, as upstream allows it).
fn skeleton() -> String {
    // The same three rules in both hooks rather than a jump to a shared chain: a new
    // connection's first packet is the hot path (`proxy/benches/netpol_rate.rs`).
    let pods = format!(
        "\t\tip saddr vmap @{EGRESS_MAP}\n\
         \t\tip daddr vmap @{INGRESS_MAP}\n\
         \t\tip daddr @{GUARDED_SET} counter name {UNPROGRAMMED_COUNTER} drop\n"
    );
    format!(
        "table ip {TABLE} {{\n\
         \tmap {INGRESS_MAP} {{ type ipv4_addr : verdict; }}\n\
         \tmap {EGRESS_MAP} {{ type ipv4_addr : verdict; }}\n\
         \tset {GUARDED_SET} {{ type ipv4_addr; flags interval; }}\n\
         \tcounter {UNPROGRAMMED_COUNTER} {{}}\n\
         \tchain forward {{\n\
         \t\ttype filter hook forward priority filter; policy accept;\n\
         \t\tct state established,related accept\n\
         {pods}\
         \t}}\n\
         \tchain output {{\n\
         \t\ttype filter hook output priority filter; policy accept;\n\
         \t\tct state established,related accept\n\
         \t\tfib saddr type local accept\n\
         {pods}\
         \t}}\n}}\n"
    )
}

/// The whole table as one transaction that replaces whatever is there (a first sync, or
/// one after an error): the old table's rules hold until the new one's commit.
pub fn full_script(state: &Desired) -> String {
    let mut out = format!("table ip {TABLE} {{}}\ndelete table ip {TABLE}\n");
    out.push_str(&skeleton());
    out.push_str(&script(&diff(&Desired::default(), state)));
    out
}
