//! ADD: the bridge and its gateway addresses, the veth pair, the pod's addresses and
//! routes, masquerading; undone on failure.

use super::*;

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
pub(super) fn test_hold(step: &str) {
    if std::env::var_os("CAIRN_CNI_TEST_HOLD").is_some_and(|s| s == step) {
        if let Some(marker) = std::env::var_os("CAIRN_CNI_TEST_HOLD_MARKER") {
            let _ = std::fs::write(marker, step);
        }
        std::thread::sleep(std::time::Duration::from_secs(30));
    }
}

pub(super) async fn rollback(ctx: &Ctx) {
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
pub(super) fn conflicts(old: IpNetwork, new: IpNetwork) -> bool {
    if old.ip() == new.ip() || old.is_ipv6() != new.is_ipv6() || is_link_local(old.ip()) {
        return false;
    }
    old.is_ipv4() || old.contains(new.ip()) || new.contains(old.ip())
}

pub(super) fn enable_forwarding(v6: bool) -> Result<(), PluginError> {
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

pub(super) fn default_net(v6: bool) -> IpNetwork {
    if v6 {
        IpNetwork::new(IpAddr::V6(Ipv6Addr::UNSPECIFIED), 0)
    } else {
        IpNetwork::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), 0)
    }
    .unwrap_or_else(|_| IpNetwork::V4(ipnetwork::Ipv4Network::from(Ipv4Addr::UNSPECIFIED)))
}

pub(super) fn to_ipnet(n: IpNetwork) -> Result<ipnet::IpNet, PluginError> {
    ipnet::IpNet::new(n.ip(), n.prefix())
        .map_err(|e| PluginError::InvalidConfig(format!("address {n}: {e}")))
}

/// The routes the pod gets: the configured ones, then a default route per family through
/// the gateway when `isDefaultGateway` (unless a default route is configured already).
pub(super) fn pod_routes(
    conf: &NetConf,
    allocs: &[Allocation],
) -> Vec<(IpNetwork, Option<IpAddr>)> {
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

pub(super) async fn plumb(
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
        bridge_gateways(&host, conf, &br, allocs).await?;
    }
    let hveth = host_veth(ctx, &host, &br, netns_file).await?;
    let routes = pod_routes(conf, allocs);
    let pod_if = pod_interface(ctx, netns, allocs, &routes).await?;
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
    let interfaces = [
        (br_now, None),
        (hveth, None),
        (pod_if, Some(netns.display().to_string())),
    ];
    add_result(conf, interfaces, allocs, routes)
}

/// The gateway addresses on the bridge: as the reference, one IPv4 address per bridge,
/// IPv6 ones only if their subnets do not overlap; a different one is replaced with
/// forceAddress, an error otherwise.
pub(super) async fn bridge_gateways(
    host: &Netlink,
    conf: &NetConf,
    br: &cairn_netlink::Link,
    allocs: &[Allocation],
) -> Result<(), PluginError> {
    if allocs.iter().any(|a| a.address.is_ipv6()) {
        disable_dad(&conf.bridge)?;
    }
    let existing = host.addresses(br.index).await?;
    for a in allocs {
        let Some(gw) = a.gateway else {
            continue;
        };
        let addr = IpNetwork::new(gw, a.address.prefix())
            .map_err(|e| PluginError::InvalidConfig(format!("gateway {gw}: {e}")))?;
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
    Ok(())
}

/// The veth pair, its host end on the bridge and its peer moved into the pod.
pub(super) async fn host_veth(
    ctx: &Ctx,
    host: &Netlink,
    br: &cairn_netlink::Link,
    netns_file: &std::fs::File,
) -> Result<cairn_netlink::Link, PluginError> {
    let host_name = ctx.host_veth();
    let alias = ctx.alias();
    let spec = VethSpec {
        host_name: &host_name,
        peer_name: &ctx.ifname,
        mtu: ctx.conf.mtu,
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
    if ctx.conf.hairpin {
        host.set_hairpin(hveth.index, true).await?;
    }
    Ok(hveth)
}

/// Inside the pod: loopback up, the interface's addresses and routes.
pub(super) async fn pod_interface(
    ctx: &Ctx,
    netns: &Path,
    allocs: &[Allocation],
    routes: &[(IpNetwork, Option<IpAddr>)],
) -> Result<cairn_netlink::Link, PluginError> {
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
    for (dst, gw) in routes {
        let gw = gw.or_else(|| {
            allocs
                .iter()
                .filter(|a| a.address.is_ipv6() == dst.is_ipv6())
                .find_map(|a| a.gateway)
        });
        cont.add_route(*dst, gw, c.index).await?;
    }
    Ok(c)
}

/// ADD's result: the bridge, the host veth and the pod's interface (with its sandbox),
/// the addresses on the pod's interface (index 2) and the routes.
pub(super) fn add_result(
    conf: &NetConf,
    interfaces: [(cairn_netlink::Link, Option<String>); 3],
    allocs: &[Allocation],
    routes: Vec<(IpNetwork, Option<IpAddr>)>,
) -> Result<CNIResult, PluginError> {
    let interfaces = interfaces
        .into_iter()
        .map(|(link, sandbox)| Interface {
            mac: link.mac_string(),
            name: link.name,
            mtu: None,
            sandbox,
            socket_path: None,
            pci_id: None,
        })
        .collect();
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
        interfaces,
        ips,
        routes: result_routes,
        dns: result_dns(conf),
    })
}

pub(super) fn result_dns(conf: &NetConf) -> Option<Dns> {
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
