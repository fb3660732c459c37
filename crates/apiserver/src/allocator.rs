//! ClusterIP and NodePort allocation. Allocations live in the Service objects themselves,
//! so after a restart the allocators are rebuilt from the stored Services and nothing is
//! handed out twice.

use std::collections::BTreeSet;
use std::net::Ipv4Addr;

use ipnetwork::Ipv4Network;

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum AllocError {
    #[error("range is full")]
    Full,
    #[error("provided IP is already allocated")]
    IpInUse,
    #[error("provided IP is not in the valid range. The range of valid IPs is {0}")]
    IpOutOfRange(String),
    #[error("provided port is already allocated")]
    PortInUse,
    #[error("provided port is not in the valid range. The range of valid ports is {0}-{1}")]
    PortOutOfRange(u16, u16),
}

/// Allocates addresses from a service CIDR, skipping the network and broadcast addresses.
#[derive(Debug)]
pub struct IpAllocator {
    network: Ipv4Network,
    used: BTreeSet<u32>,
    next: u32,
}

impl IpAllocator {
    pub fn new(network: Ipv4Network) -> Self {
        let first = u32::from(network.network()).saturating_add(1);
        IpAllocator {
            network,
            used: BTreeSet::new(),
            next: first,
        }
    }

    fn first(&self) -> u32 {
        u32::from(self.network.network()).saturating_add(1)
    }

    fn last(&self) -> u32 {
        u32::from(self.network.broadcast()).saturating_sub(1)
    }

    /// The first usable address: reserved for the `kubernetes` Service.
    /// Whether `ip` is in the range (a Service's address, allocated or not).
    pub fn contains(&self, ip: Ipv4Addr) -> bool {
        self.network.contains(ip)
    }

    pub fn first_address(&self) -> Ipv4Addr {
        Ipv4Addr::from(self.first())
    }

    pub fn cidr(&self) -> String {
        self.network.to_string()
    }

    /// Marks `ip` as used; errors if it is outside the range or taken.
    pub fn reserve(&mut self, ip: Ipv4Addr) -> Result<(), AllocError> {
        let n = u32::from(ip);
        if n < self.first() || n > self.last() {
            return Err(AllocError::IpOutOfRange(self.cidr()));
        }
        if !self.used.insert(n) {
            return Err(AllocError::IpInUse);
        }
        Ok(())
    }

    /// Records an address found in a stored object (no range or duplicate check).
    pub fn restore(&mut self, ip: Ipv4Addr) {
        self.used.insert(u32::from(ip));
    }

    /// Next free address after the last one handed out, wrapping around.
    pub fn allocate(&mut self) -> Result<Ipv4Addr, AllocError> {
        let (first, last) = (self.first(), self.last());
        if last < first {
            return Err(AllocError::Full);
        }
        let size = last - first + 1;
        let mut candidate = self.next.clamp(first, last);
        for _ in 0..size {
            if !self.used.contains(&candidate) {
                self.used.insert(candidate);
                self.next = if candidate == last {
                    first
                } else {
                    candidate + 1
                };
                return Ok(Ipv4Addr::from(candidate));
            }
            candidate = if candidate == last {
                first
            } else {
                candidate + 1
            };
        }
        Err(AllocError::Full)
    }

    pub fn release(&mut self, ip: Ipv4Addr) {
        self.used.remove(&u32::from(ip));
    }

    pub fn in_use(&self) -> usize {
        self.used.len()
    }
}

/// Allocates NodePorts from a port range.
#[derive(Debug)]
pub struct PortAllocator {
    first: u16,
    last: u16,
    used: BTreeSet<u16>,
    next: u16,
}

impl PortAllocator {
    pub fn new(first: u16, last: u16) -> Self {
        PortAllocator {
            first,
            last,
            used: BTreeSet::new(),
            next: first,
        }
    }

    pub fn contains(&self, port: u16) -> bool {
        (self.first..=self.last).contains(&port)
    }

    pub fn reserve(&mut self, port: u16) -> Result<(), AllocError> {
        if !self.contains(port) {
            return Err(AllocError::PortOutOfRange(self.first, self.last));
        }
        if !self.used.insert(port) {
            return Err(AllocError::PortInUse);
        }
        Ok(())
    }

    pub fn restore(&mut self, port: u16) {
        self.used.insert(port);
    }

    pub fn allocate(&mut self) -> Result<u16, AllocError> {
        let size = u32::from(self.last - self.first) + 1;
        let mut candidate = self.next.clamp(self.first, self.last);
        for _ in 0..size {
            if !self.used.contains(&candidate) {
                self.used.insert(candidate);
                self.next = if candidate == self.last {
                    self.first
                } else {
                    candidate + 1
                };
                return Ok(candidate);
            }
            candidate = if candidate == self.last {
                self.first
            } else {
                candidate + 1
            };
        }
        Err(AllocError::Full)
    }

    pub fn release(&mut self, port: u16) {
        self.used.remove(&port);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ip_allocation_skips_used_and_wraps() {
        let mut a = IpAllocator::new("10.96.0.0/29".parse().unwrap());
        assert_eq!(a.first_address(), Ipv4Addr::new(10, 96, 0, 1));
        a.reserve(a.first_address()).unwrap();
        let got: Vec<Ipv4Addr> = (0..5).map(|_| a.allocate().unwrap()).collect();
        assert_eq!(got[0], Ipv4Addr::new(10, 96, 0, 2));
        assert_eq!(got[4], Ipv4Addr::new(10, 96, 0, 6));
        assert_eq!(a.allocate(), Err(AllocError::Full));
        a.release(Ipv4Addr::new(10, 96, 0, 3));
        assert_eq!(a.allocate().unwrap(), Ipv4Addr::new(10, 96, 0, 3));
        assert_eq!(
            a.reserve(Ipv4Addr::new(10, 96, 0, 2)),
            Err(AllocError::IpInUse)
        );
        assert!(matches!(
            a.reserve(Ipv4Addr::new(10, 97, 0, 2)),
            Err(AllocError::IpOutOfRange(_))
        ));
        assert!(matches!(
            a.reserve(Ipv4Addr::new(10, 96, 0, 7)),
            Err(AllocError::IpOutOfRange(_))
        ));
    }

    #[test]
    fn port_allocation() {
        let mut p = PortAllocator::new(30000, 30002);
        p.reserve(30001).unwrap();
        assert_eq!(p.allocate().unwrap(), 30000);
        assert_eq!(p.allocate().unwrap(), 30002);
        assert_eq!(p.allocate(), Err(AllocError::Full));
        assert_eq!(
            p.reserve(29999),
            Err(AllocError::PortOutOfRange(30000, 30002))
        );
        assert_eq!(p.reserve(30001), Err(AllocError::PortInUse));
    }
}
