#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use super::parse::{rule, script, ElementVerdict, Expr, Op};

#[test]
fn the_proxys_rule_shapes_parse() {
    assert_eq!(
        rule("ip daddr 10.96.0.10 ip saddr != 10.244.0.0/16 jump mark-for-masquerade").unwrap(),
        [
            Expr::Payload { offset: 16, len: 4 },
            Expr::Cmp {
                equal: true,
                data: vec![10, 96, 0, 10]
            },
            Expr::Payload { offset: 12, len: 2 },
            Expr::Cmp {
                equal: false,
                data: vec![10, 244]
            },
            Expr::Verdict {
                goto: false,
                chain: "mark-for-masquerade".into()
            },
        ]
    );
    assert_eq!(
        rule("meta l4proto udp numgen random mod 3 == 0 dnat to 10.244.1.2:53").unwrap(),
        [
            Expr::MetaL4Proto,
            Expr::Cmp {
                equal: true,
                data: vec![17]
            },
            Expr::Numgen { modulus: 3 },
            Expr::Cmp {
                equal: true,
                data: vec![0; 4]
            },
            Expr::Dnat {
                address: "10.244.1.2".parse().unwrap(),
                port: 53
            },
        ]
    );
    assert_eq!(rule("jump mark-for-masquerade").unwrap().len(), 1);
    assert_eq!(
        rule("ip saddr 10.244.1.2 meta mark set meta mark | 0x00004000").unwrap()[2],
        Expr::MarkOr { bits: 0x4000 }
    );
    // Outside the subset: the caller falls back to nft.
    for other in [
        "ip saddr @affinity-x meta l4proto tcp update @affinity-x { ip saddr } dnat to 10.0.0.1:80",
        "ip saddr != 10.96.0.0/12 jump x",
        "masquerade fully-random",
        "meta l4proto tcp dnat to 10.0.0.1:80 counter",
    ] {
        assert_eq!(rule(other), None, "{other}");
    }
}

#[test]
fn partial_scripts_parse_and_others_do_not() {
    let partial = "delete element ip cairn-proxy service-ips { 10.96.0.10 . tcp . 80 }\n\
        add chain ip cairn-proxy svc-a\nflush chain ip cairn-proxy svc-a\n\
        flush chain ip cairn-proxy svc-b\ndelete chain ip cairn-proxy svc-b\n\
        add rule ip cairn-proxy svc-a meta l4proto tcp dnat to 10.244.1.2:8080\n\
        add element ip cairn-proxy service-ips { 10.96.0.10 . tcp . 80 : goto svc-a }\n\
        add element ip cairn-proxy no-endpoint-nodeports { tcp . 30080 : drop, udp . 30081 : goto reject-packet }\n";
    let ops = script(partial).unwrap();
    assert_eq!(ops.len(), 8);
    assert_eq!(
        ops[0],
        Op::DeleteElements {
            table: "cairn-proxy".into(),
            map: "service-ips".into(),
            keys: vec![vec![10, 96, 0, 10, 6, 0, 0, 0, 0, 80, 0, 0]],
        }
    );
    let Op::AddElements { items, .. } = &ops[7] else {
        panic!("{:?}", ops[7])
    };
    assert_eq!(
        items[0],
        (vec![6, 0, 0, 0, 0x75, 0x80, 0, 0], ElementVerdict::Drop)
    );
    assert_eq!(items[1].1, ElementVerdict::Goto("reject-packet".into()));
    for full in [
        "add table ip cairn-proxy\ndelete table ip cairn-proxy\ntable ip cairn-proxy {\n}\n",
        "add set ip cairn-proxy affinity-x { type ipv4_addr; flags dynamic,timeout; timeout 10s; }\n",
        "delete table ip cairn-proxy\n",
    ] {
        assert_eq!(script(full), None, "{full}");
    }
}

#[test]
fn a_batch_is_framed_and_numbered() {
    let ops = script("add chain ip t c\nflush chain ip t c\n").unwrap();
    let bytes = super::encode::batch(&ops, 100);
    let kind = |at: usize| u16::from_ne_bytes([bytes[at + 4], bytes[at + 5]]);
    let seq = |at: usize| u32::from_ne_bytes(bytes[at + 8..at + 12].try_into().unwrap());
    let len = |at: usize| u32::from_ne_bytes(bytes[at..at + 4].try_into().unwrap()) as usize;
    let mut at = 0;
    let mut seen = Vec::new();
    while at < bytes.len() {
        seen.push((kind(at), seq(at)));
        at += len(at);
    }
    // Batch begin, NEWCHAIN, DELRULE (flush), batch end.
    assert_eq!(
        seen,
        [
            (0x10, 100),
            ((10 << 8) | 3, 101),
            ((10 << 8) | 8, 102),
            (0x11, 103)
        ]
    );
}
