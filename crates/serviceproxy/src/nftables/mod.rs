//! The proxy's nftables ruleset, rendered from a [`ProxyState`] (pure; applied by a
//! `cairn_netfilter::NftDriver`). A main table, `ip cairn-proxy`, and the service ports
//! spread over 1 to [`MAX_SHARDS`] shard tables, `ip cairn-proxy-shard<k>`:
//!
//! - In each shard, `service-ips` (`ip daddr . meta l4proto . th dport : verdict`) and
//!   `service-nodeports` (`meta l4proto . th dport`, for local addresses) send a new
//!   connection to the service port's chain, from the shard's own NAT base chains. The
//!   first chain that DNATs wins: netfilter runs no further NAT chain of the hook for a
//!   connection once its NAT is set up, and the other shards' lookups miss anyway.
//! - In the main table, `no-endpoint-services` / `no-endpoint-nodeports`, checked in
//!   filter hooks before NAT, reject connections to ports without endpoints (or drop them
//!   where `externalTrafficPolicy: Local` has none on this node, as kube-proxy does); and
//!   postrouting masquerades what the service chains marked.
//! - The endpoint is chosen in the service port's chain by a cascade of DNAT rules,
//!   `meta l4proto tcp numgen random mod N-i == 0 dnat to ep-i` (uniform, as iptables'
//!   `statistic` chains). kube-proxy's nftables mode gives every service an anonymous
//!   verdict map, which the kernel loads in quadratic time (41 s at 10,000 services on the
//!   peer); one shared named map is worse still, since every commit re-validates each
//!   referring chain against all its elements. Plain rules load and re-validate in linear
//!   time. There is no chain per endpoint: `nft` reads the table's chain list in every
//!   transaction (see `entry::chain_with_pick`).
//! - `svc-<id>` (cluster traffic: masquerade what comes from outside `--cluster-cidr`),
//!   `ext-<id>` (node port, external and load-balancer traffic: masquerade unless
//!   `externalTrafficPolicy: Local`); hairpin traffic (from an endpoint of the service) is
//!   marked for masquerade; ClientIP affinity keeps a per-endpoint set of client
//!   addresses with the timeout.
//!
//! Why shards: a commit that adds a rule with a NAT statement or a jump makes the kernel
//! re-validate the whole jump graph of that rule's *table* (every service chain behind
//! the maps), ~25 ms at 10,000 services in one table. Shards of about
//! [`SERVICES_PER_SHARD`] bound that walk (one endpoint change at 10,000 services: 33-37
//! ms p50 in one table, 11-15 ms in 8 shards); a cluster below that size keeps one shard,
//! so the packet path has as many NAT base chains as before. The shard count is chosen
//! at each full sync; partial syncs keep the applied one.
//!
//! A full sync replaces every table in one transaction (block syntax, [`batch`]); a
//! partial sync rewrites only the changed service ports' chains and elements, as typed
//! operations the driver sends to the kernel without `nft`.

mod batch;
mod entry;

use ipnetwork::Ipv4Network;

use crate::diff::Diff;
pub(super) use crate::ids::endpoint_id;
pub use crate::ids::service_id;
use crate::model::*;

/// The main table (filter checks, masquerade, the no-endpoint maps).
pub const TABLE: &str = "cairn-proxy";
/// Shard tables are named this with their number appended.
pub const SHARD_PREFIX: &str = "cairn-proxy-shard";
/// The most shard tables a full sync makes.
pub const MAX_SHARDS: usize = 8;
/// Service ports per shard table the shard count aims at.
pub const SERVICES_PER_SHARD: usize = 1250;

/// The shard tables' count for `service_ports` service ports.
pub fn shard_count(service_ports: usize) -> usize {
    service_ports
        .div_ceil(SERVICES_PER_SHARD)
        .clamp(1, MAX_SHARDS)
}

/// Every table this backend may own (for `--cleanup`): the main one and all shards.
pub fn owned_tables() -> Vec<String> {
    let mut out = vec![TABLE.to_string()];
    out.extend((0..MAX_SHARDS).map(|k| format!("{SHARD_PREFIX}{k}")));
    out
}

#[derive(Debug, Clone, Default)]
pub struct NftConfig {
    /// Traffic from outside it to a cluster IP is masqueraded.
    pub cluster_cidr: Option<Ipv4Network>,
    /// Node ports answer on the local addresses in these ranges (`--nodeport-addresses`);
    /// empty: on every local address but loopback.
    pub nodeport_cidrs: Vec<Ipv4Network>,
}

