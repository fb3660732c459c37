//! cairn-netlink: small helpers over `rtnetlink` shared by the CNI plugin and the node
//! network controller: entering network namespaces, opening a netlink connection bound to
//! a namespace, and the link/address/route operations a bridge CNI plugin needs.
//!
//! All operations are `async` and expect a Tokio runtime. A connection opened with
//! [`Netlink::connect_in`] stays bound to the namespace it was opened in, whatever the
//! calling thread does afterwards, so one thread can drive the host and a container
//! namespace at the same time.

use std::fs::File;
use std::net::IpAddr;
use std::path::{Path, PathBuf};

use futures::TryStreamExt;
use ipnetwork::IpNetwork;
use netlink_packet_route::address::AddressAttribute;
use netlink_packet_route::link::{
    InfoBridgePort, InfoData, InfoPortData, InfoVeth, LinkAttribute, LinkFlags, LinkInfo,
    LinkMessage,
};
use netlink_packet_route::route::{RouteAddress, RouteAttribute, RouteMessage, RouteProtocol};
use netlink_packet_route::AddressFamily;
use nix::sched::{setns, CloneFlags};
mod dummy;
pub mod overlay;

use rtnetlink::{
    Handle, LinkBridge, LinkBridgePort, LinkMessageBuilder, LinkUnspec, LinkVeth,
    RouteMessageBuilder,
};

/// Errors of this crate; each names the namespace, link or address concerned.
#[derive(Debug, thiserror::Error)]
pub enum NetlinkError {
    #[error("open network namespace {path}: {source}")]
    OpenNetns {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("enter network namespace {path}: {source}")]
    Setns { path: PathBuf, source: nix::Error },
    #[error("open netlink socket: {0}")]
    Socket(std::io::Error),
    #[error("{op} {object}: {source}")]
    Request {
        op: &'static str,
        object: String,
        source: Box<rtnetlink::Error>,
    },
    #[error("write {path}: {source}")]
    Sysctl {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("link {0} not found")]
    LinkNotFound(String),
    #[error("link {name} exists but is a {kind}, not a {want}")]
    WrongKind {
        name: String,
        kind: String,
        want: &'static str,
    },
}

impl NetlinkError {
    /// The errno of a kernel refusal (positive, e.g. `libc::EEXIST` = 17), if this is one.
    pub fn errno(&self) -> Option<i32> {
        match self {
            NetlinkError::Request { source, .. } => errno(source),
            _ => None,
        }
    }
}

/// The errno carried by a netlink error answer, as a positive number.
pub fn errno(e: &rtnetlink::Error) -> Option<i32> {
    match e {
        rtnetlink::Error::NetlinkError(msg) => msg.code.map(|c| c.get().abs()),
        _ => None,
    }
}

pub const ENOENT: i32 = 2;
pub const ESRCH: i32 = 3;
pub const EEXIST: i32 = 17;
pub const ENODEV: i32 = 19;
pub const EADDRNOTAVAIL: i32 = 99;

fn req(
    op: &'static str,
    object: impl Into<String>,
) -> impl FnOnce(rtnetlink::Error) -> NetlinkError {
    let object = object.into();
    move |source| NetlinkError::Request {
        op,
        object,
        source: Box::new(source),
    }
}

/// The calling thread's current network namespace, restored when dropped.
pub struct NetnsGuard {
    orig: File,
}

impl NetnsGuard {
    /// Moves the calling thread into the namespace at `path` (e.g. `/run/netns/x` or
    /// `/proc/PID/ns/net`) until the guard is dropped.
    pub fn enter(path: &Path) -> Result<Self, NetlinkError> {
        let here = Path::new("/proc/thread-self/ns/net");
        let orig = File::open(here).map_err(|source| NetlinkError::OpenNetns {
            path: here.to_path_buf(),
            source,
        })?;
        let target = open_netns(path)?;
        setns(&target, CloneFlags::CLONE_NEWNET).map_err(|source| NetlinkError::Setns {
            path: path.to_path_buf(),
            source,
        })?;
        Ok(Self { orig })
    }
}

impl Drop for NetnsGuard {
    fn drop(&mut self) {
        // Best effort: failing to return to the original namespace cannot be reported
        // from drop; the process is a short-lived plugin or a dedicated thread.
        let _ = setns(&self.orig, CloneFlags::CLONE_NEWNET);
    }
}

