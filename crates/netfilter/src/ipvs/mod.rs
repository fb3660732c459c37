//! IPVS (the kernel's layer-4 load balancer) over generic netlink: list, add, change and
//! delete IPv4 virtual services and their real servers, as a service proxy in IPVS mode
//! needs. Services are named by (protocol, address, port), never by firewall mark; real
//! servers are always reached by masquerading (NAT).
//!
//! The wire format is small enough to encode here (`message.rs`, tested against
//! hand-written layouts and answers captured from Debian's kernel); the socket is
//! `netlink-sys`'s blocking one (`socket.rs`). The "IPVS" generic netlink family exists only
//! while the `ip_vs` module is loaded; without it every call fails with
//! [`IpvsError::Unavailable`].

mod message;
mod socket;

use std::collections::BTreeMap;
use std::fmt;
use std::io;
use std::net::Ipv4Addr;

pub use message::DecodeError;
pub use socket::IpvsNetlink;

/// `IPPROTO_TCP`.
pub const IPPROTO_TCP: u8 = 6;
/// `IPPROTO_UDP`.
pub const IPPROTO_UDP: u8 = 17;
/// `IPPROTO_SCTP`.
pub const IPPROTO_SCTP: u8 = 132;

/// An IPv4 virtual service. Identified by (`protocol`, `address`, `port`); `scheduler` and
/// `persistent_timeout` are its settings.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct VirtualServer {
    pub address: Ipv4Addr,
    /// `IPPROTO_TCP` (6), `IPPROTO_UDP` (17) or `IPPROTO_SCTP` (132).
    pub protocol: u8,
    pub port: u16,
    /// The scheduler module's name without its `ip_vs_` prefix: "rr", "wrr", "lc", "sh"...
    /// (at most 15 bytes). The kernel loads the module on first use.
    pub scheduler: String,
    /// Persistence (sessionAffinity: ClientIP): a client keeps its real server for this
    /// many seconds after its last connection (give at least 1: the kernel takes 0 as is).
    /// `None`: every connection is scheduled on its own.
    pub persistent_timeout: Option<u32>,
}

/// What identifies a service (in requests and in [`FakeIpvs`]'s table): protocol,
/// address, port.
pub type ServiceKey = (u8, Ipv4Addr, u16);

impl VirtualServer {
    /// A service with the "rr" scheduler and no persistence.
    pub fn new(protocol: u8, address: Ipv4Addr, port: u16) -> VirtualServer {
        VirtualServer {
            address,
            protocol,
            port,
            scheduler: "rr".into(),
            persistent_timeout: None,
        }
    }

    pub fn key(&self) -> ServiceKey {
        (self.protocol, self.address, self.port)
    }
}

/// `TCP 10.96.0.10:80`, as errors name a service.
impl fmt::Display for VirtualServer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.protocol {
            IPPROTO_TCP => write!(f, "TCP ")?,
            IPPROTO_UDP => write!(f, "UDP ")?,
            IPPROTO_SCTP => write!(f, "SCTP ")?,
            p => write!(f, "protocol {p} ")?,
        }
        write!(f, "{}:{}", self.address, self.port)
    }
}

/// A real server (backend) of a service. Identified within its service by (`address`,
/// `port`); `weight` is its setting (0 stops new connections to it, existing ones stay);
/// the connection counts are what the kernel reports (ignored in requests).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RealServer {
    pub address: Ipv4Addr,
    pub port: u16,
    pub weight: u32,
    pub active_connections: u32,
    pub inactive_connections: u32,
}

impl RealServer {
    /// A real server with `weight` and no connections.
    pub fn new(address: Ipv4Addr, port: u16, weight: u32) -> RealServer {
        RealServer {
            address,
            port,
            weight,
            active_connections: 0,
            inactive_connections: 0,
        }
    }

    pub fn key(&self) -> (Ipv4Addr, u16) {
        (self.address, self.port)
    }
}

