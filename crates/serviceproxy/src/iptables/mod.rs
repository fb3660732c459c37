//! The proxy's iptables rules, rendered from a [`ProxyState`] as `iptables-restore
//! --noflush` payloads (pure; applied by a `cairn_netfilter::IptablesDriver`). The shape
//! is kube-proxy's, with `CAIRN-` names:
//!
//! - nat `CAIRN-SERVICES` (cluster, external and load-balancer addresses) and
//!   `CAIRN-NODEPORTS` (local addresses) jump to a service port's `CAIRN-SVC-<id>`
//!   (cluster traffic) or `CAIRN-EXT-<id>` (node-port, external, load-balancer traffic);
//!   those mark hairpin traffic for masquerade and pick an endpoint with a `statistic
//!   --probability` cascade of DNAT rules (`recent` lists for ClientIP affinity). Unlike
//!   kube-proxy there is no chain per endpoint: iptables-nft's `--noflush` restore looks
//!   chains up linearly, so chains cost quadratic time (see `rules::pick_chain`). The
//!   price: a pod that backs a service is masqueraded when it connects to that service,
//!   whichever endpoint serves it (kube-proxy masquerades only when it reaches itself).
//! - filter `CAIRN-NO-ENDPOINTS` / `CAIRN-NO-EP-NODEPORTS` reject new connections to
//!   ports without endpoints (or drop them where `externalTrafficPolicy: Local` has none
//!   on this node), before NAT could send them nowhere.
//! - Masquerading by mark: `CAIRN-MARK-MASQ` sets 0x4000, `CAIRN-POSTROUTING` masquerades
//!   what carries it.
//!
//! A partial sync rewrites only the changed service ports' own chains and adds or deletes
//! (`-A`/`-D`) their single rules in the dispatch chains; it never rewrites a dispatch
//! chain (kube-proxy rewrites all of `KUBE-SERVICES` on every change: 600 ms of a 710 ms
//! change at 10,000 services on the peer). A full sync compares the wanted ruleset with
//! `iptables-save` and rewrites only the chains that differ; dispatch chains compare as
//! sets, since partial syncs append in change order.

mod rules;
mod saved;
#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write;

use ipnetwork::Ipv4Network;

use crate::diff::Diff;
use crate::model::*;
pub use rules::Ruleset;
pub use saved::Saved;

/// Every chain the proxy owns starts with this.
pub const PREFIX: &str = "CAIRN-";
const SERVICES: &str = "CAIRN-SERVICES";
const NODEPORTS: &str = "CAIRN-NODEPORTS";
const NO_ENDPOINTS: &str = "CAIRN-NO-ENDPOINTS";
const NO_ENDPOINT_NODEPORTS: &str = "CAIRN-NO-EP-NODEPORTS";
const MARK_MASQ: &str = "CAIRN-MARK-MASQ";
const POSTROUTING: &str = "CAIRN-POSTROUTING";
/// Chains whose rules are independent of their order (one rule per address and port).
const DISPATCH: [&str; 4] = [SERVICES, NODEPORTS, NO_ENDPOINTS, NO_ENDPOINT_NODEPORTS];
/// Endpoint counts worth a warning: the pick is a cascade of rules, linear in them.
const LARGE: usize = 1000;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Table {
    Filter,
    Nat,
}

impl Table {
    pub fn name(self) -> &'static str {
        match self {
            Table::Filter => "filter",
            Table::Nat => "nat",
        }
    }

    fn from_name(s: &str) -> Option<Table> {
        match s {
            "filter" => Some(Table::Filter),
            "nat" => Some(Table::Nat),
            _ => None,
        }
    }
}

#[derive(Debug, Clone, Default)]
pub struct IptConfig {
    /// Traffic from outside it to a cluster IP is masqueraded.
    pub cluster_cidr: Option<Ipv4Network>,
    /// Node ports answer on the local addresses in these ranges (`--nodeport-addresses`);
    /// empty: on every local address but loopback.
    pub nodeport_cidrs: Vec<Ipv4Network>,
}

fn fixed_chains() -> Vec<(Table, &'static str, Vec<String>)> {
    let owned = |rules: &[&str]| rules.iter().map(|r| r.to_string()).collect();
    vec![
        (Table::Nat, SERVICES, Vec::new()),
        (Table::Nat, NODEPORTS, Vec::new()),
        (
            Table::Nat,
            MARK_MASQ,
            owned(&["-j MARK --set-xmark 0x4000/0x4000"]),
        ),
        (
            Table::Nat,
            POSTROUTING,
            owned(&[
                "-m mark ! --mark 0x4000/0x4000 -j RETURN",
                "-j MARK --set-xmark 0x4000/0x0",
                "-j MASQUERADE --random-fully",
            ]),
        ),
        (Table::Filter, NO_ENDPOINTS, Vec::new()),
        (Table::Filter, NO_ENDPOINT_NODEPORTS, Vec::new()),
    ]
}

