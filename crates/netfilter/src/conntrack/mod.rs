//! Connection tracking over netfilter netlink (ctnetlink): list a protocol's IPv4 flows and
//! delete single flows by their original tuple. The service proxy needs exactly this to
//! drop UDP flows that still point at a removed endpoint (UDP has no connection end, so
//! such a flow would otherwise keep black-holing a client until it idles out) without
//! flushing every flow on a restart.
//!
//! The wire format is small enough to encode here (`message.rs`, tested against bytes
//! captured from the kernel); the socket is `netlink-sys`'s blocking one (`socket.rs`).

mod message;
mod socket;

use std::fmt;
use std::net::Ipv4Addr;

pub use message::DecodeError;
pub use socket::ConntrackNetlink;

/// `IPPROTO_TCP`.
pub const IPPROTO_TCP: u8 = 6;
/// `IPPROTO_UDP`.
pub const IPPROTO_UDP: u8 = 17;

/// One tracked IPv4 flow: its original tuple (as the first packet saw it) and its reply
/// tuple (what answers look like, so after DNAT `reply_src` is the real backend).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Flow {
    pub protocol: u8,
    pub orig_src: Ipv4Addr,
    pub orig_dst: Ipv4Addr,
    pub orig_sport: u16,
    pub orig_dport: u16,
    pub reply_src: Ipv4Addr,
    pub reply_dst: Ipv4Addr,
    pub reply_sport: u16,
    pub reply_dport: u16,
}

impl Flow {
    /// A flow nobody NATed: the reply tuple mirrors the original one.
    pub fn unnatted(protocol: u8, src: Ipv4Addr, sport: u16, dst: Ipv4Addr, dport: u16) -> Flow {
        Flow {
            protocol,
            orig_src: src,
            orig_dst: dst,
            orig_sport: sport,
            orig_dport: dport,
            reply_src: dst,
            reply_dst: src,
            reply_sport: dport,
            reply_dport: sport,
        }
    }

    /// Same original tuple (what the kernel looks a flow up by on delete).
    pub fn same_original(&self, other: &Flow) -> bool {
        (
            self.protocol,
            self.orig_src,
            self.orig_dst,
            self.orig_sport,
            self.orig_dport,
        ) == (
            other.protocol,
            other.orig_src,
            other.orig_dst,
            other.orig_sport,
            other.orig_dport,
        )
    }
}

/// `udp 10.0.0.1:1000 -> 10.96.0.10:53 (reply 10.244.1.5:53 -> 10.0.0.1:1000)`, as errors
/// and logs name a flow.
impl fmt::Display for Flow {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.protocol {
            IPPROTO_UDP => write!(f, "udp ")?,
            IPPROTO_TCP => write!(f, "tcp ")?,
            p => write!(f, "proto {p} ")?,
        }
        write!(
            f,
            "{}:{} -> {}:{} (reply {}:{} -> {}:{})",
            self.orig_src,
            self.orig_sport,
            self.orig_dst,
            self.orig_dport,
            self.reply_src,
            self.reply_sport,
            self.reply_dst,
            self.reply_dport
        )
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ConntrackError {
    #[error(
        "{op}: conntrack over netlink is unavailable (is the nf_conntrack_netlink module \
         loaded?): {source}"
    )]
    Unavailable { op: String, source: std::io::Error },
    #[error("{op}: permission denied (CAP_NET_ADMIN in this network namespace is needed)")]
    PermissionDenied { op: String },
    #[error("{op}: {source}")]
    Io { op: String, source: std::io::Error },
    #[error("{op}: the kernel answered: {source}")]
    Kernel { op: String, source: std::io::Error },
    #[error("{op}: undecodable netlink answer: {source}")]
    Decode { op: String, source: DecodeError },
}

/// Lists and deletes conntrack flows of the caller's network namespace.
pub trait ConntrackDriver: Send + Sync {
    /// Every IPv4 flow of `protocol` (`IPPROTO_UDP` = 17) in this network namespace.
    fn list(&self, protocol: u8) -> Result<Vec<Flow>, ConntrackError>;
    /// Deletes these flows (by original tuple); flows already gone (ENOENT) are not an
    /// error. Returns how many were deleted.
    fn delete(&self, flows: &[Flow]) -> Result<usize, ConntrackError>;
}

