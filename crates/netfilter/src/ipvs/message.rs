//! IPVS generic netlink messages: the family lookup through the generic netlink controller,
//! the service and real server requests the driver sends, and the answers it reads.
//! Netlink, generic netlink and attribute headers are in host byte order, as are the
//! u16/u32 attributes, except ports and the persistence netmask, which are in network
//! byte order; addresses are the kernel's 16-byte `nf_inet_addr` union (IPv4 in the first
//! 4 bytes); every attribute is padded to 4 bytes (`linux/netlink.h`,
//! `linux/genetlink.h`, `linux/ip_vs.h`).

use std::net::Ipv4Addr;

use super::{RealServer, VirtualServer};
use crate::netlink::message::{
    self as netlink, attrs, error_code, finish, ipv4_attr, port_attr, put_attr, put_nested,
    truncated, u16_attr, u32_attr, NLMSG_DONE, NLMSG_ERROR, NLM_F_ACK, NLM_F_DUMP, NLM_F_REQUEST,
};

const GENL_HDRLEN: usize = 4;

/// The generic netlink controller's fixed family id and what it is asked.
pub(crate) const GENL_ID_CTRL: u16 = 0x10;
const CTRL_VERSION: u8 = 1;
pub(crate) const CTRL_CMD_NEWFAMILY: u8 = 1;
const CTRL_CMD_GETFAMILY: u8 = 3;
const CTRL_ATTR_FAMILY_ID: u16 = 1;
const CTRL_ATTR_FAMILY_NAME: u16 = 2;
const IPVS_GENL_NAME: &[u8] = b"IPVS";
const IPVS_GENL_VERSION: u8 = 1;

// IPVS commands.
pub(crate) const IPVS_CMD_NEW_SERVICE: u8 = 1;
const IPVS_CMD_SET_SERVICE: u8 = 2;
const IPVS_CMD_DEL_SERVICE: u8 = 3;
const IPVS_CMD_GET_SERVICE: u8 = 4;
pub(crate) const IPVS_CMD_NEW_DEST: u8 = 5;
const IPVS_CMD_SET_DEST: u8 = 6;
const IPVS_CMD_DEL_DEST: u8 = 7;
const IPVS_CMD_GET_DEST: u8 = 8;

// First-level attributes.
const IPVS_CMD_ATTR_SERVICE: u16 = 1;
const IPVS_CMD_ATTR_DEST: u16 = 2;

// Service attributes (inside IPVS_CMD_ATTR_SERVICE).
const IPVS_SVC_ATTR_AF: u16 = 1;
const IPVS_SVC_ATTR_PROTOCOL: u16 = 2;
const IPVS_SVC_ATTR_ADDR: u16 = 3;
const IPVS_SVC_ATTR_PORT: u16 = 4;
const IPVS_SVC_ATTR_FWMARK: u16 = 5;
const IPVS_SVC_ATTR_SCHED_NAME: u16 = 6;
const IPVS_SVC_ATTR_FLAGS: u16 = 7;
const IPVS_SVC_ATTR_TIMEOUT: u16 = 8;
const IPVS_SVC_ATTR_NETMASK: u16 = 9;

// Destination attributes (inside IPVS_CMD_ATTR_DEST).
const IPVS_DEST_ATTR_ADDR: u16 = 1;
const IPVS_DEST_ATTR_PORT: u16 = 2;
const IPVS_DEST_ATTR_FWD_METHOD: u16 = 3;
const IPVS_DEST_ATTR_WEIGHT: u16 = 4;
const IPVS_DEST_ATTR_U_THRESH: u16 = 5;
const IPVS_DEST_ATTR_L_THRESH: u16 = 6;
const IPVS_DEST_ATTR_ACTIVE_CONNS: u16 = 7;
const IPVS_DEST_ATTR_INACT_CONNS: u16 = 8;
const IPVS_DEST_ATTR_ADDR_FAMILY: u16 = 11;