/// The built-in chains' jumps into the proxy's, in order.
fn builtin_jumps(cfg: &IptConfig) -> Vec<(Table, &'static str, String)> {
    let destinations: Vec<String> = if cfg.nodeport_cidrs.is_empty() {
        vec!["! -d 127.0.0.0/8".to_string()]
    } else {
        cfg.nodeport_cidrs
            .iter()
            .map(|c| format!("-d {c}"))
            .collect()
    };
    let nodeports = |target: &str, new: bool| {
        let state = if new {
            "-m conntrack --ctstate NEW "
        } else {
            ""
        };
        destinations
            .iter()
            .map(|d| format!("{d} {state}-m addrtype --dst-type LOCAL -j {target}"))
            .collect::<Vec<_>>()
    };
    let no_endpoints = format!("-m conntrack --ctstate NEW -j {NO_ENDPOINTS}");
    let mut jumps = Vec::new();
    for chain in ["PREROUTING", "OUTPUT"] {
        jumps.push((Table::Nat, chain, format!("-j {SERVICES}")));
        for rule in nodeports(NODEPORTS, false) {
            jumps.push((Table::Nat, chain, rule));
        }
    }
    jumps.push((Table::Nat, "POSTROUTING", format!("-j {POSTROUTING}")));
    for chain in ["INPUT", "FORWARD", "OUTPUT"] {
        jumps.push((Table::Filter, chain, no_endpoints.clone()));
        for rule in nodeports(NO_ENDPOINT_NODEPORTS, true) {
            jumps.push((Table::Filter, chain, rule));
        }
    }
    jumps
}

/// One restore payload, per table: chain declarations (which create or flush), rule
/// deletions, rule additions, chain removals — in that order, so every jump has its
/// target and every removed chain has lost its references first.
#[derive(Debug, Default)]
struct Payload {
    tables: BTreeMap<Table, [Vec<String>; 4]>,
}

impl Payload {
    fn part(&mut self, t: Table, i: usize) -> &mut Vec<String> {
        &mut self.tables.entry(t).or_default()[i]
    }
    fn declare(&mut self, t: Table, chain: &str) {
        self.part(t, 0).push(format!(":{chain} - [0:0]"));
    }
    fn delete(&mut self, t: Table, chain: &str, rule: &str) {
        self.part(t, 1).push(format!("-D {chain} {rule}"));
    }
    fn append(&mut self, t: Table, chain: &str, rule: &str) {
        self.part(t, 2).push(format!("-A {chain} {rule}"));
    }
    fn insert(&mut self, t: Table, chain: &str, rule: &str) {
        self.part(t, 2).push(format!("-I {chain} {rule}"));
    }
    fn remove(&mut self, t: Table, chain: &str) {
        self.part(t, 3).push(format!("-X {chain}"));
    }

    /// The payload, or None when there is nothing to write.
    fn render(&self) -> Option<String> {
        let mut out = String::new();
        for (table, parts) in &self.tables {
            if parts.iter().all(Vec::is_empty) {
                continue;
            }
            // Writing to a String cannot fail.
            let _ = writeln!(out, "*{}", table.name());
            for line in parts.iter().flatten() {
                out.push_str(line);
                out.push('\n');
            }
            out.push_str("COMMIT\n");
        }
        (!out.is_empty()).then_some(out)
    }
}

fn same_rules(chain: &str, have: &[String], want: &[String]) -> bool {
    if DISPATCH.contains(&chain) {
        fn sorted(v: &[String]) -> Vec<&String> {
            let mut v: Vec<&String> = v.iter().collect();
            v.sort();
            v
        }
        have.len() == want.len() && sorted(have) == sorted(want)
    } else {
        have == want
    }
}

fn large_warnings(
    state: &ProxyState,
    names: &mut dyn Iterator<Item = &ServicePortName>,
) -> Vec<String> {
    names
        .filter_map(|n| {
            state
                .get(n)
                .map(|e| (n, e.cluster.len().max(e.external.len())))
        })
        .filter(|(_, count)| *count > LARGE)
        .map(|(n, count)| {
            format!("{n}: {count} endpoints; each new connection walks up to that many rules")
        })
        .collect()
}

/// What a sync writes.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Rendered {
    /// The `iptables-restore --noflush` payload; None when the kernel is already right.
    pub payload: Option<String>,
    /// Chains (re)written or removed.
    pub chains_written: usize,
    pub warnings: Vec<String>,
}

