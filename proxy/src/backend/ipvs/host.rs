//! What the IPVS mode changes on the node besides IPVS and nftables: the dummy link that
//! holds the service addresses, and the sysctls IPVS needs. A trait, so the backend's
//! logic is tested without root; the real one speaks rtnetlink.

use std::collections::BTreeSet;
use std::net::{IpAddr, Ipv4Addr};

use cairn_netlink::{Netlink, NetlinkError};
use cairn_serviceproxy::ipvs::DUMMY_LINK;
use ipnetwork::{IpNetwork, Ipv4Network};

#[derive(Debug, thiserror::Error)]
pub enum HostError {
    #[error("{0}")]
    Netlink(#[from] NetlinkError),
    #[error("writing {path}: {source}")]
    Sysctl {
        path: String,
        source: std::io::Error,
    },
    #[error("no tokio runtime to run netlink requests on")]
    NoRuntime,
}

pub trait IpvsHost: Send {
    /// The addresses on the dummy link, creating the link if it is missing.
    fn dummy_addresses(&self) -> Result<BTreeSet<Ipv4Addr>, HostError>;
    fn add_dummy_address(&self, ip: Ipv4Addr) -> Result<(), HostError>;
    fn delete_dummy_address(&self, ip: Ipv4Addr) -> Result<(), HostError>;
    /// Removes the dummy link (and so its addresses), if it exists.
    fn delete_dummy(&self) -> Result<(), HostError>;
    /// Every local IPv4 address, with its link's name.
    fn local_addresses(&self) -> Result<Vec<(String, Ipv4Addr)>, HostError>;
    /// Writes `/proc/sys/<key>` (`net/ipv4/vs/conntrack`).
    fn set_sysctl(&self, key: &str, value: &str) -> Result<(), HostError>;
}

/// The real host: rtnetlink requests run on the proxy's runtime (the backend is called
/// from `block_in_place`, where `Handle::block_on` is allowed).
pub struct NetlinkHost {
    netlink: Netlink,
}

impl NetlinkHost {
    /// Must be called inside a tokio runtime (the netlink connection runs on it).
    pub fn new() -> Result<NetlinkHost, HostError> {
        Ok(NetlinkHost {
            netlink: Netlink::connect()?,
        })
    }

    fn block_on<T>(
        &self,
        f: impl std::future::Future<Output = Result<T, NetlinkError>>,
    ) -> Result<T, HostError> {
        let handle = tokio::runtime::Handle::try_current().map_err(|_| HostError::NoRuntime)?;
        Ok(handle.block_on(f)?)
    }

    fn dummy_index(&self) -> Result<u32, HostError> {
        Ok(self.block_on(self.netlink.ensure_dummy(DUMMY_LINK))?.index)
    }
}

fn host_route(ip: Ipv4Addr) -> IpNetwork {
    IpNetwork::V4(Ipv4Network::from(ip))
}

impl IpvsHost for NetlinkHost {
    fn dummy_addresses(&self) -> Result<BTreeSet<Ipv4Addr>, HostError> {
        let index = self.dummy_index()?;
        let addrs = self.block_on(self.netlink.addresses(index))?;
        Ok(addrs
            .into_iter()
            .filter_map(|a| match a.ip() {
                IpAddr::V4(v4) => Some(v4),
                IpAddr::V6(_) => None,
            })
            .collect())
    }

    fn add_dummy_address(&self, ip: Ipv4Addr) -> Result<(), HostError> {
        let index = self.dummy_index()?;
        self.block_on(self.netlink.add_address(index, host_route(ip)))
    }

    fn delete_dummy_address(&self, ip: Ipv4Addr) -> Result<(), HostError> {
        let index = self.dummy_index()?;
        self.block_on(self.netlink.delete_address(index, host_route(ip)))
            .map(drop)
    }

    fn delete_dummy(&self) -> Result<(), HostError> {
        self.block_on(self.netlink.delete_link_by_name(DUMMY_LINK))
            .map(drop)
    }

    fn local_addresses(&self) -> Result<Vec<(String, Ipv4Addr)>, HostError> {
        let all = self.block_on(self.netlink.all_addresses())?;
        Ok(all
            .into_iter()
            .filter_map(|(link, a)| match a.ip() {
                IpAddr::V4(v4) => Some((link, v4)),
                IpAddr::V6(_) => None,
            })
            .collect())
    }

    fn set_sysctl(&self, key: &str, value: &str) -> Result<(), HostError> {
        let path = format!("/proc/sys/{key}");
        std::fs::write(&path, value).map_err(|source| HostError::Sysctl { path, source })
    }
}

/// An in-memory host for unit tests.
#[derive(Debug, Default)]
pub struct FakeHost {
    pub dummy: parking_lot::Mutex<Option<BTreeSet<Ipv4Addr>>>,
    pub local: Vec<(String, Ipv4Addr)>,
    pub sysctls: parking_lot::Mutex<Vec<(String, String)>>,
}

impl IpvsHost for FakeHost {
    fn dummy_addresses(&self) -> Result<BTreeSet<Ipv4Addr>, HostError> {
        Ok(self.dummy.lock().get_or_insert_with(BTreeSet::new).clone())
    }
    fn add_dummy_address(&self, ip: Ipv4Addr) -> Result<(), HostError> {
        self.dummy
            .lock()
            .get_or_insert_with(BTreeSet::new)
            .insert(ip);
        Ok(())
    }
    fn delete_dummy_address(&self, ip: Ipv4Addr) -> Result<(), HostError> {
        if let Some(d) = self.dummy.lock().as_mut() {
            d.remove(&ip);
        }
        Ok(())
    }
    fn delete_dummy(&self) -> Result<(), HostError> {
        *self.dummy.lock() = None;
        Ok(())
    }
    fn local_addresses(&self) -> Result<Vec<(String, Ipv4Addr)>, HostError> {
        let mut all = self.local.clone();
        for ip in self.dummy.lock().iter().flatten() {
            all.push((DUMMY_LINK.to_string(), *ip));
        }
        Ok(all)
    }
    fn set_sysctl(&self, key: &str, value: &str) -> Result<(), HostError> {
        self.sysctls.lock().push((key.into(), value.into()));
        Ok(())
    }
}