const AF_INET: u16 = 2;
/// `IP_VS_SVC_F_PERSISTENT`.
const IP_VS_SVC_F_PERSISTENT: u32 = 0x1;
/// `IP_VS_CONN_F_MASQ`: NAT to the real server, the only method a service proxy uses.
const IP_VS_CONN_F_MASQ: u32 = 0;
/// The persistence netmask of an IPv4 service: each client address on its own.
const PERSISTENCE_NETMASK_V4: [u8; 4] = [0xff; 4];
/// `IP_VS_SCHEDNAME_MAXLEN`, terminating NUL included.
pub(crate) const SCHED_NAME_MAX: usize = 16;

// `pub enum DecodeError` (Truncated, Missing) and its conversion from the shared decoder's
// failures.
netlink::decode_error!("answer without {0}");

/// One decoded netlink message of an answer; a generic netlink message's attributes are
/// borrowed from the datagram.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Reply<'a> {
    /// A generic netlink message of family `family` (the controller's or IPVS's).
    Genl {
        seq: u32,
        family: u16,
        cmd: u8,
        attrs: &'a [u8],
    },
    /// The end of a dump, with its status (0, or a negative errno).
    Done { seq: u32, code: i32 },
    /// An ack (`code` 0) or an error (a negative errno) for request `seq`.
    Error { seq: u32, code: i32 },
    /// Anything else (skipped).
    Other { seq: u32 },
}

/// A netlink header with a zero length (set by `finish`) and the generic netlink header.
fn begin(family: u16, flags: u16, seq: u32, cmd: u8, version: u8) -> Vec<u8> {
    netlink::begin(family, flags, seq, [cmd, version, 0, 0])
}

fn put_u16(b: &mut Vec<u8>, kind: u16, value: u16) {
    put_attr(b, kind, &value.to_ne_bytes());
}

fn put_u32(b: &mut Vec<u8>, kind: u16, value: u32) {
    put_attr(b, kind, &value.to_ne_bytes());
}

/// An IPv4 address as the kernel's 16-byte `nf_inet_addr`.
fn put_addr(b: &mut Vec<u8>, kind: u16, addr: Ipv4Addr) {
    let mut union = [0u8; 16];
    union[..4].copy_from_slice(&addr.octets());
    put_attr(b, kind, &union);
}

/// `CTRL_CMD_GETFAMILY` for "IPVS": answered by `CTRL_CMD_NEWFAMILY` or `-ENOENT`.
pub(crate) fn family_request(seq: u32) -> Vec<u8> {
    let mut b = begin(
        GENL_ID_CTRL,
        NLM_F_REQUEST,
        seq,
        CTRL_CMD_GETFAMILY,
        CTRL_VERSION,
    );
    let mut name = IPVS_GENL_NAME.to_vec();
    name.push(0);
    put_attr(&mut b, CTRL_ATTR_FAMILY_NAME, &name);
    finish(b)
}

/// The attributes that identify a service: family, protocol, address, port (the kernel
/// needs all four unless a firewall mark names the service; this driver never uses marks).
fn put_service_id(b: &mut Vec<u8>, s: &VirtualServer) {
    put_u16(b, IPVS_SVC_ATTR_AF, AF_INET);
    put_u16(b, IPVS_SVC_ATTR_PROTOCOL, u16::from(s.protocol));
    put_addr(b, IPVS_SVC_ATTR_ADDR, s.address);
    put_attr(b, IPVS_SVC_ATTR_PORT, &s.port.to_be_bytes());
}

/// A whole service, as adding or changing one needs: scheduler, flags (with a full mask, so
/// persistence is switched off as well as on), persistence timeout and netmask.
fn put_service_full(b: &mut Vec<u8>, s: &VirtualServer) {
    put_service_id(b, s);
    let mut sched = s.scheduler.as_bytes().to_vec();
    sched.push(0);
    put_attr(b, IPVS_SVC_ATTR_SCHED_NAME, &sched);
    let flags = if s.persistent_timeout.is_some() {
        IP_VS_SVC_F_PERSISTENT
    } else {
        0
    };
    let mut flags_attr = [0u8; 8];
    flags_attr[..4].copy_from_slice(&flags.to_ne_bytes());
    flags_attr[4..].copy_from_slice(&u32::MAX.to_ne_bytes());
    put_attr(b, IPVS_SVC_ATTR_FLAGS, &flags_attr);
    put_u32(b, IPVS_SVC_ATTR_TIMEOUT, s.persistent_timeout.unwrap_or(0));
    put_attr(b, IPVS_SVC_ATTR_NETMASK, &PERSISTENCE_NETMASK_V4);
}