/// Turns IPv6 duplicate address detection off for `ifname` in the calling thread's
/// namespace (`accept_dad` and `enhanced_dad` = 0), so its addresses are usable at once.
/// A kernel without IPv6 (no such files) is fine.
pub fn disable_dad(ifname: &str) -> Result<(), NetlinkError> {
    for key in ["accept_dad", "enhanced_dad"] {
        let path = PathBuf::from(format!("/proc/sys/net/ipv6/conf/{ifname}/{key}"));
        match std::fs::write(&path, "0") {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(source) => return Err(NetlinkError::Sysctl { path, source }),
        }
    }
    Ok(())
}

/// Opens a network namespace file (checks that it exists; `setns` checks the type).
pub fn open_netns(path: &Path) -> Result<File, NetlinkError> {
    File::open(path).map_err(|source| NetlinkError::OpenNetns {
        path: path.to_path_buf(),
        source,
    })
}

/// What the plugin needs to know about a link.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Link {
    pub index: u32,
    pub name: String,
    pub mac: Vec<u8>,
    pub mtu: u32,
    pub controller: Option<u32>,
    pub alias: Option<String>,
    pub up: bool,
    pub promisc: bool,
    pub kind: Option<String>,
    /// For a bridge port: whether hairpin mode is on.
    pub hairpin: Option<bool>,
}

impl Link {
    pub(crate) fn from_message(msg: &LinkMessage) -> Self {
        let mut link = Link {
            index: msg.header.index,
            up: msg.header.flags.contains(LinkFlags::Up),
            promisc: msg.header.flags.contains(LinkFlags::Promisc),
            ..Default::default()
        };
        for attr in &msg.attributes {
            match attr {
                LinkAttribute::IfName(n) => link.name = n.clone(),
                LinkAttribute::Address(a) => link.mac = a.clone(),
                LinkAttribute::Mtu(m) => link.mtu = *m,
                LinkAttribute::Controller(c) => link.controller = Some(*c),
                LinkAttribute::IfAlias(a) => link.alias = Some(a.clone()),
                LinkAttribute::LinkInfo(infos) => {
                    for info in infos {
                        match info {
                            LinkInfo::Kind(k) => link.kind = Some(k.to_string()),
                            LinkInfo::PortData(InfoPortData::BridgePort(port)) => {
                                for p in port {
                                    if let InfoBridgePort::HairpinMode(h) = p {
                                        link.hairpin = Some(*h);
                                    }
                                }
                            }
                            _ => {}
                        }
                    }
                }
                _ => {}
            }
        }
        link
    }

    /// The MAC address as `aa:bb:cc:dd:ee:ff`.
    pub fn mac_string(&self) -> String {
        self.mac
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect::<Vec<_>>()
            .join(":")
    }
}

/// A route as read back from the kernel (main table, unicast).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Route {
    pub dst: IpNetwork,
    pub gateway: Option<IpAddr>,
    pub oif: Option<u32>,
}

/// A netlink connection bound to one network namespace.
#[derive(Clone)]
pub struct Netlink {
    handle: Handle,
}

impl Netlink {
    /// Opens a connection in the calling thread's current namespace. Must run inside a
    /// Tokio runtime (the connection task is spawned on it).
    pub fn connect() -> Result<Self, NetlinkError> {
        let (conn, handle, _) = rtnetlink::new_connection().map_err(NetlinkError::Socket)?;
        tokio::spawn(conn);
        Ok(Self { handle })
    }

    /// Opens a connection bound to the namespace at `path`; the calling thread returns
    /// to its own namespace before this returns.
    pub fn connect_in(path: &Path) -> Result<Self, NetlinkError> {
        let _guard = NetnsGuard::enter(path)?;
        Self::connect()
    }

    pub fn handle(&self) -> &Handle {
        &self.handle
    }

    /// The link called `name`, or `None` when there is none.
    pub async fn link_by_name(&self, name: &str) -> Result<Option<Link>, NetlinkError> {
        let mut stream = self
            .handle
            .link()
            .get()
            .match_name(name.to_string())
            .execute();
        match stream.try_next().await {
            Ok(Some(msg)) => Ok(Some(Link::from_message(&msg))),
            Ok(None) => Ok(None),
            Err(e) if matches!(errno(&e), Some(ENODEV) | Some(ENOENT)) => Ok(None),
            Err(e) => Err(req("get link", name)(e)),
        }
    }

