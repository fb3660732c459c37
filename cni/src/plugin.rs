//! The CNI operations of the bridge plugin: ADD, DEL, CHECK, STATUS and GC.
//!
//! Host side: the bridge (created when missing, gateway addresses on it when
//! `isGateway`), one veth per attachment named `veth<hash of network, container,
//! ifname>` with the alias `cairn-cni:<network>:<container>:<ifname>` (so DEL works
//! without the netns and GC finds leftovers), attached to the bridge. The veth's peer is
//! created directly inside the pod's namespace with its final name, in the same netlink
//! request, so no half-moved interface can be left behind.

use std::collections::HashSet;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::path::{Path, PathBuf};

use cairn_netlink::{disable_dad, open_netns, Netlink, NetlinkError, NetnsGuard, VethSpec, EEXIST};
use ipnetwork::IpNetwork;
use rscni_plugin::cni::Cni;
use rscni_plugin::error::Error as CniError;
use rscni_plugin::types::{Args, CNIResult, Dns, Interface, IpConfig, Route};

use crate::config::{self, ConfigError, NetConf, Strictness};
use crate::ipam::{Allocation, IpamError, Store};
use crate::masq::{self, MasqError};

/// Error codes of this plugin above the spec's reserved range.
pub const CODE_NETLINK: u32 = 100;
pub const CODE_MASQ: u32 = 101;
pub const CODE_CHECK: u32 = 102;
pub const CODE_DUPLICATE: u32 = 103;
pub const CODE_INTERNAL: u32 = 104;
pub const CODE_REQUESTED_UNAVAILABLE: u32 = 105;

