//! Building a [`ClusterZone`] from the compact objects of [`crate::input`]. Every name is
//! computed the way CoreDNS computes it per query: a service or endpoint name stands for
//! a list of targets (address, port, SRV target name), and its A, AAAA and SRV records are
//! derived from that list (`findServices` and `plugin.A`/`AAAA`/`SRV`). Names are handled
//! as lower-case wire bytes and rendered once ([`super::render`]); a rebuild reuses the
//! rendered names of every Service whose inputs did not change.

use std::collections::hash_map::DefaultHasher;
use std::collections::{HashMap, HashSet};
use std::hash::{Hash, Hasher};
use std::net::IpAddr;
use std::sync::Arc;

use hickory_proto::rr::rdata::{NS, SOA, SRV, TXT};
use hickory_proto::rr::{Name, RData, Record, RecordType};
use hickory_proto::serialize::binary::{BinDecodable, BinDecoder};
use k8s_openapi::api::core::v1::{Namespace, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;

use super::render::{render_alone, Renderer};
use super::{wire_key, ClusterZone, Fragment, Kind, Node, ZoneConfig, ZoneError};
use crate::input::{namespace_name, PortInfo, ServiceInfo, ServiceKind, SliceInfo};

/// The version of the Kubernetes DNS schema, served as TXT at `dns-version.<domain>`.
const DNS_SCHEMA_VERSION: &str = "1.1.0";
/// TTL of the schema version record (CoreDNS's).
const SCHEMA_TTL: u32 = 28_800;
/// Upper bound of the SOA record's own TTL (CoreDNS's).
const MAX_SOA_TTL: u32 = 300;

/// An object, or part of one, left out of the zone.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RecordError {
    #[error("service {namespace}/{name}: {what} {value:?} is not a valid DNS name: {reason}")]
    Service {
        namespace: String,
        name: String,
        what: &'static str,
        value: String,
        reason: String,
    },
    #[error("service {namespace}/{name}: its records do not fit in a DNS message: {reason}")]
    Render {
        namespace: String,
        name: String,
        reason: String,
    },
    #[error("namespace {name:?} is not a valid DNS label: {reason}")]
    Namespace { name: String, reason: String },
}

/// `label` + `suffix` in wire form, lower case; labels of 1 to 63 bytes without dots,
/// names of at most 255.
pub(super) fn prepend(label: &str, suffix: &[u8]) -> Result<Vec<u8>, String> {
    let bytes = label.as_bytes();
    if bytes.is_empty() || bytes.len() > 63 || bytes.contains(&b'.') {
        return Err("labels are 1 to 63 characters without dots".to_string());
    }
    if 1 + bytes.len() + suffix.len() > 255 {
        return Err("names are at most 255 bytes".to_string());
    }
    let mut wire = Vec::with_capacity(1 + bytes.len() + suffix.len());
    wire.push(bytes.len() as u8);
    wire.extend(bytes.iter().map(u8::to_ascii_lowercase));
    wire.extend_from_slice(suffix);
    Ok(wire)
}

/// The name of wire bytes made by [`prepend`].
pub(super) fn name_of(wire: &[u8]) -> Result<Name, String> {
    let mut name = Name::read(&mut BinDecoder::new(wire)).map_err(|e| e.to_string())?;
    name.set_fqdn(true);
    Ok(name)
}

fn addr_record(owner: &Name, ip: IpAddr, ttl: u32) -> Record {
    let data = match ip {
        IpAddr::V4(v4) => RData::A(v4.into()),
        IpAddr::V6(v6) => RData::AAAA(v6.into()),
    };
    Record::from_rdata(owner.clone(), ttl, data)
}

/// `10-244-1-5`, or for IPv6 the address with `-` for `:` (and a trailing `0` when it
/// would end in `-`), as CoreDNS's `endpointHostname`.
pub(super) fn dashed(ip: IpAddr) -> String {
    let text = ip.to_string();
    match ip {
        IpAddr::V4(_) => text.replace('.', "-"),
        IpAddr::V6(_) => {
            let mut d = text.replace(':', "-");
            if d.ends_with('-') {
                d.push('0');
            }
            d
        }
    }
}