fn ipvs_request(family: u16, flags: u16, seq: u32, cmd: u8) -> Vec<u8> {
    begin(family, flags, seq, cmd, IPVS_GENL_VERSION)
}

const ACKED: u16 = NLM_F_REQUEST | NLM_F_ACK;

/// `IPVS_CMD_NEW_SERVICE` (acked).
pub(crate) fn new_service(family: u16, seq: u32, s: &VirtualServer) -> Vec<u8> {
    let mut b = ipvs_request(family, ACKED, seq, IPVS_CMD_NEW_SERVICE);
    put_nested(&mut b, IPVS_CMD_ATTR_SERVICE, |b| put_service_full(b, s));
    finish(b)
}

/// `IPVS_CMD_SET_SERVICE` (acked): scheduler, persistence.
pub(crate) fn set_service(family: u16, seq: u32, s: &VirtualServer) -> Vec<u8> {
    let mut b = ipvs_request(family, ACKED, seq, IPVS_CMD_SET_SERVICE);
    put_nested(&mut b, IPVS_CMD_ATTR_SERVICE, |b| put_service_full(b, s));
    finish(b)
}

/// `IPVS_CMD_DEL_SERVICE` (acked), the service by its identity only.
pub(crate) fn del_service(family: u16, seq: u32, s: &VirtualServer) -> Vec<u8> {
    let mut b = ipvs_request(family, ACKED, seq, IPVS_CMD_DEL_SERVICE);
    put_nested(&mut b, IPVS_CMD_ATTR_SERVICE, |b| put_service_id(b, s));
    finish(b)
}

/// `IPVS_CMD_GET_SERVICE` as a dump of every service.
pub(crate) fn dump_services(family: u16, seq: u32) -> Vec<u8> {
    finish(ipvs_request(
        family,
        NLM_F_REQUEST | NLM_F_DUMP,
        seq,
        IPVS_CMD_GET_SERVICE,
    ))
}

/// `IPVS_CMD_GET_DEST` as a dump of one service's real servers.
pub(crate) fn dump_dests(family: u16, seq: u32, s: &VirtualServer) -> Vec<u8> {
    let mut b = ipvs_request(family, NLM_F_REQUEST | NLM_F_DUMP, seq, IPVS_CMD_GET_DEST);
    put_nested(&mut b, IPVS_CMD_ATTR_SERVICE, |b| put_service_id(b, s));
    finish(b)
}

/// A real server's identity: address, port and (explicitly) its address family.
fn put_dest_id(b: &mut Vec<u8>, r: &RealServer) {
    put_addr(b, IPVS_DEST_ATTR_ADDR, r.address);
    put_attr(b, IPVS_DEST_ATTR_PORT, &r.port.to_be_bytes());
    put_u16(b, IPVS_DEST_ATTR_ADDR_FAMILY, AF_INET);
}

/// A whole real server, as adding or changing one needs: masquerading, the weight, no
/// connection thresholds.
fn put_dest_full(b: &mut Vec<u8>, r: &RealServer) {
    put_addr(b, IPVS_DEST_ATTR_ADDR, r.address);
    put_attr(b, IPVS_DEST_ATTR_PORT, &r.port.to_be_bytes());
    put_u32(b, IPVS_DEST_ATTR_FWD_METHOD, IP_VS_CONN_F_MASQ);
    put_u32(b, IPVS_DEST_ATTR_WEIGHT, r.weight);
    put_u32(b, IPVS_DEST_ATTR_U_THRESH, 0);
    put_u32(b, IPVS_DEST_ATTR_L_THRESH, 0);
    put_u16(b, IPVS_DEST_ATTR_ADDR_FAMILY, AF_INET);
}

