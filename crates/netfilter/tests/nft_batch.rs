//! Partial syncs sent as netlink batches leave the kernel exactly as `nft -f` of the same
//! script does (root; private network namespaces): the proxy's full ruleset is loaded in
//! two namespaces, one partial transaction goes through `NftCommand` (the batch path) in
//! the first and through the `nft` binary in the second, and the listings must match.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::io::Write;
use std::net::Ipv4Addr;
use std::process::{Command, Stdio};

use cairn_netfilter::{NftCommand, NftDriver};
use cairn_nft::{Op, Rule, Stmt};
use cairn_serviceproxy::nftables::{NftConfig, Renderer};
use cairn_serviceproxy::*;
use cairn_testsupport::NetNs;

fn state(variant: u8, node_port: bool) -> ProxyState {
    let mut s = ProxyState::new();
    for i in 0..20u8 {
        let ep = |k: u8| Endpoint {
            local: k == 1,
            ..Endpoint::ready(
                Ipv4Addr::new(10, 244, i, k + if i == 7 { variant } else { 0 }),
                8080,
            )
        };
        let eps = if i == 9 && variant > 0 {
            vec![]
        } else {
            vec![ep(1), ep(2)]
        };
        let port = ServicePort {
            cluster_ip: Some(Ipv4Addr::new(10, 96, 0, i + 1)),
            port: 80,
            node_port: (node_port && i % 2 == 0).then_some(30000 + u16::from(i)),
            external_local: i == 4,
            ..Default::default()
        };
        let name = ServicePortName {
            namespace: "t".into(),
            name: format!("svc-{i}"),
            port: String::new(),
            protocol: if i == 3 { Protocol::Udp } else { Protocol::Tcp },
        };
        let entry = ServiceEntry {
            port,
            cluster: eps.clone(),
            external: eps.iter().filter(|e| i != 4 || e.local).cloned().collect(),
            local_count: 1,
        };
        s.insert(name, entry);
    }
    s
}

fn in_netns<T: Send>(f: impl FnOnce() -> T + Send) -> T {
    NetNs::new("cnftb").unwrap().run_inside(f)
}

fn nft_binary(script: &str) {
    let mut child = Command::new("nft")
        .args(["-f", "-"])
        .stdin(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(script.as_bytes())
        .unwrap();
    assert!(child.wait().unwrap().success(), "{script}");
}

#[test]
fn a_batch_leaves_the_same_ruleset_as_nft() {
    // A cluster CIDR of whole bytes is compared as a prefix; another one is masked first.
    for cidr in ["10.244.0.0/16", "10.240.0.0/12"] {
        let cfg = NftConfig {
            cluster_cidr: Some(cidr.parse().unwrap()),
            ..Default::default()
        };
        same_ruleset_after_a_partial_sync(&cfg);
    }
}

fn same_ruleset_after_a_partial_sync(cfg: &NftConfig) {
    let before = state(0, true);
    let after = state(5, false);
    let mut r = Renderer::default();
    let full = r.full(cfg, &before);
    let partial = r.partial(cfg, &before, &after, &diff(&before, &after));
    let script = cairn_nft::script(&partial);
    assert!(
        script.contains("delete element") && script.contains("dnat to 10.244.7.6:8080"),
        "{script}"
    );
    let listing = |through_batch: bool| {
        in_netns(|| {
            let nft = NftCommand::new().unwrap();
            nft.apply(&full).unwrap();
            if through_batch {
                nft.apply_ops(&partial).unwrap();
            } else {
                nft_binary(&script);
            }
            // The main table and the one shard 20 service ports make.
            ["cairn-proxy", "cairn-proxy-shard0"]
                .map(|t| nft.list_table("ip", t).unwrap().unwrap())
                .concat()
        })
    };
    let (batch, binary) = (listing(true), listing(false));
    assert_eq!(batch, binary);
    // And the batch really changed something.
    assert!(
        batch.contains("10.244.7.6:8080") && !batch.contains("30000"),
        "{batch}"
    );
}

#[test]
fn a_failing_batch_changes_nothing_and_names_the_line() {
    in_netns(|| {
        let nft = NftCommand::new().unwrap();
        let cfg = NftConfig::default();
        nft.apply(&Renderer::default().full(&cfg, &state(0, false)))
            .unwrap();
        let before = nft.list_table("ip", "cairn-proxy").unwrap();
        let (table, chain) = ("cairn-proxy".to_string(), "fresh".to_string());
        let bad = [
            Op::AddChain {
                table: table.clone(),
                chain: chain.clone(),
            },
            Op::AddRule {
                table,
                chain,
                rule: Rule::new([Stmt::Jump("no-such-chain".into())]),
            },
        ];
        let err = nft.apply_ops(&bad).unwrap_err().to_string();
        assert!(
            err.contains("add rule ip cairn-proxy fresh jump no-such-chain"),
            "{err}"
        );
        assert_eq!(
            nft.list_table("ip", "cairn-proxy").unwrap(),
            before,
            "atomic"
        );
    });
}
