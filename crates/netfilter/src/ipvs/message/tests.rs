#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use super::*;
use crate::ipvs::{IPPROTO_TCP, IPPROTO_UDP};
use crate::netlink::message::NLMSG_HDRLEN;
use crate::netlink::test_util::{hex, ip};

fn tcp_service() -> VirtualServer {
    VirtualServer {
        address: ip("10.96.0.10"),
        protocol: IPPROTO_TCP,
        port: 80,
        scheduler: "rr".into(),
        persistent_timeout: None,
    }
}

fn udp_persistent_service() -> VirtualServer {
    VirtualServer {
        address: ip("10.96.0.10"),
        protocol: IPPROTO_UDP,
        port: 53,
        scheduler: "rr".into(),
        persistent_timeout: Some(600),
    }
}

fn backend(weight: u32) -> RealServer {
    RealServer {
        address: ip("10.244.1.5"),
        port: 8080,
        weight,
        active_connections: 0,
        inactive_connections: 0,
    }
}

// The service identity every request below carries (nested IPVS_CMD_ATTR_SERVICE
// without its header): AF_INET, TCP, 10.96.0.10 in a 16-byte union, port 80.
const TCP_SERVICE_ID: &str = "\
    0600 0100 0200 0000 \
    0600 0200 0600 0000 \
    1400 0300 0a60000a 00000000 00000000 00000000 \
    0600 0400 0050 0000";

#[test]
fn family_request_bytes() {
    let expected = hex("20000000 1000 0100 01000000 00000000 \
         03 01 0000 \
         0900 0200 49505653 00 000000");
    assert_eq!(family_request(1), expected);
}

#[test]
fn new_service_bytes_with_persistence() {
    // Family id 0x1c, seq 5, REQUEST|ACK, NEW_SERVICE version 1.
    let expected = hex("68000000 1c00 0500 05000000 00000000 \
         01 01 0000 \
         5400 0180 \
           0600 0100 0200 0000 \
           0600 0200 1100 0000 \
           1400 0300 0a60000a 00000000 00000000 00000000 \
           0600 0400 0035 0000 \
           0700 0600 727200 00 \
           0c00 0700 01000000 ffffffff \
           0800 0800 58020000 \
           0800 0900 ffffffff");
    assert_eq!(new_service(0x1c, 5, &udp_persistent_service()), expected);
    // Without persistence: flags 0 under the full mask (so SET clears it), timeout 0.
    let plain = new_service(0x1c, 5, &tcp_service());
    let expected = hex(&format!(
        "68000000 1c00 0500 05000000 00000000 \
         01 01 0000 \
         5400 0180 {TCP_SERVICE_ID} \
           0700 0600 727200 00 \
           0c00 0700 00000000 ffffffff \
           0800 0800 00000000 \
           0800 0900 ffffffff"
    ));
    assert_eq!(plain, expected);
    // SET_SERVICE is the same message with command 2.
    let mut set = expected.clone();
    set[16] = 2;
    assert_eq!(set_service(0x1c, 5, &tcp_service()), set);
}

#[test]
fn del_service_bytes() {
    let expected = hex(&format!(
        "44000000 1c00 0500 07000000 00000000 \
         03 01 0000 \
         3000 0180 {TCP_SERVICE_ID}"
    ));
    assert_eq!(del_service(0x1c, 7, &tcp_service()), expected);
}

#[test]
fn dump_request_bytes() {
    let expected = hex("14000000 1c00 0103 08000000 00000000 04 01 0000");
    assert_eq!(dump_services(0x1c, 8), expected);
    let expected = hex(&format!(
        "44000000 1c00 0103 09000000 00000000 \
         08 01 0000 \
         3000 0180 {TCP_SERVICE_ID}"
    ));
    assert_eq!(dump_dests(0x1c, 9, &tcp_service()), expected);
}

#[test]
fn dest_request_bytes() {
    let full_dest = "\
        4800 0280 \
          1400 0100 0af40105 00000000 00000000 00000000 \
          0600 0200 1f90 0000 \
          0800 0300 00000000 \
          0800 0400 03000000 \
          0800 0500 00000000 \
          0800 0600 00000000 \
          0600 0b00 0200 0000";
    let expected = hex(&format!(
        "8c000000 1c00 0500 0a000000 00000000 \
         05 01 0000 \
         3000 0180 {TCP_SERVICE_ID} {full_dest}"
    ));
    assert_eq!(new_dest(0x1c, 10, &tcp_service(), &backend(3)), expected);
    let mut set = expected.clone();
    set[16] = 6;
    assert_eq!(set_dest(0x1c, 10, &tcp_service(), &backend(3)), set);
    // Delete: the identity only (address, port, family); the weight does not matter.
    let expected = hex(&format!(
        "6c000000 1c00 0500 0b000000 00000000 \
         07 01 0000 \
         3000 0180 {TCP_SERVICE_ID} \
         2800 0280 \
           1400 0100 0af40105 00000000 00000000 00000000 \
           0600 0200 1f90 0000 \
           0600 0b00 0200 0000"
    ));
    assert_eq!(del_dest(0x1c, 11, &tcp_service(), &backend(7)), expected);
}