#[derive(Debug, thiserror::Error)]
pub enum PluginError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error(transparent)]
    Ipam(#[from] IpamError),
    #[error(transparent)]
    Netlink(#[from] NetlinkError),
    #[error(transparent)]
    Masq(#[from] MasqError),
    #[error("CNI_NETNS {path}: {source}")]
    Netns { path: PathBuf, source: NetlinkError },
    #[error("missing {0}")]
    MissingEnv(&'static str),
    #[error("start async runtime: {0}")]
    Runtime(std::io::Error),
    #[error("{0}")]
    Check(String),
    #[error("{0}")]
    NotReady(String),
    #[error("{0}")]
    InvalidConfig(String),
    #[error("write {path}: {source}")]
    Sysctl {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{}", .0.iter().map(ToString::to_string).collect::<Vec<_>>().join("; "))]
    Multiple(Vec<PluginError>),
}

impl From<PluginError> for CniError {
    fn from(e: PluginError) -> Self {
        let details = e.to_string();
        match e {
            PluginError::Config(ConfigError::Decode(_)) => CniError::FailedToDecode(details),
            PluginError::Config(ConfigError::Unsupported { .. }) => {
                CniError::UnsupportedNetworkConfiguration(details)
            }
            PluginError::Config(_) | PluginError::InvalidConfig(_) => {
                CniError::InvalidNetworkConfig(details)
            }
            PluginError::Ipam(IpamError::Exhausted(_)) => CniError::TryAgainLater(details),
            PluginError::Ipam(IpamError::RequestedOutOfRange(_)) => {
                CniError::InvalidNetworkConfig(details)
            }
            PluginError::Ipam(IpamError::RequestedUnavailable { .. }) => CniError::Custom(
                CODE_REQUESTED_UNAVAILABLE,
                "requested IP address unavailable".into(),
                details,
            ),
            PluginError::Ipam(IpamError::Duplicate { .. }) => {
                CniError::Custom(CODE_DUPLICATE, "duplicate allocation".into(), details)
            }
            PluginError::Ipam(_) | PluginError::Sysctl { .. } => CniError::IOFailure(details),
            PluginError::Netns { .. } | PluginError::MissingEnv(_) => {
                CniError::InvalidEnvValue(details)
            }
            PluginError::Netlink(_) => {
                CniError::Custom(CODE_NETLINK, "netlink operation failed".into(), details)
            }
            PluginError::Masq(_) => {
                CniError::Custom(CODE_MASQ, "IP masquerade setup failed".into(), details)
            }
            PluginError::Check(_) => CniError::Custom(CODE_CHECK, "check failed".into(), details),
            PluginError::NotReady(_) => CniError::PluginNotAvailable(details),
            PluginError::Runtime(_) | PluginError::Multiple(_) => {
                CniError::Custom(CODE_INTERNAL, "operation failed".into(), details)
            }
        }
    }
}

/// The per-invocation context taken from the environment and stdin.
#[derive(Debug, Clone)]
pub struct Ctx {
    pub id: String,
    pub ifname: String,
    pub netns: Option<PathBuf>,
    pub conf: NetConf,
    /// Addresses asked for: `IP=` in CNI_ARGS, `args.cni.ips`, runtimeConfig `ips`.
    pub requested: Vec<IpAddr>,
}

impl Ctx {
    /// The host end's name: `veth` + 8 hex digits of a hash of the attachment.
    pub fn host_veth(&self) -> String {
        host_veth_name(&self.conf.name, &self.id, &self.ifname)
    }

    fn alias(&self) -> String {
        masq::tag(&self.conf.name, &self.id, &self.ifname)
    }
}

/// The host veth name of an attachment.
pub fn host_veth_name(network: &str, id: &str, ifname: &str) -> String {
    let h = crate::fnv64(&[network, id, ifname]);
    format!("veth{:08x}", (h >> 32) ^ (h & 0xffff_ffff))
}

fn conf_from_args(args: &Args, strict: Strictness) -> Result<NetConf, PluginError> {
    let v = serde_json::to_value(args.config())
        .map_err(|e| PluginError::Config(ConfigError::Decode(e.to_string())))?;
    let raw = config::parse_raw(&v)?;
    Ok(config::resolve(&raw, strict)?)
}

fn ctx_from_args(args: &Args, strict: Strictness) -> Result<Ctx, PluginError> {
    Ok(Ctx {
        id: args
            .container_id()
            .map(|c| c.to_string())
            .ok_or(PluginError::MissingEnv("CNI_CONTAINERID"))?,
        ifname: args
            .ifname()
            .map(|i| i.to_string())
            .ok_or(PluginError::MissingEnv("CNI_IFNAME"))?,
        netns: args.netns().cloned().filter(|p| !p.as_os_str().is_empty()),
        conf: conf_from_args(args, strict)?,
        requested: requested_ips(args)?,
    })
}

/// Parses one requested address (`10.0.0.5` or `10.0.0.5/24`).
fn parse_requested(field: &str, s: &str) -> Result<IpAddr, PluginError> {
    let ip = s.split('/').next().unwrap_or(s).trim();
    ip.parse().map_err(|e| {
        PluginError::InvalidConfig(format!("{field}: {s:?} is not an IP address: {e}"))
    })
}

fn requested_from_list(
    field: &str,
    v: Option<&serde_json::Value>,
) -> Result<Vec<IpAddr>, PluginError> {
    let mut out = Vec::new();
    for item in v.and_then(|v| v.as_array()).into_iter().flatten() {
        let s = item.as_str().ok_or_else(|| {
            PluginError::InvalidConfig(format!("{field}: {item} is not a string"))
        })?;
        out.push(parse_requested(field, s)?);
    }
    Ok(out)
}

/// host-local's static address requests, in its order of precedence: runtimeConfig
/// `ips`, then `args.cni.ips`, then `IP=` (comma-separated) in CNI_ARGS.
fn requested_ips(args: &Args) -> Result<Vec<IpAddr>, PluginError> {
    let conf = args.config();
    let rt = requested_from_list(
        "runtimeConfig.ips",
        conf.runtime_config
            .as_ref()
            .and_then(|r| r.custom.get("ips")),
    )?;
    if !rt.is_empty() {
        return Ok(rt);
    }
    let cni_args = requested_from_list(
        "args.cni.ips",
        conf.args
            .as_ref()
            .and_then(|a| a.get("cni"))
            .and_then(|c| c.get("ips")),
    )?;
    if !cni_args.is_empty() {
        return Ok(cni_args);
    }
    let mut out = Vec::new();
    for kv in args.args().unwrap_or_default().split(';') {
        if let Some(("IP", v)) = kv.split_once('=') {
            for ip in v.split(',').filter(|s| !s.is_empty()) {
                out.push(parse_requested("CNI_ARGS IP", ip)?);
            }
        }
    }
    Ok(out)
}

fn block_on<F: std::future::Future>(f: F) -> Result<F::Output, PluginError> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .enable_time()
        .build()
        .map_err(PluginError::Runtime)?;
    Ok(rt.block_on(f))
}

/// The plugin.
pub struct Bridge;

impl Cni for Bridge {
    fn add(&self, args: Args) -> Result<CNIResult, CniError> {
        let ctx = ctx_from_args(&args, Strictness::Strict)?;
        Ok(block_on(add(&ctx))??)
    }

    fn del(&self, args: Args) -> Result<(), CniError> {
        let ctx = ctx_from_args(&args, Strictness::Lenient)?;
        Ok(block_on(del(&ctx))??)
    }

    fn check(&self, args: Args) -> Result<(), CniError> {
        let ctx = ctx_from_args(&args, Strictness::Lenient)?;
        let prev = args.config().prev_result.clone().ok_or_else(|| {
            PluginError::InvalidConfig("CHECK requires prevResult in the configuration".into())
        })?;
        Ok(block_on(check(&ctx, &prev))??)
    }

    fn status(&self, args: Args) -> Result<(), CniError> {
        let conf = match conf_from_args(&args, Strictness::Strict) {
            Err(PluginError::Config(
                e @ (ConfigError::SubnetFile { .. } | ConfigError::SubnetFileContent { .. }),
            )) => return Err(PluginError::NotReady(e.to_string()).into()),
            other => other?,
        };
        Ok(status(&conf)?)
    }

    fn gc(&self, args: Args) -> Result<(), CniError> {
        let conf = conf_from_args(&args, Strictness::Lenient)?;
        // Without the list every attachment would look stale: refuse rather than wipe.
        let list = args.config().valid_attachments.as_ref().ok_or_else(|| {
            PluginError::InvalidConfig("GC requires cni.dev/valid-attachments".into())
        })?;
        let valid: HashSet<(String, String)> = list
            .iter()
            .map(|a| (a.container_id.clone(), a.ifname.clone()))
            .collect();
        Ok(block_on(gc(&conf, &valid))??)
    }
}

fn netns_err(path: &Path) -> impl FnOnce(NetlinkError) -> PluginError + '_ {
    move |source| PluginError::Netns {
        path: path.to_path_buf(),
        source,
    }
}

/// ADD: allocate, plumb, and on any failure undo everything this call did.
pub async fn add(ctx: &Ctx) -> Result<CNIResult, PluginError> {
    let netns = ctx
        .netns
        .clone()
        .ok_or(PluginError::MissingEnv("CNI_NETNS"))?;
    let netns_file = open_netns(&netns).map_err(netns_err(&netns))?;
    let allocs = {
        let store = Store::open(&ctx.conf.network_dir())?;
        store.allocate_requested(&ctx.id, &ctx.ifname, &ctx.conf.range_sets, &ctx.requested)?
    };
    test_hold("after-ipam");
    match plumb(ctx, &netns, &netns_file, &allocs).await {
        Ok(r) => Ok(r),
        Err(e) => {
            rollback(ctx).await;
            Err(e)
        }
    }
}

/// Crash-test hook: when `CAIRN_CNI_TEST_HOLD` names this step, the plugin writes the
/// file named by `CAIRN_CNI_TEST_HOLD_MARKER` and sleeps, so a test can SIGKILL it at a
/// known point of ADD. Unset in production; costs one environment lookup per step.
fn test_hold(step: &str) {
    if std::env::var_os("CAIRN_CNI_TEST_HOLD").is_some_and(|s| s == step) {
        if let Some(marker) = std::env::var_os("CAIRN_CNI_TEST_HOLD_MARKER") {
            let _ = std::fs::write(marker, step);
        }
        std::thread::sleep(std::time::Duration::from_secs(30));
    }
}

async fn rollback(ctx: &Ctx) {
    if let Ok(host) = Netlink::connect() {
        let _ = host.delete_link_by_name(&ctx.host_veth()).await;
    }
    if ctx.conf.ip_masq {
        let _ = masq::teardown(
            masq::backend(ctx.conf.masq_backend),
            &ctx.conf.name,
            &ctx.id,
            &ctx.ifname,
        );
    }
    if let Ok(store) = Store::open(&ctx.conf.network_dir()) {
        let _ = store.release(&ctx.id, &ctx.ifname);
    }
}

/// Whether bridge address `old` stands in the way of gateway address `new`: any other
/// IPv4 address, or an IPv6 one whose subnet overlaps (link-local ones never).
fn conflicts(old: IpNetwork, new: IpNetwork) -> bool {
    if old.ip() == new.ip() || old.is_ipv6() != new.is_ipv6() || is_link_local(old.ip()) {
        return false;
    }
    old.is_ipv4() || old.contains(new.ip()) || new.contains(old.ip())
}

fn is_link_local(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => v4.is_link_local(),
        IpAddr::V6(v6) => (v6.segments()[0] & 0xffc0) == 0xfe80,
    }
}

fn enable_forwarding(v6: bool) -> Result<(), PluginError> {
    let path = PathBuf::from(if v6 {
        "/proc/sys/net/ipv6/conf/all/forwarding"
    } else {
        "/proc/sys/net/ipv4/ip_forward"
    });
    if std::fs::read_to_string(&path).is_ok_and(|s| s.trim() == "1") {
        return Ok(());
    }
    std::fs::write(&path, "1").map_err(|source| PluginError::Sysctl { path, source })
}

fn default_net(v6: bool) -> IpNetwork {
    if v6 {
        IpNetwork::new(IpAddr::V6(Ipv6Addr::UNSPECIFIED), 0)
    } else {
        IpNetwork::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), 0)
    }
    .unwrap_or_else(|_| IpNetwork::V4(ipnetwork::Ipv4Network::from(Ipv4Addr::UNSPECIFIED)))
}

