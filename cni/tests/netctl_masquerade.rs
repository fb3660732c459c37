//! The network controller's masquerade rules with both backends, in a fresh namespace:
//! installed once, left alone when already right (no rewrite), rewritten atomically when
//! the node subnet changes, removed when masquerading is turned off, and moved when the
//! backend is switched.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use cairn_cni::config::MasqBackend;
use cairn_cni::netctl::masquerade;
use common::Netns;
use ipnetwork::Ipv4Network;

/// Runs `f` on a thread inside `ns` (the iptables/nft children inherit it).
fn in_netns<T: Send + 'static>(ns: &Netns, f: impl FnOnce() -> T + Send + 'static) -> T {
    let path = ns.path();
    std::thread::spawn(move || {
        let _g = cairn_netlink::NetnsGuard::enter(&path).unwrap();
        f()
    })
    .join()
    .unwrap()
}

fn net(s: &str) -> Ipv4Network {
    s.parse().unwrap()
}

fn lifecycle(backend: MasqBackend, list: &[&str]) {
    let ns = Netns::new();
    let cluster = net("10.244.0.0/16");
    assert!(in_netns(&ns, move || masquerade::ensure(
        backend,
        cluster,
        net("10.244.3.0/24")
    )
    .unwrap()));
    let rules = ns.sh(list);
    assert!(rules.contains("10.244.3.0/24"), "{rules}");
    // Already right: nothing rewritten.
    assert!(!in_netns(&ns, move || masquerade::ensure(
        backend,
        cluster,
        net("10.244.3.0/24")
    )
    .unwrap()));
    // New subnet: the old rules are replaced, not added to.
    assert!(in_netns(&ns, move || masquerade::ensure(
        backend,
        cluster,
        net("10.244.9.0/24")
    )
    .unwrap()));
    let rules = ns.sh(list);
    assert!(
        rules.contains("10.244.9.0/24") && !rules.contains("10.244.3.0/24"),
        "{rules}"
    );
    in_netns(&ns, move || masquerade::remove(backend).unwrap());
    let after = ns.exec(list);
    let text = String::from_utf8_lossy(&after.stdout);
    assert!(!text.contains("10.244.9.0/24"), "{text}");
    // Removing twice is fine.
    in_netns(&ns, move || masquerade::remove(backend).unwrap());
}

#[test]
fn iptables_rules_lifecycle() {
    lifecycle(MasqBackend::Iptables, &["iptables-save", "-t", "nat"]);
    let ns = Netns::new();
    in_netns(&ns, || {
        masquerade::ensure(
            MasqBackend::Iptables,
            net("10.244.0.0/16"),
            net("10.244.1.0/24"),
        )
        .unwrap()
    });
    let dump = ns.sh(&["iptables-save", "-t", "nat"]);
    let chain: Vec<&str> = dump
        .lines()
        .filter(|l| l.starts_with("-A CAIRN-POSTRTG"))
        .collect();
    assert_eq!(chain.len(), 4, "{dump}");
    assert!(
        chain[0].contains("-s 10.244.0.0/16 -d 10.244.0.0/16") && chain[0].ends_with("-j RETURN")
    );
    assert!(
        chain[1].contains("-s 10.244.1.0/24 ! -d 224.0.0.0/4") && chain[1].contains("MASQUERADE")
    );
    let jumps = dump
        .lines()
        .filter(|l| l.starts_with("-A POSTROUTING") && l.ends_with("-j CAIRN-POSTRTG"))
        .count();
    assert_eq!(jumps, 1);
}

#[test]
fn nftables_rules_lifecycle() {
    lifecycle(MasqBackend::Nftables, &["nft", "list", "ruleset"]);
}

#[test]
fn switching_backend_moves_the_rules() {
    let ns = Netns::new();
    let cluster = net("10.244.0.0/16");
    let subnet = net("10.244.5.0/24");
    let chain = |ns: &Netns| {
        ns.sh(&["iptables-save", "-t", "nat"])
            .lines()
            .filter(|l| l.contains(masquerade::IPTABLES_CHAIN))
            .count()
    };
    let table = |ns: &Netns| {
        ns.sh(&["nft", "list", "tables"])
            .contains(masquerade::NFT_TABLE)
    };
    assert!(in_netns(&ns, move || masquerade::ensure_only(
        MasqBackend::Iptables,
        cluster,
        subnet
    )
    .unwrap()));
    assert!(chain(&ns) > 0 && !table(&ns));
    assert!(in_netns(&ns, move || masquerade::ensure_only(
        MasqBackend::Nftables,
        cluster,
        subnet
    )
    .unwrap()));
    assert_eq!(
        chain(&ns),
        0,
        "iptables rules left after switching to nftables"
    );
    assert!(table(&ns));
    in_netns(&ns, || masquerade::remove_all().unwrap());
    assert_eq!(chain(&ns), 0);
    assert!(!table(&ns));
}
