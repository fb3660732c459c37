//! The IPVS backend: virtual servers over IPVS generic netlink, the service addresses on
//! the dummy link `cairn-ipvs0`, and the small nftables table IPVS needs beside it
//! (`cairn_serviceproxy::ipvs`). Each sync compares the wanted virtual servers with what
//! the kernel lists and writes only differences (a partial sync looks only at the service
//! ports that changed since the last one, and at real servers still draining). A real
//! server that goes away while it has connections is drained: weight 0 until they end,
//! then deleted. Virtual servers the proxy owns: those on the dummy link's addresses and
//! node ports (30000–32767) on the node's addresses; others' are left alone.

mod host;
#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, BTreeSet};
use std::net::Ipv4Addr;
use std::sync::Arc;

use cairn_netfilter::ipvs::{IpvsDriver, RealServer, VirtualServer};
use cairn_netfilter::NftDriver;
use cairn_serviceproxy::ipvs::{self, rules, IpvsConfig, IpvsState, Virtual, VirtualKey};
use cairn_serviceproxy::{Protocol, ProxyState};

pub use host::{FakeHost, HostError, IpvsHost, NetlinkHost};

use super::{BackendError, ProxyBackend, SyncReport};

/// kube-proxy's default service node port range, for recognising owned node ports.
const NODE_PORTS: std::ops::RangeInclusive<u16> = 30000..=32767;

/// The sysctls IPVS mode needs (kube-proxy sets the same): NAT hooks see IPVS traffic;
/// connections to removed real servers expire; service addresses get no ARP answers.
const SYSCTLS: [(&str, &str); 5] = [
    ("net/ipv4/vs/conntrack", "1"),
    ("net/ipv4/vs/expire_nodest_conn", "1"),
    ("net/ipv4/vs/expire_quiescent_template", "1"),
    ("net/ipv4/conf/all/arp_ignore", "1"),
    ("net/ipv4/conf/all/arp_announce", "2"),
];

pub struct IpvsBackend {
    ipvs: Arc<dyn IpvsDriver>,
    nft: Arc<dyn NftDriver>,
    host: Box<dyn IpvsHost>,
    config: IpvsConfig,
    prepared: bool,
    /// What the last sync programmed.
    applied: Option<IpvsState>,
    /// Virtual servers with real servers at weight 0, waiting for connections to end.
    draining: BTreeSet<VirtualKey>,
    /// What the current sync left out, for its report.
    warnings: Vec<String>,
    /// The helper table as last applied (a partial sync that leaves it unchanged does not
    /// reload it: at 10,000 services it holds some 40,000 set elements).
    applied_rules: Option<String>,
}

fn protocol_number(p: Protocol) -> u8 {
    match p {
        Protocol::Tcp => 6,
        Protocol::Udp => 17,
        Protocol::Sctp => 132,
    }
}

impl IpvsBackend {
    pub fn new(
        ipvs: Arc<dyn IpvsDriver>,
        nft: Arc<dyn NftDriver>,
        host: Box<dyn IpvsHost>,
        config: IpvsConfig,
    ) -> IpvsBackend {
        IpvsBackend {
            ipvs,
            nft,
            host,
            config,
            prepared: false,
            applied: None,
            draining: BTreeSet::new(),
            warnings: Vec::new(),
            applied_rules: None,
        }
    }

    fn virtual_server(&self, k: &VirtualKey, v: &Virtual) -> VirtualServer {
        VirtualServer {
            address: k.address,
            protocol: protocol_number(k.protocol),
            port: k.port,
            scheduler: self.config.scheduler().to_string(),
            persistent_timeout: v.persistent_timeout,
        }
    }

    fn prepare(&mut self) -> Result<(), BackendError> {
        if !self.prepared {
            for (key, value) in SYSCTLS {
                self.host.set_sysctl(key, value)?;
            }
            self.prepared = true;
        }
        Ok(())
    }

    /// The kernel's virtual servers that this proxy owns, by key.
    fn owned(
        &self,
        addresses: &BTreeSet<Ipv4Addr>,
        node_ips: &[Ipv4Addr],
    ) -> Result<BTreeMap<(Ipv4Addr, u8, u16), VirtualServer>, BackendError> {
        Ok(self
            .ipvs
            .services()?
            .into_iter()
            .filter(|s| {
                addresses.contains(&s.address)
                    || (node_ips.contains(&s.address) && NODE_PORTS.contains(&s.port))
            })
            .map(|s| ((s.address, s.protocol, s.port), s))
            .collect())
    }
}

impl ProxyBackend for IpvsBackend {
    fn sync(&mut self, desired: &ProxyState, full: bool) -> Result<SyncReport, BackendError> {
        self.prepare()?;
        let local = self.host.local_addresses()?;
        let node_ips = ipvs::node_port_addresses(&self.config, &local);
        let want = ipvs::desired(desired, &node_ips);
        let have_addresses = self.host.dummy_addresses()?;
        for ip in want.addresses.difference(&have_addresses) {
            self.host.add_dummy_address(*ip)?;
        }
        let full = full || self.applied.is_none();
        let helper_rules = rules::render(&self.config, desired);
        if full || self.applied_rules.as_ref() != Some(&helper_rules) {
            self.applied_rules = None;
            self.nft.apply(&helper_rules)?;
            self.applied_rules = Some(helper_rules);
        }
        self.warnings.clear();
        let written = if full {
            self.sync_all(&want, &have_addresses, &node_ips)?
        } else {
            self.sync_changed(&want)?
        };
        for ip in have_addresses.difference(&want.addresses) {
            self.host.delete_dummy_address(*ip)?;
        }
        self.applied = Some(want);
        Ok(SyncReport {
            full,
            written,
            warnings: std::mem::take(&mut self.warnings),
        })
    }