/// `skeleton` with node ports limited to `--nodeport-addresses`.
fn limit_nodeports(cfg: &NftConfig, skeleton: &str) -> String {
    if cfg.nodeport_cidrs.is_empty() {
        return skeleton.to_string();
    }
    let cidrs: Vec<String> = cfg.nodeport_cidrs.iter().map(|c| c.to_string()).collect();
    skeleton.replace(
        "ip daddr != 127.0.0.0/8",
        &format!("ip daddr {{ {} }}", cidrs.join(", ")),
    )
}

/// Renders full and partial syncs; keeps the warnings of the last one.
#[derive(Debug, Default)]
pub struct Renderer {
    pub warnings: Vec<String>,
    /// The shard count of the last full sync (partial syncs keep it).
    shards: usize,
}

/// The main table's fixed chains (the maps are declared by [`batch::Batch::render_full`]).
const MAIN_SKELETON: &str = r#"	chain reject-packet {
		reject
	}
	chain endpoints-check {
		ip daddr . meta l4proto . th dport vmap @no-endpoint-services
		fib daddr type local ip daddr != 127.0.0.0/8 meta l4proto . th dport vmap @no-endpoint-nodeports
	}
	chain filter-input {
		type filter hook input priority -110; policy accept;
		ct state new jump endpoints-check
	}
	chain filter-forward {
		type filter hook forward priority -110; policy accept;
		ct state new jump endpoints-check
	}
	chain filter-output {
		type filter hook output priority -110; policy accept;
		ct state new jump endpoints-check
	}
	chain masquerading {
		meta mark & 0x4000 == 0 return
		meta mark set meta mark ^ 0x4000
		masquerade fully-random
	}
	chain nat-postrouting {
		type nat hook postrouting priority srcnat; policy accept;
		jump masquerading
	}
"#;

/// Each shard table's fixed chains.
const SHARD_SKELETON: &str = r#"	chain services {
		ip daddr . meta l4proto . th dport vmap @service-ips
		fib daddr type local ip daddr != 127.0.0.0/8 meta l4proto . th dport vmap @service-nodeports
	}
	chain nat-prerouting {
		type nat hook prerouting priority dstnat; policy accept;
		jump services
	}
	chain nat-output {
		type nat hook output priority -100; policy accept;
		jump services
	}
"#;

impl Renderer {
    /// Replaces every table.
    pub fn full(&mut self, cfg: &NftConfig, state: &ProxyState) -> String {
        self.warnings.clear();
        self.shards = shard_count(state.len());
        let mut batch = batch::Batch::default();
        for (name, entry) in state {
            batch.shard = self.shard_of(name);
            entry::add(&mut batch, cfg, name, entry, &mut self.warnings);
        }
        let skeletons = (
            limit_nodeports(cfg, MAIN_SKELETON),
            limit_nodeports(cfg, SHARD_SKELETON),
        );
        batch.render_full(&skeletons.0, &skeletons.1, self.shards)
    }

    /// Rewrites only what `diff` names, as typed operations (see `cairn_nft`); `applied` is
    /// what the previous sync programmed.
    pub fn partial(
        &mut self,
        cfg: &NftConfig,
        applied: &ProxyState,
        desired: &ProxyState,
        diff: &Diff,
    ) -> Vec<cairn_nft::Op> {
        self.warnings.clear();
        let mut batch = batch::Batch::default();
        for name in diff.removed.iter().chain(diff.changed.iter()) {
            if let Some(old) = applied.get(name) {
                batch.shard = self.shard_of(name);
                entry::remove(&mut batch, name, old, desired.get(name));
            }
        }
        for name in diff.changed.iter().chain(diff.added.iter()) {
            if let Some(entry) = desired.get(name) {
                batch.shard = self.shard_of(name);
                entry::add(&mut batch, cfg, name, entry, &mut self.warnings);
            }
        }
        batch.render_partial()
    }

    /// The shard a service port lives in: its id (a hash of its name) modulo the count.
    fn shard_of(&self, name: &ServicePortName) -> usize {
        let id = service_id(name);
        let hash = u64::from_str_radix(&id, 16).unwrap_or(0);
        (hash % self.shards.max(1) as u64) as usize
    }
}

#[cfg(test)]
mod tests;
