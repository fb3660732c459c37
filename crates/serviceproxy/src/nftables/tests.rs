//! Rendering across shard tables (no kernel: the scripts as text).

use std::net::Ipv4Addr;

use super::*;
use crate::diff::diff;

fn name(i: u32) -> ServicePortName {
    ServicePortName {
        namespace: "ns".into(),
        name: format!("svc-{i}"),
        port: String::new(),
        protocol: Protocol::Tcp,
    }
}

fn ip(base: [u8; 4], i: u32) -> Ipv4Addr {
    Ipv4Addr::from(u32::from(Ipv4Addr::from(base)) + i)
}

/// `n` ClusterIP services; service `empty` has no endpoints, the others one each
/// (service `moved` on another address).
fn state(n: u32, empty: Option<u32>, moved: Option<u32>) -> ProxyState {
    (0..n)
        .map(|i| {
            let port = ServicePort {
                cluster_ip: Some(ip([10, 96, 0, 1], i)),
                port: 80,
                ..Default::default()
            };
            let offset = if moved == Some(i) { 100_000 } else { 0 };
            let eps = if empty == Some(i) {
                vec![]
            } else {
                vec![Endpoint::ready(ip([10, 244, 0, 2], i + offset), 8080)]
            };
            (name(i), ServiceEntry::with_endpoints(port, eps))
        })
        .collect()
}

/// The text of `table`'s block in a full script.
fn block<'a>(script: &'a str, table: &str) -> &'a str {
    let start = script
        .find(&format!("table ip {table} {{\n"))
        .unwrap_or_else(|| panic!("no block for {table}"));
    let end = script[start..].find("\n}\n").unwrap() + start;
    &script[start..end]
}

/// The tables a partial script's commands name.
fn tables_named(script: &str) -> std::collections::BTreeSet<String> {
    script
        .lines()
        .filter_map(|l| l.split(" ip ").nth(1))
        .filter_map(|rest| rest.split(' ').next())
        .map(str::to_string)
        .collect()
}

#[test]
fn the_shard_count_follows_the_service_count() {
    assert_eq!(shard_count(0), 1);
    assert_eq!(shard_count(SERVICES_PER_SHARD), 1);
    assert_eq!(shard_count(SERVICES_PER_SHARD + 1), 2);
    assert_eq!(shard_count(10_000), 8);
    assert_eq!(shard_count(1_000_000), MAX_SHARDS);
    assert_eq!(owned_tables().len(), MAX_SHARDS + 1);
}

#[test]
fn a_full_sync_spreads_service_chains_over_shards_and_drops_unused_ones() {
    let cfg = NftConfig::default();
    let mut r = Renderer::default();
    let script = r.full(&cfg, &state(3000, Some(7), None));
    let main = block(&script, TABLE);
    assert!(main.contains("map no-endpoint-services"), "{main}");
    assert!(main.contains("10.96.0.8 . tcp . 80 : goto reject-packet"));
    assert!(main.contains("chain nat-postrouting") && !main.contains("chain svc-"));
    let mut chains = 0;
    for k in 0..3 {
        let shard = block(&script, &format!("{SHARD_PREFIX}{k}"));
        assert!(shard.contains("map service-ips") && shard.contains("chain nat-prerouting"));
        let here = shard.matches("\tchain svc-").count();
        assert!(here > 800 && here < 1200, "shard {k} holds {here}");
        // Every element of the shard's map leads to one of the shard's chains.
        for line in shard.lines().filter(|l| l.contains("elements = {")) {
            for target in line.split("goto ").skip(1) {
                let chain = target.split([',', ' ']).next().unwrap();
                assert!(shard.contains(&format!("\tchain {chain} {{")), "{chain}");
            }
        }
        chains += here;
    }
    assert_eq!(chains, 2999);
    for k in 3..MAX_SHARDS {
        let name = format!("{SHARD_PREFIX}{k}");
        assert!(script.contains(&format!("add table ip {name}\ndelete table ip {name}\n")));
        assert!(!script.contains(&format!("table ip {name} {{")));
    }
}

#[test]
fn a_partial_sync_writes_only_the_changed_service_ports_shard() {
    let cfg = NftConfig::default();
    let mut r = Renderer::default();
    let before = state(3000, None, None);
    let full = r.full(&cfg, &before);
    // The shard that holds svc-42's chain.
    let id = service_id(&name(42));
    let home = (0..3)
        .map(|k| format!("{SHARD_PREFIX}{k}"))
        .find(|t| block(&full, t).contains(&format!("chain svc-{id}")))
        .unwrap();
    // Moved endpoint: only its shard. Growing past a shard boundary does not move it
    // (partial syncs keep the applied count).
    let mut after = state(3000, None, Some(42));
    for (name, entry) in state(4000, None, None) {
        after.entry(name).or_insert(entry);
    }
    let d = diff(&before, &after);
    let script = cairn_nft::script(&r.partial(&cfg, &before, &after, &d));
    assert!(
        script.contains(&format!("flush chain ip {home} svc-{id}")),
        "{script}"
    );
    let named = tables_named(&script);
    assert!(!named.contains(TABLE), "{named:?}");
    assert!(named.len() <= 3, "{named:?}");
    // Losing its endpoints: its element leaves the shard's map for the main table's.
    let none = state(3000, Some(42), None);
    let script = cairn_nft::script(&r.partial(&cfg, &before, &none, &diff(&before, &none)));
    let vip = "10.96.0.43 . tcp . 80";
    assert!(
        script.contains(&format!("delete element ip {home} service-ips {{ {vip} }}")),
        "{script}"
    );
    assert!(script.contains(&format!(
        "add element ip {TABLE} no-endpoint-services {{ {vip} : goto reject-packet }}"
    )));
    assert!(script.contains(&format!("delete chain ip {home} svc-{id}")));
}
