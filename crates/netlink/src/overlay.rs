//! What the node network controller programs: a vxlan device, routes marked with the
//! controller's own rtnetlink protocol number (so it lists and removes only its own),
//! permanent neighbour entries and vxlan forwarding-database entries.

use std::net::{IpAddr, Ipv4Addr};

use futures::TryStreamExt;
use ipnetwork::Ipv4Network;
use netlink_packet_route::link::{InfoData, InfoVxlan, LinkAttribute, LinkInfo, LinkMessage};
use netlink_packet_route::neighbour::{
    NeighbourAddress, NeighbourAttribute, NeighbourFlags, NeighbourMessage, NeighbourState,
};
use netlink_packet_route::route::{
    RouteAttribute, RouteFlags, RouteHeader, RouteMessage, RouteProtocol, RouteScope, RouteType,
};
use netlink_packet_route::AddressFamily;
use rtnetlink::{LinkUnspec, LinkVxlan, RouteMessageBuilder};

use crate::{errno, req, route_addr, Link, Netlink, NetlinkError, ENOENT, ESRCH};

/// A vxlan device to create.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VxlanSpec {
    pub name: String,
    pub vni: u32,
    /// Source address of the encapsulated packets (the node's IP).
    pub local: Ipv4Addr,
    /// UDP destination port.
    pub port: u16,
    /// The underlay link the tunnel runs over.
    pub underlay_index: u32,
    pub mtu: u32,
    pub mac: [u8; 6],
    /// Learning of remote MACs from received packets (off: the controller fills the FDB).
    pub learning: bool,
}

/// A vxlan device as read back from the kernel.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VxlanLink {
    pub link: Link,
    pub vni: Option<u32>,
    pub local: Option<Ipv4Addr>,
    pub port: Option<u16>,
    pub underlay_index: Option<u32>,
    pub learning: Option<bool>,
}

impl VxlanLink {
    fn from_message(msg: &LinkMessage) -> Self {
        let mut v = VxlanLink {
            link: Link::from_message(msg),
            vni: None,
            local: None,
            port: None,
            underlay_index: None,
            learning: None,
        };
        for attr in &msg.attributes {
            let LinkAttribute::LinkInfo(infos) = attr else {
                continue;
            };
            for info in infos {
                let LinkInfo::Data(InfoData::Vxlan(data)) = info else {
                    continue;
                };
                for d in data {
                    match d {
                        InfoVxlan::Id(id) => v.vni = Some(*id),
                        InfoVxlan::Local(a) => v.local = Some(*a),
                        InfoVxlan::Port(p) => v.port = Some(*p),
                        InfoVxlan::Link(i) => v.underlay_index = Some(*i),
                        InfoVxlan::Learning(l) => v.learning = Some(*l),
                        _ => {}
                    }
                }
            }
        }
        v
    }

    /// Why this device cannot serve as `spec` (None when it can), as flannel checks.
    pub fn incompatibility(&self, spec: &VxlanSpec) -> Option<String> {
        if self.link.kind.as_deref() != Some("vxlan") {
            return Some(format!(
                "it is a {}",
                self.link.kind.as_deref().unwrap_or("link of unknown kind")
            ));
        }
        if self.vni != Some(spec.vni) {
            return Some(format!("VNI {:?} instead of {}", self.vni, spec.vni));
        }
        if self.local != Some(spec.local) {
            return Some(format!("local {:?} instead of {}", self.local, spec.local));
        }
        if self.port.is_some_and(|p| p != spec.port) {
            return Some(format!("port {:?} instead of {}", self.port, spec.port));
        }
        if self
            .underlay_index
            .is_some_and(|i| i != spec.underlay_index)
        {
            return Some(format!(
                "underlay link #{:?} instead of #{}",
                self.underlay_index, spec.underlay_index
            ));
        }
        if self.learning.is_some_and(|l| l != spec.learning) {
            return Some(format!("learning {:?}", self.learning));
        }
        None
    }
}

/// An IPv4 route in the main table, as the controller owns them.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct OwnedRoute {
    pub dst: Ipv4Network,
    pub gateway: Option<Ipv4Addr>,
    pub oif: u32,
    pub onlink: bool,
}

/// A neighbour (ARP) entry.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Neighbour {
    pub ip: IpAddr,
    pub mac: Vec<u8>,
    pub permanent: bool,
}

/// A bridge/vxlan forwarding-database entry.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct FdbEntry {
    pub mac: Vec<u8>,
    /// For a vxlan device: the remote VTEP the MAC is behind.
    pub dst: Option<IpAddr>,
    pub permanent: bool,
}