fn dest_request(
    family: u16,
    seq: u32,
    cmd: u8,
    s: &VirtualServer,
    fill: impl FnOnce(&mut Vec<u8>),
) -> Vec<u8> {
    let mut b = ipvs_request(family, ACKED, seq, cmd);
    put_nested(&mut b, IPVS_CMD_ATTR_SERVICE, |b| put_service_id(b, s));
    put_nested(&mut b, IPVS_CMD_ATTR_DEST, fill);
    finish(b)
}

/// `IPVS_CMD_NEW_DEST` (acked).
pub(crate) fn new_dest(family: u16, seq: u32, s: &VirtualServer, r: &RealServer) -> Vec<u8> {
    dest_request(family, seq, IPVS_CMD_NEW_DEST, s, |b| put_dest_full(b, r))
}

/// `IPVS_CMD_SET_DEST` (acked): the weight.
pub(crate) fn set_dest(family: u16, seq: u32, s: &VirtualServer, r: &RealServer) -> Vec<u8> {
    dest_request(family, seq, IPVS_CMD_SET_DEST, s, |b| put_dest_full(b, r))
}

/// `IPVS_CMD_DEL_DEST` (acked), the real server by its identity only.
pub(crate) fn del_dest(family: u16, seq: u32, s: &VirtualServer, r: &RealServer) -> Vec<u8> {
    dest_request(family, seq, IPVS_CMD_DEL_DEST, s, |b| put_dest_id(b, r))
}

/// Every netlink message in one received datagram.
pub(crate) fn parse_datagram(buf: &[u8]) -> Result<Vec<Reply<'_>>, DecodeError> {
    netlink::parse_datagram(buf, parse_message)
}

fn parse_message(kind: u16, seq: u32, payload: &[u8]) -> Result<Reply<'_>, DecodeError> {
    Ok(match kind {
        NLMSG_ERROR => Reply::Error {
            seq,
            code: error_code(payload)?,
        },
        NLMSG_DONE if payload.is_empty() => Reply::Done { seq, code: 0 },
        NLMSG_DONE => Reply::Done {
            seq,
            code: error_code(payload)?,
        },
        // 0x10 and up are families; below are netlink's own types (NOOP, OVERRUN).
        family if family >= GENL_ID_CTRL => {
            let Some((hdr, attrs)) = payload.split_at_checked(GENL_HDRLEN) else {
                return Err(truncated("generic netlink header", 4, payload.len()).into());
            };
            Reply::Genl {
                seq,
                family,
                cmd: hdr[0],
                attrs,
            }
        }
        _ => Reply::Other { seq },
    })
}

/// The family id in a `CTRL_CMD_NEWFAMILY` answer.
pub(crate) fn family_id(attributes: &[u8]) -> Result<u16, DecodeError> {
    for a in attrs(attributes) {
        if let (CTRL_ATTR_FAMILY_ID, b) = a? {
            return u16_attr(b, "family id").map_err(DecodeError::from);
        }
    }
    Err(DecodeError::Missing("a family id"))
}

/// The payload of the first attribute `kind` among `attributes`.
fn nested(attributes: &[u8], kind: u16) -> Result<Option<&[u8]>, DecodeError> {
    for a in attrs(attributes) {
        let (k, b) = a?;
        if k == kind {
            return Ok(Some(b));
        }
    }
    Ok(None)
}