fn to_ipnet(n: IpNetwork) -> Result<ipnet::IpNet, PluginError> {
    ipnet::IpNet::new(n.ip(), n.prefix())
        .map_err(|e| PluginError::InvalidConfig(format!("address {n}: {e}")))
}

/// The routes the pod gets: the configured ones, then a default route per family through
/// the gateway when `isDefaultGateway` (unless a default route is configured already).
fn pod_routes(conf: &NetConf, allocs: &[Allocation]) -> Vec<(IpNetwork, Option<IpAddr>)> {
    let mut out: Vec<(IpNetwork, Option<IpAddr>)> =
        conf.routes.iter().map(|r| (r.dst, r.gw)).collect();
    if conf.is_default_gateway {
        for v6 in [false, true] {
            let gw = allocs
                .iter()
                .filter(|a| a.address.is_ipv6() == v6)
                .find_map(|a| a.gateway);
            let has_default = conf
                .routes
                .iter()
                .any(|r| r.dst.is_ipv6() == v6 && r.dst.prefix() == 0);
            if let (Some(gw), false) = (gw, has_default) {
                out.push((default_net(v6), Some(gw)));
            }
        }
    }
    out
}

async fn plumb(
    ctx: &Ctx,
    netns: &Path,
    netns_file: &std::fs::File,
    allocs: &[Allocation],
) -> Result<CNIResult, PluginError> {
    let conf = &ctx.conf;
    let host = Netlink::connect()?;
    let br = host
        .ensure_bridge(&conf.bridge, conf.mtu, conf.promisc)
        .await?;
    if conf.is_gateway {
        if allocs.iter().any(|a| a.address.is_ipv6()) {
            disable_dad(&conf.bridge)?;
        }
        let existing = host.addresses(br.index).await?;
        for a in allocs {
            if let Some(gw) = a.gateway {
                let addr = IpNetwork::new(gw, a.address.prefix())
                    .map_err(|e| PluginError::InvalidConfig(format!("gateway {gw}: {e}")))?;
                // As the reference: one IPv4 address per bridge, IPv6 ones only if their
                // subnets do not overlap; a different one is replaced with forceAddress,
                // an error otherwise.
                for old in existing.iter().filter(|o| conflicts(**o, addr)) {
                    if !conf.force_address {
                        return Err(PluginError::InvalidConfig(format!(
                            "bridge {} already has an IP address ({old}) different from {addr}; \
                             set forceAddress to replace it",
                            conf.bridge
                        )));
                    }
                    host.delete_address(br.index, *old).await?;
                }
                host.add_address(br.index, addr).await?;
                enable_forwarding(gw.is_ipv6())?;
            }
        }
    }
    let host_name = ctx.host_veth();
    let alias = ctx.alias();
    let spec = VethSpec {
        host_name: &host_name,
        peer_name: &ctx.ifname,
        mtu: conf.mtu,
        controller: Some(br.index),
        alias: Some(&alias),
    };
    if let Err(e) = host.create_veth(&spec, netns_file).await {
        // A leftover of this very attachment (a crashed ADD) is replaced once.
        let stale = e.errno() == Some(EEXIST)
            && host
                .link_by_name(&host_name)
                .await?
                .is_some_and(|l| l.alias.as_deref() == Some(alias.as_str()));
        if !stale {
            return Err(e.into());
        }
        host.delete_link_by_name(&host_name).await?;
        host.create_veth(&spec, netns_file).await?;
    }
    test_hold("after-veth");
    let hveth = host
        .link_by_name(&host_name)
        .await?
        .ok_or_else(|| NetlinkError::LinkNotFound(host_name.clone()))?;
    if conf.hairpin {
        host.set_hairpin(hveth.index, true).await?;
    }

    let cont = Netlink::connect_in(netns).map_err(netns_err(netns))?;
    if let Some(lo) = cont.link_by_name("lo").await? {
        if !lo.up {
            cont.set_up(lo.index).await?;
        }
    }
    let c = cont.link_by_name(&ctx.ifname).await?.ok_or_else(|| {
        NetlinkError::LinkNotFound(format!("{} in {}", ctx.ifname, netns.display()))
    })?;
    if allocs.iter().any(|a| a.address.is_ipv6()) {
        // As the reference plugin (enabledad defaults to false): no DAD in the pod, so
        // its IPv6 addresses are usable when ADD returns.
        let _guard = NetnsGuard::enter(netns).map_err(netns_err(netns))?;
        disable_dad(&ctx.ifname)?;
    }
    for a in allocs {
        cont.add_address(c.index, a.address).await?;
    }
    cont.set_up(c.index).await?;
    let routes = pod_routes(conf, allocs);
    for (dst, gw) in &routes {
        let gw = gw.or_else(|| {
            allocs
                .iter()
                .filter(|a| a.address.is_ipv6() == dst.is_ipv6())
                .find_map(|a| a.gateway)
        });
        cont.add_route(*dst, gw, c.index).await?;
    }

    test_hold("after-routes");
    if conf.ip_masq {
        let addrs: Vec<IpAddr> = allocs.iter().map(|a| a.address.ip()).collect();
        masq::setup(
            masq::backend(conf.masq_backend),
            &conf.name,
            &ctx.id,
            &ctx.ifname,
            &addrs,
            &conf.masq_exclude,
        )?;
        test_hold("after-masq");
    }

    // The bridge's MAC can change when its first port arrives: read it now.
    let br_now = host.link_by_index(br.index).await?.unwrap_or(br);
    let iface = |name: String, mac: String, sandbox: Option<String>| Interface {
        name,
        mac,
        mtu: None,
        sandbox,
        socket_path: None,
        pci_id: None,
    };
    let mut ips = Vec::new();
    for a in allocs {
        ips.push(IpConfig {
            interface: Some(2),
            address: to_ipnet(a.address)?,
            gateway: a.gateway,
        });
    }
    let mut result_routes = Vec::new();
    for (dst, gw) in routes {
        result_routes.push(Route {
            dst: to_ipnet(dst)?,
            gw,
            mtu: None,
            advmss: None,
            priority: None,
            table: None,
            scope: None,
        });
    }
    Ok(CNIResult {
        interfaces: vec![
            iface(br_now.name.clone(), br_now.mac_string(), None),
            iface(hveth.name.clone(), hveth.mac_string(), None),
            iface(
                ctx.ifname.clone(),
                c.mac_string(),
                Some(netns.display().to_string()),
            ),
        ],
        ips,
        routes: result_routes,
        dns: result_dns(conf),
    })
}