/// A full sync: everything that differs between `saved` (what the kernel has) and the
/// ruleset `state` wants.
pub fn full(cfg: &IptConfig, state: &ProxyState, saved: &Saved) -> Rendered {
    let want = Ruleset::build(cfg, state);
    let mut p = Payload::default();
    let mut written = 0;
    for ((table, chain), rules) in &want.chains {
        let have = saved.chains.get(&(*table, chain.clone()));
        if have.is_some_and(|have| same_rules(chain, have, rules)) {
            continue;
        }
        written += 1;
        p.declare(*table, chain);
        for rule in rules {
            p.append(*table, chain, rule);
        }
    }
    for (table, chain) in saved.chains.keys() {
        if !want.chains.contains_key(&(*table, chain.clone())) {
            written += 1;
            p.declare(*table, chain);
            p.remove(*table, chain);
        }
    }
    sync_jumps(&mut p, &want, saved);
    Rendered {
        payload: p.render(),
        chains_written: written,
        warnings: large_warnings(state, &mut state.keys()),
    }
}

/// Deletes built-in jumps the ruleset does not want (and duplicates); inserts missing ones.
fn sync_jumps(p: &mut Payload, want: &Ruleset, saved: &Saved) {
    let mut seen = BTreeSet::new();
    for (table, chain, rule) in &saved.jumps {
        let wanted = want
            .jumps
            .iter()
            .any(|(t, c, r)| t == table && c == chain && r == rule);
        if !wanted || !seen.insert((table, chain, rule)) {
            p.delete(*table, chain, rule);
        }
    }
    // Inserted at the top in reverse, so they end up in the wanted order.
    for (table, chain, rule) in want.jumps.iter().rev() {
        let have = saved
            .jumps
            .iter()
            .any(|(t, c, r)| t == table && c == chain && r == rule);
        if !have {
            p.insert(*table, chain, rule);
        }
    }
}

/// A partial sync: rewrites the own chains of the service ports `diff` names (only those
/// whose rules changed), removes chains they no longer use, and adds or deletes their
/// rules in the dispatch chains. `applied` is what the previous sync programmed.
pub fn partial(
    cfg: &IptConfig,
    applied: &ProxyState,
    desired: &ProxyState,
    diff: &Diff,
) -> Rendered {
    let mut p = Payload::default();
    let mut written = 0;
    let names = diff.added.iter().chain(&diff.changed).chain(&diff.removed);
    for name in names {
        let old = applied.get(name).map(|e| rules::entry_rules(cfg, name, e));
        let new = desired.get(name).map(|e| rules::entry_rules(cfg, name, e));
        let (old, new) = (old.unwrap_or_default(), new.unwrap_or_default());
        for d in &old.dispatch {
            if !new.dispatch.contains(d) {
                p.delete(d.0, d.1, &d.2);
            }
        }
        for d in &new.dispatch {
            if !old.dispatch.contains(d) {
                p.append(d.0, d.1, &d.2);
            }
        }
        for (chain, rules) in &new.chains {
            if old.chains.iter().any(|(c, r)| c == chain && r == rules) {
                continue;
            }
            written += 1;
            p.declare(Table::Nat, chain);
            for rule in rules {
                p.append(Table::Nat, chain, rule);
            }
        }
        for (chain, _) in &old.chains {
            if !new.chains.iter().any(|(c, _)| c == chain) {
                written += 1;
                p.declare(Table::Nat, chain);
                p.remove(Table::Nat, chain);
            }
        }
    }
    let mut touched = diff.added.iter().chain(&diff.changed);
    Rendered {
        payload: p.render(),
        chains_written: written,
        warnings: large_warnings(desired, &mut touched),
    }
}

/// Removes every chain of the proxy and every jump into them, nothing else — except that
/// with iptables-nft, built-in chains left empty with policy ACCEPT are deleted too: iptables
/// created them for the proxy's jumps, an empty accepting chain does nothing, and the
/// ruleset is then exactly what it was before the proxy ran.
pub fn cleanup(saved: &Saved) -> Option<String> {
    let mut p = Payload::default();
    for (table, chain, rule) in &saved.jumps {
        p.delete(*table, chain, rule);
    }
    if saved.nf_tables {
        for ((table, chain), rules) in &saved.accepting_builtins {
            let ours = saved
                .jumps
                .iter()
                .filter(|(t, c, _)| t == table && c == chain)
                .count();
            if ours > 0 && ours == *rules {
                p.remove(*table, chain);
            }
        }
    }
    for (table, chain) in saved.chains.keys() {
        p.declare(*table, chain);
        p.remove(*table, chain);
    }
    p.render()
}
