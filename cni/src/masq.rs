//! IP masquerade for pod traffic leaving the pod network, with iptables or nftables.
//!
//! Every rule carries the comment `cairn-cni:<network>:<containerID>:<ifname>` (none of
//! the three may contain `:`), so DEL and GC remove exactly the rules of an attachment.
//! iptables: a chain `CAIRN-<hash>` per attachment (ACCEPT to the excluded networks,
//! MASQUERADE the rest except multicast) jumped to from nat POSTROUTING for the pod's
//! address, installed with one `iptables-restore --noflush`. nftables: a table
//! `inet cairn-cni` with a nat postrouting chain and one rule per address, rendered here and
//! applied through [`cairn_netfilter::NftDriver`] (`NftCommand`; `RecordingNft` in tests).

use std::net::IpAddr;

use cairn_netfilter::{
    find_binary, IptablesCommand, IptablesDriver, IptablesError, IptablesVariant, NftCommand,
    NftDriver, NftError,
};
use ipnetwork::IpNetwork;

use crate::config::MasqBackend;

#[derive(Debug, thiserror::Error)]
pub enum MasqError {
    #[error(transparent)]
    Nft(#[from] NftError),
    #[error(transparent)]
    Iptables(#[from] IptablesError),
}

const NFT_TABLE: &str = "cairn-cni";

/// The tag written in every rule of one attachment.
pub fn tag(network: &str, id: &str, ifname: &str) -> String {
    format!("cairn-cni:{network}:{id}:{ifname}")
}

fn parse_tag(s: &str) -> Option<(String, String, String)> {
    let rest = s.trim_matches('"').strip_prefix("cairn-cni:")?;
    let mut it = rest.splitn(3, ':');
    Some((
        it.next()?.to_string(),
        it.next()?.to_string(),
        it.next()?.to_string(),
    ))
}

/// The iptables chain of one attachment.
pub fn chain_name(network: &str, id: &str, ifname: &str) -> String {
    format!("CAIRN-{:016X}", crate::fnv64(&[network, id, ifname]))
}

/// The configured backend, or the detected one: iptables when installed (it is what the
/// reference plugin and kube-proxy use), nftables otherwise.
pub fn backend(configured: Option<MasqBackend>) -> MasqBackend {
    configured.unwrap_or_else(|| {
        if find_binary("iptables-restore").is_some() {
            MasqBackend::Iptables
        } else {
            MasqBackend::Nftables
        }
    })
}

/// The system's iptables (`v6`: ip6tables), through cairn-netfilter.
pub(crate) fn iptables(v6: bool) -> Result<IptablesCommand, MasqError> {
    Ok(IptablesCommand::for_family(v6, IptablesVariant::System)?)
}

/// Installs masquerading for `addrs` of one attachment.
pub fn setup(
    backend: MasqBackend,
    network: &str,
    id: &str,
    ifname: &str,
    addrs: &[IpAddr],
    exclude: &[IpNetwork],
) -> Result<(), MasqError> {
    match backend {
        MasqBackend::Iptables => {
            let t = tag(network, id, ifname);
            for v6 in [false, true] {
                let mine: Vec<_> = addrs.iter().filter(|a| a.is_ipv6() == v6).collect();
                if mine.is_empty() {
                    continue;
                }
                let chain = chain_name(network, id, ifname);
                let mut s = format!("*nat\n:{chain} - [0:0]\n");
                for n in exclude.iter().filter(|n| n.is_ipv6() == v6) {
                    s += &format!("-A {chain} -d {n} -m comment --comment {t} -j ACCEPT\n");
                }
                let mcast = if v6 { "ff00::/8" } else { "224.0.0.0/4" };
                s += &format!("-A {chain} ! -d {mcast} -m comment --comment {t} -j MASQUERADE\n");
                let host = if v6 { 128 } else { 32 };
                for a in mine {
                    s += &format!(
                        "-A POSTROUTING -s {a}/{host} -m comment --comment {t} -j {chain}\n"
                    );
                }
                s += "COMMIT\n";
                iptables(v6)?.restore(&s)?;
            }
            Ok(())
        }
        MasqBackend::Nftables => {
            setup_nft(&NftCommand::new()?, network, id, ifname, addrs, exclude)
        }
    }
}

/// The nftables script installing masquerading for `addrs` of one attachment: the table
/// and chain (a no-op when they exist), then one rule per address.
pub fn nft_setup_script(
    network: &str,
    id: &str,
    ifname: &str,
    addrs: &[IpAddr],
    exclude: &[IpNetwork],
) -> String {
    let t = tag(network, id, ifname);
    let mut s = format!(
        "table inet {NFT_TABLE} {{\n chain postrouting {{ type nat hook postrouting priority srcnat; policy accept; }}\n}}\n"
    );
    for a in addrs {
        let fam = if a.is_ipv6() { "ip6" } else { "ip" };
        let mcast = if a.is_ipv6() {
            "ff00::/8"
        } else {
            "224.0.0.0/4"
        };
        let mut rule = format!("{fam} saddr {a}");
        for n in exclude.iter().filter(|n| n.is_ipv6() == a.is_ipv6()) {
            rule += &format!(" {fam} daddr != {n}");
        }
        rule += &format!(" {fam} daddr != {mcast} masquerade comment \"{t}\"");
        s += &format!("add rule inet {NFT_TABLE} postrouting {rule}\n");
    }
    s
}

/// [`setup`] with nftables, through `nft` (one transaction).
pub fn setup_nft(
    nft: &dyn NftDriver,
    network: &str,
    id: &str,
    ifname: &str,
    addrs: &[IpAddr],
    exclude: &[IpNetwork],
) -> Result<(), MasqError> {
    nft.apply(&nft_setup_script(network, id, ifname, addrs, exclude))?;
    Ok(())
}

/// Removes the rules of every attachment of `network` for which `remove` says so.
/// Returns how many attachments had rules removed.
pub fn teardown_matching(
    backend: MasqBackend,
    network: &str,
    remove: &dyn Fn(&str, &str) -> bool,
) -> Result<usize, MasqError> {
    let matches = |tag_text: &str| -> Option<(String, String)> {
        let (net, id, ifname) = parse_tag(tag_text)?;
        (net == network && remove(&id, &ifname)).then_some((id, ifname))
    };
    match backend {
        MasqBackend::Iptables => {
            let mut count = 0;
            for v6 in [false, true] {
                let ipt = match iptables(v6) {
                    Ok(ipt) => ipt,
                    Err(MasqError::Iptables(IptablesError::Missing(_))) => continue,
                    Err(e) => return Err(e),
                };
                let dump = ipt.save("nat")?;
                let mut dels = String::new();
                let mut chains = Vec::new();
                for line in dump.lines() {
                    let Some(rest) = line.strip_prefix("-A POSTROUTING ") else {
                        continue;
                    };
                    let words: Vec<&str> = rest.split_whitespace().collect();
                    let Some(pos) = words.iter().position(|w| *w == "--comment") else {
                        continue;
                    };
                    let Some((id, ifname)) = words.get(pos + 1).and_then(|t| matches(t)) else {
                        continue;
                    };
                    dels += &format!("-D POSTROUTING {rest}\n");
                    let chain = chain_name(network, &id, &ifname);
                    if !chains.contains(&chain) {
                        chains.push(chain);
                    }
                }
                // Chains whose jump is already gone (a crash between steps) still go.
                for line in dump.lines() {
                    if let Some(ch) = line.strip_prefix(":CAIRN-") {
                        let name = format!("CAIRN-{}", ch.split_whitespace().next().unwrap_or(""));
                        let tagged = dump.lines().any(|l| {
                            l.starts_with(&format!("-A {name} "))
                                && l.split_whitespace()
                                    .skip_while(|w| *w != "--comment")
                                    .nth(1)
                                    .and_then(&matches)
                                    .is_some()
                        });
                        if tagged && !chains.contains(&name) {
                            chains.push(name);
                        }
                    }
                }
                if dels.is_empty() && chains.is_empty() {
                    continue;
                }
                let mut s = String::from("*nat\n");
                s += &dels;
                for c in &chains {
                    s += &format!("-F {c}\n-X {c}\n");
                }
                s += "COMMIT\n";
                ipt.restore(&s)?;
                count += chains.len();
            }
            Ok(count)
        }
        MasqBackend::Nftables => teardown_matching_nft(&NftCommand::new()?, network, remove),
    }
}

/// The script deleting, from `listing` (the table as `nft -a list table` prints it), the
/// postrouting rules whose tag `matches`, and how many it deletes.
fn nft_teardown_script(listing: &str, matches: &dyn Fn(&str) -> bool) -> (String, usize) {
    let mut s = String::new();
    let mut count = 0;
    let mut in_chain = false;
    for line in listing.lines() {
        let trimmed = line.trim();
        if trimmed.starts_with("chain ") {
            in_chain = trimmed.starts_with("chain postrouting ");
            continue;
        }
        if trimmed == "}" {
            in_chain = false;
        }
        if !in_chain {
            continue;
        }
        let Some(ci) = line.find("comment \"") else {
            continue;
        };
        let rest = &line[ci + 9..];
        let Some(end) = rest.find('"') else { continue };
        if !matches(&rest[..end]) {
            continue;
        }
        let Some(h) = line
            .rsplit("# handle ")
            .next()
            .and_then(|h| h.trim().parse::<u64>().ok())
        else {
            continue;
        };
        s += &format!("delete rule inet {NFT_TABLE} postrouting handle {h}\n");
        count += 1;
    }
    (s, count)
}

/// [`teardown_matching`] with nftables: one listing with handles, then one transaction
/// deleting the matching rules (rules of other attachments stay).
pub fn teardown_matching_nft(
    nft: &dyn NftDriver,
    network: &str,
    remove: &dyn Fn(&str, &str) -> bool,
) -> Result<usize, MasqError> {
    let listing = match nft.list_table_with_handles("inet", NFT_TABLE) {
        Ok(Some(l)) => l,
        // No table, no rules (nor when nft cannot list it, as before).
        Ok(None) | Err(NftError::Failed { .. }) => return Ok(0),
        Err(e) => return Err(e.into()),
    };
    let (s, count) = nft_teardown_script(&listing, &|t| {
        parse_tag(t).is_some_and(|(net, id, ifname)| net == network && remove(&id, &ifname))
    });
    if !s.is_empty() {
        nft.apply(&s)?;
    }
    Ok(count)
}

/// Removes the rules of one attachment.
pub fn teardown(
    backend: MasqBackend,
    network: &str,
    id: &str,
    ifname: &str,
) -> Result<usize, MasqError> {
    teardown_matching(backend, network, &|i, f| i == id && f == ifname)
}

#[cfg(test)]
mod tests {
    use cairn_netfilter::RecordingNft;

    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    fn net(s: &str) -> IpNetwork {
        s.parse().unwrap()
    }

    #[test]
    fn nft_setup_renders_one_transaction() {
        let nft = RecordingNft::default();
        setup_nft(
            &nft,
            "net",
            "abc",
            "eth0",
            &[ip("10.244.1.5"), ip("fd00::5")],
            &[net("10.244.0.0/16"), net("fd00::/64")],
        )
        .unwrap();
        assert_eq!(
            *nft.scripts.lock(),
            vec![
                "table inet cairn-cni {\n chain postrouting { type nat hook postrouting priority srcnat; policy accept; }\n}\n\
                 add rule inet cairn-cni postrouting ip saddr 10.244.1.5 ip daddr != 10.244.0.0/16 ip daddr != 224.0.0.0/4 masquerade comment \"cairn-cni:net:abc:eth0\"\n\
                 add rule inet cairn-cni postrouting ip6 saddr fd00::5 ip6 daddr != fd00::/64 ip6 daddr != ff00::/8 masquerade comment \"cairn-cni:net:abc:eth0\"\n"
                    .to_string()
            ]
        );
    }

    #[test]
    fn nft_setup_failure_surfaces_as_a_masquerade_error() {
        let nft = RecordingNft::default();
        *nft.fail_next.lock() = Some("Error: Could not process rule".into());
        let e = setup_nft(&nft, "net", "abc", "eth0", &[ip("10.244.1.5")], &[]).unwrap_err();
        assert!(
            matches!(e, MasqError::Nft(NftError::Failed { .. })),
            "{e:?}"
        );
        assert_eq!(
            e.to_string(),
            "nft -f - failed: Error: Could not process rule"
        );
        let cni: rscni_plugin::error::Error = crate::plugin::PluginError::from(e).into();
        assert!(
            matches!(&cni, rscni_plugin::error::Error::Custom(crate::plugin::CODE_MASQ, msg, details)
                if msg == "IP masquerade setup failed" && details.contains("Could not process rule")),
            "{cni:?}"
        );
    }

    /// `nft -a list table inet cairn-cni` with three attachments, two of network `net`.
    const LISTING: &str = "table inet cairn-cni { # handle 7
\tchain postrouting { # handle 1
\t\ttype nat hook postrouting priority srcnat; policy accept;
\t\tip saddr 10.244.1.5 ip daddr != 10.244.0.0/16 ip daddr != 224.0.0.0/4 masquerade comment \"cairn-cni:net:abc:eth0\" # handle 2
\t\tip6 saddr fd00::5 ip6 daddr != ff00::/8 masquerade comment \"cairn-cni:net:abc:eth0\" # handle 3
\t\tip saddr 10.244.1.6 ip daddr != 224.0.0.0/4 masquerade comment \"cairn-cni:net:def:eth0\" # handle 4
\t\tip saddr 10.88.0.2 ip daddr != 224.0.0.0/4 masquerade comment \"cairn-cni:other:abc:eth0\" # handle 5
\t}
\tchain foreign { # handle 8
\t\tip saddr 10.0.0.1 masquerade comment \"cairn-cni:net:abc:eth0\" # handle 9
\t}
}
";

    #[test]
    fn nft_teardown_deletes_only_the_attachments_rules_by_handle() {
        let nft = RecordingNft::default();
        nft.tables
            .lock()
            .insert("inet cairn-cni".into(), LISTING.into());
        assert_eq!(
            teardown_matching_nft(&nft, "net", &|id, _| id == "abc").unwrap(),
            2
        );
        assert_eq!(
            *nft.scripts.lock(),
            vec!["delete rule inet cairn-cni postrouting handle 2\n\
                 delete rule inet cairn-cni postrouting handle 3\n"
                .to_string()]
        );
        // GC of network `net` keeping nothing.
        nft.scripts.lock().clear();
        assert_eq!(teardown_matching_nft(&nft, "net", &|_, _| true).unwrap(), 3);
        assert!(nft.scripts.lock()[0].ends_with("postrouting handle 4\n"));
        // Nothing of a network that has no rules: no transaction.
        nft.scripts.lock().clear();
        assert_eq!(
            teardown_matching_nft(&nft, "none", &|_, _| true).unwrap(),
            0
        );
        assert!(nft.scripts.lock().is_empty());
    }

    #[test]
    fn nft_teardown_without_the_table_is_a_no_op() {
        let nft = RecordingNft::default();
        nft.tables
            .lock()
            .insert("ip cairn-netctl".into(), String::new());
        assert_eq!(teardown_matching_nft(&nft, "net", &|_, _| true).unwrap(), 0);
        assert!(nft.scripts.lock().is_empty());
    }

    #[test]
    fn tags_round_trip() {
        let t = tag("net-1", "abc", "eth0");
        assert_eq!(
            parse_tag(&format!("\"{t}\"")),
            Some(("net-1".into(), "abc".into(), "eth0".into()))
        );
        assert_eq!(parse_tag("name: x"), None);
        let c = chain_name("n", "id", "eth0");
        assert!(c.len() <= 28 && c.starts_with("CAIRN-"));
        assert_ne!(c, chain_name("n", "id", "eth1"));
    }
}