    /// The link with index `index`, or `None`.
    pub async fn link_by_index(&self, index: u32) -> Result<Option<Link>, NetlinkError> {
        let mut stream = self.handle.link().get().match_index(index).execute();
        match stream.try_next().await {
            Ok(Some(msg)) => Ok(Some(Link::from_message(&msg))),
            Ok(None) => Ok(None),
            Err(e) if matches!(errno(&e), Some(ENODEV) | Some(ENOENT)) => Ok(None),
            Err(e) => Err(req("get link", format!("#{index}"))(e)),
        }
    }

    /// Every link of the namespace.
    pub async fn links(&self) -> Result<Vec<Link>, NetlinkError> {
        let msgs: Vec<LinkMessage> = self
            .handle
            .link()
            .get()
            .execute()
            .try_collect()
            .await
            .map_err(req("list", "links"))?;
        Ok(msgs.iter().map(Link::from_message).collect())
    }

    /// Returns the bridge `name`, creating it (with `mtu` when given, up, and promiscuous
    /// when asked) if it does not exist. Concurrent creators are tolerated.
    pub async fn ensure_bridge(
        &self,
        name: &str,
        mtu: Option<u32>,
        promisc: bool,
    ) -> Result<Link, NetlinkError> {
        if let Some(link) = self.link_by_name(name).await? {
            if link.kind.as_deref() != Some("bridge") {
                return Err(NetlinkError::WrongKind {
                    name: name.to_string(),
                    kind: link.kind.unwrap_or_else(|| "unknown link".into()),
                    want: "bridge",
                });
            }
            if !link.up || link.promisc != promisc {
                let msg = LinkUnspec::new_with_index(link.index)
                    .up()
                    .promiscuous(promisc);
                self.handle
                    .link()
                    .set(msg.build())
                    .execute()
                    .await
                    .map_err(req("set up", name))?;
            }
            return self
                .link_by_name(name)
                .await?
                .ok_or_else(|| NetlinkError::LinkNotFound(name.to_string()));
        }
        let mut b = LinkBridge::new(name).up().promiscuous(promisc);
        if let Some(mtu) = mtu {
            b = b.mtu(mtu);
        }
        match self.handle.link().add(b.build()).execute().await {
            Ok(()) => {}
            Err(e) if errno(&e) == Some(EEXIST) => {}
            Err(e) => return Err(req("create bridge", name)(e)),
        }
        let link = self
            .link_by_name(name)
            .await?
            .ok_or_else(|| NetlinkError::LinkNotFound(name.to_string()))?;
        // Pin the bridge's (random) MAC: otherwise it follows the lowest port MAC and
        // changes under the pods' ARP caches whenever ports come and go.
        if !link.mac.is_empty() {
            self.handle
                .link()
                .set(
                    LinkUnspec::new_with_index(link.index)
                        .address(link.mac.clone())
                        .build(),
                )
                .execute()
                .await
                .map_err(req("set MAC of", name))?;
        }
        if !link.up || link.promisc != promisc {
            let msg = LinkUnspec::new_with_index(link.index)
                .up()
                .promiscuous(promisc);
            self.handle
                .link()
                .set(msg.build())
                .execute()
                .await
                .map_err(req("set up", name))?;
        }
        Ok(link)
    }

