//! Operations as nf_tables netlink messages (`include/uapi/linux/netfilter/nf_tables.h`),
//! framed in one batch.

use cairn_nft::Verdict;

use super::lower::{Expr, KernelOp};
use crate::netlink::message::{begin, finish, put_attr, put_nested, NLM_F_ACK, NLM_F_REQUEST};

const NFNL_SUBSYS_NFTABLES: u16 = 10;
const NFNL_MSG_BATCH_BEGIN: u16 = 0x10;
const NFNL_MSG_BATCH_END: u16 = 0x11;
const NFT_MSG_NEWCHAIN: u16 = 3;
const NFT_MSG_DELCHAIN: u16 = 5;
const NFT_MSG_NEWRULE: u16 = 6;
const NFT_MSG_DELRULE: u16 = 8;
const NFT_MSG_NEWSETELEM: u16 = 12;
const NFT_MSG_DELSETELEM: u16 = 14;
const NLM_F_CREATE: u16 = 0x400;
const NLM_F_APPEND: u16 = 0x800;
const NFPROTO_IPV4: u8 = 2;

const NFTA_CHAIN_TABLE: u16 = 1;
const NFTA_CHAIN_NAME: u16 = 3;
const NFTA_RULE_TABLE: u16 = 1;
const NFTA_RULE_CHAIN: u16 = 2;
const NFTA_RULE_EXPRESSIONS: u16 = 4;
const NFTA_LIST_ELEM: u16 = 1;
const NFTA_EXPR_NAME: u16 = 1;
const NFTA_EXPR_DATA: u16 = 2;
const NFTA_SET_ELEM_LIST_TABLE: u16 = 1;
const NFTA_SET_ELEM_LIST_SET: u16 = 2;
const NFTA_SET_ELEM_LIST_ELEMENTS: u16 = 3;
const NFTA_SET_ELEM_KEY: u16 = 1;
const NFTA_SET_ELEM_DATA: u16 = 2;
const NFTA_DATA_VALUE: u16 = 1;
const NFTA_DATA_VERDICT: u16 = 2;
const NFTA_VERDICT_CODE: u16 = 1;
const NFTA_VERDICT_CHAIN: u16 = 2;
const NF_DROP: i32 = 0;
const NFT_JUMP: i32 = -3;
const NFT_GOTO: i32 = -4;
/// Registers: the verdict register and the first two 16-byte data registers.
const REG_VERDICT: u32 = 0;
const REG_1: u32 = 1;
const REG_2: u32 = 2;

fn nfgenmsg(family: u8, res_id: u16) -> [u8; 4] {
    let r = res_id.to_be_bytes();
    [family, 0, r[0], r[1]]
}

fn be32(b: &mut Vec<u8>, kind: u16, v: u32) {
    put_attr(b, kind, &v.to_be_bytes());
}

fn string(b: &mut Vec<u8>, kind: u16, s: &str) {
    let mut bytes = s.as_bytes().to_vec();
    bytes.push(0);
    put_attr(b, kind, &bytes);
}

fn value(b: &mut Vec<u8>, kind: u16, data: &[u8]) {
    put_nested(b, kind, |b| put_attr(b, NFTA_DATA_VALUE, data));
}

fn verdict(b: &mut Vec<u8>, kind: u16, code: i32, chain: Option<&str>) {
    put_nested(b, kind, |b| {
        put_nested(b, NFTA_DATA_VERDICT, |b| {
            put_attr(b, NFTA_VERDICT_CODE, &code.to_be_bytes());
            if let Some(c) = chain {
                string(b, NFTA_VERDICT_CHAIN, c);
            }
        });
    });
}

fn expr(b: &mut Vec<u8>, name: &str, data: impl FnOnce(&mut Vec<u8>)) {
    put_nested(b, NFTA_LIST_ELEM, |b| {
        string(b, NFTA_EXPR_NAME, name);
        put_nested(b, NFTA_EXPR_DATA, data);
    });
}