/// `10.244.1.5:8080`, as errors name a real server.
impl fmt::Display for RealServer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.address, self.port)
    }
}

#[derive(Debug, thiserror::Error)]
pub enum IpvsError {
    #[error("{op}: IPVS is not available (is the ip_vs module loaded?)")]
    Unavailable { op: String },
    #[error("{op}: permission denied (CAP_NET_ADMIN in this network namespace is needed)")]
    PermissionDenied { op: String },
    #[error("{op}: {reason}")]
    Invalid { op: String, reason: String },
    #[error("{op}: {source}")]
    Io { op: String, source: io::Error },
    #[error("{op}: the kernel answered: {source}")]
    Kernel { op: String, source: io::Error },
    #[error("{op}: undecodable netlink answer: {source}")]
    Decode { op: String, source: DecodeError },
}

impl IpvsError {
    /// The errno the kernel answered (`EEXIST` for a service or real server that is
    /// already there, `ESRCH` for a missing service, `ENOENT` for a missing real server or
    /// scheduler), if it answered one.
    pub fn errno(&self) -> Option<i32> {
        match self {
            IpvsError::Kernel { source, .. } => source.raw_os_error(),
            IpvsError::PermissionDenied { .. } => Some(libc::EPERM),
            _ => None,
        }
    }

    /// Whether the kernel refused to add something that already exists.
    pub fn is_already_exists(&self) -> bool {
        self.errno() == Some(libc::EEXIST)
    }
}

/// A negative-errno answer (as a positive errno) for `op`.
pub(crate) fn kernel_error(op: &str, errno: i32) -> IpvsError {
    let op = op.to_string();
    match errno {
        libc::EPERM | libc::EACCES => IpvsError::PermissionDenied { op },
        _ => IpvsError::Kernel {
            op,
            source: io::Error::from_raw_os_error(errno),
        },
    }
}

/// Refuses a scheduler name the kernel could not take (empty, too long, with a NUL).
pub(crate) fn check_service(op: &str, s: &VirtualServer) -> Result<(), IpvsError> {
    let name = &s.scheduler;
    let reason = if name.is_empty() {
        "the scheduler name is empty".to_string()
    } else if name.len() >= message::SCHED_NAME_MAX {
        format!(
            "the scheduler name {name:?} is longer than {} bytes",
            message::SCHED_NAME_MAX - 1
        )
    } else if name.contains('\0') {
        format!("the scheduler name {name:?} contains a NUL")
    } else {
        return Ok(());
    };
    Err(IpvsError::Invalid {
        op: op.to_string(),
        reason,
    })
}

pub(crate) fn op_add_service(s: &VirtualServer) -> String {
    format!("adding IPVS service {s}")
}
pub(crate) fn op_update_service(s: &VirtualServer) -> String {
    format!("updating IPVS service {s}")
}
pub(crate) fn op_delete_service(s: &VirtualServer) -> String {
    format!("deleting IPVS service {s}")
}
pub(crate) fn op_list_real_servers(s: &VirtualServer) -> String {
    format!("listing the real servers of IPVS service {s}")
}
pub(crate) fn op_add_real_server(s: &VirtualServer, r: &RealServer) -> String {
    format!("adding real server {r} to IPVS service {s}")
}
pub(crate) fn op_update_real_server(s: &VirtualServer, r: &RealServer) -> String {
    format!("updating real server {r} of IPVS service {s}")
}
pub(crate) fn op_delete_real_server(s: &VirtualServer, r: &RealServer) -> String {
    format!("deleting real server {r} from IPVS service {s}")
}
pub(crate) const OP_LIST_SERVICES: &str = "listing IPVS services";