/// One of CoreDNS's `msg.Service` entries: an address, a port (-1: none), the port's
/// name and protocol, and the name an SRV record points at (indexes into [`Targets`]).
#[derive(Debug, Clone, Copy)]
struct Target {
    ip: IpAddr,
    port: i32,
    port_key: usize,
    host: usize,
}

/// The targets of one service, with the names and port keys they refer to.
#[derive(Default)]
struct Targets {
    /// SRV target names: wire form and name.
    hosts: Vec<(Vec<u8>, Name)>,
    host_index: HashMap<Vec<u8>, usize>,
    /// Lower-case (port name, protocol).
    port_keys: Vec<(String, String)>,
    list: Vec<Target>,
}

impl Targets {
    fn host(&mut self, wire: Vec<u8>) -> Result<usize, String> {
        if let Some(i) = self.host_index.get(&wire) {
            return Ok(*i);
        }
        let name = name_of(&wire)?;
        self.hosts.push((wire.clone(), name));
        self.host_index.insert(wire, self.hosts.len() - 1);
        Ok(self.hosts.len() - 1)
    }

    fn push(&mut self, ip: IpAddr, port: &PortInfo, host: usize) {
        let key = (
            port.name.to_ascii_lowercase(),
            port.protocol.to_ascii_lowercase(),
        );
        let port_key = match self.port_keys.iter().position(|k| *k == key) {
            Some(i) => i,
            None => {
                self.port_keys.push(key);
                self.port_keys.len() - 1
            }
        };
        self.list.push(Target {
            ip,
            port: port.port,
            port_key,
            host,
        });
    }
}

/// The ports of a slice or service, or CoreDNS's `-1` sentinel when it has none (the
/// name still answers A, without SRV records).
fn ports_or_sentinel(ports: &[PortInfo]) -> Vec<PortInfo> {
    if ports.is_empty() {
        vec![PortInfo {
            name: String::new(),
            protocol: String::new(),
            port: -1,
        }]
    } else {
        ports.to_vec()
    }
}

/// The inputs a service's names depend on.
fn fingerprint(svc: &ServiceInfo, slices: &[&SliceInfo]) -> u64 {
    let mut h = DefaultHasher::new();
    svc.hash(&mut h);
    slices.hash(&mut h);
    h.finish()
}

/// A name of the zone with its node.
type Entry = (Arc<[u8]>, Arc<Node>);

pub(super) struct Builder<'c> {
    pub(super) config: &'c ZoneConfig,
    pub(super) origin: Name,
    pub(super) origin_wire: Vec<u8>,
    pub(super) svc_wire: Vec<u8>,
    pub(super) renderer: Renderer,
    pub(super) nodes: HashMap<Arc<[u8]>, Arc<Node>>,
    pub(super) fragments: Vec<Arc<Fragment>>,
    /// Where the walk through the previous zone's fragments is.
    pub(super) cursor: usize,
    pub(super) warnings: Vec<RecordError>,
    pub(super) empty: Arc<Node>,
}

impl Builder<'_> {
    pub(super) fn insert(&mut self, wire: Vec<u8>, node: Arc<Node>) -> Entry {
        let key: Arc<[u8]> = wire.into();
        self.nodes.insert(key.clone(), node.clone());
        (key, node)
    }

    /// A, AAAA and SRV of a name from its targets: addresses once each in order; SRV per
    /// distinct (target, port) with priority 0 and weight `100 / targets` (at least 1,
    /// over every target, as CoreDNS sums weights before dropping duplicates); the
    /// targets' addresses in the additional section.
    fn node(&mut self, owner: &Name, subset: &[Target], t: &Targets) -> Result<Node, String> {
        let ttl = self.config.ttl;
        let (mut a, mut aaaa, mut srv, mut extra) =
            (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        let (mut seen_ips, mut seen_srv, mut seen_extra) =
            (HashSet::new(), HashSet::new(), HashSet::new());
        // CoreDNS: floor(100 / (100 * n) * 100) in float64.
        let weight = ((100.0 / (100.0 * subset.len() as f64)) * 100.0).floor() as u16;
        for target in subset {
            if seen_ips.insert(target.ip) {
                let record = addr_record(owner, target.ip, ttl);
                if target.ip.is_ipv4() {
                    a.push(record)
                } else {
                    aaaa.push(record)
                }
            }
            let Ok(port) = u16::try_from(target.port) else {
                continue;
            };
            let host = &t.hosts[target.host].1;
            if seen_srv.insert((target.host, port)) {
                let data = RData::SRV(SRV::new(0, weight.max(1), port, host.clone()));
                srv.push(Record::from_rdata(owner.clone(), ttl, data));
            }
            if seen_extra.insert((target.host, target.ip)) {
                extra.push(addr_record(host, target.ip, ttl));
            }
        }
        let sets = [
            (RecordType::A, a, vec![]),
            (RecordType::AAAA, aaaa, vec![]),
            (RecordType::SRV, srv, extra),
        ];
        self.static_node(owner, sets)
    }

    pub(super) fn static_node<const N: usize>(
        &mut self,
        owner: &Name,
        sets: [(RecordType, Vec<Record>, Vec<Record>); N],
    ) -> Result<Node, String> {
        let mut chunks = Vec::new();
        for (rtype, records, extra) in sets.iter().filter(|s| !s.1.is_empty()) {
            let chunk = self.renderer.render(owner, *rtype, records, extra);
            chunks.push((u16::from(*rtype), chunk.map_err(|e| e.to_string())?));
        }
        Ok(Node {
            kind: Kind::Static,
            chunks: chunks.into(),
            alias: None,
            sig: 0,
        })
    }
}

