//! host-local compatible IP address management.
//!
//! State lives in `<dataDir>/<network>/`: one file per allocated address, named after the
//! address and holding `<containerID>\r\n<ifname>`, `last_reserved_ip.<rangeset>` with the
//! last address handed out (allocation continues after it, wrapping around), and `lock`,
//! flock'ed for the whole of an allocation or release so concurrent plugins (ours or
//! host-local itself) never hand out one address twice.

use std::collections::HashSet;
use std::fs::{self, File, OpenOptions};
use std::io::{ErrorKind, Write};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use ipnetwork::IpNetwork;
use nix::fcntl::{Flock, FlockArg};

const LINE_BREAK: &str = "\r\n";
const LAST_RESERVED: &str = "last_reserved_ip.";

#[derive(Debug, thiserror::Error)]
pub enum IpamError {
    #[error("IPAM directory {path}: {source}")]
    Dir {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("lock {path}: {source}")]
    Lock { path: PathBuf, source: nix::Error },
    #[error("IPAM file {path}: {source}")]
    File {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("no IP addresses available in range set {0}")]
    Exhausted(String),
    #[error("requested IP address {ip} is not available in range set {set}")]
    RequestedUnavailable { ip: IpAddr, set: String },
    #[error("requested IP address {0} is in no configured range")]
    RequestedOutOfRange(IpAddr),
    #[error(
        "{id}/{ifname} already has address {ip} allocated; duplicate allocation is not allowed"
    )]
    Duplicate {
        id: String,
        ifname: String,
        ip: IpAddr,
    },
}

fn to_u128(ip: IpAddr) -> u128 {
    match ip {
        IpAddr::V4(v4) => u128::from(u32::from(v4)),
        IpAddr::V6(v6) => u128::from(v6),
    }
}

fn from_u128(v: u128, v6: bool) -> IpAddr {
    if v6 {
        IpAddr::V6(Ipv6Addr::from(v))
    } else {
        IpAddr::V4(Ipv4Addr::from(u32::try_from(v).unwrap_or(u32::MAX)))
    }
}

/// One canonical range: `start..=end` inside `subnet`, with the gateway (never allocated).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Range {
    pub subnet: IpNetwork,
    pub start: IpAddr,
    pub end: IpAddr,
    pub gateway: Option<IpAddr>,
}

/// Ranges allocated from together; one address is handed out per range set.
pub type RangeSet = Vec<Range>;

impl Range {
    /// Canonicalizes like host-local: the subnet's network address, start defaulting to
    /// the first host, end to the last host (the broadcast address excluded for IPv4),
    /// gateway defaulting to the first host.
    pub fn new(
        subnet: IpNetwork,
        start: Option<IpAddr>,
        end: Option<IpAddr>,
        gateway: Option<IpAddr>,
    ) -> Result<Self, String> {
        let v6 = subnet.is_ipv6();
        let bits = if v6 { 128 } else { 32 };
        if u32::from(subnet.prefix()) + 2 > bits {
            return Err(format!("network {subnet} is too small to allocate from"));
        }
        let subnet = IpNetwork::new(subnet.network(), subnet.prefix())
            .map_err(|e| format!("subnet {subnet}: {e}"))?;
        let net = to_u128(subnet.network());
        let host_bits = bits - u32::from(subnet.prefix());
        let last = if host_bits >= 128 {
            u128::MAX
        } else {
            net | ((1u128 << host_bits) - 1)
        };
        let first_host = net + 1;
        let last_host = if v6 { last } else { last - 1 };
        let check = |what: &str, ip: IpAddr| -> Result<u128, String> {
            if ip.is_ipv6() != v6 || !subnet.contains(ip) {
                return Err(format!("{what} {ip} is not in subnet {subnet}"));
            }
            Ok(to_u128(ip))
        };
        let s = match start {
            Some(ip) => check("rangeStart", ip)?,
            None => first_host,
        };
        let e = match end {
            Some(ip) => check("rangeEnd", ip)?,
            None => last_host,
        };
        if s > e {
            return Err(format!(
                "rangeStart {} is after rangeEnd {}",
                from_u128(s, v6),
                from_u128(e, v6)
            ));
        }
        let gateway = match gateway {
            Some(ip) => {
                check("gateway", ip)?;
                Some(ip)
            }
            None => Some(from_u128(first_host, v6)),
        };
        Ok(Self {
            subnet,
            start: from_u128(s, v6),
            end: from_u128(e, v6),
            gateway,
        })
    }

