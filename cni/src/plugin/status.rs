//! STATUS and GC: the plugin is ready; attachments no runtime knows are removed.

use super::*;

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
