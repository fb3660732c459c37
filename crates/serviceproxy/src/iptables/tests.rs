#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::net::Ipv4Addr;

use super::*;
use crate::diff::diff;

fn name(svc: &str) -> ServicePortName {
    ServicePortName {
        namespace: "ns".into(),
        name: svc.into(),
        port: "http".into(),
        protocol: Protocol::Tcp,
    }
}

fn ep(last: u8) -> Endpoint {
    Endpoint {
        local: true,
        ..Endpoint::ready(Ipv4Addr::new(10, 244, 1, last), 8080)
    }
}

fn entry(vip: u8, eps: &[u8], node_port: Option<u16>) -> ServiceEntry {
    let port = ServicePort {
        cluster_ip: Some(Ipv4Addr::new(10, 96, 0, vip)),
        port: 80,
        node_port,
        ..Default::default()
    };
    ServiceEntry::with_endpoints(port, eps.iter().map(|l| ep(*l)).collect())
}

fn cfg() -> IptConfig {
    IptConfig {
        cluster_cidr: Some("10.244.0.0/16".parse().unwrap()),
        ..Default::default()
    }
}

/// What `iptables-save` would print after the ruleset was applied.
fn save_text(r: &Ruleset) -> String {
    let mut out = String::new();
    for table in [Table::Filter, Table::Nat] {
        out += &format!("*{}\n", table.name());
        for (t, chain) in r.chains.keys() {
            if *t == table {
                out += &format!(":{chain} - [0:0]\n");
            }
        }
        for (t, chain, rule) in &r.jumps {
            if *t == table {
                out += &format!("-A {chain} {rule}\n");
            }
        }
        for ((t, chain), rules) in &r.chains {
            for rule in rules.iter().filter(|_| *t == table) {
                out += &format!("-A {chain} {rule}\n");
            }
        }
        out += "COMMIT\n";
    }
    out
}

fn lines(r: &Rendered) -> Vec<String> {
    r.payload
        .as_deref()
        .unwrap_or_default()
        .lines()
        .map(str::to_string)
        .collect()
}

#[test]
fn a_full_sync_from_nothing_writes_every_chain_and_the_jumps() {
    let state: ProxyState = [(name("web"), entry(10, &[2, 3], Some(30080)))].into();
    let r = full(&cfg(), &state, &Saved::default());
    let l = lines(&r);
    let id = crate::ids::service_id(&name("web"));
    let svc = format!("CAIRN-SVC-{id}");
    assert!(l.contains(&format!(":{svc} - [0:0]")));
    assert!(l.contains(&format!(
        "-A CAIRN-SERVICES -d 10.96.0.10/32 -p tcp -m tcp --dport 80 -j {svc}"
    )));
    assert!(l.contains(&format!(
        "-A CAIRN-NODEPORTS -p tcp -m tcp --dport 30080 -j CAIRN-EXT-{id}"
    )));
    assert!(l.contains(&format!(
        "-A {svc} ! -s 10.244.0.0/16 -d 10.96.0.10/32 -p tcp -m tcp --dport 80 -j CAIRN-MARK-MASQ"
    )));
    let cascade: Vec<&String> = l
        .iter()
        .filter(|x| x.starts_with(&format!("-A {svc} -")))
        .collect();
    let rules: Vec<&str> = cascade
        .iter()
        .map(|r| r.split_once(' ').unwrap().1)
        .collect();
    let rules: Vec<&str> = rules.iter().map(|r| r.split_once(' ').unwrap().1).collect();
    assert_eq!(
        rules,
        [
            "-s 10.244.1.2/32 -j CAIRN-MARK-MASQ",
            "-s 10.244.1.3/32 -j CAIRN-MARK-MASQ",
            "-p tcp -m statistic --mode random --probability 0.50000000000 -j DNAT --to-destination 10.244.1.2:8080",
            "-p tcp -j DNAT --to-destination 10.244.1.3:8080",
        ]
    );
    assert!(l.contains(&"-I PREROUTING -j CAIRN-SERVICES".to_string()));
    assert!(l
        .iter()
        .any(|x| x.contains("-j DNAT --to-destination 10.244.1.3:8080")));
    // Chains are declared before any rule refers to them.
    let first_rule = l.iter().position(|x| x.starts_with("-A ")).unwrap();
    let last_decl = l.iter().rposition(|x| x.starts_with(':')).unwrap();
    assert!(last_decl < first_rule);
    assert_eq!(l.iter().filter(|x| *x == "COMMIT").count(), 2);
}

#[test]
fn probabilities_are_the_values_statistic_prints() {
    assert_eq!(rules::probability_for_test(3), "0.33333333349");
    assert_eq!(rules::probability_for_test(2), "0.50000000000");
}