    pub fn contains(&self, ip: IpAddr) -> bool {
        ip.is_ipv6() == self.subnet.is_ipv6() && {
            let v = to_u128(ip);
            v >= to_u128(self.start) && v <= to_u128(self.end)
        }
    }

    pub fn overlaps(&self, other: &Range) -> bool {
        self.subnet.is_ipv6() == other.subnet.is_ipv6()
            && to_u128(self.start) <= to_u128(other.end)
            && to_u128(other.start) <= to_u128(self.end)
    }

    /// Number of addresses in `start..=end`, saturating.
    pub fn size(&self) -> u128 {
        (to_u128(self.end) - to_u128(self.start)).saturating_add(1)
    }
}

/// One allocated address with its subnet prefix and gateway.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Allocation {
    pub address: IpNetwork,
    pub gateway: Option<IpAddr>,
}

/// An existing allocation as found on disk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    pub ip: IpAddr,
    pub id: String,
    pub ifname: Option<String>,
}

/// The network's state directory, locked for as long as the store lives.
pub struct Store {
    dir: PathBuf,
    _lock: Flock<File>,
}

impl Store {
    /// Opens (creating) `<data_dir>/<network>` and takes its lock.
    pub fn open(network_dir: &Path) -> Result<Self, IpamError> {
        fs::create_dir_all(network_dir).map_err(|source| IpamError::Dir {
            path: network_dir.to_path_buf(),
            source,
        })?;
        let lock_path = network_dir.join("lock");
        let f = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .mode(0o750)
            .open(&lock_path)
            .map_err(|source| IpamError::File {
                path: lock_path.clone(),
                source,
            })?;
        let lock =
            Flock::lock(f, FlockArg::LockExclusive).map_err(|(_, source)| IpamError::Lock {
                path: lock_path,
                source,
            })?;
        Ok(Self {
            dir: network_dir.to_path_buf(),
            _lock: lock,
        })
    }

    /// Opens the store only if its directory exists (DEL/GC of a network never used here).
    pub fn open_existing(network_dir: &Path) -> Result<Option<Self>, IpamError> {
        if !network_dir.is_dir() {
            return Ok(None);
        }
        Self::open(network_dir).map(Some)
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Every allocation file in the directory.
    pub fn records(&self) -> Result<Vec<Record>, IpamError> {
        let rd = fs::read_dir(&self.dir).map_err(|source| IpamError::Dir {
            path: self.dir.clone(),
            source,
        })?;
        let mut out = Vec::new();
        for entry in rd.flatten() {
            let name = entry.file_name();
            let Some(ip) = name.to_str().and_then(|n| n.parse::<IpAddr>().ok()) else {
                continue;
            };
            let path = entry.path();
            let text = match fs::read_to_string(&path) {
                Ok(t) => t,
                Err(e) if e.kind() == ErrorKind::NotFound => continue,
                Err(source) => return Err(IpamError::File { path, source }),
            };
            let (id, ifname) = match text.split_once(LINE_BREAK) {
                Some((id, ifname)) => (id.trim().to_string(), Some(ifname.trim().to_string())),
                None => (text.trim().to_string(), None),
            };
            out.push(Record { ip, id, ifname });
        }
        out.sort_by_key(|r| to_u128(r.ip));
        Ok(out)
    }

    fn last_reserved(&self, set: usize) -> Option<IpAddr> {
        fs::read_to_string(self.dir.join(format!("{LAST_RESERVED}{set}")))
            .ok()
            .and_then(|s| s.trim().parse().ok())
    }

    /// Reserves `ip` for `id`/`ifname` with an exclusive create; `Ok(false)` if taken.
    fn reserve(&self, ip: IpAddr, id: &str, ifname: &str, set: usize) -> Result<bool, IpamError> {
        let path = self.dir.join(ip.to_string());
        match OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o644)
            .open(&path)
        {
            Ok(mut f) => {
                let body = format!("{}{LINE_BREAK}{ifname}", id.trim());
                if let Err(source) = f.write_all(body.as_bytes()) {
                    let _ = fs::remove_file(&path);
                    return Err(IpamError::File { path, source });
                }
                let lr = self.dir.join(format!("{LAST_RESERVED}{set}"));
                fs::write(&lr, ip.to_string())
                    .map_err(|source| IpamError::File { path: lr, source })?;
                Ok(true)
            }
            Err(e) if e.kind() == ErrorKind::AlreadyExists => Ok(false),
            Err(source) => Err(IpamError::File { path, source }),
        }
    }