    /// Creates a veth pair in one request: `host_name` here (up, attached to `controller`,
    /// with `alias`), and its peer `peer_name` directly inside the namespace open as
    /// `peer_netns`. Both ends get `mtu` when given.
    pub async fn create_veth(
        &self,
        spec: &VethSpec<'_>,
        peer_netns: &File,
    ) -> Result<(), NetlinkError> {
        use std::os::fd::AsRawFd;
        let mut peer = LinkMessageBuilder::<LinkUnspec>::new()
            .name(spec.peer_name.to_string())
            .setns_by_fd(peer_netns.as_raw_fd());
        if let Some(mtu) = spec.mtu {
            peer = peer.mtu(mtu);
        }
        let mut host = LinkVeth::new(spec.host_name, spec.peer_name)
            .set_info_data(InfoData::Veth(InfoVeth::Peer(peer.build())))
            .up();
        if let Some(mtu) = spec.mtu {
            host = host.mtu(mtu);
        }
        if let Some(c) = spec.controller {
            host = host.controller(c);
        }
        self.handle
            .link()
            .add(host.build())
            .execute()
            .await
            .map_err(req("create veth", spec.host_name))?;
        // The kernel ignores IFLA_IFALIAS when creating a link: set it afterwards.
        if let Some(alias) = spec.alias {
            let link = self
                .link_by_name(spec.host_name)
                .await?
                .ok_or_else(|| NetlinkError::LinkNotFound(spec.host_name.to_string()))?;
            self.handle
                .link()
                .set(
                    LinkUnspec::new_with_index(link.index)
                        .alias(alias.to_string())
                        .build(),
                )
                .execute()
                .await
                .map_err(req("set alias of", spec.host_name))?;
        }
        Ok(())
    }

    /// Sets hairpin mode on bridge port `index`.
    pub async fn set_hairpin(&self, index: u32, on: bool) -> Result<(), NetlinkError> {
        self.handle
            .link()
            .set_port(LinkBridgePort::new(index).hairpin(on).build())
            .execute()
            .await
            .map_err(req("set hairpin on", format!("link #{index}")))
    }

    /// Brings link `index` up.
    pub async fn set_up(&self, index: u32) -> Result<(), NetlinkError> {
        self.handle
            .link()
            .set(LinkUnspec::new_with_index(index).up().build())
            .execute()
            .await
            .map_err(req("set up", format!("link #{index}")))
    }

    /// Deletes the link called `name`; `Ok(false)` when it did not exist.
    pub async fn delete_link_by_name(&self, name: &str) -> Result<bool, NetlinkError> {
        let Some(link) = self.link_by_name(name).await? else {
            return Ok(false);
        };
        self.delete_link(link.index, name).await
    }

    /// Deletes link `index` (`name` is for messages); `Ok(false)` when already gone.
    pub async fn delete_link(&self, index: u32, name: &str) -> Result<bool, NetlinkError> {
        match self.handle.link().del(index).execute().await {
            Ok(()) => Ok(true),
            Err(e) if matches!(errno(&e), Some(ENODEV) | Some(ENOENT)) => Ok(false),
            Err(e) => Err(req("delete link", name)(e)),
        }
    }

    /// Adds `addr` to link `index`; an existing identical address is fine.
    pub async fn add_address(&self, index: u32, addr: IpNetwork) -> Result<(), NetlinkError> {
        match self
            .handle
            .address()
            .add(index, addr.ip(), addr.prefix())
            .execute()
            .await
        {
            Ok(()) => Ok(()),
            Err(e) if errno(&e) == Some(EEXIST) => Ok(()),
            Err(e) => Err(req("add address", format!("{addr} on link #{index}"))(e)),
        }
    }

    /// Removes `addr` from link `index`; `Ok(false)` when it was not there.
    pub async fn delete_address(&self, index: u32, addr: IpNetwork) -> Result<bool, NetlinkError> {
        let msgs: Vec<_> = self
            .handle
            .address()
            .get()
            .set_link_index_filter(index)
            .execute()
            .try_collect()
            .await
            .map_err(req("list addresses of", format!("link #{index}")))?;
        for m in msgs {
            let matches = m.header.index == index
                && m.header.prefix_len == addr.prefix()
                && m.attributes
                    .iter()
                    .any(|a| matches!(a, AddressAttribute::Address(ip) if *ip == addr.ip()));
            if matches {
                match self.handle.address().del(m).execute().await {
                    Ok(()) => return Ok(true),
                    Err(e) if errno(&e) == Some(EADDRNOTAVAIL) => return Ok(false),
                    Err(e) => {
                        return Err(req("delete address", format!("{addr} on link #{index}"))(e))
                    }
                }
            }
        }
        Ok(false)
    }