/// `aa:bb:cc:dd:ee:ff` for a MAC address.
pub fn mac_to_string(mac: &[u8]) -> String {
    mac.iter()
        .map(|b| format!("{b:02x}"))
        .collect::<Vec<_>>()
        .join(":")
}

/// Parses `aa:bb:cc:dd:ee:ff`.
pub fn parse_mac(s: &str) -> Option<[u8; 6]> {
    let mut out = [0u8; 6];
    let mut parts = s.trim().split(':');
    for b in &mut out {
        *b = u8::from_str_radix(parts.next()?, 16).ok()?;
    }
    parts.next().is_none().then_some(out)
}

fn route_message(r: &OwnedRoute, protocol: u8) -> RouteMessage {
    let mut b = RouteMessageBuilder::<Ipv4Addr>::new()
        .destination_prefix(r.dst.network(), r.dst.prefix())
        .output_interface(r.oif)
        .protocol(RouteProtocol::Other(protocol))
        .scope(RouteScope::Universe)
        .kind(RouteType::Unicast);
    if let Some(g) = r.gateway {
        b = b.gateway(g);
    } else {
        b = b.scope(RouteScope::Link);
    }
    if r.onlink {
        b = b.onlink();
    }
    b.build()
}

fn neighbour_ip(a: &NeighbourAddress) -> Option<IpAddr> {
    match a {
        NeighbourAddress::Inet(v4) => Some(IpAddr::V4(*v4)),
        NeighbourAddress::Inet6(v6) => Some(IpAddr::V6(*v6)),
        // Bridge-family (FDB) dumps carry the VTEP address undecoded.
        NeighbourAddress::Other(bytes) => match bytes.len() {
            4 => <[u8; 4]>::try_from(bytes.as_slice())
                .ok()
                .map(|b| IpAddr::V4(Ipv4Addr::from(b))),
            16 => <[u8; 16]>::try_from(bytes.as_slice())
                .ok()
                .map(|b| IpAddr::V6(std::net::Ipv6Addr::from(b))),
            _ => None,
        },
        _ => None,
    }
}

fn neighbour_address(ip: IpAddr) -> NeighbourAddress {
    match ip {
        IpAddr::V4(v4) => NeighbourAddress::Inet(v4),
        IpAddr::V6(v6) => NeighbourAddress::Inet6(v6),
    }
}

impl Netlink {
    /// The vxlan device called `name` (or any link of that name, see `link.kind`).
    pub async fn vxlan_by_name(&self, name: &str) -> Result<Option<VxlanLink>, NetlinkError> {
        let mut stream = self
            .handle
            .link()
            .get()
            .match_name(name.to_string())
            .execute();
        match stream.try_next().await {
            Ok(Some(msg)) => Ok(Some(VxlanLink::from_message(&msg))),
            Ok(None) => Ok(None),
            Err(e) if matches!(errno(&e), Some(crate::ENODEV) | Some(ENOENT)) => Ok(None),
            Err(e) => Err(req("get link", name)(e)),
        }
    }

    /// Creates the vxlan device (up) described by `spec`.
    pub async fn create_vxlan(&self, spec: &VxlanSpec) -> Result<(), NetlinkError> {
        let msg = LinkVxlan::new(&spec.name, spec.vni)
            .dev(spec.underlay_index)
            .local(spec.local)
            .port(spec.port)
            .learning(spec.learning)
            .mtu(spec.mtu)
            .address(spec.mac.to_vec())
            .up()
            .build();
        self.handle
            .link()
            .add(msg)
            .execute()
            .await
            .map_err(req("create vxlan", spec.name.clone()))
    }

    /// Sets the MTU of link `index`.
    pub async fn set_mtu(&self, index: u32, mtu: u32) -> Result<(), NetlinkError> {
        self.handle
            .link()
            .set(LinkUnspec::new_with_index(index).mtu(mtu).build())
            .execute()
            .await
            .map_err(req("set MTU of", format!("link #{index}")))
    }

    /// The link holding address `ip`, if any.
    pub async fn link_holding_address(&self, ip: IpAddr) -> Result<Option<Link>, NetlinkError> {
        let msgs: Vec<_> = self
            .handle
            .address()
            .get()
            .execute()
            .try_collect()
            .await
            .map_err(req("list", "addresses"))?;
        for m in msgs {
            let holds = m.attributes.iter().any(|a| {
                matches!(a, netlink_packet_route::address::AddressAttribute::Address(x) if *x == ip)
            });
            if holds {
                return self.link_by_index(m.header.index).await;
            }
        }
        Ok(None)
    }

