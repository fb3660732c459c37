//! CHECK: the attachment is still as ADD left it (the prevResult's interfaces, addresses
//! and routes).

use super::*;

/// CHECK: the attachment still looks like `prev` says.
pub async fn check(ctx: &Ctx, prev: &CNIResult) -> Result<(), PluginError> {
    let fail = |m: String| PluginError::Check(m);
    let netns = ctx
        .netns
        .clone()
        .ok_or(PluginError::MissingEnv("CNI_NETNS"))?;
    check_host_side(ctx, &Netlink::connect()?).await?;
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
    check_addresses(ctx, &cont, c.index, prev, pos).await?;
    check_routes(&cont, prev, &netns).await
}

/// The bridge exists and the host veth is on it (with hairpin mode when asked).
async fn check_host_side(ctx: &Ctx, host: &Netlink) -> Result<(), PluginError> {
    let fail = PluginError::Check;
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
    Ok(())
}

/// The prevResult's addresses of interface `pos` are on the pod's interface and still
/// allocated to this container.
async fn check_addresses(
    ctx: &Ctx,
    cont: &Netlink,
    index: u32,
    prev: &CNIResult,
    pos: usize,
) -> Result<(), PluginError> {
    let fail = PluginError::Check;
    let have = cont.addresses(index).await?;
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
    Ok(())
}

/// The prevResult's routes are in the pod's namespace.
async fn check_routes(cont: &Netlink, prev: &CNIResult, netns: &Path) -> Result<(), PluginError> {
    let fail = PluginError::Check;
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