#[test]
fn a_full_sync_onto_the_same_rules_writes_nothing() {
    let mut state: ProxyState = [(name("web"), entry(10, &[2, 3], Some(30080)))].into();
    state.insert(name("empty"), entry(11, &[], Some(30081)));
    let want = Ruleset::build(&cfg(), &state);
    let saved = Saved::parse(&save_text(&want));
    assert_eq!(saved.chains, want.chains);
    let r = full(&cfg(), &state, &saved);
    assert_eq!(r.payload, None, "{r:?}");
}

#[test]
fn a_full_sync_repairs_only_what_drifted() {
    let state: ProxyState = [(name("web"), entry(10, &[2, 3], None))].into();
    let want = Ruleset::build(&cfg(), &state);
    let mut text = save_text(&want);
    let sep = want
        .chains
        .keys()
        .find(|(_, c)| c.starts_with("CAIRN-SVC-"))
        .unwrap()
        .1
        .clone();
    // Someone deleted a rule of a service chain, left a stale chain and doubled a jump.
    let dnat = text
        .lines()
        .find(|l| l.starts_with(&format!("-A {sep} -p tcp")))
        .unwrap()
        .to_string();
    text = text.replace(&format!("{dnat}\n"), "");
    text = text.replace(
        "*nat\n",
        "*nat\n:CAIRN-SVC-OLD - [0:0]\n-A PREROUTING -j CAIRN-SERVICES\n",
    );
    let r = full(&cfg(), &state, &Saved::parse(&text));
    let l = lines(&r);
    assert!(l.contains(&format!(":{sep} - [0:0]")));
    assert!(l.contains(&dnat));
    assert!(
        l.contains(&":CAIRN-SVC-OLD - [0:0]".to_string())
            && l.contains(&"-X CAIRN-SVC-OLD".to_string())
    );
    assert!(l.contains(&"-D PREROUTING -j CAIRN-SERVICES".to_string()));
    assert_eq!(r.chains_written, 2, "{l:#?}");
    assert!(
        !l.iter().any(|x| x.contains("CAIRN-SERVICES -d")),
        "dispatch untouched"
    );
}

#[test]
fn dispatch_chains_compare_as_sets() {
    let state: ProxyState = [
        (name("a"), entry(10, &[2], None)),
        (name("b"), entry(11, &[3], None)),
    ]
    .into();
    let want = Ruleset::build(&cfg(), &state);
    let text = save_text(&want);
    let svc_rules: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("-A CAIRN-SERVICES"))
        .collect();
    let swapped = text.replace(
        &format!("{}\n{}", svc_rules[0], svc_rules[1]),
        &format!("{}\n{}", svc_rules[1], svc_rules[0]),
    );
    assert_ne!(swapped, text);
    assert_eq!(full(&cfg(), &state, &Saved::parse(&swapped)).payload, None);
}

#[test]
fn an_endpoint_change_rewrites_its_chains_and_never_a_dispatch_chain() {
    let applied: ProxyState = [(name("web"), entry(10, &[2, 3], Some(30080)))].into();
    let desired: ProxyState = [(name("web"), entry(10, &[2, 4], Some(30080)))].into();
    let r = partial(&cfg(), &applied, &desired, &diff(&applied, &desired));
    let l = lines(&r);
    assert!(
        !l.iter()
            .any(|x| x.contains("CAIRN-SERVICES") || x.contains("CAIRN-NODEPORTS")),
        "{l:#?}"
    );
    assert!(!l.iter().any(|x| x.starts_with("-X ")), "{l:#?}");
    assert!(l
        .iter()
        .any(|x| x.contains("--to-destination 10.244.1.4:8080")));
    assert!(!l.iter().any(|x| x.contains("10.244.1.3")));
    // The service's two chains (cluster, external) rewritten.
    assert_eq!(r.chains_written, 2);
}

#[test]
fn losing_the_last_endpoint_moves_the_rules_to_reject() {
    let applied: ProxyState = [(name("web"), entry(10, &[2], Some(30080)))].into();
    let desired: ProxyState = [(name("web"), entry(10, &[], Some(30080)))].into();
    let l = lines(&partial(
        &cfg(),
        &applied,
        &desired,
        &diff(&applied, &desired),
    ));
    let id = crate::ids::service_id(&name("web"));
    assert!(l.contains(&format!(
        "-D CAIRN-SERVICES -d 10.96.0.10/32 -p tcp -m tcp --dport 80 -j CAIRN-SVC-{id}"
    )));
    assert!(l.contains(&"-A CAIRN-NO-ENDPOINTS -d 10.96.0.10/32 -p tcp -m tcp --dport 80 -j REJECT --reject-with icmp-port-unreachable".to_string()));
    assert!(l.contains(&"-A CAIRN-NO-EP-NODEPORTS -p tcp -m tcp --dport 30080 -j REJECT --reject-with icmp-port-unreachable".to_string()));
    assert!(l.contains(&format!("-X CAIRN-SVC-{id}")));
    let filter = l.iter().position(|x| x == "*filter").unwrap();
    let nat = l.iter().position(|x| x == "*nat").unwrap();
    assert!(filter < nat);
}