/// IPVS services and real servers of the caller's network namespace (the calling thread's).
pub trait IpvsDriver: Send + Sync {
    /// Every IPv4 service not named by a firewall mark.
    fn services(&self) -> Result<Vec<VirtualServer>, IpvsError>;
    /// Adds a service; one with the same key already there is an error
    /// ([`IpvsError::is_already_exists`]).
    fn add_service(&self, s: &VirtualServer) -> Result<(), IpvsError>;
    /// Sets the scheduler and persistence of the service with `s`'s key.
    fn update_service(&self, s: &VirtualServer) -> Result<(), IpvsError>;
    /// Deletes the service with `s`'s key and its real servers; a missing one is no error.
    fn delete_service(&self, s: &VirtualServer) -> Result<(), IpvsError>;
    /// The real servers of the service with `s`'s key (none when the service is missing:
    /// the kernel does not tell the two apart).
    fn real_servers(&self, s: &VirtualServer) -> Result<Vec<RealServer>, IpvsError>;
    /// Adds a real server (masquerading) to a service; an existing one is an error.
    fn add_real_server(&self, s: &VirtualServer, r: &RealServer) -> Result<(), IpvsError>;
    /// Sets a real server's weight.
    fn update_real_server(&self, s: &VirtualServer, r: &RealServer) -> Result<(), IpvsError>;
    /// Deletes a real server; a missing one (or a missing service) is no error.
    fn delete_real_server(&self, s: &VirtualServer, r: &RealServer) -> Result<(), IpvsError>;
}

/// One call a [`FakeIpvs`] received.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IpvsCall {
    Services,
    AddService(VirtualServer),
    UpdateService(VirtualServer),
    DeleteService(VirtualServer),
    RealServers(VirtualServer),
    AddRealServer(VirtualServer, RealServer),
    UpdateRealServer(VirtualServer, RealServer),
    DeleteRealServer(VirtualServer, RealServer),
}

impl IpvsCall {
    /// Whether the call changes the table (anything but a listing).
    pub fn is_change(&self) -> bool {
        !matches!(self, IpvsCall::Services | IpvsCall::RealServers(_))
    }
}

/// An in-memory IPVS table for unit tests of callers, answering as the kernel does
/// (`EEXIST` for duplicates, `ESRCH` for a missing service, `ENOENT` for a missing real
/// server on update; deletes of missing things succeed).
#[derive(Debug, Default)]
pub struct FakeIpvs {
    /// Services by key, each with its real servers (in the order added).
    pub table: parking_lot::Mutex<BTreeMap<ServiceKey, (VirtualServer, Vec<RealServer>)>>,
    /// Every call received, failed ones included, in order.
    pub calls: parking_lot::Mutex<Vec<IpvsCall>>,
    /// Fail the next call with this errno (as the kernel would answer), changing nothing.
    pub fail_next: parking_lot::Mutex<Option<i32>>,
    /// Real-server addresses refused with `EINVAL`, as the kernel refuses addresses that
    /// are not unicast in the namespace (a subnet's broadcast address, say).
    pub refused_real_servers: parking_lot::Mutex<std::collections::BTreeSet<Ipv4Addr>>,
}

impl FakeIpvs {
    pub fn new() -> FakeIpvs {
        FakeIpvs::default()
    }

    /// Every call that changed (or tried to change) the table, in order.
    pub fn changes(&self) -> Vec<IpvsCall> {
        self.calls
            .lock()
            .iter()
            .filter(|c| c.is_change())
            .cloned()
            .collect()
    }

    fn begin(&self, call: IpvsCall, op: &str) -> Result<(), IpvsError> {
        self.calls.lock().push(call);
        match self.fail_next.lock().take() {
            Some(errno) => Err(kernel_error(op, errno)),
            None => Ok(()),
        }
    }
}

impl IpvsDriver for FakeIpvs {
    fn services(&self) -> Result<Vec<VirtualServer>, IpvsError> {
        self.begin(IpvsCall::Services, OP_LIST_SERVICES)?;
        Ok(self.table.lock().values().map(|(s, _)| s.clone()).collect())
    }