fn result_dns(conf: &NetConf) -> Option<Dns> {
    if let Some(v) = &conf.dns {
        if let Ok(d) = serde_json::from_value::<Dns>(v.clone()) {
            return Some(d);
        }
    }
    let text = std::fs::read_to_string(conf.resolv_conf.as_ref()?).ok()?;
    let mut dns = Dns::default();
    for line in text.lines() {
        let mut w = line.split_whitespace();
        match w.next() {
            Some("nameserver") => dns.nameservers.extend(w.next().map(String::from)),
            Some("domain") => dns.domain = w.next().map(String::from),
            Some("search") => dns.search = Some(w.map(String::from).collect()),
            Some("options") => dns.options = Some(w.map(String::from).collect()),
            _ => {}
        }
    }
    Some(dns)
}

/// DEL: release the addresses, delete the veth pair, remove masquerade rules. Missing
/// pieces are fine; failures are collected and reported together after every step ran.
pub async fn del(ctx: &Ctx) -> Result<(), PluginError> {
    let mut errors = Vec::new();
    match Store::open_existing(&ctx.conf.network_dir()) {
        Ok(Some(store)) => {
            if let Err(e) = store.release(&ctx.id, &ctx.ifname) {
                errors.push(e.into());
            }
        }
        Ok(None) => {}
        Err(e) => errors.push(e.into()),
    }
    match Netlink::connect() {
        Ok(host) => match host.delete_link_by_name(&ctx.host_veth()).await {
            Ok(true) => {}
            Ok(false) => {
                // Not our naming (or already gone): remove the pod side if it is a veth.
                if let Some(ns) = &ctx.netns {
                    if let Ok(cont) = Netlink::connect_in(ns) {
                        match cont.link_by_name(&ctx.ifname).await {
                            Ok(Some(l)) if l.kind.as_deref() == Some("veth") => {
                                if let Err(e) = cont.delete_link(l.index, &ctx.ifname).await {
                                    errors.push(e.into());
                                }
                            }
                            Ok(_) => {}
                            Err(e) => errors.push(e.into()),
                        }
                    }
                }
            }
            Err(e) => errors.push(e.into()),
        },
        Err(e) => errors.push(e.into()),
    }
    if ctx.conf.ip_masq {
        if let Err(e) = masq::teardown(
            masq::backend(ctx.conf.masq_backend),
            &ctx.conf.name,
            &ctx.id,
            &ctx.ifname,
        ) {
            errors.push(e.into());
        }
    }
    match errors.len() {
        0 => Ok(()),
        1 => Err(errors.remove(0)),
        _ => Err(PluginError::Multiple(errors)),
    }
}

