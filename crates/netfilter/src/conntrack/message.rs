//! ctnetlink messages: the two requests the driver sends (a dump of the IPv4 table, a
//! delete by original tuple) and the answers it reads (flows, `NLMSG_DONE`,
//! `NLMSG_ERROR`). Netlink headers and attribute headers are in host byte order,
//! addresses and ports inside the tuples in network byte order, every attribute padded
//! to 4 bytes (`linux/netlink.h`, `linux/netfilter/nfnetlink_conntrack.h`).

use std::net::Ipv4Addr;

use super::Flow;
use crate::netlink::message::{
    self as netlink, attrs, error_code, finish, ipv4_attr, port_attr, put_attr, put_nested,
    truncated, NLMSG_DONE, NLMSG_ERROR, NLM_F_ACK, NLM_F_DUMP, NLM_F_REQUEST,
};

const NFNL_SUBSYS_CTNETLINK: u16 = 1;
const IPCTNL_MSG_CT_NEW: u16 = 0;
const IPCTNL_MSG_CT_GET: u16 = 1;
const IPCTNL_MSG_CT_DELETE: u16 = 2;
const NFGENMSG_LEN: usize = 4;
const AF_INET: u8 = 2;
const NFNETLINK_V0: u8 = 0;

const CTA_TUPLE_ORIG: u16 = 1;
const CTA_TUPLE_REPLY: u16 = 2;
const CTA_TUPLE_IP: u16 = 1;
const CTA_TUPLE_PROTO: u16 = 2;
const CTA_IP_V4_SRC: u16 = 1;
const CTA_IP_V4_DST: u16 = 2;
const CTA_PROTO_NUM: u16 = 1;
const CTA_PROTO_SRC_PORT: u16 = 2;
const CTA_PROTO_DST_PORT: u16 = 3;

// `pub enum DecodeError` (Truncated, Missing) and its conversion from the shared decoder's
// failures.
netlink::decode_error!("IPv4 flow without {0}");

/// One decoded netlink message of an answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Reply {
    /// A dumped flow; `None` when it is not IPv4 (the kernel filters by family, this is
    /// belt and braces).
    Flow { seq: u32, flow: Option<Flow> },
    /// The end of a dump, with its status (0, or a negative errno).
    Done { seq: u32, code: i32 },
    /// An ack (`code` 0) or an error (a negative errno) for request `seq`.
    Error { seq: u32, code: i32 },
    /// Anything else (skipped).
    Other { seq: u32 },
}

fn nfnl_type(msg: u16) -> u16 {
    (NFNL_SUBSYS_CTNETLINK << 8) | msg
}

/// A netlink header with a zero length (set by `finish`) and the IPv4 nfgenmsg.
fn begin(msg: u16, flags: u16, seq: u32) -> Vec<u8> {
    // res_id 0 (big endian)
    netlink::begin(nfnl_type(msg), flags, seq, [AF_INET, NFNETLINK_V0, 0, 0])
}

/// `IPCTNL_MSG_CT_GET` with `NLM_F_DUMP` for the IPv4 table.
pub(crate) fn dump_request(seq: u32) -> Vec<u8> {
    finish(begin(IPCTNL_MSG_CT_GET, NLM_F_REQUEST | NLM_F_DUMP, seq))
}

/// `IPCTNL_MSG_CT_DELETE` of one flow, acked. Always carries the original tuple: a
/// delete without any tuple would flush the whole table.
pub(crate) fn delete_request(seq: u32, flow: &Flow) -> Vec<u8> {
    let mut b = begin(IPCTNL_MSG_CT_DELETE, NLM_F_REQUEST | NLM_F_ACK, seq);
    put_nested(&mut b, CTA_TUPLE_ORIG, |b| {
        put_nested(b, CTA_TUPLE_IP, |b| {
            put_attr(b, CTA_IP_V4_SRC, &flow.orig_src.octets());
            put_attr(b, CTA_IP_V4_DST, &flow.orig_dst.octets());
        });
        put_nested(b, CTA_TUPLE_PROTO, |b| {
            put_attr(b, CTA_PROTO_NUM, &[flow.protocol]);
            put_attr(b, CTA_PROTO_SRC_PORT, &flow.orig_sport.to_be_bytes());
            put_attr(b, CTA_PROTO_DST_PORT, &flow.orig_dport.to_be_bytes());
        });
    });
    finish(b)
}

/// Every netlink message in one received datagram.
pub(crate) fn parse_datagram(buf: &[u8]) -> Result<Vec<Reply>, DecodeError> {
    netlink::parse_datagram(buf, parse_message)
}