#[test]
fn local_external_traffic_without_local_endpoints_is_dropped() {
    let mut e = entry(10, &[2], Some(30080));
    e.port.external_local = true;
    e.external.clear();
    let state: ProxyState = [(name("web"), e)].into();
    let l = lines(&full(&cfg(), &state, &Saved::default()));
    assert!(
        l.contains(&"-A CAIRN-NO-EP-NODEPORTS -p tcp -m tcp --dport 30080 -j DROP".to_string()),
        "{l:#?}"
    );
}

#[test]
fn affinity_uses_recent_lists_per_endpoint() {
    let mut e = entry(10, &[2, 3], None);
    e.port.affinity_seconds = Some(600);
    let state: ProxyState = [(name("web"), e)].into();
    let l = lines(&full(&cfg(), &state, &Saved::default()));
    let check = l.iter().find(|x| x.contains("--update")).unwrap();
    assert!(
        check.contains("-p tcp -m recent --update --seconds 600 --reap --name CAIRN-AFF-"),
        "{check}"
    );
    assert!(l.iter().any(|x| x.contains(
        "-p tcp -m statistic --mode random --probability 0.50000000000 -m recent --set --name CAIRN-AFF-"
    )));
}

#[test]
fn removing_a_service_deletes_its_rules_and_chains() {
    let applied: ProxyState = [(name("web"), entry(10, &[2], None))].into();
    let desired = ProxyState::new();
    let r = partial(&cfg(), &applied, &desired, &diff(&applied, &desired));
    let l = lines(&r);
    assert_eq!(
        l.iter().filter(|x| x.starts_with("-X ")).count(),
        1,
        "{l:#?}"
    );
    assert_eq!(
        l.iter()
            .filter(|x| x.starts_with("-D CAIRN-SERVICES"))
            .count(),
        1
    );
}

#[test]
fn large_services_warn() {
    let many: Vec<u8> = (1..=255).collect();
    let mut e = entry(10, &many, None);
    let more = e.cluster.clone();
    for _ in 0..4 {
        e.cluster.extend(more.iter().cloned());
    }
    let state: ProxyState = [(name("web"), e)].into();
    let r = full(&cfg(), &state, &Saved::default());
    assert_eq!(r.warnings.len(), 1, "{:?}", r.warnings);
}

#[test]
fn cleanup_removes_only_the_proxys_chains_and_builtins_it_alone_used() {
    let text = "# Generated by iptables-save v1.8.9 (nf_tables) on now\n*nat\n:PREROUTING ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n:POSTROUTING DROP [0:0]\n:OTHER - [0:0]\n:CAIRN-SERVICES - [0:0]\n\
-A PREROUTING -j CAIRN-SERVICES\n-A PREROUTING -j OTHER\n-A OUTPUT -j CAIRN-SERVICES\n-A POSTROUTING -j CAIRN-SERVICES\nCOMMIT\n";
    let payload = cleanup(&Saved::parse(text)).unwrap();
    let l: Vec<&str> = payload.lines().collect();
    assert_eq!(
        l,
        [
            "*nat",
            ":CAIRN-SERVICES - [0:0]",
            "-D PREROUTING -j CAIRN-SERVICES",
            "-D OUTPUT -j CAIRN-SERVICES",
            "-D POSTROUTING -j CAIRN-SERVICES",
            "-X OUTPUT",
            "-X CAIRN-SERVICES",
            "COMMIT"
        ]
    );
    let legacy = text.replace(" (nf_tables)", " (legacy)");
    assert!(!cleanup(&Saved::parse(&legacy))
        .unwrap()
        .contains("-X OUTPUT"));
}

#[test]
fn nodeport_addresses_limit_the_nodeport_jumps() {
    let cfg = IptConfig {
        nodeport_cidrs: vec!["198.18.0.0/24".parse().unwrap()],
        ..cfg()
    };
    let r = Ruleset::build(&cfg, &ProxyState::new());
    let nodeports: Vec<&String> = r
        .jumps
        .iter()
        .filter(|(_, _, rule)| rule.contains("NODEPORTS"))
        .map(|(_, _, rule)| rule)
        .collect();
    assert_eq!(nodeports.len(), 5, "{nodeports:?}");
    assert!(nodeports.iter().all(|r| r.starts_with("-d 198.18.0.0/24 ")));
}
