#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::net::Ipv4Addr;

use cairn_nft::{AddrField, Key, Op, Proto, Rule, Stmt, Verdict};

use super::lower::{ops, rule, Expr, KernelOp};

fn ip(s: &str) -> Ipv4Addr {
    s.parse().unwrap()
}

fn net_ne(field: AddrField, net: &str) -> Stmt {
    Stmt::Addr {
        field,
        equal: false,
        net: net.parse().unwrap(),
    }
}

#[test]
fn the_proxys_rules_lower_as_nft_compiles_them() {
    let masquerade = Rule::new([
        Stmt::addr_is(AddrField::Daddr, ip("10.96.0.10")),
        net_ne(AddrField::Saddr, "10.244.0.0/16"),
        Stmt::Jump("mark-for-masquerade".into()),
    ]);
    assert_eq!(
        rule(&masquerade).unwrap(),
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
    let pick = Rule::new([
        Stmt::L4Proto(Proto::Udp),
        Stmt::OneIn(3),
        Stmt::Dnat(ip("10.244.1.2"), 53),
    ]);
    assert_eq!(
        rule(&pick).unwrap(),
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
                address: ip("10.244.1.2"),
                port: 53
            },
        ]
    );
    let hairpin = Rule::new([
        Stmt::addr_is(AddrField::Saddr, ip("10.244.1.2")),
        Stmt::MarkOr(0x4000),
    ]);
    assert_eq!(rule(&hairpin).unwrap()[2], Expr::MarkOr { bits: 0x4000 });
    // A prefix that is not whole bytes is masked first.
    let wide = Rule::new([net_ne(AddrField::Saddr, "10.96.0.0/12")]);
    assert_eq!(
        rule(&wide).unwrap(),
        [
            Expr::Payload { offset: 12, len: 4 },
            Expr::Mask {
                mask: vec![255, 240, 0, 0]
            },
            Expr::Cmp {
                equal: false,
                data: vec![10, 96, 0, 0]
            },
        ]
    );
    // Sets are nft's: the transaction is printed for `nft -f`.
    let sticky = Rule::new([
        Stmt::SaddrInSet("affinity-x".into()),
        Stmt::Dnat(ip("10.0.0.1"), 80),
    ]);
    assert_eq!(rule(&sticky), None);
}

#[test]
fn operations_lower_to_kernel_operations_or_not_at_all() {
    let (t, m) = ("cairn-proxy".to_string(), "service-ips".to_string());
    let key = Key::AddrProtoPort(ip("10.96.0.10"), Proto::Tcp, 80);
    let partial = [
        Op::DeleteElements {
            table: t.clone(),
            map: m.clone(),
            keys: vec![key],
        },
        Op::AddChain {
            table: t.clone(),
            chain: "svc-a".into(),
        },
        Op::AddElements {
            table: t.clone(),
            map: "no-endpoint-nodeports".into(),
            items: vec![
                (Key::ProtoPort(Proto::Tcp, 30080), Verdict::Drop),
                (
                    Key::ProtoPort(Proto::Udp, 30081),
                    Verdict::Goto("reject-packet".into()),
                ),
            ],
        },
    ];
    let lowered = ops(&partial).unwrap();
    assert_eq!(
        lowered[0],
        KernelOp::DeleteElements(
            "cairn-proxy",
            "service-ips",
            vec![vec![10, 96, 0, 10, 6, 0, 0, 0, 0, 80, 0, 0]]
        )
    );
    let KernelOp::AddElements(_, _, items) = &lowered[2] else {
        panic!("{:?}", lowered[2])
    };
    assert_eq!(
        items[0],
        (vec![6, 0, 0, 0, 0x75, 0x80, 0, 0], &Verdict::Drop)
    );
    let with_set = [
        partial[1].clone(),
        Op::DeleteSet {
            table: t,
            set: "affinity-x".into(),
        },
    ];
    assert_eq!(ops(&with_set), None);
}

#[test]
fn a_batch_is_framed_and_numbered() {
    let (table, chain) = ("t".to_string(), "c".to_string());
    let typed = [
        Op::AddChain {
            table: table.clone(),
            chain: chain.clone(),
        },
        Op::FlushChain { table, chain },
    ];
    let bytes = super::encode::batch(&ops(&typed).unwrap(), 100);
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