    /// Allocates one address from each range set, host-local style. On failure nothing
    /// stays allocated by this call.
    pub fn allocate(
        &self,
        id: &str,
        ifname: &str,
        sets: &[RangeSet],
    ) -> Result<Vec<Allocation>, IpamError> {
        self.allocate_requested(id, ifname, sets, &[])
    }

    /// As [`Store::allocate`], but a range set containing one of `requested` (host-local's
    /// `IP=` in CNI_ARGS, `args.cni.ips`, runtimeConfig `ips`) hands out exactly that one.
    pub fn allocate_requested(
        &self,
        id: &str,
        ifname: &str,
        sets: &[RangeSet],
        requested: &[IpAddr],
    ) -> Result<Vec<Allocation>, IpamError> {
        for ip in requested {
            if !sets.iter().flatten().any(|r| r.contains(*ip)) {
                return Err(IpamError::RequestedOutOfRange(*ip));
            }
        }
        let existing = self.records()?;
        if let Some(r) = existing
            .iter()
            .find(|r| r.id == id && r.ifname.as_deref().is_none_or(|i| i == ifname))
        {
            return Err(IpamError::Duplicate {
                id: id.to_string(),
                ifname: ifname.to_string(),
                ip: r.ip,
            });
        }
        let mut out = Vec::new();
        for (i, set) in sets.iter().enumerate() {
            let wanted = requested
                .iter()
                .find(|ip| set.iter().any(|r| r.contains(**ip)));
            let got = match wanted {
                Some(ip) => self.allocate_exact(id, ifname, i, set, *ip),
                None => self.allocate_from_set(id, ifname, i, set),
            };
            match got {
                Ok(a) => out.push(a),
                Err(e) => {
                    for a in &out {
                        let _ = fs::remove_file(self.dir.join(a.address.ip().to_string()));
                    }
                    return Err(e);
                }
            }
        }
        Ok(out)
    }

    fn allocate_exact(
        &self,
        id: &str,
        ifname: &str,
        set_index: usize,
        set: &RangeSet,
        ip: IpAddr,
    ) -> Result<Allocation, IpamError> {
        let unavailable = || IpamError::RequestedUnavailable {
            ip,
            set: set
                .iter()
                .map(|r| format!("{}-{}", r.start, r.end))
                .collect::<Vec<_>>()
                .join(","),
        };
        let r = set
            .iter()
            .find(|r| r.contains(ip))
            .ok_or_else(unavailable)?;
        if Some(ip) == r.gateway || !self.reserve(ip, id, ifname, set_index)? {
            return Err(unavailable());
        }
        let address = IpNetwork::new(ip, r.subnet.prefix())
            .map_err(|e| IpamError::Exhausted(format!("{}: {e}", r.subnet)))?;
        Ok(Allocation {
            address,
            gateway: r.gateway,
        })
    }