    /// The main-table IPv4 routes carrying rtnetlink protocol `protocol`.
    pub async fn owned_routes(&self, protocol: u8) -> Result<Vec<OwnedRoute>, NetlinkError> {
        let msgs: Vec<RouteMessage> = self
            .handle
            .route()
            .get(RouteMessageBuilder::<Ipv4Addr>::new().build())
            .execute()
            .try_collect()
            .await
            .map_err(req("list", "routes"))?;
        let mut out = Vec::new();
        for m in msgs {
            if m.header.protocol != RouteProtocol::Other(protocol) {
                continue;
            }
            let mut table = u32::from(m.header.table);
            let mut dst = None;
            let mut gateway = None;
            let mut oif = 0;
            for a in &m.attributes {
                match a {
                    RouteAttribute::Destination(d) => dst = route_addr(d),
                    RouteAttribute::Gateway(g) => gateway = route_addr(g),
                    RouteAttribute::Oif(i) => oif = *i,
                    RouteAttribute::Table(t) => table = *t,
                    _ => {}
                }
            }
            if table != u32::from(RouteHeader::RT_TABLE_MAIN) {
                continue;
            }
            let base = match dst {
                Some(IpAddr::V4(d)) => d,
                None => Ipv4Addr::UNSPECIFIED,
                Some(IpAddr::V6(_)) => continue,
            };
            let Ok(dst) = Ipv4Network::new(base, m.header.destination_prefix_length) else {
                continue;
            };
            let gateway = match gateway {
                Some(IpAddr::V4(g)) => Some(g),
                _ => None,
            };
            out.push(OwnedRoute {
                dst,
                gateway,
                oif,
                onlink: m.header.flags.contains(RouteFlags::Onlink),
            });
        }
        out.sort();
        Ok(out)
    }

    /// Adds `route` with protocol `protocol`; `replace` swaps an existing route to the same
    /// destination for it (use it only over a route of one's own).
    pub async fn add_owned_route(
        &self,
        route: &OwnedRoute,
        protocol: u8,
        replace: bool,
    ) -> Result<(), NetlinkError> {
        let desc = format!("{} via {:?} dev #{}", route.dst, route.gateway, route.oif);
        let mut request = self.handle.route().add(route_message(route, protocol));
        if replace {
            request = request.replace();
        }
        request.execute().await.map_err(req("add route", desc))
    }

    /// Deletes `route` (protocol `protocol`); `Ok(false)` when it was already gone.
    pub async fn delete_owned_route(
        &self,
        route: &OwnedRoute,
        protocol: u8,
    ) -> Result<bool, NetlinkError> {
        let desc = format!("{} via {:?} dev #{}", route.dst, route.gateway, route.oif);
        match self
            .handle
            .route()
            .del(route_message(route, protocol))
            .execute()
            .await
        {
            Ok(()) => Ok(true),
            Err(e) if matches!(errno(&e), Some(ESRCH) | Some(ENOENT)) => Ok(false),
            Err(e) => Err(req("delete route", desc)(e)),
        }
    }

    async fn neighbour_dump(
        &self,
        family: AddressFamily,
        index: u32,
    ) -> Result<Vec<NeighbourMessage>, NetlinkError> {
        let msgs: Vec<NeighbourMessage> = self
            .handle
            .neighbours()
            .get()
            .set_address_family(family)
            .execute()
            .try_collect()
            .await
            .map_err(req("list neighbours of", format!("link #{index}")))?;
        Ok(msgs
            .into_iter()
            .filter(|m| m.header.ifindex == index)
            .collect())
    }

    /// The IPv4 neighbour entries of link `index`.
    pub async fn neighbours(&self, index: u32) -> Result<Vec<Neighbour>, NetlinkError> {
        let mut out = Vec::new();
        for m in self.neighbour_dump(AddressFamily::Inet, index).await? {
            let mut ip = None;
            let mut mac = Vec::new();
            for a in &m.attributes {
                match a {
                    NeighbourAttribute::Destination(d) => ip = neighbour_ip(d),
                    NeighbourAttribute::LinkLayerAddress(l) => mac = l.clone(),
                    _ => {}
                }
            }
            if let Some(ip) = ip {
                out.push(Neighbour {
                    ip,
                    mac,
                    permanent: m.header.state == NeighbourState::Permanent,
                });
            }
        }
        out.sort();
        Ok(out)
    }

