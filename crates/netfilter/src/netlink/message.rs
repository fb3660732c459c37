//! Netlink framing: message headers, attributes (type-length-value, nested ones too) and
//! the splitting of a received datagram into its messages, as `linux/netlink.h` lays them
//! out. Headers and attribute headers are in host byte order; every attribute and message
//! is padded to 4 bytes. The protocols put their own 4-byte family header right after the
//! netlink header and decide what a message's type means; this module never interprets a
//! payload beyond the status of `NLMSG_ERROR`/`NLMSG_DONE`.
//!
//! Decoding failures are reported as [`Truncated`], which each protocol converts (with
//! `From`) into its own public `DecodeError`, so the public error types stay per protocol.

use std::net::Ipv4Addr;

/// `sizeof(struct nlmsghdr)`.
pub(crate) const NLMSG_HDRLEN: usize = 16;
pub(crate) const NLMSG_ERROR: u16 = 2;
pub(crate) const NLMSG_DONE: u16 = 3;
pub(crate) const NLM_F_REQUEST: u16 = 0x1;
pub(crate) const NLM_F_ACK: u16 = 0x4;
pub(crate) const NLM_F_DUMP: u16 = 0x300;

const NLA_HDRLEN: usize = 4;
const NLA_F_NESTED: u16 = 0x8000;
const NLA_F_NET_BYTEORDER: u16 = 0x4000;

/// Input that ended before a field did: `need` bytes of `what` wanted, `have` left. The
/// kernel's answers never are; this guards against reading garbage.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Truncated {
    pub(crate) what: &'static str,
    pub(crate) need: usize,
    pub(crate) have: usize,
}