impl Builder<'_> {
    /// The service's names, reused from `previous` when its inputs are unchanged. Both
    /// this zone's services and the previous fragments are in name order, so finding the
    /// previous fragment is a walk.
    fn add_service(
        &mut self,
        svc: &ServiceInfo,
        slices: &[&SliceInfo],
        previous: Option<&ClusterZone>,
    ) {
        let fingerprint = fingerprint(svc, slices);
        let old = previous.map_or(&[][..], |p| &p.fragments[..]);
        let key = (svc.namespace.as_str(), svc.name.as_str());
        while old
            .get(self.cursor)
            .is_some_and(|f| (f.namespace.as_str(), f.name.as_str()) < key)
        {
            self.cursor += 1;
        }
        let reused = old.get(self.cursor).filter(|f| {
            (f.namespace.as_str(), f.name.as_str()) == key && f.fingerprint == fingerprint
        });
        let fragment = match reused {
            Some(f) => {
                for (k, n) in &f.nodes {
                    self.nodes.insert(k.clone(), n.clone());
                }
                f.clone()
            }
            None => Arc::new(self.service_fragment(svc, slices, fingerprint)),
        };
        self.warnings.extend(fragment.warnings.iter().cloned());
        self.fragments.push(fragment);
    }

    fn service_fragment(
        &mut self,
        svc: &ServiceInfo,
        slices: &[&SliceInfo],
        fingerprint: u64,
    ) -> Fragment {
        let mut f = Fragment {
            namespace: svc.namespace.clone(),
            name: svc.name.clone(),
            fingerprint,
            nodes: Vec::new(),
            warnings: Vec::new(),
        };
        let warn = |what, value: &str, reason| RecordError::Service {
            namespace: svc.namespace.clone(),
            name: svc.name.clone(),
            what,
            value: value.to_string(),
            reason,
        };
        let base = prepend(&svc.namespace, &self.svc_wire).and_then(|ns| prepend(&svc.name, &ns));
        let base = match base.and_then(|w| Ok((name_of(&w)?, w))) {
            Ok(base) => base,
            Err(reason) => {
                f.warnings.push(warn("name", &svc.name, reason));
                return f;
            }
        };
        if let ServiceKind::ExternalName(target) = &svc.kind {
            match self.external(&base, target) {
                Ok(node) => f.nodes.extend(node),
                Err(reason) => f.warnings.push(warn("externalName", target, reason)),
            }
            return f;
        }
        let mut endpoints = Targets::default();
        for (label, reason) in endpoint_targets(&base.1, slices, &mut endpoints) {
            f.warnings.push(warn("endpoint hostname", &label, reason));
        }
        if let Err(reason) = self.service_nodes(svc, &base, &endpoints, &mut f) {
            f.warnings.push(RecordError::Render {
                namespace: svc.namespace.clone(),
                name: svc.name.clone(),
                reason,
            });
        }
        f
    }

    /// The service name, its port names and its endpoint names.
    fn service_nodes(
        &mut self,
        svc: &ServiceInfo,
        (base, base_wire): &(Name, Vec<u8>),
        endpoints: &Targets,
        f: &mut Fragment,
    ) -> Result<(), String> {
        let own;
        let targets = match &svc.kind {
            ServiceKind::ClusterIp(ips) => {
                let mut t = Targets::default();
                let host = t.host(base_wire.clone())?;
                for port in &ports_or_sentinel(&svc.ports) {
                    ips.iter().for_each(|ip| t.push(*ip, port, host));
                }
                own = t;
                &own
            }
            _ => endpoints,
        };
        if !targets.list.is_empty() {
            let node = self.node(base, &targets.list, targets)?;
            f.nodes.push(self.insert(base_wire.clone(), Arc::new(node)));
            for (i, (port, proto)) in targets
                .port_keys
                .iter()
                .enumerate()
                .filter(|(_, k)| !k.0.is_empty())
            {
                let subset: Vec<Target> = targets
                    .list
                    .iter()
                    .filter(|t| t.port_key == i)
                    .copied()
                    .collect();
                let Ok(wire) = prepend(&format!("_{proto}"), base_wire)
                    .and_then(|w| prepend(&format!("_{port}"), &w))
                else {
                    continue;
                };
                let node = self.node(&name_of(&wire)?, &subset, targets)?;
                f.nodes.push(self.insert(wire, Arc::new(node)));
            }
        }
        for (host, (wire, name)) in endpoints.hosts.iter().enumerate() {
            let subset: Vec<Target> = endpoints
                .list
                .iter()
                .filter(|t| t.host == host)
                .copied()
                .collect();
            let node = self.node(name, &subset, endpoints)?;
            f.nodes.push(self.insert(wire.clone(), Arc::new(node)));
        }
        Ok(())
    }

    /// An ExternalName service: a CNAME, unless the target is an address (which CoreDNS
    /// leaves out) or the name itself.
    fn external(
        &mut self,
        (base, wire): &(Name, Vec<u8>),
        target: &str,
    ) -> Result<Option<Entry>, String> {
        if target.is_empty() || target.parse::<IpAddr>().is_ok() {
            return Ok(None);
        }
        let fqdn = format!("{}.", target.trim_end_matches('.').to_ascii_lowercase());
        let to = Name::from_ascii(&fqdn).map_err(|e| e.to_string())?;
        let node = if &to == base {
            self.empty.clone()
        } else {
            Arc::new(Node {
                kind: Kind::Alias,
                chunks: Box::new([]),
                alias: Some(to),
                sig: 0,
            })
        };
        Ok(Some(self.insert(wire.clone(), node)))
    }
}