/// An in-memory table for unit tests of callers: `list` filters `flows`, `delete` removes
/// matching original tuples and records what it removed.
#[derive(Debug, Default)]
pub struct FakeConntrack {
    pub flows: parking_lot::Mutex<Vec<Flow>>,
    /// Every flow `delete` removed, in order.
    pub deleted: parking_lot::Mutex<Vec<Flow>>,
    /// Fail the next call with this errno (as the kernel would answer).
    pub fail_next: parking_lot::Mutex<Option<i32>>,
}

impl FakeConntrack {
    pub fn new(flows: impl IntoIterator<Item = Flow>) -> FakeConntrack {
        FakeConntrack {
            flows: parking_lot::Mutex::new(flows.into_iter().collect()),
            ..FakeConntrack::default()
        }
    }

    fn take_failure(&self, op: &str) -> Result<(), ConntrackError> {
        match self.fail_next.lock().take() {
            Some(errno) => Err(ConntrackError::Kernel {
                op: op.to_string(),
                source: std::io::Error::from_raw_os_error(errno),
            }),
            None => Ok(()),
        }
    }
}

impl ConntrackDriver for FakeConntrack {
    fn list(&self, protocol: u8) -> Result<Vec<Flow>, ConntrackError> {
        self.take_failure(&format!("listing protocol {protocol} flows"))?;
        Ok(self
            .flows
            .lock()
            .iter()
            .filter(|f| f.protocol == protocol)
            .copied()
            .collect())
    }

    fn delete(&self, flows: &[Flow]) -> Result<usize, ConntrackError> {
        self.take_failure(&format!("deleting {} flows", flows.len()))?;
        let mut table = self.flows.lock();
        let mut deleted = self.deleted.lock();
        let mut n = 0;
        for target in flows {
            if let Some(i) = table.iter().position(|f| f.same_original(target)) {
                deleted.push(table.remove(i));
                n += 1;
            }
        }
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

    use super::*;
    use crate::netlink::test_util::ip;

    #[test]
    fn flow_display_names_both_tuples() {
        let mut f = Flow::unnatted(IPPROTO_UDP, ip("10.0.0.1"), 1000, ip("10.96.0.10"), 53);
        f.reply_src = ip("10.244.1.5");
        assert_eq!(
            f.to_string(),
            "udp 10.0.0.1:1000 -> 10.96.0.10:53 (reply 10.244.1.5:53 -> 10.0.0.1:1000)"
        );
    }

    #[test]
    fn fake_lists_by_protocol_and_deletes_by_original_tuple() {
        let a = Flow::unnatted(IPPROTO_UDP, ip("10.0.0.1"), 1000, ip("10.0.0.2"), 53);
        let b = Flow::unnatted(IPPROTO_UDP, ip("10.0.0.1"), 1001, ip("10.0.0.2"), 53);
        let t = Flow::unnatted(IPPROTO_TCP, ip("10.0.0.1"), 1000, ip("10.0.0.2"), 53);
        let ct = FakeConntrack::new([a, b, t]);
        assert_eq!(ct.list(IPPROTO_UDP).unwrap(), vec![a, b]);
        // The reply tuple does not matter for the lookup; a gone flow is no error.
        let mut a_other_reply = a;
        a_other_reply.reply_src = ip("10.9.9.9");
        assert_eq!(ct.delete(&[a_other_reply, a]).unwrap(), 1);
        assert_eq!(*ct.deleted.lock(), vec![a]);
        assert_eq!(ct.list(IPPROTO_UDP).unwrap(), vec![b]);
        *ct.fail_next.lock() = Some(libc::EPERM);
        let err = ct.delete(&[b]).unwrap_err();
        assert!(err.to_string().contains("deleting 1 flows"), "{err}");
        assert_eq!(ct.delete(&[b]).unwrap(), 1);
    }
}