    fn add_service(&self, s: &VirtualServer) -> Result<(), IpvsError> {
        let op = op_add_service(s);
        self.begin(IpvsCall::AddService(s.clone()), &op)?;
        check_service(&op, s)?;
        let mut table = self.table.lock();
        if table.contains_key(&s.key()) {
            return Err(kernel_error(&op, libc::EEXIST));
        }
        table.insert(s.key(), (s.clone(), Vec::new()));
        Ok(())
    }

    fn update_service(&self, s: &VirtualServer) -> Result<(), IpvsError> {
        let op = op_update_service(s);
        self.begin(IpvsCall::UpdateService(s.clone()), &op)?;
        check_service(&op, s)?;
        match self.table.lock().get_mut(&s.key()) {
            Some((existing, _)) => {
                *existing = s.clone();
                Ok(())
            }
            None => Err(kernel_error(&op, libc::ESRCH)),
        }
    }

    fn delete_service(&self, s: &VirtualServer) -> Result<(), IpvsError> {
        self.begin(IpvsCall::DeleteService(s.clone()), &op_delete_service(s))?;
        self.table.lock().remove(&s.key());
        Ok(())
    }

    fn real_servers(&self, s: &VirtualServer) -> Result<Vec<RealServer>, IpvsError> {
        self.begin(IpvsCall::RealServers(s.clone()), &op_list_real_servers(s))?;
        Ok(self
            .table
            .lock()
            .get(&s.key())
            .map(|(_, reals)| reals.clone())
            .unwrap_or_default())
    }

    fn add_real_server(&self, s: &VirtualServer, r: &RealServer) -> Result<(), IpvsError> {
        let op = op_add_real_server(s, r);
        self.begin(IpvsCall::AddRealServer(s.clone(), r.clone()), &op)?;
        if self.refused_real_servers.lock().contains(&r.address) {
            return Err(kernel_error(&op, libc::EINVAL));
        }
        let mut table = self.table.lock();
        let Some((_, reals)) = table.get_mut(&s.key()) else {
            return Err(kernel_error(&op, libc::ESRCH));
        };
        if reals.iter().any(|x| x.key() == r.key()) {
            return Err(kernel_error(&op, libc::EEXIST));
        }
        reals.push(RealServer::new(r.address, r.port, r.weight));
        Ok(())
    }

    fn update_real_server(&self, s: &VirtualServer, r: &RealServer) -> Result<(), IpvsError> {
        let op = op_update_real_server(s, r);
        self.begin(IpvsCall::UpdateRealServer(s.clone(), r.clone()), &op)?;
        let mut table = self.table.lock();
        let Some((_, reals)) = table.get_mut(&s.key()) else {
            return Err(kernel_error(&op, libc::ESRCH));
        };
        match reals.iter_mut().find(|x| x.key() == r.key()) {
            Some(existing) => {
                existing.weight = r.weight;
                Ok(())
            }
            None => Err(kernel_error(&op, libc::ENOENT)),
        }
    }