    fn cleanup(&mut self) -> Result<(), BackendError> {
        let local = self.host.local_addresses()?;
        let node_ips = ipvs::node_port_addresses(&IpvsConfig::default(), &local);
        let addresses = self.host.dummy_addresses()?;
        for s in self.owned(&addresses, &node_ips)?.values() {
            self.ipvs.delete_service(s)?;
        }
        self.host.delete_dummy()?;
        if self.nft.table_exists("ip", ipvs::TABLE)? {
            self.nft
                .apply(&format!("delete table ip {}\n", ipvs::TABLE))?;
        }
        self.applied = None;
        self.applied_rules = None;
        Ok(())
    }
}

impl IpvsBackend {
    /// Every owned virtual server against the wanted ones.
    fn sync_all(
        &mut self,
        want: &IpvsState,
        have_addresses: &BTreeSet<Ipv4Addr>,
        node_ips: &[Ipv4Addr],
    ) -> Result<usize, BackendError> {
        let mut addresses = have_addresses.clone();
        addresses.extend(want.addresses.iter().copied());
        let mut have = self.owned(&addresses, node_ips)?;
        let mut written = 0;
        for (k, v) in &want.services {
            let key = (k.address, protocol_number(k.protocol), k.port);
            written += usize::from(self.sync_one(k, v, have.remove(&key))?);
        }
        for stale in have.values() {
            self.ipvs.delete_service(stale)?;
            written += 1;
        }
        Ok(written)
    }

    /// Only the virtual servers that changed since the last sync, and draining ones.
    fn sync_changed(&mut self, want: &IpvsState) -> Result<usize, BackendError> {
        let applied = self.applied.take().unwrap_or_default();
        let mut keys: BTreeSet<VirtualKey> = std::mem::take(&mut self.draining);
        for (k, v) in &want.services {
            if applied.services.get(k) != Some(v) {
                keys.insert(*k);
            }
        }
        let mut written = 0;
        for (k, v) in applied
            .services
            .iter()
            .filter(|(k, _)| !want.services.contains_key(k))
        {
            self.ipvs.delete_service(&self.virtual_server(k, v))?;
            written += 1;
        }
        if keys.is_empty() {
            return Ok(written);
        }
        let mut have: BTreeMap<(Ipv4Addr, u8, u16), VirtualServer> = self
            .ipvs
            .services()?
            .into_iter()
            .map(|s| ((s.address, s.protocol, s.port), s))
            .collect();
        for k in keys {
            if let Some(v) = want.services.get(&k) {
                let key = (k.address, protocol_number(k.protocol), k.port);
                written += usize::from(self.sync_one(&k, v, have.remove(&key))?);
            }
        }
        Ok(written)
    }

    /// Brings one virtual server to `v`; whether anything was written.
    fn sync_one(
        &mut self,
        k: &VirtualKey,
        v: &Virtual,
        have: Option<VirtualServer>,
    ) -> Result<bool, BackendError> {
        let vs = self.virtual_server(k, v);
        let (current, wrote) = match have {
            None => {
                self.ipvs.add_service(&vs)?;
                (Vec::new(), true)
            }
            Some(h) if h != vs => {
                self.ipvs.update_service(&vs)?;
                (self.ipvs.real_servers(&vs)?, true)
            }
            Some(_) => (self.ipvs.real_servers(&vs)?, false),
        };
        Ok(self.sync_real_servers(k, &vs, v, current)? || wrote)
    }

    fn sync_real_servers(
        &mut self,
        k: &VirtualKey,
        vs: &VirtualServer,
        v: &Virtual,
        current: Vec<RealServer>,
    ) -> Result<bool, BackendError> {
        let mut wrote = false;
        let mut present = BTreeSet::new();
        for r in current {
            present.insert((r.address, r.port));
            let wanted = v.real_servers.contains(&(r.address, r.port));
            if wanted && r.weight == 0 {
                self.ipvs
                    .update_real_server(vs, &RealServer { weight: 1, ..r })?;
                wrote = true;
            } else if !wanted && r.active_connections + r.inactive_connections > 0 {
                if r.weight != 0 {
                    self.ipvs
                        .update_real_server(vs, &RealServer { weight: 0, ..r })?;
                    wrote = true;
                }
                self.draining.insert(*k);
            } else if !wanted {
                self.ipvs.delete_real_server(vs, &r)?;
                wrote = true;
            }
        }
        for (address, port) in v.real_servers.difference(&present) {
            let r = RealServer {
                address: *address,
                port: *port,
                weight: 1,
                active_connections: 0,
                inactive_connections: 0,
            };
            // As kube-proxy: a real server the kernel refuses (a broadcast address in a
            // slice, say) is left out with a warning, not the end of the whole sync. A
            // full sync tries it again.
            match self.ipvs.add_real_server(vs, &r) {
                Ok(()) => wrote = true,
                Err(e) => self.warnings.push(format!("{e}; left out")),
            }
        }
        Ok(wrote)
    }
}