fn parse_message(kind: u16, seq: u32, payload: &[u8]) -> Result<Reply, DecodeError> {
    Ok(match kind {
        NLMSG_ERROR => Reply::Error {
            seq,
            code: error_code(payload)?,
        },
        // A DONE without a status (some families send none) is a success.
        NLMSG_DONE if payload.is_empty() => Reply::Done { seq, code: 0 },
        NLMSG_DONE => Reply::Done {
            seq,
            code: error_code(payload)?,
        },
        k if k == nfnl_type(IPCTNL_MSG_CT_NEW) => Reply::Flow {
            seq,
            flow: parse_flow(payload)?,
        },
        _ => Reply::Other { seq },
    })
}

/// A dumped flow (nfgenmsg, then attributes); `None` unless both tuples are IPv4.
fn parse_flow(payload: &[u8]) -> Result<Option<Flow>, DecodeError> {
    let Some((nfgen, attributes)) = payload.split_at_checked(NFGENMSG_LEN) else {
        return Err(truncated("nfgenmsg", NFGENMSG_LEN, payload.len()).into());
    };
    if nfgen[0] != AF_INET {
        return Ok(None);
    }
    let (mut orig, mut reply) = (None, None);
    for a in attrs(attributes) {
        match a? {
            (CTA_TUPLE_ORIG, b) => orig = Some(parse_tuple(b)?),
            (CTA_TUPLE_REPLY, b) => reply = Some(parse_tuple(b)?),
            _ => {}
        }
    }
    let orig = orig.ok_or(DecodeError::Missing("an original tuple"))?;
    let reply = reply.ok_or(DecodeError::Missing("a reply tuple"))?;
    let (Some(o), Some(r)) = (orig, reply) else {
        return Ok(None);
    };
    Ok(Some(Flow {
        protocol: o.protocol,
        orig_src: o.src,
        orig_dst: o.dst,
        orig_sport: o.sport,
        orig_dport: o.dport,
        reply_src: r.src,
        reply_dst: r.dst,
        reply_sport: r.sport,
        reply_dport: r.dport,
    }))
}

struct Tuple {
    protocol: u8,
    src: Ipv4Addr,
    dst: Ipv4Addr,
    sport: u16,
    dport: u16,
}

/// A tuple; `None` when it has no IPv4 addresses (an IPv6 one). Protocols without ports
/// (ICMP) get ports 0.
fn parse_tuple(buf: &[u8]) -> Result<Option<Tuple>, DecodeError> {
    let (mut src, mut dst, mut protocol) = (None, None, None);
    let (mut sport, mut dport) = (0, 0);
    for a in attrs(buf) {
        match a? {
            (CTA_TUPLE_IP, ip) => {
                for a in attrs(ip) {
                    match a? {
                        (CTA_IP_V4_SRC, b) => src = Some(ipv4_attr(b)?),
                        (CTA_IP_V4_DST, b) => dst = Some(ipv4_attr(b)?),
                        _ => {}
                    }
                }
            }
            (CTA_TUPLE_PROTO, proto) => {
                for a in attrs(proto) {
                    match a? {
                        (CTA_PROTO_NUM, b) => protocol = b.first().copied(),
                        (CTA_PROTO_SRC_PORT, b) => sport = port_attr(b)?,
                        (CTA_PROTO_DST_PORT, b) => dport = port_attr(b)?,
                        _ => {}
                    }
                }
            }
            _ => {}
        }
    }
    let (Some(src), Some(dst)) = (src, dst) else {
        return Ok(None);
    };
    let protocol = protocol.ok_or(DecodeError::Missing("a protocol number"))?;
    Ok(Some(Tuple {
        protocol,
        src,
        dst,
        sport,
        dport,
    }))
}