    /// The addresses on link `index`.
    pub async fn addresses(&self, index: u32) -> Result<Vec<IpNetwork>, NetlinkError> {
        let msgs: Vec<_> = self
            .handle
            .address()
            .get()
            .set_link_index_filter(index)
            .execute()
            .try_collect()
            .await
            .map_err(req("list addresses of", format!("link #{index}")))?;
        let mut out = Vec::new();
        for m in msgs {
            if m.header.index != index {
                continue;
            }
            for a in &m.attributes {
                if let AddressAttribute::Address(ip) = a {
                    if let Ok(n) = IpNetwork::new(*ip, m.header.prefix_len) {
                        out.push(n);
                    }
                }
            }
        }
        Ok(out)
    }

    /// Adds a route to `dst` via `gateway` (or on-link when `None`) out of link `oif`.
    /// An identical existing route is fine.
    pub async fn add_route(
        &self,
        dst: IpNetwork,
        gateway: Option<IpAddr>,
        oif: u32,
    ) -> Result<(), NetlinkError> {
        let msg = route_message(dst, gateway, oif);
        let desc = match gateway {
            Some(gw) => format!("{dst} via {gw} dev #{oif}"),
            None => format!("{dst} dev #{oif}"),
        };
        match self.handle.route().add(msg).execute().await {
            Ok(()) => Ok(()),
            Err(e) if errno(&e) == Some(EEXIST) => Ok(()),
            Err(e) => Err(req("add route", desc)(e)),
        }
    }

    /// The main-table routes of one address family.
    pub async fn routes(&self, v6: bool) -> Result<Vec<Route>, NetlinkError> {
        let filter = if v6 {
            RouteMessageBuilder::<std::net::Ipv6Addr>::new().build()
        } else {
            RouteMessageBuilder::<std::net::Ipv4Addr>::new().build()
        };
        let msgs: Vec<RouteMessage> = self
            .handle
            .route()
            .get(filter)
            .execute()
            .try_collect()
            .await
            .map_err(req("list", "routes"))?;
        let mut out = Vec::new();
        for m in msgs {
            let mut dst: Option<IpAddr> = None;
            let mut gateway = None;
            let mut oif = None;
            let mut table = u32::from(m.header.table);
            for a in &m.attributes {
                match a {
                    RouteAttribute::Destination(d) => dst = route_addr(d),
                    RouteAttribute::Gateway(g) => gateway = route_addr(g),
                    RouteAttribute::Oif(i) => oif = Some(*i),
                    RouteAttribute::Table(t) => table = *t,
                    _ => {}
                }
            }
            if table != 254 {
                continue;
            }
            let base = match (dst, m.header.address_family) {
                (Some(d), _) => d,
                (None, AddressFamily::Inet6) => IpAddr::V6(std::net::Ipv6Addr::UNSPECIFIED),
                (None, _) => IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED),
            };
            if let Ok(dst) = IpNetwork::new(base, m.header.destination_prefix_length) {
                out.push(Route { dst, gateway, oif });
            }
        }
        Ok(out)
    }
}

fn route_addr(a: &RouteAddress) -> Option<IpAddr> {
    match a {
        RouteAddress::Inet(v4) => Some(IpAddr::V4(*v4)),
        RouteAddress::Inet6(v6) => Some(IpAddr::V6(*v6)),
        _ => None,
    }
}

fn route_message(dst: IpNetwork, gateway: Option<IpAddr>, oif: u32) -> RouteMessage {
    match (dst, gateway) {
        (IpNetwork::V4(d), gw) => {
            let mut b = RouteMessageBuilder::<std::net::Ipv4Addr>::new()
                .destination_prefix(d.network(), d.prefix())
                .output_interface(oif)
                .protocol(RouteProtocol::Boot);
            if let Some(IpAddr::V4(g)) = gw {
                b = b.gateway(g);
            }
            b.build()
        }
        (IpNetwork::V6(d), gw) => {
            let mut b = RouteMessageBuilder::<std::net::Ipv6Addr>::new()
                .destination_prefix(d.network(), d.prefix())
                .output_interface(oif)
                .protocol(RouteProtocol::Boot);
            if let Some(IpAddr::V6(g)) = gw {
                b = b.gateway(g);
            }
            b.build()
        }
    }
}

/// A veth pair to create with [`Netlink::create_veth`].
#[derive(Debug, Clone)]
pub struct VethSpec<'a> {
    pub host_name: &'a str,
    pub peer_name: &'a str,
    pub mtu: Option<u32>,
    pub controller: Option<u32>,
    pub alias: Option<&'a str>,
}
