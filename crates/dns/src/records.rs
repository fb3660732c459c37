//! The cluster zone, free of IO: every name CoreDNS's `kubernetes` plugin answers for a
//! set of Services, EndpointSlices and Namespaces, computed once per change so a query is
//! one map lookup. [`ClusterZone::answer`] says what a query gets: records, NODATA,
//! NXDOMAIN, REFUSED (zone transfers) or "not ours" (the server forwards it).
//!
//! Names, as the Kubernetes DNS specification and CoreDNS define them:
//! - `<svc>.<ns>.svc.<domain>`: the ClusterIPs; for a headless service its ready endpoints;
//!   for an ExternalName service a CNAME. SRV: one record per port.
//! - `_<port>._<proto>.<svc>.<ns>.svc.<domain>`: SRV for a named port, addresses of its
//!   targets in the additional section.
//! - `<endpoint>.<svc>.<ns>.svc.<domain>`: an endpoint of any service, named by its
//!   `hostname` or its dashed address (`10-244-1-5`).
//! - `<a-b-c-d>.<ns>.pod.<domain>`: the address itself (`pods insecure`).
//! - reverse names of ClusterIPs and ready endpoint addresses: PTR.
//! - `<domain>` (SOA, NS), `ns.dns.<domain>`, `dns-version.<domain>` (TXT `1.1.0`),
//!   `svc.<domain>`, `pod.<domain>`, `<ns>.svc.<domain>` and `<ns>.pod.<domain>` of
//!   existing namespaces: names that exist, so NODATA for anything they lack.
//!
//! Everything else under the domain is NXDOMAIN (CoreDNS's reading, including the empty
//! non-terminals `_tcp.<svc>…` it treats as endpoint names); reverse names that are not
//! cluster addresses, and reverse names asked for anything but PTR, are forwarded, as
//! kubeadm's Corefile does with `fallthrough in-addr.arpa ip6.arpa`.

mod build;
mod render;
mod reverse;
#[cfg(test)]
mod tests;

use std::collections::{HashMap, HashSet};
use std::net::IpAddr;
use std::sync::Arc;

use hickory_proto::rr::rdata::{A, AAAA, CNAME};
use hickory_proto::rr::{Name, RData, Record, RecordType};

pub use build::RecordError;
pub(crate) use render::Chunk;

/// The cluster domain when none is configured.
pub const DEFAULT_DOMAIN: &str = "cluster.local";
/// CoreDNS's `kubernetes` plugin default TTL.
pub const DEFAULT_TTL: u32 = 5;
/// CNAME hops followed inside the zone (CoreDNS's `maxCnameChainLength`).
const MAX_CNAME_CHAIN: usize = 10;

/// What `<a-b-c-d>.<ns>.pod.<domain>` answers (CoreDNS's `pods` option).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PodMode {
    /// NXDOMAIN (the plugin's default).
    Disabled,
    /// The address the name spells, in any existing namespace (kubeadm's Corefile, and
    /// what the conformance tests query).
    #[default]
    Insecure,
}

/// How the zone is built.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ZoneConfig {
    /// The cluster domain (`cluster.local`).
    pub domain: String,
    /// TTL of every record, and the SOA minimum (negative caching).
    pub ttl: u32,
    pub pods: PodMode,
    /// Addresses of `ns.dns.<domain>` and glue of the apex NS record; when empty, the
    /// ClusterIPs of `kube-system/kube-dns`.
    pub ns_ips: Vec<IpAddr>,
}

impl Default for ZoneConfig {
    fn default() -> ZoneConfig {
        ZoneConfig {
            domain: DEFAULT_DOMAIN.to_string(),
            ttl: DEFAULT_TTL,
            pods: PodMode::default(),
            ns_ips: Vec::new(),
        }
    }
}

/// The zone's configuration was unusable.
#[derive(Debug, thiserror::Error)]
pub enum ZoneError {
    #[error("cluster domain {domain:?} is not a domain name: {reason}")]
    Domain { domain: String, reason: String },
}

/// A positive answer.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Reply {
    pub answers: Vec<Record>,
    pub additionals: Vec<Record>,
    /// The answers end in a CNAME to this name outside the cluster domain (an
    /// ExternalName service): the server resolves it upstream and appends what it gets,
    /// as CoreDNS does, since a stub resolver expects the whole chain.
    pub resolve_upstream: Option<Name>,
}