    fn delete_real_server(&self, s: &VirtualServer, r: &RealServer) -> Result<(), IpvsError> {
        let op = op_delete_real_server(s, r);
        self.begin(IpvsCall::DeleteRealServer(s.clone(), r.clone()), &op)?;
        if let Some((_, reals)) = self.table.lock().get_mut(&s.key()) {
            reals.retain(|x| x.key() != r.key());
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

    use super::*;
    use crate::netlink::test_util::ip;

    #[test]
    fn display_names_services_and_real_servers() {
        let s = VirtualServer::new(IPPROTO_TCP, ip("10.96.0.10"), 80);
        assert_eq!(s.to_string(), "TCP 10.96.0.10:80");
        let s = VirtualServer::new(IPPROTO_SCTP, ip("10.96.0.10"), 9);
        assert_eq!(s.to_string(), "SCTP 10.96.0.10:9");
        let r = RealServer::new(ip("10.244.1.5"), 8080, 1);
        assert_eq!(r.to_string(), "10.244.1.5:8080");
        let e = kernel_error(&op_add_real_server(&s, &r), libc::EEXIST);
        assert_eq!(
            e.to_string(),
            "adding real server 10.244.1.5:8080 to IPVS service SCTP 10.96.0.10:9: \
             the kernel answered: File exists (os error 17)"
        );
        assert!(e.is_already_exists());
        let e = kernel_error(&op_delete_service(&s), libc::EPERM);
        assert!(matches!(e, IpvsError::PermissionDenied { .. }), "{e}");
        assert!(e.to_string().contains("CAP_NET_ADMIN"), "{e}");
    }

    #[test]
    fn scheduler_names_are_checked() {
        let mut s = VirtualServer::new(IPPROTO_TCP, ip("10.96.0.10"), 80);
        assert!(check_service("x", &s).is_ok());
        s.scheduler = "a-very-long-name".into(); // 16 bytes: no room for the NUL
        let e = check_service("adding", &s).unwrap_err();
        assert!(e.to_string().contains("longer than 15 bytes"), "{e}");
        s.scheduler.clear();
        assert!(check_service("adding", &s).is_err());
        s.scheduler = "r\0r".into();
        assert!(check_service("adding", &s).is_err());
    }

    #[test]
    fn fake_answers_like_the_kernel() {
        let ipvs = FakeIpvs::new();
        let mut svc = VirtualServer::new(IPPROTO_TCP, ip("10.96.0.10"), 80);
        let a = RealServer::new(ip("10.244.1.5"), 8080, 1);
        let b = RealServer::new(ip("10.244.2.5"), 8080, 1);
        let first = svc.clone();
        ipvs.add_service(&svc).unwrap();
        assert!(ipvs.add_service(&svc).unwrap_err().is_already_exists());
        ipvs.add_real_server(&svc, &a).unwrap();
        ipvs.add_real_server(&svc, &b).unwrap();
        assert!(ipvs
            .add_real_server(&svc, &a)
            .unwrap_err()
            .is_already_exists());
        svc.persistent_timeout = Some(600);
        ipvs.update_service(&svc).unwrap();
        assert_eq!(ipvs.services().unwrap(), vec![svc.clone()]);
        let mut drained = a.clone();
        drained.weight = 0;
        ipvs.update_real_server(&svc, &drained).unwrap();
        assert_eq!(ipvs.real_servers(&svc).unwrap(), vec![drained, b.clone()]);
        ipvs.delete_real_server(&svc, &a).unwrap();
        ipvs.delete_real_server(&svc, &a).unwrap();
        let e = ipvs.update_real_server(&svc, &a).unwrap_err();
        assert_eq!(e.errno(), Some(libc::ENOENT), "{e}");
        assert_eq!(ipvs.real_servers(&svc).unwrap(), vec![b.clone()]);

        *ipvs.fail_next.lock() = Some(libc::EPERM);
        let e = ipvs.delete_service(&svc).unwrap_err();
        assert!(matches!(e, IpvsError::PermissionDenied { .. }), "{e}");
        assert_eq!(ipvs.services().unwrap().len(), 1);
        ipvs.delete_service(&svc).unwrap();
        ipvs.delete_service(&svc).unwrap();
        assert!(ipvs.services().unwrap().is_empty());
        assert!(ipvs.real_servers(&svc).unwrap().is_empty());
        let e = ipvs.update_service(&svc).unwrap_err();
        assert_eq!(e.errno(), Some(libc::ESRCH), "{e}");
        let e = ipvs.add_real_server(&svc, &b).unwrap_err();
        assert_eq!(e.errno(), Some(libc::ESRCH), "{e}");

        let changes = ipvs.changes();
        assert_eq!(changes.first(), Some(&IpvsCall::AddService(first)));
        assert_eq!(changes.len(), 15, "{changes:?}");
        assert!(ipvs.calls.lock().contains(&IpvsCall::Services));
    }
}