/// Every ready endpoint address of the slices with each slice port, named
/// `<hostname or dashed address>.<service>`; the hostnames that are not DNS labels.
fn endpoint_targets(
    base: &[u8],
    slices: &[&SliceInfo],
    out: &mut Targets,
) -> Vec<(String, String)> {
    let mut bad = Vec::new();
    for slice in slices {
        let ports = ports_or_sentinel(&slice.ports);
        for ep in &slice.endpoints {
            for ip in &ep.addresses {
                let label = ep.hostname.clone().unwrap_or_else(|| dashed(*ip));
                match prepend(&label, base).and_then(|w| out.host(w)) {
                    Ok(host) => ports.iter().for_each(|p| out.push(*ip, p, host)),
                    Err(reason) => bad.push((label, reason)),
                }
            }
        }
    }
    bad
}

impl Builder<'_> {
    /// Names that exist without a service behind them.
    fn add_fixed(
        &mut self,
        namespaces: &HashSet<String>,
        ns_ips: &[IpAddr],
        soa: &Record,
    ) -> Result<(), String> {
        let ttl = self.config.ttl;
        let origin = self.origin.clone();
        let ns_wire = prepend("ns", &prepend("dns", &self.origin_wire)?)?;
        let ns_name = name_of(&ns_wire)?;
        let ns = Record::from_rdata(origin.clone(), ttl, RData::NS(NS(ns_name.clone())));
        let glue: Vec<Record> = ns_ips
            .iter()
            .map(|ip| addr_record(&ns_name, *ip, ttl))
            .collect();
        let ns_set = if ns_ips.is_empty() { vec![] } else { vec![ns] };
        let apex = self.static_node(
            &origin,
            [
                (RecordType::SOA, vec![soa.clone()], vec![]),
                (RecordType::NS, ns_set, glue.clone()),
            ],
        )?;
        self.insert(self.origin_wire.clone(), Arc::new(apex));
        let (v4, v6): (Vec<Record>, Vec<Record>) = glue
            .into_iter()
            .partition(|r| r.record_type() == RecordType::A);
        let node = self.static_node(
            &ns_name,
            [(RecordType::A, v4, vec![]), (RecordType::AAAA, v6, vec![])],
        )?;
        self.insert(ns_wire, Arc::new(node));
        let version_wire = prepend("dns-version", &self.origin_wire)?;
        let version = name_of(&version_wire)?;
        let txt = RData::TXT(TXT::new(vec![DNS_SCHEMA_VERSION.to_string()]));
        let record = Record::from_rdata(version.clone(), SCHEMA_TTL, txt);
        let node = self.static_node(&version, [(RecordType::TXT, vec![record], vec![])])?;
        self.insert(version_wire, Arc::new(node));
        let pod_wire = prepend("pod", &self.origin_wire)?;
        for (kind, wire) in [("svc", self.svc_wire.clone()), ("pod", pod_wire)] {
            self.insert(wire.clone(), self.empty.clone());
            for ns in namespaces {
                match prepend(ns, &wire) {
                    Ok(w) => drop(self.insert(w, self.empty.clone())),
                    Err(reason) if kind == "svc" => self.warnings.push(RecordError::Namespace {
                        name: ns.clone(),
                        reason,
                    }),
                    Err(_) => {}
                }
            }
        }
        Ok(())
    }
}
/// The zone's SOA as CoreDNS writes it.
fn soa_record(origin: &Name, ttl: u32, serial: u32) -> Result<Record, String> {
    let wire = wire_key(origin);
    let mname = name_of(&prepend("ns", &prepend("dns", &wire)?)?)?;
    let rname = name_of(&prepend("hostmaster", &wire)?)?;
    let soa = SOA::new(mname, rname, serial, 7200, 1800, 86_400, ttl);
    Ok(Record::from_rdata(
        origin.clone(),
        ttl.min(MAX_SOA_TTL),
        RData::SOA(soa),
    ))
}