/// What a query gets from the zone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    Records(Reply),
    /// The name exists without records of the type: NOERROR, SOA in authority.
    NoData,
    /// NXDOMAIN, SOA in authority.
    NxDomain,
    /// AXFR/IXFR of a cluster name, which CoreDNS refuses.
    Refused,
    /// Not a cluster name: forward it.
    NotOurs,
}

/// How a name answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// From its record sets; NODATA for other types.
    Static,
    /// An ExternalName service: a CNAME for every type.
    Alias,
    /// A reverse name: PTR only, anything else is forwarded.
    Reverse,
}

/// One name of the zone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Node {
    pub(crate) kind: Kind,
    /// At most one per type.
    pub(crate) chunks: Box<[(u16, Chunk)]>,
    /// The CNAME target of an alias.
    pub(crate) alias: Option<Name>,
    /// Reverse names: a hash of their PTR targets, to reuse them across rebuilds.
    pub(crate) sig: u64,
}

impl Node {
    pub(crate) fn chunk(&self, rtype: u16) -> Option<&Chunk> {
        self.chunks
            .iter()
            .find(|(t, _)| *t == rtype)
            .map(|(_, c)| c)
    }
}

/// The lower-case wire form of a name (length-prefixed labels, final zero): the key of
/// every map of names here and in the server, which reads it straight off a packet.
pub(crate) fn wire_key(name: &Name) -> Vec<u8> {
    let mut key = Vec::with_capacity(name.len() + 2);
    for label in name.iter() {
        key.push(label.len() as u8);
        key.extend(label.iter().map(u8::to_ascii_lowercase));
    }
    key.push(0);
    key
}

/// The names one Service contributes, kept to be reused as long as its inputs do not
/// change.
#[derive(Debug)]
pub(crate) struct Fragment {
    pub(crate) namespace: String,
    pub(crate) name: String,
    pub(crate) fingerprint: u64,
    pub(crate) nodes: Vec<(Arc<[u8]>, Arc<Node>)>,
    pub(crate) warnings: Vec<RecordError>,
}

/// All names of the cluster, ready to answer.
#[derive(Debug, Clone)]
pub struct ClusterZone {
    pub(crate) config: ZoneConfig,
    /// The domain, lower case, fully qualified.
    pub(crate) origin: Name,
    pub(crate) origin_wire: Vec<u8>,
    pub(crate) serial: u32,
    pub(crate) nodes: HashMap<Arc<[u8]>, Arc<Node>>,
    /// In namespace and name order.
    pub(crate) fragments: Vec<Arc<Fragment>>,
    pub(crate) namespaces: HashSet<String>,
    pub(crate) soa: Record,
    /// The SOA record uncompressed, for the authority section of negative answers.
    pub(crate) soa_wire: Box<[u8]>,
    pub(crate) warnings: Vec<RecordError>,
    pub(crate) synced: bool,
}

/// One step of following a name inside the zone.
enum Step {
    Alias(Record),
    Done(Answer),
}

impl ClusterZone {
    /// The configured domain, lower case and fully qualified.
    pub fn origin(&self) -> &Name {
        &self.origin
    }

    pub fn config(&self) -> &ZoneConfig {
        &self.config
    }

    pub fn serial(&self) -> u32 {
        self.serial
    }

    /// The SOA record that goes in the authority section of negative answers.
    pub fn soa(&self) -> &Record {
        &self.soa
    }

    /// False for a zone made before the API objects were listed: the server answers
    /// SERVFAIL instead of NXDOMAIN then, as CoreDNS does before its caches synced.
    pub fn is_synced(&self) -> bool {
        self.synced
    }

    /// Objects (or parts) that could not be turned into names, for logging.
    pub fn warnings(&self) -> &[RecordError] {
        &self.warnings
    }

    /// How many names the zone holds (including reverse names).
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    pub(crate) fn origin_wire(&self) -> &[u8] {
        &self.origin_wire
    }

    pub(crate) fn origin_labels(&self) -> usize {
        self.origin.iter().count()
    }

    pub(crate) fn soa_wire(&self) -> &[u8] {
        &self.soa_wire
    }

    pub(crate) fn node(&self, key: &[u8]) -> Option<&Node> {
        self.nodes.get(key).map(|n| &**n)
    }

    /// Whether `name` is the domain or under it.
    pub fn contains(&self, name: &Name) -> bool {
        self.origin.zone_of(name)
    }

    /// The answer to a query of `qtype` for `name` (any case).
    pub fn answer(&self, name: &Name, qtype: RecordType) -> Answer {
        match self.step(name, qtype) {
            Step::Done(answer) => answer,
            Step::Alias(cname) if qtype == RecordType::CNAME => Answer::Records(Reply {
                answers: vec![cname],
                ..Reply::default()
            }),
            Step::Alias(cname) => self.chase(cname, qtype),
        }
    }