// Answers captured from Debian's 6.1 kernel in a qemu guest (the integration test's
// run, family id 0x20), one datagram each.

/// `CTRL_CMD_NEWFAMILY` for "IPVS" (seq 0x21): id 0x20, its ops.
const CAPTURED_FAMILY: &str = "\
    840100001000000021000000760000000102000009000200495056530000000006000100200000000800\
    030001000000080004000000000008000500060000004401060014000100080001000100000008000200\
    0b000000140002000800010002000000080002000b000000140003000800010003000000080002000b00\
    0000140004000800010004000000080002000f000000140005000800010005000000080002000b000000\
    140006000800010006000000080002000b000000140007000800010007000000080002000b0000001400\
    08000800010008000000080002000d000000140009000800010009000000080002000b00000014000a00\
    080001000a000000080002000b00000014000b00080001000b000000080002000d00000014000c000800\
    01000c000000080002000b00000014000d00080001000d000000080002000b00000014000e0008000100\
    0f000000080002000b00000014000f000800010010000000080002000b00000014001000080001001100\
    0000080002000b000000";

/// One datagram of a GET_SERVICE dump (seq 0x10): UDP 10.96.0.10:53 rr persistent 600,
/// TCP 10.96.0.10:80 sh persistent 120 (flags with IP_VS_SVC_F_HASHED), stats included.
const CAPTURED_SERVICES: &str = "\
    40010000200002001000000076000000010100002c010100060001000200000006000200110000001400\
    03000a60000a000000000000000000000000060004000035000007000600727200000c00070003000000\
    ffffffff080008005802000008000900ffffffff5c000a00080001000000000008000200000000000800\
    0300000000000c00040000000000000000000c0005000000000000000000080006000000000008000700\
    000000000800080000000000080009000000000008000a00000000007c000c000c000100000000000000\
    00000c00020000000000000000000c00030000000000000000000c00040000000000000000000c000500\
    00000000000000000c00060000000000000000000c00070000000000000000000c000800000000000000\
    00000c00090000000000000000000c000a00000000000000000040010000200002001000000076000000\
    010100002c01010006000100020000000600020006000000140003000a60000a00000000000000000000\
    0000060004000050000007000600736800000c00070003000000ffffffff080008007800000008000900\
    ffffffff5c000a000800010000000000080002000000000008000300000000000c000400000000000000\
    00000c000500000000000000000008000600000000000800070000000000080008000000000008000900\
    0000000008000a00000000007c000c000c00010000000000000000000c00020000000000000000000c00\
    030000000000000000000c00040000000000000000000c00050000000000000000000c00060000000000\
    000000000c00070000000000000000000c00080000000000000000000c00090000000000000000000c00\
    0a000000000000000000";

/// One datagram of a GET_DEST dump (seq 0x14) of TCP 10.96.0.10:80: 10.244.2.5:8080
/// weight 1, 10.244.1.5:8080 weight 0 (newest first), stats included.
const CAPTURED_DESTS: &str = "\
    640100002000020014000000760000000501000050010200140001000af4020500000000000000000000\
    0000060002001f9000000800030000000000080004000100000005000d000000000006000e0000000000\
    06000f000000000008000500000000000800060000000000080007000000000008000800000000000800\
    09000000000006000b00020000005c000a00080001000000000008000200000000000800030000000000\
    0c00040000000000000000000c0005000000000000000000080006000000000008000700000000000800\
    080000000000080009000000000008000a00000000007c000c000c00010000000000000000000c000200\
    00000000000000000c00030000000000000000000c00040000000000000000000c000500000000000000\
    00000c00060000000000000000000c00070000000000000000000c00080000000000000000000c000900\
    00000000000000000c000a00000000000000000064010000200002001400000076000000050100005001\
    0200140001000af40105000000000000000000000000060002001f900000080003000000000008000400\
    0000000005000d000000000006000e000000000006000f00000000000800050000000000080006000000\
    000008000700000000000800080000000000080009000000000006000b00020000005c000a0008000100\
    00000000080002000000000008000300000000000c00040000000000000000000c000500000000000000\
    0000080006000000000008000700000000000800080000000000080009000000000008000a0000000000\
    7c000c000c00010000000000000000000c00020000000000000000000c00030000000000000000000c00\
    040000000000000000000c00050000000000000000000c00060000000000000000000c00070000000000\
    000000000c00080000000000000000000c00090000000000000000000c000a000000000000000000";

