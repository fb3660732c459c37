#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::net::Ipv4Addr;

use super::*;

fn ip(s: &str) -> Ipv4Addr {
    s.parse().unwrap()
}

#[test]
fn rules_print_as_nft_reads_them() {
    let masquerade_outside = Rule::new([
        Stmt::addr_is(AddrField::Daddr, ip("10.96.0.10")),
        Stmt::Addr {
            field: AddrField::Saddr,
            equal: false,
            net: "10.244.0.0/16".parse().unwrap(),
        },
        Stmt::MarkOr(0x4000),
    ]);
    assert_eq!(
        masquerade_outside.to_string(),
        "ip daddr 10.96.0.10 ip saddr != 10.244.0.0/16 meta mark set meta mark | 0x00004000"
    );
    let sticky_pick = Rule::new([
        Stmt::L4Proto(Proto::Udp),
        Stmt::OneIn(3),
        Stmt::RememberSaddr("affinity-x".into()),
        Stmt::Dnat(ip("10.244.1.2"), 53),
    ]);
    assert_eq!(
        sticky_pick.to_string(),
        "meta l4proto udp numgen random mod 3 == 0 update @affinity-x { ip saddr } dnat to 10.244.1.2:53"
    );
    let remembered = Rule::new([Stmt::SaddrInSet("a".into()), Stmt::Goto("c".into())]);
    assert_eq!(remembered.to_string(), "ip saddr @a goto c");
}

#[test]
fn operations_print_as_nft_commands() {
    let (t, m) = ("cairn-proxy-shard0".to_string(), "service-ips".to_string());
    let ops = [
        Op::DeleteElements {
            table: t.clone(),
            map: m.clone(),
            keys: vec![
                Key::AddrProtoPort(ip("10.96.0.1"), Proto::Tcp, 80),
                Key::ProtoPort(Proto::Sctp, 30000),
            ],
        },
        Op::AddChain {
            table: t.clone(),
            chain: "svc-x".into(),
        },
        Op::AddSet {
            table: t.clone(),
            set: "affinity-y".into(),
            definition: DynamicAddrSet {
                timeout_seconds: 10800,
            },
        },
        Op::AddElements {
            table: t.clone(),
            map: m,
            items: vec![
                (
                    Key::AddrProtoPort(ip("10.96.0.1"), Proto::Tcp, 80),
                    Verdict::Goto("svc-x".into()),
                ),
                (Key::ProtoPort(Proto::Udp, 53), Verdict::Drop),
            ],
        },
        Op::DeleteSet {
            table: t,
            set: "affinity-y".into(),
        },
    ];
    assert_eq!(
        script(&ops),
        "delete element ip cairn-proxy-shard0 service-ips { 10.96.0.1 . tcp . 80, sctp . 30000 }\n\
         add chain ip cairn-proxy-shard0 svc-x\n\
         add set ip cairn-proxy-shard0 affinity-y { type ipv4_addr; flags dynamic,timeout; timeout 10800s; }\n\
         add element ip cairn-proxy-shard0 service-ips { 10.96.0.1 . tcp . 80 : goto svc-x, udp . 53 : drop }\n\
         delete set ip cairn-proxy-shard0 affinity-y\n"
    );
}

#[test]
fn keys_are_padded_as_the_kernel_stores_concatenations() {
    assert_eq!(
        Key::AddrProtoPort(ip("10.96.0.1"), Proto::Tcp, 80).bytes(),
        [10, 96, 0, 1, 6, 0, 0, 0, 0, 80, 0, 0]
    );
    assert_eq!(
        Key::ProtoPort(Proto::Udp, 30000).bytes(),
        [17, 0, 0, 0, 0x75, 0x30, 0, 0]
    );
}