fn origin_of(domain: &str) -> Result<Name, String> {
    let trimmed = domain.trim_end_matches('.').to_ascii_lowercase();
    if trimmed.is_empty() {
        return Err("empty".to_string());
    }
    Name::from_ascii(format!("{trimmed}.")).map_err(|e| e.to_string())
}

/// The ClusterIPs of `kube-system/kube-dns`, the conventional cluster DNS service.
fn kube_dns_ips(services: &[&ServiceInfo]) -> Vec<IpAddr> {
    let dns = services
        .iter()
        .find(|s| s.namespace == "kube-system" && s.name == "kube-dns");
    match dns.map(|s| &s.kind) {
        Some(ServiceKind::ClusterIp(ips)) => ips.clone(),
        _ => Vec::new(),
    }
}

fn service_of(s: &SliceInfo) -> (&str, &str) {
    (s.namespace.as_str(), s.service.as_str())
}

fn sorted<'a, T, K: Ord>(
    items: impl IntoIterator<Item = &'a T>,
    key: impl Fn(&'a T) -> K,
) -> Vec<&'a T> {
    let mut v: Vec<&'a T> = items.into_iter().collect();
    v.sort_by_key(|a| key(a));
    v
}

impl ClusterZone {
    /// The zone of these objects. `serial` is the SOA serial (the source uses the time
    /// of the last change, as CoreDNS does). Objects that cannot be named are left out
    /// and listed in [`ClusterZone::warnings`].
    pub fn build<'a>(
        config: &ZoneConfig,
        services: impl IntoIterator<Item = &'a ServiceInfo>,
        slices: impl IntoIterator<Item = &'a SliceInfo>,
        namespaces: impl IntoIterator<Item = &'a str>,
        serial: u32,
    ) -> Result<ClusterZone, ZoneError> {
        build(config, None, services, slices, namespaces, serial)
    }

    /// This zone's successor for new objects, with the same configuration: the names of
    /// services whose inputs did not change, and reverse names whose targets did not,
    /// are taken over as they are instead of being rendered again.
    pub fn rebuild<'a>(
        &self,
        services: impl IntoIterator<Item = &'a ServiceInfo>,
        slices: impl IntoIterator<Item = &'a SliceInfo>,
        namespaces: impl IntoIterator<Item = &'a str>,
        serial: u32,
    ) -> Result<ClusterZone, ZoneError> {
        build(
            &self.config,
            Some(self),
            services,
            slices,
            namespaces,
            serial,
        )
    }

    /// The zone of Kubernetes objects as the API serves them.
    pub fn from_objects(
        config: &ZoneConfig,
        services: &[Service],
        slices: &[EndpointSlice],
        namespaces: &[Namespace],
        serial: u32,
    ) -> Result<ClusterZone, ZoneError> {
        let services: Vec<ServiceInfo> = services
            .iter()
            .filter_map(ServiceInfo::from_service)
            .collect();
        let slices: Vec<SliceInfo> = slices.iter().filter_map(SliceInfo::from_slice).collect();
        let namespaces: Vec<String> = namespaces.iter().filter_map(namespace_name).collect();
        let ns = namespaces.iter().map(String::as_str);
        ClusterZone::build(config, &services, &slices, ns, serial)
    }

    /// An empty zone for the time before the first lists arrived: cluster names that
    /// would be NXDOMAIN get SERVFAIL from the server meanwhile.
    pub fn pending(config: &ZoneConfig) -> Result<ClusterZone, ZoneError> {
        let mut zone = ClusterZone::build(config, [], [], [], 0)?;
        zone.synced = false;
        Ok(zone)
    }
}