    /// Sets a permanent neighbour entry `ip` → `mac` on link `index` (replacing any).
    pub async fn set_permanent_neighbour(
        &self,
        index: u32,
        ip: IpAddr,
        mac: &[u8],
    ) -> Result<(), NetlinkError> {
        self.handle
            .neighbours()
            .add(index, ip)
            .link_layer_address(mac)
            .state(NeighbourState::Permanent)
            .kind(RouteType::Unicast)
            .replace()
            .execute()
            .await
            .map_err(req(
                "set neighbour",
                format!("{ip} lladdr {} on link #{index}", mac_to_string(mac)),
            ))
    }

    /// Deletes the neighbour entry for `ip` on link `index`; `Ok(false)` when absent.
    pub async fn delete_neighbour(&self, index: u32, ip: IpAddr) -> Result<bool, NetlinkError> {
        let mut msg = NeighbourMessage::default();
        msg.header.family = match ip {
            IpAddr::V4(_) => AddressFamily::Inet,
            IpAddr::V6(_) => AddressFamily::Inet6,
        };
        msg.header.ifindex = index;
        msg.attributes
            .push(NeighbourAttribute::Destination(neighbour_address(ip)));
        match self.handle.neighbours().del(msg).execute().await {
            Ok(()) => Ok(true),
            Err(e) if matches!(errno(&e), Some(ENOENT) | Some(ESRCH)) => Ok(false),
            Err(e) => Err(req("delete neighbour", format!("{ip} on link #{index}"))(e)),
        }
    }

    /// The forwarding-database entries of link `index` (for a vxlan device: MAC → VTEP).
    pub async fn fdb_entries(&self, index: u32) -> Result<Vec<FdbEntry>, NetlinkError> {
        let mut out = Vec::new();
        for m in self.neighbour_dump(AddressFamily::Bridge, index).await? {
            let mut dst = None;
            let mut mac = Vec::new();
            for a in &m.attributes {
                match a {
                    NeighbourAttribute::Destination(d) => dst = neighbour_ip(d),
                    NeighbourAttribute::LinkLayerAddress(l) => mac = l.clone(),
                    _ => {}
                }
            }
            out.push(FdbEntry {
                mac,
                dst,
                permanent: m.header.state == NeighbourState::Permanent,
            });
        }
        out.sort();
        Ok(out)
    }

    /// Sets a permanent FDB entry `mac` → VTEP `dst` on vxlan link `index` (replacing any
    /// entry for `mac`), as `bridge fdb replace MAC dev DEV dst IP self permanent`.
    pub async fn set_fdb(&self, index: u32, mac: &[u8], dst: IpAddr) -> Result<(), NetlinkError> {
        self.handle
            .neighbours()
            .add_bridge(index, mac)
            .flags(NeighbourFlags::Own)
            .state(NeighbourState::Permanent)
            .destination(dst)
            .replace()
            .execute()
            .await
            .map_err(req(
                "set fdb entry",
                format!("{} dst {dst} on link #{index}", mac_to_string(mac)),
            ))
    }

    /// Deletes the FDB entry `mac` (→ `dst`) of link `index`; `Ok(false)` when absent.
    pub async fn delete_fdb(
        &self,
        index: u32,
        mac: &[u8],
        dst: Option<IpAddr>,
    ) -> Result<bool, NetlinkError> {
        let mut msg = NeighbourMessage::default();
        msg.header.family = AddressFamily::Bridge;
        msg.header.ifindex = index;
        msg.header.flags = NeighbourFlags::Own;
        msg.attributes
            .push(NeighbourAttribute::LinkLayerAddress(mac.to_vec()));
        if let Some(dst) = dst {
            msg.attributes
                .push(NeighbourAttribute::Destination(neighbour_address(dst)));
        }
        match self.handle.neighbours().del(msg).execute().await {
            Ok(()) => Ok(true),
            Err(e) if matches!(errno(&e), Some(ENOENT) | Some(ESRCH)) => Ok(false),
            Err(e) => Err(req(
                "delete fdb entry",
                format!("{} on link #{index}", mac_to_string(mac)),
            )(e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn macs_round_trip() {
        let mac = parse_mac("0a:58:c0:a8:00:01").unwrap();
        assert_eq!(mac_to_string(&mac), "0a:58:c0:a8:00:01");
        assert_eq!(parse_mac("0a:58:c0:a8:00"), None);
        assert_eq!(parse_mac("0a:58:c0:a8:00:01:02"), None);
        assert_eq!(parse_mac("zz:58:c0:a8:00:01"), None);
    }
}
