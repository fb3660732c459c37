//! DEL: releases the attachment's addresses and removes its veth and masquerade rules,
//! also when the pod's namespace is gone.

use super::*;

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