/// A dumped service (`IPVS_CMD_NEW_SERVICE`'s attributes); `None` for IPv6 services and
/// those named by a firewall mark.
pub(crate) fn parse_service(attributes: &[u8]) -> Result<Option<VirtualServer>, DecodeError> {
    let svc = nested(attributes, IPVS_CMD_ATTR_SERVICE)?
        .ok_or(DecodeError::Missing("a service attribute"))?;
    let (mut af, mut protocol, mut address, mut port) = (None, None, None, None);
    let (mut scheduler, mut flags, mut timeout, mut fwmark) = (None, None, 0, 0);
    for a in attrs(svc) {
        match a? {
            (IPVS_SVC_ATTR_AF, b) => af = Some(u16_attr(b, "address family")?),
            (IPVS_SVC_ATTR_PROTOCOL, b) => protocol = Some(u16_attr(b, "protocol")?),
            (IPVS_SVC_ATTR_ADDR, b) => address = Some(b),
            (IPVS_SVC_ATTR_PORT, b) => port = Some(port_attr(b)?),
            (IPVS_SVC_ATTR_FWMARK, b) => fwmark = u32_attr(b, "firewall mark")?,
            (IPVS_SVC_ATTR_SCHED_NAME, b) => {
                let name = b.split(|c| *c == 0).next().unwrap_or_default();
                scheduler = Some(String::from_utf8_lossy(name).into_owned());
            }
            (IPVS_SVC_ATTR_FLAGS, b) => flags = Some(u32_attr(b, "service flags")?),
            (IPVS_SVC_ATTR_TIMEOUT, b) => timeout = u32_attr(b, "persistence timeout")?,
            _ => {}
        }
    }
    if af.ok_or(DecodeError::Missing("a service address family"))? != AF_INET || fwmark != 0 {
        return Ok(None);
    }
    let protocol = protocol.ok_or(DecodeError::Missing("a service protocol"))?;
    let address = ipv4_attr(address.ok_or(DecodeError::Missing("a service address"))?)?;
    let flags = flags.ok_or(DecodeError::Missing("service flags"))?;
    Ok(Some(VirtualServer {
        address,
        // Protocol numbers fit a byte (the kernel stores a u16 for alignment).
        protocol: u8::try_from(protocol).unwrap_or(u8::MAX),
        port: port.ok_or(DecodeError::Missing("a service port"))?,
        scheduler: scheduler.ok_or(DecodeError::Missing("a scheduler name"))?,
        persistent_timeout: (flags & IP_VS_SVC_F_PERSISTENT != 0).then_some(timeout),
    }))
}

/// A dumped real server (`IPVS_CMD_NEW_DEST`'s attributes); `None` when it is not IPv4.
pub(crate) fn parse_dest(attributes: &[u8]) -> Result<Option<RealServer>, DecodeError> {
    let dest = nested(attributes, IPVS_CMD_ATTR_DEST)?
        .ok_or(DecodeError::Missing("a destination attribute"))?;
    let (mut address, mut port, mut weight) = (None, None, None);
    let (mut active, mut inactive) = (0, 0);
    // Kernels before 4.3 name no family: a destination then has its service's (IPv4 here).
    let mut af = AF_INET;
    for a in attrs(dest) {
        match a? {
            (IPVS_DEST_ATTR_ADDR, b) => address = Some(b),
            (IPVS_DEST_ATTR_PORT, b) => port = Some(port_attr(b)?),
            (IPVS_DEST_ATTR_WEIGHT, b) => weight = Some(u32_attr(b, "weight")?),
            (IPVS_DEST_ATTR_ACTIVE_CONNS, b) => active = u32_attr(b, "active connections")?,
            (IPVS_DEST_ATTR_INACT_CONNS, b) => inactive = u32_attr(b, "inactive connections")?,
            (IPVS_DEST_ATTR_ADDR_FAMILY, b) => af = u16_attr(b, "address family")?,
            _ => {}
        }
    }
    if af != AF_INET {
        return Ok(None);
    }
    let address = ipv4_attr(address.ok_or(DecodeError::Missing("a destination address"))?)?;
    Ok(Some(RealServer {
        address,
        port: port.ok_or(DecodeError::Missing("a destination port"))?,
        weight: weight.ok_or(DecodeError::Missing("a destination weight"))?,
        active_connections: active,
        inactive_connections: inactive,
    }))
}

#[cfg(all(test, target_endian = "little"))]
mod tests;