#[cfg(all(test, target_endian = "little"))]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

    use super::*;
    use crate::conntrack::{IPPROTO_TCP, IPPROTO_UDP};
    use crate::netlink::test_util::{hex, ip};

    #[test]
    fn dump_request_bytes() {
        let expected = hex("14000000 0101 0103 07000000 00000000 \
             02 00 0000");
        assert_eq!(dump_request(7), expected);
    }

    /// The bytes `conntrack -D` style deletes carry, byte for byte what the kernel acked
    /// when captured (the request is echoed in the ENOENT answer below).
    #[test]
    fn delete_request_bytes() {
        let flow = Flow::unnatted(IPPROTO_UDP, ip("10.0.0.1"), 1000, ip("10.0.0.2"), 53);
        let expected = hex("48000000 0201 0500 09000000 00000000 \
             02 00 0000 \
             3400 0180 \
               1400 0180 \
                 0800 0100 0a000001 \
                 0800 0200 0a000002 \
               1c00 0280 \
                 0500 0100 11 000000 \
                 0600 0200 03e8 0000 \
                 0600 0300 0035 0000");
        assert_eq!(delete_request(9, &flow), expected);
        // Only the original tuple matters: a different reply changes nothing.
        let mut natted = flow;
        natted.reply_src = ip("10.244.1.5");
        assert_eq!(delete_request(9, &natted), expected);
    }

    /// One datagram of a dump captured from a 6.18 kernel in a fresh namespace after
    /// `conntrack -I`: a DNATed UDP flow, a TCP flow (with protoinfo), a plain UDP flow.
    const CAPTURED_DUMP: &str = "\
        c0000000000122000700000003410000020000003400018014000180080001000a000003080002000a60\
        000a1c0002800500010011000000060002009c40000006000300003500003400028014000180080001000a\
        f40105080002000a0000031c00028005000100110000000600020014e90000060003009c40000008000300\
        00000008080008000000000008000c005210626008000b0000000001080007000000005f1c001880080001\
        000000000008000200000000000800030000000000f0000000000122000700000003410000020000003400\
        018014000180080001000a000001080002000a0000021c00028005000100060000000600020007d0000006\
        000300005000003400028014000180080001000a000002080002000a0000011c0002800500010006000000\
        06000200005000000600030007d000000800030000000008080008000000000008000c00a7c23f3d08000b\
        00000000010800070000000063300004802c00018005000100030000000500020000000000050003000000\
        0000060004000a000000060005000a0000001c001880080001000000000008000200000000000800030000\
        000000c0000000000122000700000003410000020000003400018014000180080001000a00000108000200\
        0a0000021c00028005000100110000000600020003e8000006000300003500003400028014000180080001\
        000a000002080002000a0000011c000280050001001100000006000200003500000600030003e800000800\
        030000000008080008000000000008000c00b457008e08000b0000000001080007000000005f1c00188008\
        0001000000000008000200000000000800030000000000";
    const CAPTURED_DONE: &str = "1400000003000200070000000341000000000000";

    #[test]
    fn decodes_a_captured_dump() {
        let replies = parse_datagram(&hex(CAPTURED_DUMP)).unwrap();
        let flows: Vec<Flow> = replies
            .iter()
            .map(|r| match r {
                Reply::Flow {
                    seq: 7,
                    flow: Some(f),
                } => *f,
                other => panic!("{other:?}"),
            })
            .collect();
        let dnat = Flow {
            protocol: IPPROTO_UDP,
            orig_src: ip("10.0.0.3"),
            orig_dst: ip("10.96.0.10"),
            orig_sport: 40000,
            orig_dport: 53,
            reply_src: ip("10.244.1.5"),
            reply_dst: ip("10.0.0.3"),
            reply_sport: 5353,
            reply_dport: 40000,
        };
        let tcp = Flow::unnatted(IPPROTO_TCP, ip("10.0.0.1"), 2000, ip("10.0.0.2"), 80);
        let udp = Flow::unnatted(IPPROTO_UDP, ip("10.0.0.1"), 1000, ip("10.0.0.2"), 53);
        assert_eq!(flows, vec![dnat, tcp, udp]);
        assert_eq!(
            parse_datagram(&hex(CAPTURED_DONE)).unwrap(),
            vec![Reply::Done { seq: 7, code: 0 }]
        );
    }

    #[test]
    fn decodes_captured_acks() {
        // Success: NLMSG_ERROR with code 0 and the request's header (NLM_F_CAPPED).
        let ok = hex("240000000200000109000000434100000000000048000000020105000900000000000000");
        assert_eq!(
            parse_datagram(&ok).unwrap(),
            vec![Reply::Error { seq: 9, code: 0 }]
        );
        // The same delete again: -ENOENT, with the whole request echoed.
        let enoent = hex(
            "5c000000020000000a00000043410000feffffff48000000020105000a00000000000000020000\
             003400018014000180080001000a000001080002000a0000021c0002800500010011000000060002\
             0003e800000600030000350000",
        );
        assert_eq!(
            parse_datagram(&enoent).unwrap(),
            vec![Reply::Error {
                seq: 10,
                code: -libc::ENOENT
            }]
        );
    }

    #[test]
    fn rejects_truncated_input() {
        let mut dump = hex(CAPTURED_DUMP);
        dump.truncate(100);
        assert!(matches!(
            parse_datagram(&dump),
            Err(DecodeError::Truncated { .. })
        ));
        // A flow whose tuple attribute claims more than it has.
        let mut msg = hex(CAPTURED_DUMP);
        msg.truncate(0xc0);
        msg[20] = 0xff; // CTA_TUPLE_ORIG's length
        assert!(parse_datagram(&msg).is_err());
    }

    #[test]
    fn skips_ipv6_flows() {
        // nfgenmsg AF_INET6 (10): not decoded further.
        let v6 = hex("18000000 0001 2200 07000000 00000000 0a000000 04000100");
        assert_eq!(
            parse_datagram(&v6).unwrap(),
            vec![Reply::Flow { seq: 7, flow: None }]
        );
    }
}