fn build<'a>(
    config: &ZoneConfig,
    previous: Option<&ClusterZone>,
    services: impl IntoIterator<Item = &'a ServiceInfo>,
    slices: impl IntoIterator<Item = &'a SliceInfo>,
    namespaces: impl IntoIterator<Item = &'a str>,
    serial: u32,
) -> Result<ClusterZone, ZoneError> {
    let domain_err = |reason| ZoneError::Domain {
        domain: config.domain.clone(),
        reason,
    };
    let origin = origin_of(&config.domain).map_err(domain_err)?;
    let origin_wire = wire_key(&origin);
    let soa = soa_record(&origin, config.ttl, serial).map_err(domain_err)?;
    let soa_wire = render_alone(&soa).map_err(|e| domain_err(e.to_string()))?;
    let services = sorted(services, |s| (s.namespace.as_str(), s.name.as_str()));
    // By service, so each service's slices are a run found by walking along.
    let slices = sorted(slices, |s| {
        (s.namespace.as_str(), s.service.as_str(), s.name.as_str())
    });
    let namespaces: HashSet<String> = namespaces
        .into_iter()
        .map(str::to_ascii_lowercase)
        .collect();
    let ns_ips = if config.ns_ips.is_empty() {
        kube_dns_ips(&services)
    } else {
        config.ns_ips.clone()
    };
    let mut b = Builder {
        config,
        svc_wire: prepend("svc", &origin_wire).map_err(domain_err)?,
        origin: origin.clone(),
        origin_wire: origin_wire.clone(),
        renderer: Renderer::default(),
        nodes: HashMap::with_capacity(previous.map_or(0, ClusterZone::len)),
        fragments: Vec::with_capacity(services.len()),
        cursor: 0,
        warnings: Vec::new(),
        empty: Arc::new(Node {
            kind: Kind::Static,
            chunks: Box::new([]),
            alias: None,
            sig: 0,
        }),
    };
    b.add_fixed(&namespaces, &ns_ips, &soa)
        .map_err(domain_err)?;
    let mut at = 0;
    for svc in &services {
        let key = (svc.namespace.as_str(), svc.name.as_str());
        while slices.get(at).is_some_and(|s| service_of(s) < key) {
            at += 1;
        }
        let run = slices[at..]
            .iter()
            .take_while(|s| service_of(s) == key)
            .count();
        // CoreDNS answers NXDOMAIN for services of a namespace it has not seen.
        if namespaces.contains(svc.namespace.as_str()) {
            b.add_service(svc, &slices[at..at + run], previous);
        }
    }
    b.add_reverse(&services, &slices, previous);
    Ok(ClusterZone {
        config: config.clone(),
        origin,
        origin_wire,
        serial,
        nodes: b.nodes,
        fragments: b.fragments,
        namespaces,
        soa,
        soa_wire,
        warnings: b.warnings,
        synced: true,
    })
}