/// CHECK: the attachment still looks like `prev` says.
pub async fn check(ctx: &Ctx, prev: &CNIResult) -> Result<(), PluginError> {
    let fail = |m: String| PluginError::Check(m);
    let netns = ctx
        .netns
        .clone()
        .ok_or(PluginError::MissingEnv("CNI_NETNS"))?;
    let host = Netlink::connect()?;
    let br = host
        .link_by_name(&ctx.conf.bridge)
        .await?
        .ok_or_else(|| fail(format!("bridge {} does not exist", ctx.conf.bridge)))?;
    let hname = ctx.host_veth();
    let hveth = host
        .link_by_name(&hname)
        .await?
        .ok_or_else(|| fail(format!("host veth {hname} does not exist")))?;
    if hveth.controller != Some(br.index) {
        return Err(fail(format!(
            "host veth {hname} is not attached to bridge {}",
            ctx.conf.bridge
        )));
    }
    if ctx.conf.hairpin && hveth.hairpin != Some(true) {
        return Err(fail(format!(
            "host veth {hname} does not have hairpin mode on"
        )));
    }
    let cont = Netlink::connect_in(&netns).map_err(netns_err(&netns))?;
    let c = cont.link_by_name(&ctx.ifname).await?.ok_or_else(|| {
        fail(format!(
            "interface {} does not exist in {}",
            ctx.ifname,
            netns.display()
        ))
    })?;
    if !c.up {
        return Err(fail(format!("interface {} is down", ctx.ifname)));
    }
    let pos = prev
        .interfaces
        .iter()
        .position(|i| i.name == ctx.ifname && i.sandbox.is_some())
        .ok_or_else(|| {
            fail(format!(
                "prevResult has no sandbox interface {}",
                ctx.ifname
            ))
        })?;
    let want = &prev.interfaces[pos];
    if !want.mac.is_empty() && !want.mac.eq_ignore_ascii_case(&c.mac_string()) {
        return Err(fail(format!(
            "interface {} has MAC {}, prevResult says {}",
            ctx.ifname,
            c.mac_string(),
            want.mac
        )));
    }
    let have = cont.addresses(c.index).await?;
    let store = Store::open_existing(&ctx.conf.network_dir())?;
    let records = match &store {
        Some(s) => s.records()?,
        None => Vec::new(),
    };
    for ip in &prev.ips {
        if ip.interface.is_some_and(|i| i as usize != pos) {
            continue;
        }
        let found = have
            .iter()
            .any(|h| h.ip() == ip.address.addr() && h.prefix() == ip.address.prefix_len());
        if !found {
            return Err(fail(format!(
                "address {} is missing on {}",
                ip.address, ctx.ifname
            )));
        }
        if !records
            .iter()
            .any(|r| r.ip == ip.address.addr() && r.id == ctx.id)
        {
            return Err(fail(format!(
                "address {} is not allocated to {} in {}",
                ip.address.addr(),
                ctx.id,
                ctx.conf.network_dir().display()
            )));
        }
    }
    for v6 in [false, true] {
        let want: Vec<&Route> = prev
            .routes
            .iter()
            .filter(|r| r.dst.addr().is_ipv6() == v6)
            .collect();
        if want.is_empty() {
            continue;
        }
        let have = cont.routes(v6).await?;
        for r in want {
            let dst = r.dst.trunc();
            let ok = have.iter().any(|h| {
                h.dst.network() == dst.addr()
                    && h.dst.prefix() == dst.prefix_len()
                    && r.gw.is_none_or(|g| h.gateway == Some(g))
            });
            if !ok {
                return Err(fail(format!(
                    "route to {} is missing in {}",
                    r.dst,
                    netns.display()
                )));
            }
        }
    }
    Ok(())
}