    /// Follows a CNAME chain inside the zone; a chain leaving it is left to the server.
    fn chase(&self, first: Record, qtype: RecordType) -> Answer {
        let mut reply = Reply::default();
        let mut seen: Vec<Name> = Vec::new();
        let mut alias = first;
        for _ in 0..MAX_CNAME_CHAIN {
            let RData::CNAME(target) = &alias.data else {
                break;
            };
            let target = target.0.to_lowercase();
            reply.answers.push(alias);
            if !self.contains(&target) {
                reply.resolve_upstream = Some(target);
                break;
            }
            if seen.contains(&target) {
                break;
            }
            match self.step(&target, qtype) {
                Step::Alias(next) => {
                    seen.push(target);
                    alias = next;
                }
                Step::Done(Answer::Records(found)) => {
                    reply.answers.extend(found.answers);
                    reply.additionals.extend(found.additionals);
                    break;
                }
                Step::Done(_) => break,
            }
        }
        Answer::Records(reply)
    }

    /// The answer at `name` alone, or the CNAME found there.
    fn step(&self, name: &Name, qtype: RecordType) -> Step {
        let key = wire_key(name);
        let Some(node) = self.node(&key) else {
            return Step::Done(self.answer_missing(name, qtype));
        };
        let decoded = |chunk: &Chunk| match chunk.decode(&key, qtype) {
            Some((answers, additionals)) => Answer::Records(Reply {
                answers,
                additionals,
                resolve_upstream: None,
            }),
            None => Answer::NoData,
        };
        let chunk = node.chunk(u16::from(qtype));
        Step::Done(match node.kind {
            Kind::Reverse => match chunk {
                Some(chunk) if qtype == RecordType::PTR => decoded(chunk),
                _ => Answer::NotOurs,
            },
            _ if matches!(qtype, RecordType::AXFR | RecordType::IXFR) => Answer::Refused,
            Kind::Alias => match &node.alias {
                Some(target) => {
                    let data = RData::CNAME(CNAME(target.clone()));
                    return Step::Alias(Record::from_rdata(
                        name.to_lowercase(),
                        self.config.ttl,
                        data,
                    ));
                }
                None => Answer::NoData,
            },
            Kind::Static => chunk.map_or(Answer::NoData, decoded),
        })
    }

    /// A name the map does not hold: a pod name, NXDOMAIN, or someone else's.
    fn answer_missing(&self, name: &Name, qtype: RecordType) -> Answer {
        if !self.contains(name) {
            return Answer::NotOurs;
        }
        if matches!(qtype, RecordType::AXFR | RecordType::IXFR) {
            return Answer::Refused;
        }
        match self.pod_address(name) {
            Some(ip) => {
                let owner = name.to_lowercase();
                let rdata = match (ip, qtype) {
                    (IpAddr::V4(v4), RecordType::A) => RData::A(A(v4)),
                    (IpAddr::V6(v6), RecordType::AAAA) => RData::AAAA(AAAA(v6)),
                    _ => return Answer::NoData,
                };
                Answer::Records(Reply {
                    answers: vec![Record::from_rdata(owner, self.config.ttl, rdata)],
                    ..Reply::default()
                })
            }
            None => Answer::NxDomain,
        }
    }

    /// The address `<a-b-c-d>.<ns>.pod.<domain>` spells, under `pods insecure`, in an
    /// existing namespace (CoreDNS's `findPods`).
    fn pod_address(&self, name: &Name) -> Option<IpAddr> {
        if self.config.pods != PodMode::Insecure {
            return None;
        }
        if name.iter().count() != self.origin.iter().count() + 3 {
            return None;
        }
        let labels: Vec<&[u8]> = name.iter().take(3).collect();
        let [dashed, namespace, pod] = labels[..] else {
            return None;
        };
        if !pod.eq_ignore_ascii_case(b"pod") {
            return None;
        }
        let namespace = std::str::from_utf8(namespace).ok()?.to_ascii_lowercase();
        if !self.namespaces.contains(&namespace) {
            return None;
        }
        let dashed = std::str::from_utf8(dashed).ok()?;
        let ip = if dashed.matches('-').count() == 3 && !dashed.contains("--") {
            dashed.replace('-', ".")
        } else {
            dashed.replace('-', ":")
        };
        ip.parse().ok()
    }
}
