#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::net::Ipv4Addr;

use super::*;

fn ep(last: u8, local: bool) -> Endpoint {
    Endpoint {
        local,
        ..Endpoint::ready(Ipv4Addr::new(10, 244, 1, last), 8080)
    }
}

fn state(external_local: bool) -> ProxyState {
    let name = ServicePortName {
        namespace: "ns".into(),
        name: "web".into(),
        port: "http".into(),
        protocol: Protocol::Tcp,
    };
    let cluster = vec![ep(2, true), ep(3, false)];
    let external = if external_local {
        vec![ep(2, true)]
    } else {
        cluster.clone()
    };
    let entry = ServiceEntry {
        port: ServicePort {
            cluster_ip: Some(Ipv4Addr::new(10, 96, 0, 10)),
            port: 80,
            node_port: Some(30080),
            external_ips: vec![Ipv4Addr::new(198, 18, 0, 50)],
            affinity_seconds: Some(600),
            external_local,
            ..Default::default()
        },
        local_count: 1,
        cluster,
        external,
    };
    [(name, entry)].into()
}

#[test]
fn virtual_servers_per_frontend_and_node_address() {
    let node_ips = [Ipv4Addr::new(198, 18, 0, 10)];
    let d = desired(&state(true), &node_ips);
    let keys: Vec<String> = d
        .services
        .iter()
        .map(|(k, v)| {
            format!(
                "{}:{} {:?} {}",
                k.address,
                k.port,
                v.persistent_timeout,
                v.real_servers.len()
            )
        })
        .collect();
    assert_eq!(
        keys,
        [
            "10.96.0.10:80 Some(600) 2",
            "198.18.0.10:30080 Some(600) 1",
            "198.18.0.50:80 Some(600) 1"
        ]
    );
    assert_eq!(
        d.addresses.into_iter().collect::<Vec<_>>(),
        [Ipv4Addr::new(10, 96, 0, 10), Ipv4Addr::new(198, 18, 0, 50)]
    );
}

#[test]
fn node_port_addresses_skip_loopback_the_dummy_and_other_ranges() {
    let local = [
        ("lo".to_string(), Ipv4Addr::LOCALHOST),
        (DUMMY_LINK.to_string(), Ipv4Addr::new(10, 96, 0, 10)),
        ("eth0".to_string(), Ipv4Addr::new(198, 18, 0, 10)),
        ("cni0".to_string(), Ipv4Addr::new(10, 244, 1, 1)),
    ];
    let all = node_port_addresses(&IpvsConfig::default(), &local);
    assert_eq!(
        all,
        [Ipv4Addr::new(10, 244, 1, 1), Ipv4Addr::new(198, 18, 0, 10)]
    );
    let cfg = IpvsConfig {
        nodeport_cidrs: vec!["198.18.0.0/24".parse().unwrap()],
        ..Default::default()
    };
    assert_eq!(
        node_port_addresses(&cfg, &local),
        [Ipv4Addr::new(198, 18, 0, 10)]
    );
}

#[test]
fn helper_rules_mark_what_kube_proxy_masquerades() {
    let cfg = IpvsConfig {
        cluster_cidr: Some("10.244.0.0/16".parse().unwrap()),
        ..Default::default()
    };
    let local = rules::render(&cfg, &state(true));
    assert!(local.contains("ip saddr != 10.244.0.0/16 jump mark-for-masquerade"));
    assert!(local.contains(
        "elements = { 10.244.1.2 . tcp . 8080 . 10.244.1.2, 10.244.1.3 . tcp . 8080 . 10.244.1.3 }"
    ));
    // externalTrafficPolicy: Local: client addresses kept.
    assert!(!local.contains("198.18.0.50 . tcp . 80 }\n\t}\n\tset masq-node-ports"));
    assert!(!local.contains("tcp . 30080"));
    let cluster = rules::render(&cfg, &state(false));
    assert!(cluster.contains("set masq-node-ports {\n\t\ttype inet_proto . inet_service\n\t\telements = { tcp . 30080 }"), "{cluster}");
    assert!(cluster.contains("set masq-frontends {\n\t\ttype ipv4_addr . inet_proto . inet_service\n\t\telements = { 198.18.0.50 . tcp . 80 }"));
}