/// Attribute numbers per expression (`NFTA_PAYLOAD_*`, `NFTA_CMP_*`, ...) are each
/// expression's own, counted from 1.
fn put_expr(b: &mut Vec<u8>, e: &Expr) {
    match e {
        Expr::Payload { offset, len } => expr(b, "payload", |b| {
            be32(b, 1, REG_1); // DREG
            be32(b, 2, 1); // BASE: network header
            be32(b, 3, *offset);
            be32(b, 4, *len);
        }),
        Expr::Mask { mask } => expr(b, "bitwise", |b| {
            be32(b, 1, REG_1); // SREG
            be32(b, 2, REG_1); // DREG
            be32(b, 3, mask.len() as u32); // LEN
            value(b, 4, mask); // MASK
            value(b, 5, &vec![0; mask.len()]); // XOR
        }),
        Expr::Cmp { equal, data } => expr(b, "cmp", |b| {
            be32(b, 1, REG_1); // SREG
            be32(b, 2, if *equal { 0 } else { 1 }); // OP: eq / neq
            value(b, 3, data);
        }),
        Expr::MarkOr { bits } => {
            expr(b, "meta", |b| {
                be32(b, 1, REG_1); // DREG
                be32(b, 2, 3); // KEY: NFT_META_MARK
            });
            // `mark | bits` is `(mark & !bits) ^ bits`; the mark is a host-order u32.
            expr(b, "bitwise", |b| {
                be32(b, 1, REG_1); // SREG
                be32(b, 2, REG_1); // DREG
                be32(b, 3, 4); // LEN
                value(b, 4, &(!bits).to_ne_bytes()); // MASK
                value(b, 5, &bits.to_ne_bytes()); // XOR
            });
            expr(b, "meta", |b| {
                be32(b, 2, 3); // KEY: NFT_META_MARK
                be32(b, 3, REG_1); // SREG
            });
        }
        Expr::MetaL4Proto => expr(b, "meta", |b| {
            be32(b, 1, REG_1); // DREG
            be32(b, 2, 16); // KEY: NFT_META_L4PROTO
        }),
        Expr::Numgen { modulus } => expr(b, "numgen", |b| {
            be32(b, 1, REG_1); // DREG
            be32(b, 2, *modulus);
            be32(b, 3, 1); // TYPE: NFT_NG_RANDOM
            be32(b, 4, 0); // OFFSET
        }),
        Expr::Verdict { goto, chain } => expr(b, "immediate", |b| {
            be32(b, 1, REG_VERDICT);
            let code = if *goto { NFT_GOTO } else { NFT_JUMP };
            verdict(b, 2, code, Some(chain));
        }),
        Expr::Dnat { address, port } => {
            expr(b, "immediate", |b| {
                be32(b, 1, REG_1);
                value(b, 2, &address.octets());
            });
            expr(b, "immediate", |b| {
                be32(b, 1, REG_2);
                value(b, 2, &port.to_be_bytes());
            });
            expr(b, "nat", |b| {
                be32(b, 1, 1); // TYPE: NFT_NAT_DNAT
                be32(b, 2, u32::from(NFPROTO_IPV4));
                be32(b, 3, REG_1); // REG_ADDR_MIN
                be32(b, 5, REG_2); // REG_PROTO_MIN
                be32(b, 7, 0x2); // FLAGS: NF_NAT_RANGE_PROTO_SPECIFIED
            });
        }
    }
}

fn nft_msg(kind: u16, flags: u16, seq: u32, fill: impl FnOnce(&mut Vec<u8>)) -> Vec<u8> {
    let mut b = begin(
        (NFNL_SUBSYS_NFTABLES << 8) | kind,
        NLM_F_REQUEST | NLM_F_ACK | flags,
        seq,
        nfgenmsg(NFPROTO_IPV4, 0),
    );
    fill(&mut b);
    finish(b)
}

