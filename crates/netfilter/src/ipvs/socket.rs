//! The real driver: a blocking `NETLINK_GENERIC` socket (the crate's shared netlink
//! socket) per call, so a call acts in the network namespace of the thread making it and
//! an abandoned dump never leaves a socket half-read. The "IPVS" family id is looked up
//! once, on first use (family ids are global, not per namespace).

use std::io;
use std::sync::OnceLock;

use netlink_sys::protocols::NETLINK_GENERIC;

use super::message::{self, DecodeError, Reply, CTRL_CMD_NEWFAMILY, GENL_ID_CTRL};
use super::{
    check_service, kernel_error, op_add_real_server, op_add_service, op_delete_real_server,
    op_delete_service, op_list_real_servers, op_update_real_server, op_update_service, IpvsDriver,
    IpvsError, RealServer, VirtualServer, OP_LIST_SERVICES,
};
use crate::netlink::socket::{next_seqs, Socket};

/// IPVS through generic netlink, in the calling thread's network namespace. The family id
/// is kept after the first successful lookup (a failed one is retried on the next call); if
/// `ip_vs` is unloaded and loaded again the id can change: make a new driver then.
#[derive(Debug, Default)]
pub struct IpvsNetlink {
    family: OnceLock<u16>,
}

impl IpvsNetlink {
    pub fn new() -> IpvsNetlink {
        IpvsNetlink::default()
    }
}

/// A failed socket call.
fn os_error(op: &str, source: io::Error) -> IpvsError {
    let op = op.to_string();
    match source.raw_os_error() {
        Some(libc::EPERM | libc::EACCES) => IpvsError::PermissionDenied { op },
        _ => IpvsError::Io { op, source },
    }
}

fn decode_error(op: &str) -> impl FnOnce(DecodeError) -> IpvsError + '_ {
    move |source| IpvsError::Decode {
        op: op.to_string(),
        source,
    }
}

/// An open generic netlink socket (failing with IPVS's errors) and the IPVS family id.
struct Conn {
    sock: Socket<IpvsError>,
    family: u16,
}

impl Conn {
    /// Opens a socket and resolves the family (once per driver).
    fn open(driver: &IpvsNetlink, op: &str) -> Result<Conn, IpvsError> {
        let mut conn = Conn {
            sock: Socket::open(NETLINK_GENERIC, op, os_error)?,
            family: 0,
        };
        conn.family = match driver.family.get() {
            Some(id) => *id,
            None => {
                let id = conn.resolve_family(op)?;
                // A racing thread resolved the same id.
                let _ = driver.family.set(id);
                id
            }
        };
        Ok(conn)
    }

    /// Asks the generic netlink controller for the "IPVS" family's id. The controller
    /// answers ENOENT while `ip_vs` is not loaded (and tries to load it first, where the
    /// caller may load modules).
    fn resolve_family(&mut self, op: &str) -> Result<u16, IpvsError> {
        let seq = next_seqs(1);
        self.sock.send(op, &message::family_request(seq))?;
        loop {
            let datagram = self.sock.recv(op)?;
            for r in message::parse_datagram(datagram).map_err(decode_error(op))? {
                match r {
                    Reply::Genl {
                        seq: s,
                        family: GENL_ID_CTRL,
                        cmd: CTRL_CMD_NEWFAMILY,
                        attrs,
                    } if s == seq => {
                        return message::family_id(attrs).map_err(decode_error(op));
                    }
                    Reply::Error { seq: s, code } if s == seq && code < 0 => {
                        return Err(match code.saturating_neg() {
                            libc::ENOENT => IpvsError::Unavailable { op: op.to_string() },
                            errno => kernel_error(op, errno),
                        });
                    }
                    _ => {}
                }
            }
        }
    }

    /// Sends an acked request and waits for its ack; errnos in `tolerated` count as done.
    fn request(
        &mut self,
        op: &str,
        build: impl FnOnce(u16, u32) -> Vec<u8>,
        tolerated: &[i32],
    ) -> Result<(), IpvsError> {
        let seq = next_seqs(1);
        self.sock.send(op, &build(self.family, seq))?;
        loop {
            let datagram = self.sock.recv(op)?;
            for r in message::parse_datagram(datagram).map_err(decode_error(op))? {
                if let Reply::Error { seq: s, code } = r {
                    if s != seq {
                        continue;
                    }
                    let errno = code.saturating_neg();
                    if errno == 0 || tolerated.contains(&errno) {
                        return Ok(());
                    }
                    return Err(kernel_error(op, errno));
                }
            }
        }
    }