/// Its end (NLMSG_DONE, status 0).
const CAPTURED_DONE: &str = "\
    1400000003000200140000007600000000000000";

/// The ack of NEW_SERVICE seq 5 (NLM_F_CAPPED: only the request header echoed).
const CAPTURED_ACK: &str = "\
    240000000200000105000000760000000000000068000000200005000500000000000000";

/// NEW_SERVICE TCP 10.96.0.10:80 again (seq 7): -EEXIST, the whole request echoed.
const CAPTURED_EEXIST: &str = "\
    7c000000020000000700000076000000efffffff68000000200005000700000000000000010100005400\
    018006000100020000000600020006000000140003000a60000a00000000000000000000000006000400\
    0050000007000600727200000c00070000000000ffffffff080008000000000008000900ffffffff";

/// NEW_DEST 10.244.1.5:8080 weight 1 again (seq 0xb): -EEXIST with the request.
const CAPTURED_NEW_DEST_EEXIST: &str = "\
    a0000000020000000b00000076000000efffffff8c000000200005000b00000000000000050100003000\
    018006000100020000000600020006000000140003000a60000a00000000000000000000000006000400\
    0050000048000280140001000af40105000000000000000000000000060002001f900000080003000000\
    000008000400010000000800050000000000080006000000000006000b0002000000";

/// SET_DEST of the removed 10.244.2.5:8080 (seq 0x18): -ENOENT with the request.
const CAPTURED_SET_DEST_ENOENT: &str = "\
    a0000000020000001800000076000000feffffff8c000000200005001800000000000000060100003000\
    018006000100020000000600020006000000140003000a60000a00000000000000000000000006000400\
    0050000048000280140001000af40205000000000000000000000000060002001f900000080003000000\
    000008000400010000000800050000000000080006000000000006000b0002000000";

/// DEL_DEST 10.244.2.5:8080 again (seq 0x16): -ENOENT with the request.
const CAPTURED_DEL_DEST_ENOENT: &str = "\
    80000000020000001600000076000000feffffff6c000000200005001600000000000000070100003000\
    018006000100020000000600020006000000140003000a60000a00000000000000000000000006000400\
    0050000028000280140001000af40205000000000000000000000000060002001f90000006000b000200\
    0000";

/// DEL_SERVICE UDP 10.96.0.10:53 again (seq 0x1a): -ESRCH with the request.
const CAPTURED_DEL_SERVICE_ESRCH: &str = "\
    58000000020000001a00000076000000fdffffff44000000200005001a00000000000000030100003000\
    018006000100020000000600020011000000140003000a60000a00000000000000000000000006000400\
    00350000";

/// SET_SERVICE of the deleted UDP service (seq 0x1f): -ESRCH with the request.
const CAPTURED_SET_SERVICE_ESRCH: &str = "\
    7c000000020000001f00000076000000fdffffff68000000200005001f00000000000000020100005400\
    018006000100020000000600020011000000140003000a60000a00000000000000000000000006000400\
    0035000007000600727200000c00070001000000ffffffff080008005802000008000900ffffffff";

#[test]
fn decodes_the_captured_family_answer() {
    let datagram = hex(CAPTURED_FAMILY);
    let replies = parse_datagram(&datagram).unwrap();
    let [Reply::Genl {
        seq: 0x21,
        family: GENL_ID_CTRL,
        cmd: CTRL_CMD_NEWFAMILY,
        attrs,
    }] = replies.as_slice()
    else {
        panic!("{replies:?}");
    };
    assert_eq!(family_id(attrs).unwrap(), 0x20);
    // Without the id attribute: an error, not a guess.
    assert_eq!(
        family_id(&hex("09000200 49505653 00 000000")),
        Err(DecodeError::Missing("a family id"))
    );
}

#[test]
fn decodes_a_captured_service_dump() {
    let datagram = hex(CAPTURED_SERVICES);
    let services: Vec<VirtualServer> = parse_datagram(&datagram)
        .unwrap()
        .into_iter()
        .map(|r| match r {
            Reply::Genl {
                seq: 0x10,
                family: 0x20,
                cmd: IPVS_CMD_NEW_SERVICE,
                attrs,
            } => parse_service(attrs).unwrap().unwrap(),
            other => panic!("{other:?}"),
        })
        .collect();
    let tcp = VirtualServer {
        scheduler: "sh".into(),
        persistent_timeout: Some(120),
        ..tcp_service()
    };
    assert_eq!(services, vec![udp_persistent_service(), tcp]);
}