fn chain_msg(kind: u16, flags: u16, seq: u32, table: &str, chain: &str) -> Vec<u8> {
    nft_msg(kind, flags, seq, |b| {
        string(b, NFTA_CHAIN_TABLE, table);
        string(b, NFTA_CHAIN_NAME, chain);
    })
}

fn elements_msg(
    kind: u16,
    seq: u32,
    table: &str,
    map: &str,
    items: &[(&Vec<u8>, Option<&Verdict>)],
) -> Vec<u8> {
    let flags = if kind == NFT_MSG_NEWSETELEM {
        NLM_F_CREATE
    } else {
        0
    };
    nft_msg(kind, flags, seq, |b| {
        string(b, NFTA_SET_ELEM_LIST_TABLE, table);
        string(b, NFTA_SET_ELEM_LIST_SET, map);
        put_nested(b, NFTA_SET_ELEM_LIST_ELEMENTS, |b| {
            for (key, v) in items {
                put_nested(b, NFTA_LIST_ELEM, |b| {
                    value(b, NFTA_SET_ELEM_KEY, key);
                    match v {
                        Some(Verdict::Goto(c)) => verdict(b, NFTA_SET_ELEM_DATA, NFT_GOTO, Some(c)),
                        Some(Verdict::Drop) => verdict(b, NFTA_SET_ELEM_DATA, NF_DROP, None),
                        None => {}
                    }
                });
            }
        });
    })
}

/// One operation as a message with sequence number `seq`.
fn message(op: &KernelOp<'_>, seq: u32) -> Vec<u8> {
    match op {
        KernelOp::AddChain(table, chain) => {
            chain_msg(NFT_MSG_NEWCHAIN, NLM_F_CREATE, seq, table, chain)
        }
        KernelOp::DeleteChain(table, chain) => chain_msg(NFT_MSG_DELCHAIN, 0, seq, table, chain),
        KernelOp::FlushChain(table, chain) => nft_msg(NFT_MSG_DELRULE, 0, seq, |b| {
            string(b, NFTA_RULE_TABLE, table);
            string(b, NFTA_RULE_CHAIN, chain);
        }),
        KernelOp::AddRule(table, chain, exprs) => {
            nft_msg(NFT_MSG_NEWRULE, NLM_F_CREATE | NLM_F_APPEND, seq, |b| {
                string(b, NFTA_RULE_TABLE, table);
                string(b, NFTA_RULE_CHAIN, chain);
                put_nested(b, NFTA_RULE_EXPRESSIONS, |b| {
                    for e in exprs {
                        put_expr(b, e);
                    }
                });
            })
        }
        KernelOp::DeleteElements(table, map, keys) => {
            let items: Vec<_> = keys.iter().map(|k| (k, None)).collect();
            elements_msg(NFT_MSG_DELSETELEM, seq, table, map, &items)
        }
        KernelOp::AddElements(table, map, items) => {
            let items: Vec<_> = items.iter().map(|(k, v)| (k, Some(*v))).collect();
            elements_msg(NFT_MSG_NEWSETELEM, seq, table, map, &items)
        }
    }
}

/// The batch: begin, one message per operation (sequence numbers `first + 1` …), end.
pub(crate) fn batch(ops: &[KernelOp<'_>], first: u32) -> Vec<u8> {
    let mut out = finish(begin(
        NFNL_MSG_BATCH_BEGIN,
        NLM_F_REQUEST,
        first,
        nfgenmsg(0, NFNL_SUBSYS_NFTABLES),
    ));
    for (i, op) in ops.iter().enumerate() {
        let seq = first.wrapping_add(1).wrapping_add(i as u32);
        out.extend_from_slice(&message(op, seq));
    }
    let end_seq = first.wrapping_add(1).wrapping_add(ops.len() as u32);
    out.extend(finish(begin(
        NFNL_MSG_BATCH_END,
        NLM_F_REQUEST,
        end_seq,
        nfgenmsg(0, NFNL_SUBSYS_NFTABLES),
    )));
    out
}
