//! A blocking netlink socket (netlink-sys) and its receive buffer, as both drivers use
//! one: opened per call (so a call acts in the network namespace of the thread making it
//! and an abandoned dump never leaves a socket half-read), retried on EINTR, and reading
//! every datagram whole. Failures go through the protocol's own `os_error`, so each driver
//! keeps its error type and its wording.

use std::io;
use std::sync::atomic::{AtomicU32, Ordering};

/// Receive buffer to start with: dump datagrams are at most 32 KiB (the kernel sizes them
/// by the reader's buffer, capped there); larger ones are peeked and the buffer grown.
const RECV_BUFFER: usize = 64 * 1024;

static SEQ: AtomicU32 = AtomicU32::new(1);

/// `n` consecutive sequence numbers (wrapping), the first returned. One counter serves
/// every socket: numbers need only be unique among a socket's outstanding requests.
pub(crate) fn next_seqs(n: usize) -> u32 {
    SEQ.fetch_add(u32::try_from(n).unwrap_or(u32::MAX), Ordering::Relaxed)
}

/// Maps a failed socket call, named by its operation, to a protocol's error.
pub(crate) type OsError<E> = fn(&str, io::Error) -> E;

/// An open, bound socket and its receive buffer.
pub(crate) struct Socket<E> {
    sock: netlink_sys::Socket,
    buf: Vec<u8>,
    os_error: OsError<E>,
}

impl<E> Socket<E> {
    /// A socket of netlink `protocol`, bound to a port the kernel picks; failures (and
    /// those of later calls) are mapped by `os_error`.
    pub(crate) fn open(protocol: isize, op: &str, os_error: OsError<E>) -> Result<Self, E> {
        let mut sock = netlink_sys::Socket::new(protocol).map_err(|e| os_error(op, e))?;
        sock.bind_auto().map_err(|e| os_error(op, e))?;
        Ok(Socket {
            sock,
            buf: Vec::with_capacity(RECV_BUFFER),
            os_error,
        })
    }

    /// Sends one datagram; a short send is an error (netlink never splits one).
    pub(crate) fn send(&self, op: &str, bytes: &[u8]) -> Result<(), E> {
        loop {
            match self.sock.send(bytes, 0) {
                Ok(n) if n == bytes.len() => return Ok(()),
                Ok(n) => {
                    let msg = format!("sent {n} of {} bytes", bytes.len());
                    return Err((self.os_error)(op, io::Error::other(msg)));
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err((self.os_error)(op, e)),
            }
        }
    }

    /// One `recv` into a cleared buffer, retried on EINTR; the datagram's full length.
    fn recv_once(&mut self, op: &str, flags: libc::c_int) -> Result<usize, E> {
        loop {
            self.buf.clear();
            match self.sock.recv(&mut self.buf, flags) {
                Ok(n) => return Ok(n),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err((self.os_error)(op, e)),
            }
        }
    }

    /// The next datagram, whole: its length is peeked first (`MSG_TRUNC` reports the real
    /// size), so a datagram larger than the buffer grows it instead of being cut.
    pub(crate) fn recv(&mut self, op: &str) -> Result<&[u8], E> {
        let size = self.recv_once(op, libc::MSG_PEEK | libc::MSG_TRUNC)?;
        if size > self.buf.capacity() {
            self.buf.reserve(size);
        }
        let n = self.recv_once(op, 0)?;
        Ok(&self.buf[..n.min(self.buf.len())])
    }
}
