//! The node's masquerade rules (flannel's set): pod → pod is left alone, pod → outside
//! the cluster CIDR is masqueraded, host → remote pods is masqueraded so replies come back
//! through the pod network. iptables: chain `CAIRN-POSTRTG` in `nat`, jumped to from
//! POSTROUTING; nftables: table `ip cairn-netctl`. Every rule carries a fingerprint of the
//! whole set in its comment, so "already right" is one listing and a change is one atomic
//! rewrite (no window without rules). The nftables table goes through
//! [`cairn_netfilter::NftDriver`].

use cairn_netfilter::{find_binary, IptablesDriver, NftCommand, NftDriver};
use ipnetwork::Ipv4Network;

use crate::config::MasqBackend;
use crate::masq::{iptables, MasqError};

pub const IPTABLES_CHAIN: &str = "CAIRN-POSTRTG";
pub const NFT_TABLE: &str = "cairn-netctl";
const JUMP_COMMENT: &str = "cairn-netctl:jump";

/// One rule: (iptables match + target, nftables match + verdict).
fn rules(cluster: Ipv4Network, subnet: Ipv4Network) -> Vec<(String, String)> {
    vec![
        (
            format!("-s {cluster} -d {cluster} -j RETURN"),
            format!("ip saddr {cluster} ip daddr {cluster} return"),
        ),
        (
            format!("-s {subnet} ! -d 224.0.0.0/4 -j MASQUERADE --random-fully"),
            format!("ip saddr {subnet} ip daddr != 224.0.0.0/4 masquerade fully-random"),
        ),
        (
            format!("! -s {cluster} -d {subnet} -j RETURN"),
            format!("ip saddr != {cluster} ip daddr {subnet} return"),
        ),
        (
            format!("! -s {cluster} -d {cluster} -j MASQUERADE --random-fully"),
            format!("ip saddr != {cluster} ip daddr {cluster} masquerade fully-random"),
        ),
    ]
}

fn fingerprint(cluster: Ipv4Network, subnet: Ipv4Network) -> String {
    let text: Vec<String> = rules(cluster, subnet).into_iter().map(|r| r.0).collect();
    format!("cairn-netctl:{:016x}", crate::fnv64(&[&text.join("\n")]))
}

/// The backend to use: the configured one, else the plugin's detection.
pub fn backend(configured: Option<MasqBackend>) -> MasqBackend {
    crate::masq::backend(configured)
}

/// Makes the rules match `cluster`/`subnet`; returns whether anything was rewritten.
pub fn ensure(
    backend: MasqBackend,
    cluster: Ipv4Network,
    subnet: Ipv4Network,
) -> Result<bool, MasqError> {
    match backend {
        MasqBackend::Iptables => {
            let fp = fingerprint(cluster, subnet);
            let expected = rules(cluster, subnet).len();
            let ipt = iptables(false)?;
            let dump = ipt.save("nat")?;
            let chain_rules: Vec<&str> = dump
                .lines()
                .filter(|l| l.starts_with(&format!("-A {IPTABLES_CHAIN} ")))
                .collect();
            let jump = dump.lines().any(|l| {
                l.starts_with("-A POSTROUTING ")
                    && l.contains(JUMP_COMMENT)
                    && l.ends_with(&format!("-j {IPTABLES_CHAIN}"))
            });
            if jump && chain_rules.len() == expected && chain_rules.iter().all(|l| l.contains(&fp))
            {
                return Ok(false);
            }
            // Declaring the chain under --noflush flushes it: the new set replaces the old
            // in one commit.
            let mut s = format!("*nat\n:{IPTABLES_CHAIN} - [0:0]\n");
            for (rule, _) in rules(cluster, subnet) {
                let (matches, target) = rule.split_once(" -j ").unwrap_or((&rule, "RETURN"));
                s += &format!(
                    "-A {IPTABLES_CHAIN} {matches} -m comment --comment {fp} -j {target}\n"
                );
            }
            if !jump {
                s += &format!(
                    "-A POSTROUTING -m comment --comment {JUMP_COMMENT} -j {IPTABLES_CHAIN}\n"
                );
            }
            s += "COMMIT\n";
            ipt.restore(&s)?;
            Ok(true)
        }
        MasqBackend::Nftables => ensure_nft(&NftCommand::new()?, cluster, subnet),
    }
}

/// The nftables script replacing the table with the rules for `cluster`/`subnet`, in one
/// transaction (declare, delete, recreate: works whether or not the table exists).
fn nft_script(cluster: Ipv4Network, subnet: Ipv4Network) -> String {
    let fp = fingerprint(cluster, subnet);
    let mut s = format!(
        "table ip {NFT_TABLE} {{}}\ndelete table ip {NFT_TABLE}\ntable ip {NFT_TABLE} {{\n chain postrouting {{\n  type nat hook postrouting priority srcnat; policy accept;\n"
    );
    for (_, rule) in rules(cluster, subnet) {
        s += &format!("  {rule} comment \"{fp}\"\n");
    }
    s += " }\n}\n";
    s
}

/// [`ensure`] with nftables.
pub fn ensure_nft(
    nft: &dyn NftDriver,
    cluster: Ipv4Network,
    subnet: Ipv4Network,
) -> Result<bool, MasqError> {
    let fp = fingerprint(cluster, subnet);
    // Unreadable counts as wrong: the rewrite then says what is the matter.
    let current = nft
        .list_table("ip", NFT_TABLE)
        .ok()
        .flatten()
        .unwrap_or_default();
    if current.matches(&fp).count() == rules(cluster, subnet).len() {
        return Ok(false);
    }
    nft.apply(&nft_script(cluster, subnet))?;
    Ok(true)
}