    fn allocate_from_set(
        &self,
        id: &str,
        ifname: &str,
        set_index: usize,
        set: &RangeSet,
    ) -> Result<Allocation, IpamError> {
        let describe = || {
            set.iter()
                .map(|r| format!("{}-{}", r.start, r.end))
                .collect::<Vec<_>>()
                .join(",")
        };
        let total: u128 = set.iter().map(Range::size).fold(0, u128::saturating_add);
        // Start after the last reserved address if it is in this set, else at the start.
        let (mut ri, mut cur) = (
            0usize,
            to_u128(
                set.first()
                    .map_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED), |r| r.start),
            ),
        );
        if let Some(last) = self.last_reserved(set_index) {
            if let Some(pos) = set.iter().position(|r| r.contains(last)) {
                ri = pos;
                cur = to_u128(last);
                // advance one
                (ri, cur) = next(set, ri, cur);
            }
        }
        let mut tried: u128 = 0;
        while tried < total {
            let r = &set[ri];
            let ip = from_u128(cur, r.subnet.is_ipv6());
            tried += 1;
            if Some(ip) != r.gateway && self.reserve(ip, id, ifname, set_index)? {
                let address = IpNetwork::new(ip, r.subnet.prefix())
                    .map_err(|e| IpamError::Exhausted(format!("{}: {e}", r.subnet)))?;
                return Ok(Allocation {
                    address,
                    gateway: r.gateway,
                });
            }
            (ri, cur) = next(set, ri, cur);
        }
        Err(IpamError::Exhausted(describe()))
    }

    /// Releases every address held by `id`/`ifname` (or by `id` in the old one-line
    /// format). Returns the released addresses.
    pub fn release(&self, id: &str, ifname: &str) -> Result<Vec<IpAddr>, IpamError> {
        let mut out = Vec::new();
        for r in self.records()? {
            if r.id == id && r.ifname.as_deref().is_none_or(|i| i == ifname) {
                self.remove(r.ip)?;
                out.push(r.ip);
            }
        }
        Ok(out)
    }

    /// Removes every allocation whose (id, ifname) is not in `valid`. Returns the removed.
    pub fn gc(&self, valid: &HashSet<(String, String)>) -> Result<Vec<Record>, IpamError> {
        let mut out = Vec::new();
        for r in self.records()? {
            let keep = match &r.ifname {
                Some(i) => valid.contains(&(r.id.clone(), i.clone())),
                None => valid.iter().any(|(id, _)| *id == r.id),
            };
            if !keep {
                self.remove(r.ip)?;
                out.push(r);
            }
        }
        Ok(out)
    }

    fn remove(&self, ip: IpAddr) -> Result<(), IpamError> {
        let path = self.dir.join(ip.to_string());
        match fs::remove_file(&path) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == ErrorKind::NotFound => Ok(()),
            Err(source) => Err(IpamError::File { path, source }),
        }
    }

    /// Free addresses per range set (gateway excluded), saturating.
    pub fn free_counts(&self, sets: &[RangeSet]) -> Result<Vec<u128>, IpamError> {
        let records = self.records()?;
        Ok(sets
            .iter()
            .map(|set| {
                let mut total: u128 = 0;
                for r in set {
                    let mut size = r.size();
                    if r.gateway.is_some_and(|g| r.contains(g)) {
                        size -= 1;
                    }
                    total = total.saturating_add(size);
                }
                let used = records
                    .iter()
                    .filter(|rec| {
                        set.iter()
                            .any(|r| r.contains(rec.ip) && Some(rec.ip) != r.gateway)
                    })
                    .count() as u128;
                total.saturating_sub(used)
            })
            .collect())
    }
}

