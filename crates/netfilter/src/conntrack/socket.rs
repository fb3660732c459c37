//! The real driver: a blocking `NETLINK_NETFILTER` socket (the crate's shared netlink
//! socket) per call, so a call acts in the network namespace of the thread making it and an
//! abandoned dump never leaves a socket half-read.

use std::io;

use netlink_sys::protocols::NETLINK_NETFILTER;

use super::message::{delete_request, dump_request, parse_datagram, Reply};
use super::{ConntrackDriver, ConntrackError, Flow, IPPROTO_TCP, IPPROTO_UDP};
use crate::netlink::socket::{next_seqs, Socket};

/// Deletes sent in one datagram: each gets its own ack, and 64 acks (even errors, which
/// echo the ~72-byte request) stay well inside the default socket receive buffer.
const DELETE_BATCH: usize = 64;

/// Conntrack through ctnetlink, in the caller's network namespace.
#[derive(Debug, Clone, Copy, Default)]
pub struct ConntrackNetlink;

impl ConntrackNetlink {
    pub fn new() -> ConntrackNetlink {
        ConntrackNetlink
    }
}

fn protocol_name(protocol: u8) -> String {
    match protocol {
        IPPROTO_UDP => "UDP".into(),
        IPPROTO_TCP => "TCP".into(),
        p => format!("protocol {p}"),
    }
}

/// A failed socket call.
fn os_error(op: &str, source: io::Error) -> ConntrackError {
    let op = op.to_string();
    match source.raw_os_error() {
        Some(libc::EPERM | libc::EACCES) => ConntrackError::PermissionDenied { op },
        Some(libc::EPROTONOSUPPORT | libc::EAFNOSUPPORT | libc::EOPNOTSUPP) => {
            ConntrackError::Unavailable { op, source }
        }
        _ => ConntrackError::Io { op, source },
    }
}

/// A negative errno the kernel answered. nfnetlink answers EINVAL to a request for a
/// subsystem that is not registered, which for a plain dump can only mean that.
fn kernel_error(op: &str, code: i32, is_dump: bool) -> ConntrackError {
    let errno = code.saturating_neg();
    let source = io::Error::from_raw_os_error(errno);
    let op = op.to_string();
    match errno {
        libc::EPERM | libc::EACCES => ConntrackError::PermissionDenied { op },
        libc::EOPNOTSUPP | libc::EPROTONOSUPPORT | libc::EAFNOSUPPORT => {
            ConntrackError::Unavailable { op, source }
        }
        libc::EINVAL if is_dump => ConntrackError::Unavailable { op, source },
        _ => ConntrackError::Kernel { op, source },
    }
}

/// An open ctnetlink socket, failing with conntrack's errors.
struct Conn {
    sock: Socket<ConntrackError>,
}

impl Conn {
    fn open(op: &str) -> Result<Conn, ConntrackError> {
        let sock = Socket::open(NETLINK_NETFILTER, op, os_error)?;
        Ok(Conn { sock })
    }

    /// Sends up to [`DELETE_BATCH`] deletes in one datagram and reads every ack.
    fn delete_batch(&mut self, flows: &[Flow]) -> Result<usize, ConntrackError> {
        let op = format!("deleting {} conntrack flows", flows.len());
        let base = next_seqs(flows.len());
        let mut request = Vec::with_capacity(flows.len() * 72);
        let mut seq = base;
        for f in flows {
            request.extend_from_slice(&delete_request(seq, f));
            seq = seq.wrapping_add(1);
        }
        self.sock.send(&op, &request)?;
        let mut answered = vec![false; flows.len()];
        let mut pending = flows.len();
        let (mut deleted, mut first_error) = (0, None);
        while pending > 0 {
            let datagram = self.sock.recv(&op)?;
            let replies = parse_datagram(datagram).map_err(|source| ConntrackError::Decode {
                op: op.clone(),
                source,
            })?;
            for r in replies {
                let Reply::Error { seq, code } = r else {
                    continue;
                };
                let i = seq.wrapping_sub(base) as usize;
                if answered.get(i) != Some(&false) {
                    continue;
                }
                answered[i] = true;
                pending -= 1;
                match code.saturating_neg() {
                    0 => deleted += 1,
                    libc::ENOENT => {}
                    _ => {
                        let op = format!("deleting conntrack flow {}", flows[i]);
                        first_error.get_or_insert(kernel_error(&op, code, false));
                    }
                }
            }
        }
        first_error.map_or(Ok(deleted), Err)
    }
}

impl ConntrackDriver for ConntrackNetlink {
    fn list(&self, protocol: u8) -> Result<Vec<Flow>, ConntrackError> {
        let op = format!("listing IPv4 {} conntrack flows", protocol_name(protocol));
        let mut conn = Conn::open(&op)?;
        let seq = next_seqs(1);
        conn.sock.send(&op, &dump_request(seq))?;
        let mut flows = Vec::new();
        loop {
            let datagram = conn.sock.recv(&op)?;
            let replies = parse_datagram(datagram).map_err(|source| ConntrackError::Decode {
                op: op.clone(),
                source,
            })?;
            for r in replies {
                match r {
                    Reply::Flow {
                        seq: s,
                        flow: Some(f),
                    } if s == seq && f.protocol == protocol => flows.push(f),
                    Reply::Done { seq: s, code } if s == seq => {
                        if code < 0 {
                            return Err(kernel_error(&op, code, true));
                        }
                        return Ok(flows);
                    }
                    Reply::Error { seq: s, code } if s == seq && code < 0 => {
                        return Err(kernel_error(&op, code, true));
                    }
                    _ => {}
                }
            }
        }
    }

    fn delete(&self, flows: &[Flow]) -> Result<usize, ConntrackError> {
        if flows.is_empty() {
            return Ok(0);
        }
        let mut conn = Conn::open(&format!("deleting {} conntrack flows", flows.len()))?;
        let mut deleted = 0;
        for batch in flows.chunks(DELETE_BATCH) {
            deleted += conn.delete_batch(batch)?;
        }
        Ok(deleted)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

    use super::*;

    #[test]
    fn errors_name_the_operation_and_hint_at_the_module() {
        let e = kernel_error("listing IPv4 UDP conntrack flows", -libc::EINVAL, true);
        let msg = e.to_string();
        assert!(
            msg.starts_with("listing IPv4 UDP conntrack flows: "),
            "{msg}"
        );
        assert!(msg.contains("nf_conntrack_netlink"), "{msg}");
        let e = kernel_error("deleting conntrack flow x", -libc::EPERM, false);
        assert!(matches!(e, ConntrackError::PermissionDenied { .. }), "{e}");
        let e = kernel_error("deleting conntrack flow x", -libc::EBUSY, false);
        assert!(matches!(e, ConntrackError::Kernel { .. }), "{e}");
        let e = os_error("x", io::Error::from_raw_os_error(libc::EPROTONOSUPPORT));
        assert!(matches!(e, ConntrackError::Unavailable { .. }), "{e}");
    }

    #[test]
    fn sequence_blocks_do_not_overlap() {
        let a = next_seqs(64);
        let b = next_seqs(1);
        assert!(b.wrapping_sub(a) >= 64);
    }
}