/// [`ensure`] with `backend`, then removes what the other backend may have left from an
/// earlier configuration, so switching `masqueradeBackend` never leaves two rule sets.
pub fn ensure_only(
    backend: MasqBackend,
    cluster: Ipv4Network,
    subnet: Ipv4Network,
) -> Result<bool, MasqError> {
    let changed = ensure(backend, cluster, subnet)?;
    remove(other(backend))?;
    Ok(changed)
}

/// Removes the rules of both backends (masquerade turned off).
pub fn remove_all() -> Result<(), MasqError> {
    remove(MasqBackend::Iptables)?;
    remove(MasqBackend::Nftables)
}

fn other(backend: MasqBackend) -> MasqBackend {
    match backend {
        MasqBackend::Iptables => MasqBackend::Nftables,
        MasqBackend::Nftables => MasqBackend::Iptables,
    }
}

/// Removes the rules (masquerade turned off); absent rules or an absent tool are fine.
pub fn remove(backend: MasqBackend) -> Result<(), MasqError> {
    match backend {
        MasqBackend::Iptables => {
            if find_binary("iptables-save").is_none() {
                return Ok(());
            }
            let ipt = iptables(false)?;
            let dump = ipt.save("nat")?;
            let mut s = String::from("*nat\n");
            let mut any = false;
            for l in dump.lines() {
                if let Some(rest) = l.strip_prefix("-A POSTROUTING ") {
                    if rest.contains(JUMP_COMMENT) {
                        s += &format!("-D POSTROUTING {rest}\n");
                        any = true;
                    }
                }
            }
            if dump
                .lines()
                .any(|l| l.starts_with(&format!(":{IPTABLES_CHAIN} ")))
            {
                s += &format!("-F {IPTABLES_CHAIN}\n-X {IPTABLES_CHAIN}\n");
                any = true;
            }
            if any {
                s += "COMMIT\n";
                ipt.restore(&s)?;
            }
            Ok(())
        }
        MasqBackend::Nftables => match NftCommand::new() {
            Ok(nft) => remove_nft(&nft),
            Err(_) => Ok(()),
        },
    }
}

/// [`remove`] with nftables: deletes the table when it can be listed.
pub fn remove_nft(nft: &dyn NftDriver) -> Result<(), MasqError> {
    if !nft.table_exists("ip", NFT_TABLE).unwrap_or(false) {
        return Ok(());
    }
    nft.apply(&format!(
        "table ip {NFT_TABLE} {{}}\ndelete table ip {NFT_TABLE}\n"
    ))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use cairn_netfilter::RecordingNft;

    use super::*;

    #[test]
    fn nft_rules_are_rewritten_only_when_the_set_changes() {
        let nft = RecordingNft::default();
        let c: Ipv4Network = "10.244.0.0/16".parse().unwrap();
        let a: Ipv4Network = "10.244.1.0/24".parse().unwrap();
        assert!(ensure_nft(&nft, c, a).unwrap());
        let fp = fingerprint(c, a);
        assert_eq!(
            nft.scripts.lock()[0],
            format!(
                "table ip cairn-netctl {{}}\ndelete table ip cairn-netctl\ntable ip cairn-netctl {{\n chain postrouting {{\n  type nat hook postrouting priority srcnat; policy accept;\n\
                 \x20 ip saddr 10.244.0.0/16 ip daddr 10.244.0.0/16 return comment \"{fp}\"\n\
                 \x20 ip saddr 10.244.1.0/24 ip daddr != 224.0.0.0/4 masquerade fully-random comment \"{fp}\"\n\
                 \x20 ip saddr != 10.244.0.0/16 ip daddr 10.244.1.0/24 return comment \"{fp}\"\n\
                 \x20 ip saddr != 10.244.0.0/16 ip daddr 10.244.0.0/16 masquerade fully-random comment \"{fp}\"\n }}\n}}\n"
            )
        );
        // The fake lists the last script: already right.
        assert!(!ensure_nft(&nft, c, a).unwrap());
        assert!(ensure_nft(&nft, c, "10.244.2.0/24".parse().unwrap()).unwrap());
        assert_eq!(nft.scripts.lock().len(), 2);
        remove_nft(&nft).unwrap();
        assert_eq!(
            nft.scripts.lock()[2],
            "table ip cairn-netctl {}\ndelete table ip cairn-netctl\n"
        );
    }

    #[test]
    fn nft_remove_without_the_table_does_nothing() {
        let nft = RecordingNft::default();
        remove_nft(&nft).unwrap();
        nft.tables
            .lock()
            .insert("inet cairn-cni".into(), String::new());
        remove_nft(&nft).unwrap();
        assert!(nft.scripts.lock().is_empty());
    }

    #[test]
    fn fingerprint_follows_the_rule_set() {
        let c: Ipv4Network = "10.244.0.0/16".parse().unwrap();
        let a = fingerprint(c, "10.244.1.0/24".parse().unwrap());
        let b = fingerprint(c, "10.244.2.0/24".parse().unwrap());
        assert_ne!(a, b);
        assert!(a.len() < 256 && !a.contains(' '));
        let r = rules(c, "10.244.1.0/24".parse().unwrap());
        assert!(r[1]
            .0
            .contains("-s 10.244.1.0/24 ! -d 224.0.0.0/4 -j MASQUERADE"));
        assert!(r[0].1.contains("return"));
    }
}