/// The address after `cur` in the range set, wrapping to the next range and around.
fn next(set: &RangeSet, ri: usize, cur: u128) -> (usize, u128) {
    let r = &set[ri];
    if cur < to_u128(r.end) {
        return (ri, cur + 1);
    }
    let ni = (ri + 1) % set.len();
    (ni, to_u128(set[ni].start))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::str::FromStr;

    fn range(s: &str, start: Option<&str>, end: Option<&str>) -> Range {
        Range::new(
            IpNetwork::from_str(s).unwrap(),
            start.map(|x| x.parse().unwrap()),
            end.map(|x| x.parse().unwrap()),
            None,
        )
        .unwrap()
    }

    #[test]
    fn allocates_sequentially_skips_gateway_and_rotates() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("net")).unwrap();
        let sets = vec![vec![range("10.244.0.0/29", None, None)]];
        // .1 is the gateway; .2-.6 allocatable.
        let a = store.allocate("c1", "eth0", &sets).unwrap();
        assert_eq!(a[0].address.to_string(), "10.244.0.2/29");
        assert_eq!(a[0].gateway.unwrap().to_string(), "10.244.0.1");
        let b = store.allocate("c2", "eth0", &sets).unwrap();
        assert_eq!(b[0].address.ip().to_string(), "10.244.0.3");
        // Releasing c1 and allocating again continues after the last reserved (.4).
        assert_eq!(store.release("c1", "eth0").unwrap().len(), 1);
        let c = store.allocate("c3", "eth0", &sets).unwrap();
        assert_eq!(c[0].address.ip().to_string(), "10.244.0.4");
        for id in ["c4", "c5"] {
            store.allocate(id, "eth0", &sets).unwrap();
        }
        // .2 is free again and found by wrapping around.
        let d = store.allocate("c6", "eth0", &sets).unwrap();
        assert_eq!(d[0].address.ip().to_string(), "10.244.0.2");
        assert!(matches!(
            store.allocate("c7", "eth0", &sets),
            Err(IpamError::Exhausted(_))
        ));
        assert_eq!(store.free_counts(&sets).unwrap(), vec![0]);
        assert!(matches!(
            store.allocate("c6", "eth0", &sets),
            Err(IpamError::Duplicate { .. })
        ));
        let text = fs::read_to_string(dir.path().join("net/10.244.0.2")).unwrap();
        assert_eq!(text, "c6\r\neth0");
    }

    #[test]
    fn range_start_end_and_gc() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("net")).unwrap();
        let sets = vec![vec![range(
            "10.244.1.0/24",
            Some("10.244.1.100"),
            Some("10.244.1.101"),
        )]];
        assert_eq!(store.free_counts(&sets).unwrap(), vec![2]);
        store.allocate("a", "eth0", &sets).unwrap();
        store.allocate("b", "eth0", &sets).unwrap();
        let valid: HashSet<_> = [("b".to_string(), "eth0".to_string())]
            .into_iter()
            .collect();
        let removed = store.gc(&valid).unwrap();
        assert_eq!(removed.len(), 1);
        assert_eq!(removed[0].id, "a");
        assert_eq!(store.records().unwrap().len(), 1);
    }

    #[test]
    fn requested_addresses() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("net")).unwrap();
        let sets = vec![vec![range("10.244.2.0/24", None, None)]];
        let want: IpAddr = "10.244.2.77".parse().unwrap();
        let a = store
            .allocate_requested("a", "eth0", &sets, &[want])
            .unwrap();
        assert_eq!(a[0].address.to_string(), "10.244.2.77/24");
        assert!(matches!(
            store.allocate_requested("b", "eth0", &sets, &[want]),
            Err(IpamError::RequestedUnavailable { .. })
        ));
        let gw: IpAddr = "10.244.2.1".parse().unwrap();
        assert!(store.allocate_requested("c", "eth0", &sets, &[gw]).is_err());
        let out: IpAddr = "10.9.9.9".parse().unwrap();
        assert!(matches!(
            store.allocate_requested("d", "eth0", &sets, &[out]),
            Err(IpamError::RequestedOutOfRange(_))
        ));
        assert_eq!(store.records().unwrap().len(), 1);
    }

    #[test]
    fn ipv6_range() {
        let r = range("fd00:10:244::/120", None, None);
        assert_eq!(r.end.to_string(), "fd00:10:244::ff");
        assert_eq!(r.gateway.unwrap().to_string(), "fd00:10:244::1");
        assert!(Range::new(
            IpNetwork::from_str("10.0.0.0/31").unwrap(),
            None,
            None,
            None
        )
        .is_err());
    }
}
