//! Reverse names: PTR records for ClusterIPs and ready endpoint addresses, as CoreDNS's
//! `serviceRecordForIP` gives them. Computed over the whole cluster on every build (an
//! address may be claimed by several services), but a name whose targets did not change
//! is taken over from the previous zone without being rendered again.

use std::collections::hash_map::DefaultHasher;
use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::net::IpAddr;
use std::sync::Arc;

use hickory_proto::rr::rdata::PTR;
use hickory_proto::rr::{RData, Record, RecordType};

use super::build::{dashed, name_of, prepend, Builder};
use super::{ClusterZone, Kind, Node};
use crate::input::{ServiceInfo, ServiceKind, SliceInfo};

/// The reverse name of an address, in wire form, into `wire`.
fn reverse_wire(ip: IpAddr, wire: &mut Vec<u8>) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    wire.clear();
    match ip {
        IpAddr::V4(v4) => {
            for octet in v4.octets().iter().rev() {
                let digits = [octet / 100, octet / 10 % 10, octet % 10];
                let skip = if *octet >= 100 {
                    0
                } else if *octet >= 10 {
                    1
                } else {
                    2
                };
                wire.push(3 - skip as u8);
                wire.extend(digits[skip..].iter().map(|d| b'0' + d));
            }
            wire.extend_from_slice(b"\x07in-addr");
        }
        IpAddr::V6(v6) => {
            for byte in v6.octets().iter().rev() {
                wire.extend_from_slice(&[
                    1,
                    HEX[usize::from(byte & 0x0f)],
                    1,
                    HEX[usize::from(byte >> 4)],
                ]);
            }
            wire.extend_from_slice(b"\x03ip6");
        }
    }
    wire.extend_from_slice(b"\x04arpa\x00");
}

impl Builder<'_> {
    /// PTR records: a ClusterIP names its service (the first in name order); any other
    /// ready endpoint address names its endpoint in every service whose slices list it,
    /// whether or not the Service exists (CoreDNS's `serviceRecordForIP`). A reverse name
    /// whose targets are unchanged is taken over from `previous`.
    pub(super) fn add_reverse(
        &mut self,
        services: &[&ServiceInfo],
        slices: &[&SliceInfo],
        previous: Option<&ClusterZone>,
    ) {
        let mut claims: HashMap<IpAddr, Vec<Claim<'_>>> =
            HashMap::with_capacity(services.len() * 2);
        for svc in services {
            if let ServiceKind::ClusterIp(ips) = &svc.kind {
                for ip in ips {
                    claims
                        .entry(*ip)
                        .or_insert_with(|| vec![Claim::Service(svc)]);
                }
            }
        }
        for slice in slices {
            for ep in &slice.endpoints {
                for ip in &ep.addresses {
                    let list = claims.entry(*ip).or_default();
                    let claim = Claim::Endpoint(slice, ep.hostname.as_deref(), *ip);
                    let listed = list.iter().any(|c| c.identity() == claim.identity());
                    if !list.first().is_some_and(Claim::is_service) && !listed {
                        list.push(claim);
                    }
                }
            }
        }
        let mut key = Vec::with_capacity(80);
        for (ip, list) in &claims {
            reverse_wire(*ip, &mut key);
            let mut h = DefaultHasher::new();
            list.iter()
                .for_each(|c| (c.is_service(), c.identity()).hash(&mut h));
            let sig = h.finish();
            let old = previous.and_then(|p| p.nodes.get_key_value(&key[..]));
            if let Some((k, n)) = old.filter(|(_, n)| n.sig == sig) {
                self.nodes.insert(k.clone(), n.clone());
                continue;
            }
            match self.reverse_node(&key, list, sig) {
                Ok(node) => drop(self.insert(key.clone(), Arc::new(node))),
                Err(e) => tracing::debug!(%ip, error = %e, "no PTR record"),
            }
        }
    }

    fn reverse_node(&mut self, key: &[u8], claims: &[Claim<'_>], sig: u64) -> Result<Node, String> {
        let owner = name_of(key)?;
        let mut records = Vec::with_capacity(claims.len());
        for claim in claims {
            let target = name_of(&claim.wire(&self.svc_wire)?)?;
            records.push(Record::from_rdata(
                owner.clone(),
                self.config.ttl,
                RData::PTR(PTR(target)),
            ));
        }
        let mut node = self.static_node(&owner, [(RecordType::PTR, records, vec![])])?;
        node.kind = Kind::Reverse;
        node.sig = sig;
        Ok(node)
    }
}

/// What a reverse name points at.
#[derive(Debug, Clone, Copy)]
enum Claim<'a> {
    /// A ClusterIP: its service's name.
    Service(&'a ServiceInfo),
    /// A ready endpoint address (slice, hostname, address): the endpoint's name.
    Endpoint(&'a SliceInfo, Option<&'a str>, IpAddr),
}

impl Claim<'_> {
    /// What names the target: (namespace, service, endpoint hostname, address).
    fn identity(&self) -> (&str, &str, Option<&str>, Option<IpAddr>) {
        match self {
            Claim::Service(svc) => (&svc.namespace, &svc.name, None, None),
            Claim::Endpoint(slice, hostname, ip) => {
                let ip = if hostname.is_some() { None } else { Some(*ip) };
                (&slice.namespace, &slice.service, *hostname, ip)
            }
        }
    }

    fn is_service(&self) -> bool {
        matches!(self, Claim::Service(_))
    }

    fn wire(&self, svc_wire: &[u8]) -> Result<Vec<u8>, String> {
        match self {
            Claim::Service(svc) => prepend(&svc.name, &prepend(&svc.namespace, svc_wire)?),
            Claim::Endpoint(slice, hostname, ip) => {
                let base = prepend(&slice.service, &prepend(&slice.namespace, svc_wire)?)?;
                let label = hostname.map_or_else(|| dashed(*ip), str::to_string);
                prepend(&label, &base)
            }
        }
    }
}