/// Defines a protocol's public `DecodeError`, the same two failures for both protocols: a
/// truncated field (from [`Truncated`]) and a missing attribute, worded by `$missing`. A
/// macro rather than one shared type, so each protocol's public API keeps its own type
/// and its own wording while the shape is written once.
macro_rules! decode_error {
    ($missing:literal) => {
        /// A malformed answer (the kernel's are never; this guards against reading garbage).
        #[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
        pub enum DecodeError {
            #[error("{what} truncated: {need} bytes needed, {have} left")]
            Truncated {
                what: &'static str,
                need: usize,
                have: usize,
            },
            #[error($missing)]
            Missing(&'static str),
        }

        /// The shared netlink decoder's failures, as this protocol's error.
        impl From<$crate::netlink::message::Truncated> for DecodeError {
            fn from(t: $crate::netlink::message::Truncated) -> DecodeError {
                DecodeError::Truncated {
                    what: t.what,
                    need: t.need,
                    have: t.have,
                }
            }
        }
    };
}
pub(crate) use decode_error;

/// A [`Truncated`] (a function, so call sites stay one line).
pub(crate) fn truncated(what: &'static str, need: usize, have: usize) -> Truncated {
    Truncated { what, need, have }
}

fn align4(n: usize) -> usize {
    (n + 3) & !3
}

/// A netlink header with a zero length (set by [`finish`]), followed by the protocol's
/// 4-byte family header (nfgenmsg or genlmsghdr).
pub(crate) fn begin(kind: u16, flags: u16, seq: u32, family_header: [u8; 4]) -> Vec<u8> {
    let mut b = Vec::with_capacity(160);
    b.extend_from_slice(&0u32.to_ne_bytes());
    b.extend_from_slice(&kind.to_ne_bytes());
    b.extend_from_slice(&flags.to_ne_bytes());
    b.extend_from_slice(&seq.to_ne_bytes());
    b.extend_from_slice(&0u32.to_ne_bytes()); // nlmsg_pid: 0, the kernel fills it in
    b.extend_from_slice(&family_header);
    b
}

/// Writes a length field that `start` reserved (u32 for a message, u16 for an attribute).
fn patch_len(b: &mut [u8], start: usize, wide: bool) {
    let len = b.len() - start;
    if wide {
        let bytes = u32::try_from(len).unwrap_or(u32::MAX).to_ne_bytes();
        b[start..start + 4].copy_from_slice(&bytes);
    } else {
        let bytes = u16::try_from(len).unwrap_or(u16::MAX).to_ne_bytes();
        b[start..start + 2].copy_from_slice(&bytes);
    }
}

/// The message [`begin`] started, with its length set.
pub(crate) fn finish(mut b: Vec<u8>) -> Vec<u8> {
    patch_len(&mut b, 0, true);
    b
}

/// Appends an attribute, padded to 4 bytes.
pub(crate) fn put_attr(b: &mut Vec<u8>, kind: u16, payload: &[u8]) {
    let start = b.len();
    b.extend_from_slice(&[0, 0]);
    b.extend_from_slice(&kind.to_ne_bytes());
    b.extend_from_slice(payload);
    patch_len(b, start, false);
    b.resize(align4(b.len()), 0);
}

/// Writes a nested attribute whose members `fill` appends.
pub(crate) fn put_nested(b: &mut Vec<u8>, kind: u16, fill: impl FnOnce(&mut Vec<u8>)) {
    let start = b.len();
    b.extend_from_slice(&[0, 0]);
    b.extend_from_slice(&(kind | NLA_F_NESTED).to_ne_bytes());
    fill(b);
    patch_len(b, start, false);
}

/// Callers check the length first: these only read fixed-size headers.
fn read_u16(b: &[u8], at: usize) -> u16 {
    u16::from_ne_bytes([b[at], b[at + 1]])
}

fn read_u32(b: &[u8], at: usize) -> u32 {
    u32::from_ne_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

/// The attributes in `buf`: (type without the nested/byte-order flags, payload). A
/// malformed one ends the iteration with an error.
pub(crate) fn attrs(mut buf: &[u8]) -> impl Iterator<Item = Result<(u16, &[u8]), Truncated>> {
    std::iter::from_fn(move || {
        if buf.is_empty() {
            return None;
        }
        let have = buf.len();
        let len = if have >= NLA_HDRLEN {
            usize::from(read_u16(buf, 0))
        } else {
            0
        };
        if have < NLA_HDRLEN || len < NLA_HDRLEN || len > have {
            buf = &[];
            return Some(Err(truncated("attribute", len.max(NLA_HDRLEN), have)));
        }
        let kind = read_u16(buf, 2) & !(NLA_F_NESTED | NLA_F_NET_BYTEORDER);
        let payload = &buf[NLA_HDRLEN..len];
        buf = &buf[align4(len).min(have)..];
        Some(Ok((kind, payload)))
    })
}

/// Every netlink message in one received datagram, each decoded by `parse` from its type,
/// sequence number and payload (what follows the netlink header).
pub(crate) fn parse_datagram<'a, T, E: From<Truncated>>(
    mut buf: &'a [u8],
    mut parse: impl FnMut(u16, u32, &'a [u8]) -> Result<T, E>,
) -> Result<Vec<T>, E> {
    let mut out = Vec::new();
    while buf.len() >= NLMSG_HDRLEN {
        let len = read_u32(buf, 0) as usize;
        if len < NLMSG_HDRLEN || len > buf.len() {
            return Err(truncated("netlink message", len, buf.len()).into());
        }
        let kind = read_u16(buf, 4);
        let seq = read_u32(buf, 8);
        out.push(parse(kind, seq, &buf[NLMSG_HDRLEN..len])?);
        buf = &buf[align4(len).min(buf.len())..];
    }
    Ok(out)
}

/// The status an `NLMSG_ERROR` or `NLMSG_DONE` payload starts with: 0 or a negative errno.
pub(crate) fn error_code(payload: &[u8]) -> Result<i32, Truncated> {
    match payload.get(..4) {
        Some(b) => Ok(i32::from_ne_bytes([b[0], b[1], b[2], b[3]])),
        None => Err(truncated("netlink error code", 4, payload.len())),
    }
}

/// A host-order u16 attribute; `what` names it in the error.
pub(crate) fn u16_attr(b: &[u8], what: &'static str) -> Result<u16, Truncated> {
    match b.get(..2) {
        Some(v) => Ok(u16::from_ne_bytes([v[0], v[1]])),
        None => Err(truncated(what, 2, b.len())),
    }
}

/// A host-order u32 attribute; `what` names it in the error.
pub(crate) fn u32_attr(b: &[u8], what: &'static str) -> Result<u32, Truncated> {
    match b.get(..4) {
        Some(v) => Ok(u32::from_ne_bytes([v[0], v[1], v[2], v[3]])),
        None => Err(truncated(what, 4, b.len())),
    }
}

/// A port, in network byte order as both protocols carry it.
pub(crate) fn port_attr(b: &[u8]) -> Result<u16, Truncated> {
    match b.get(..2) {
        Some(p) => Ok(u16::from_be_bytes([p[0], p[1]])),
        None => Err(truncated("port", 2, b.len())),
    }
}

/// An IPv4 address: its first 4 bytes (ctnetlink's attribute is exactly those, IPVS's
/// 16-byte `nf_inet_addr` union starts with them).
pub(crate) fn ipv4_attr(b: &[u8]) -> Result<Ipv4Addr, Truncated> {
    match b.get(..4) {
        Some(o) => Ok(Ipv4Addr::new(o[0], o[1], o[2], o[3])),
        None => Err(truncated("IPv4 address", 4, b.len())),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

    use super::*;

    /// The macro-made error types keep each protocol's wording.
    #[test]
    fn decode_errors_keep_each_protocols_wording() {
        let t = truncated("port", 2, 1);
        let expected = "port truncated: 2 bytes needed, 1 left";
        assert_eq!(crate::conntrack::DecodeError::from(t).to_string(), expected);
        assert_eq!(crate::ipvs::DecodeError::from(t).to_string(), expected);
        let e = crate::conntrack::DecodeError::Missing("a reply tuple");
        assert_eq!(e.to_string(), "IPv4 flow without a reply tuple");
        let e = crate::ipvs::DecodeError::Missing("a family id");
        assert_eq!(e.to_string(), "answer without a family id");
    }
}