/// STATUS: the data directory is writable and every range set has a free address.
pub fn status(conf: &NetConf) -> Result<(), PluginError> {
    let dir = conf.network_dir();
    let not_ready = |m: String| PluginError::NotReady(m);
    std::fs::create_dir_all(&dir)
        .map_err(|e| not_ready(format!("IPAM directory {}: {e}", dir.display())))?;
    let probe = dir.join(format!(".status-{}", std::process::id()));
    std::fs::write(&probe, b"").map_err(|e| {
        not_ready(format!(
            "IPAM directory {} is not writable: {e}",
            dir.display()
        ))
    })?;
    let _ = std::fs::remove_file(&probe);
    let store = Store::open(&dir)?;
    for (i, free) in store.free_counts(&conf.range_sets)?.iter().enumerate() {
        if *free == 0 {
            return Err(not_ready(format!(
                "range set {i} of network {} has no free address",
                conf.name
            )));
        }
    }
    Ok(())
}

/// GC: remove allocations, veths and masquerade rules of attachments not in `valid`.
pub async fn gc(conf: &NetConf, valid: &HashSet<(String, String)>) -> Result<(), PluginError> {
    let mut errors: Vec<PluginError> = Vec::new();
    match Store::open_existing(&conf.network_dir()) {
        Ok(Some(store)) => {
            if let Err(e) = store.gc(valid) {
                errors.push(e.into());
            }
        }
        Ok(None) => {}
        Err(e) => errors.push(e.into()),
    }
    let is_stale = |id: &str, ifname: &str| !valid.contains(&(id.to_string(), ifname.to_string()));
    match Netlink::connect() {
        Ok(host) => match host.links().await {
            Ok(links) => {
                let prefix = format!("cairn-cni:{}:", conf.name);
                for l in links {
                    let Some(rest) = l.alias.as_deref().and_then(|a| a.strip_prefix(&prefix))
                    else {
                        continue;
                    };
                    let Some((id, ifname)) = rest.split_once(':') else {
                        continue;
                    };
                    if is_stale(id, ifname) {
                        if let Err(e) = host.delete_link(l.index, &l.name).await {
                            errors.push(e.into());
                        }
                    }
                }
            }
            Err(e) => errors.push(e.into()),
        },
        Err(e) => errors.push(e.into()),
    }
    if conf.ip_masq {
        if let Err(e) =
            masq::teardown_matching(masq::backend(conf.masq_backend), &conf.name, &is_stale)
        {
            errors.push(e.into());
        }
    }
    match errors.len() {
        0 => Ok(()),
        1 => Err(errors.remove(0)),
        _ => Err(PluginError::Multiple(errors)),
    }
}