    /// Sends a dump request and decodes every answer of command `cmd` until the dump ends.
    fn dump<T>(
        &mut self,
        op: &str,
        build: impl FnOnce(u16, u32) -> Vec<u8>,
        cmd: u8,
        decode: impl Fn(&[u8]) -> Result<Option<T>, DecodeError>,
    ) -> Result<Vec<T>, IpvsError> {
        let seq = next_seqs(1);
        let family = self.family;
        self.sock.send(op, &build(family, seq))?;
        let mut out = Vec::new();
        loop {
            let datagram = self.sock.recv(op)?;
            for r in message::parse_datagram(datagram).map_err(decode_error(op))? {
                match r {
                    Reply::Genl {
                        seq: s,
                        family: f,
                        cmd: c,
                        attrs,
                    } if s == seq && f == family && c == cmd => {
                        out.extend(decode(attrs).map_err(decode_error(op))?);
                    }
                    Reply::Done { seq: s, code } if s == seq => {
                        if code < 0 {
                            return Err(kernel_error(op, code.saturating_neg()));
                        }
                        return Ok(out);
                    }
                    Reply::Error { seq: s, code } if s == seq && code < 0 => {
                        return Err(kernel_error(op, code.saturating_neg()));
                    }
                    _ => {}
                }
            }
        }
    }
}

impl IpvsDriver for IpvsNetlink {
    fn services(&self) -> Result<Vec<VirtualServer>, IpvsError> {
        let op = OP_LIST_SERVICES;
        Conn::open(self, op)?.dump(
            op,
            message::dump_services,
            message::IPVS_CMD_NEW_SERVICE,
            message::parse_service,
        )
    }

    fn add_service(&self, s: &VirtualServer) -> Result<(), IpvsError> {
        let op = op_add_service(s);
        check_service(&op, s)?;
        Conn::open(self, &op)?.request(&op, |f, seq| message::new_service(f, seq, s), &[])
    }

    fn update_service(&self, s: &VirtualServer) -> Result<(), IpvsError> {
        let op = op_update_service(s);
        check_service(&op, s)?;
        Conn::open(self, &op)?.request(&op, |f, seq| message::set_service(f, seq, s), &[])
    }

    fn delete_service(&self, s: &VirtualServer) -> Result<(), IpvsError> {
        let op = op_delete_service(s);
        Conn::open(self, &op)?.request(
            &op,
            |f, seq| message::del_service(f, seq, s),
            &[libc::ESRCH, libc::ENOENT],
        )
    }

    fn real_servers(&self, s: &VirtualServer) -> Result<Vec<RealServer>, IpvsError> {
        let op = op_list_real_servers(s);
        Conn::open(self, &op)?.dump(
            &op,
            |f, seq| message::dump_dests(f, seq, s),
            message::IPVS_CMD_NEW_DEST,
            message::parse_dest,
        )
    }

    fn add_real_server(&self, s: &VirtualServer, r: &RealServer) -> Result<(), IpvsError> {
        let op = op_add_real_server(s, r);
        Conn::open(self, &op)?.request(&op, |f, seq| message::new_dest(f, seq, s, r), &[])
    }

    fn update_real_server(&self, s: &VirtualServer, r: &RealServer) -> Result<(), IpvsError> {
        let op = op_update_real_server(s, r);
        Conn::open(self, &op)?.request(&op, |f, seq| message::set_dest(f, seq, s, r), &[])
    }

    fn delete_real_server(&self, s: &VirtualServer, r: &RealServer) -> Result<(), IpvsError> {
        let op = op_delete_real_server(s, r);
        Conn::open(self, &op)?.request(
            &op,
            |f, seq| message::del_dest(f, seq, s, r),
            &[libc::ENOENT, libc::ESRCH],
        )
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

    use super::*;

    #[test]
    fn socket_errors_name_the_operation() {
        let e = os_error(
            "listing IPVS services",
            io::Error::from_raw_os_error(libc::EPERM),
        );
        assert!(matches!(e, IpvsError::PermissionDenied { .. }), "{e}");
        let e = os_error(
            "listing IPVS services",
            io::Error::from_raw_os_error(libc::ENOBUFS),
        );
        assert!(e.to_string().starts_with("listing IPVS services: "), "{e}");
        let e = IpvsError::Unavailable {
            op: "listing IPVS services".into(),
        };
        assert_eq!(
            e.to_string(),
            "listing IPVS services: IPVS is not available (is the ip_vs module loaded?)"
        );
    }

    /// On a kernel without IPVS (this project's build host) the family lookup fails with
    /// the clear error. Skipped where the kernel has the module: the lookup could load it.
    #[test]
    fn lookup_without_the_module_is_a_clear_error() {
        let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap();
        let modules = std::path::Path::new("/lib/modules").join(release.trim());
        if std::path::Path::new("/proc/net/ip_vs").exists()
            || modules.join("kernel/net/netfilter/ipvs").exists()
        {
            eprintln!("skipped: this kernel has IPVS");
            return;
        }
        let e = IpvsNetlink::new().services().unwrap_err();
        assert!(matches!(e, IpvsError::Unavailable { .. }), "{e}");
        assert!(e.to_string().contains("ip_vs module"), "{e}");
    }
}