#[test]
fn decodes_a_captured_real_server_dump() {
    let datagram = hex(CAPTURED_DESTS);
    let reals: Vec<RealServer> = parse_datagram(&datagram)
        .unwrap()
        .into_iter()
        .map(|r| match r {
            Reply::Genl {
                seq: 0x14,
                family: 0x20,
                cmd: IPVS_CMD_NEW_DEST,
                attrs,
            } => parse_dest(attrs).unwrap().unwrap(),
            other => panic!("{other:?}"),
        })
        .collect();
    let drained = RealServer {
        address: ip("10.244.1.5"),
        ..backend(0)
    };
    let other = RealServer {
        address: ip("10.244.2.5"),
        ..backend(1)
    };
    assert_eq!(reals, vec![other, drained]);
    assert_eq!(
        parse_datagram(&hex(CAPTURED_DONE)).unwrap(),
        vec![Reply::Done { seq: 0x14, code: 0 }]
    );
}

/// The kernel echoes a refused request whole: those echoes are byte for byte what the
/// encoders here produce for the same arguments, so the kernel read exactly these.
#[test]
fn captured_errors_echo_the_encoded_requests() {
    let other = RealServer {
        address: ip("10.244.2.5"),
        ..backend(1)
    };
    let cases: [(&str, u32, i32, Vec<u8>); 7] = [
        (
            CAPTURED_EEXIST,
            7,
            libc::EEXIST,
            new_service(0x20, 7, &tcp_service()),
        ),
        (
            CAPTURED_NEW_DEST_EEXIST,
            0xb,
            libc::EEXIST,
            new_dest(0x20, 0xb, &tcp_service(), &backend(1)),
        ),
        (
            CAPTURED_SET_DEST_ENOENT,
            0x18,
            libc::ENOENT,
            set_dest(0x20, 0x18, &tcp_service(), &other),
        ),
        (
            CAPTURED_DEL_DEST_ENOENT,
            0x16,
            libc::ENOENT,
            del_dest(0x20, 0x16, &tcp_service(), &other),
        ),
        (
            CAPTURED_DEL_SERVICE_ESRCH,
            0x1a,
            libc::ESRCH,
            del_service(0x20, 0x1a, &udp_persistent_service()),
        ),
        (
            CAPTURED_SET_SERVICE_ESRCH,
            0x1f,
            libc::ESRCH,
            set_service(0x20, 0x1f, &udp_persistent_service()),
        ),
        (
            CAPTURED_ACK,
            5,
            0,
            // Success is capped: the request's header only.
            new_service(0x20, 5, &tcp_service())[..NLMSG_HDRLEN].to_vec(),
        ),
    ];
    for (captured, seq, errno, request) in cases {
        let datagram = hex(captured);
        assert_eq!(
            parse_datagram(&datagram).unwrap(),
            vec![Reply::Error { seq, code: -errno }],
            "{captured}"
        );
        assert_eq!(
            &datagram[NLMSG_HDRLEN + 4..],
            request.as_slice(),
            "{captured}"
        );
    }
}

#[test]
fn skips_ipv6_and_fwmark_services_and_ipv6_real_servers() {
    // AF_INET6 (10) service.
    let v6 = hex("0c00 0100 0600 0100 0a00 0000");
    assert_eq!(parse_service(&v6).unwrap(), None);
    // An IPv4 service named by firewall mark 7.
    let fwmark = hex("14000100 0600 0100 0200 0000 0800 0500 07000000");
    assert_eq!(parse_service(&fwmark).unwrap(), None);
    // A real server with IPVS_DEST_ATTR_ADDR_FAMILY AF_INET6.
    let dest = hex("0c000200 0600 0b00 0a00 0000");
    assert_eq!(parse_dest(&dest).unwrap(), None);
    // No service attribute at all.
    assert_eq!(
        parse_service(&[]),
        Err(DecodeError::Missing("a service attribute"))
    );
}

#[test]
fn rejects_truncated_input() {
    let mut dump = hex(CAPTURED_SERVICES);
    dump.truncate(100);
    assert!(matches!(
        parse_datagram(&dump),
        Err(DecodeError::Truncated { .. })
    ));
    // A service whose nested attribute claims more than the message has.
    let mut msg = hex(CAPTURED_SERVICES);
    msg.truncate(0x140);
    msg[20] = 0xff;
    msg[21] = 0x0f;
    let replies = parse_datagram(&msg).unwrap();
    let [Reply::Genl { attrs, .. }] = replies.as_slice() else {
        panic!("{replies:?}");
    };
    assert!(matches!(
        parse_service(attrs),
        Err(DecodeError::Truncated { .. })
    ));
}
