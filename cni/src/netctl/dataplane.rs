//! Programs the node's network namespace through rtnetlink: the vxlan device, routes
//! marked with [`ROUTE_PROTOCOL`] (the only routes ever listed for removal), and, on the
//! vxlan device the controller owns, permanent neighbours and FDB entries.
//! Every step compares with what the kernel holds and changes only the difference, so a
//! restarted controller converges to the same state without removing anything first.

use std::collections::BTreeSet;
use std::net::{IpAddr, Ipv4Addr};
use std::path::Path;

use cairn_netlink::overlay::{mac_to_string, VxlanLink, VxlanSpec};
use cairn_netlink::{Link, Netlink, EEXIST};
use ipnetwork::{IpNetwork, Ipv4Network};
use tracing::{info, warn};

use super::peers::Desired;
use super::NetControllerError;

/// rtnetlink protocol number of the controller's routes (`ip route show proto 202`).
pub const ROUTE_PROTOCOL: u8 = 202;

/// What one reconciliation changed (for logs and tests).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Changes {
    pub routes_added: usize,
    pub routes_replaced: usize,
    pub routes_removed: usize,
    pub neighbours_set: usize,
    pub neighbours_removed: usize,
    pub fdb_set: usize,
    pub fdb_removed: usize,
}

impl Changes {
    pub fn is_empty(&self) -> bool {
        *self == Changes::default()
    }
}

/// A stable, locally administered MAC for the node's VTEP: the same after a restart or a
/// re-creation of the device, so peers' FDB and neighbour entries stay valid.
pub fn vtep_mac(node_name: &str, vni: u32) -> [u8; 6] {
    let h = crate::fnv64(&["cairn-vtep", node_name, &vni.to_string()]).to_be_bytes();
    [(h[0] & 0xfe) | 0x02, h[1], h[2], h[3], h[4], h[5]]
}

/// Turns on IPv4 forwarding for the namespace whose `/proc/sys` is `proc_sys` (the
/// files under net/ are per network namespace, seen from the reading task's).
pub fn enable_forwarding(proc_sys: &Path) -> Result<(), NetControllerError> {
    let path = proc_sys.join("net/ipv4/ip_forward");
    if std::fs::read_to_string(&path).is_ok_and(|v| v.trim() == "1") {
        return Ok(());
    }
    std::fs::write(&path, "1").map_err(|source| NetControllerError::WriteFile { path, source })
}

/// Creates the vxlan device or adopts the existing one; an incompatible device of that
/// name (other VNI, local address, port or underlay) is recreated, as flannel does.
pub async fn ensure_vxlan(nl: &Netlink, spec: &VxlanSpec) -> Result<VxlanLink, NetControllerError> {
    if let Some(existing) = nl.vxlan_by_name(&spec.name).await? {
        match existing.incompatibility(spec) {
            None => {
                if existing.link.mtu != spec.mtu {
                    nl.set_mtu(existing.link.index, spec.mtu).await?;
                }
                if !existing.link.up {
                    nl.set_up(existing.link.index).await?;
                }
                return refetch(nl, &spec.name).await;
            }
            Some(why) => {
                warn!(device = %spec.name, reason = %why, "vxlan device incompatible; recreating it");
                nl.delete_link(existing.link.index, &spec.name).await?;
            }
        }
    }
    match nl.create_vxlan(spec).await {
        Ok(()) => {
            info!(device = %spec.name, vni = spec.vni, local = %spec.local, port = spec.port, mtu = spec.mtu, "created vxlan device")
        }
        Err(e) if e.errno() == Some(EEXIST) => {}
        Err(e) => return Err(e.into()),
    }
    refetch(nl, &spec.name).await
}

async fn refetch(nl: &Netlink, name: &str) -> Result<VxlanLink, NetControllerError> {
    nl.vxlan_by_name(name)
        .await?
        .ok_or_else(|| NetControllerError::Missing(format!("vxlan device {name} vanished")))
}

/// Makes `address` the only IPv4 address of link `link`.
pub async fn ensure_only_address(
    nl: &Netlink,
    link: &Link,
    address: Ipv4Network,
) -> Result<(), NetControllerError> {
    let want = IpNetwork::V4(address);
    let current = nl.addresses(link.index).await?;
    for a in current.iter().filter(|a| a.is_ipv4() && **a != want) {
        nl.delete_address(link.index, *a).await?;
        info!(device = %link.name, address = %a, "removed stale address");
    }
    if !current.contains(&want) {
        nl.add_address(link.index, want).await?;
    }
    Ok(())
}

/// Deletes the vxlan device `name` if it exists (backend switched to host-gw).
pub async fn remove_vxlan(nl: &Netlink, name: &str) -> Result<(), NetControllerError> {
    if let Some(v) = nl.vxlan_by_name(name).await? {
        if v.link.kind.as_deref() == Some("vxlan") && nl.delete_link(v.link.index, name).await? {
            info!(
                device = name,
                "removed vxlan device of the previous backend"
            );
        }
    }
    Ok(())
}

/// Makes the controller's routes, and (with `vxlan_index`) the vxlan device's permanent
/// neighbours and FDB entries, equal to `desired`. Adds go in flannel's order
/// (neighbour, FDB, then the route that uses them), removals the other way round.
pub async fn apply(
    nl: &Netlink,
    desired: &Desired,
    vxlan_index: Option<u32>,
) -> Result<Changes, NetControllerError> {
    let mut changes = Changes::default();
    let actual_routes = nl.owned_routes(ROUTE_PROTOCOL).await?;
    let wanted_dsts: BTreeSet<Ipv4Network> = desired.routes.iter().map(|r| r.dst).collect();
    for r in actual_routes
        .iter()
        .filter(|r| !wanted_dsts.contains(&r.dst))
    {
        if nl.delete_owned_route(r, ROUTE_PROTOCOL).await? {
            changes.routes_removed += 1;
            info!(dst = %r.dst, gateway = ?r.gateway, "removed route of a departed peer");
        }
    }
    if let Some(index) = vxlan_index {
        let neighbours = nl.neighbours(index).await?;
        for n in neighbours.iter().filter(|n| n.permanent) {
            // A wanted address with a stale MAC is replaced below, not removed.
            let IpAddr::V4(ip) = n.ip else { continue };
            if !desired.neighbours.contains_key(&ip) && nl.delete_neighbour(index, n.ip).await? {
                changes.neighbours_removed += 1;
            }
        }
        let fdb = nl.fdb_entries(index).await?;
        for e in fdb.iter().filter(|e| e.permanent && e.dst.is_some()) {
            let wanted = <[u8; 6]>::try_from(e.mac.as_slice())
                .ok()
                .is_some_and(|m| desired.fdb.contains_key(&m));
            if !wanted && nl.delete_fdb(index, &e.mac, e.dst).await? {
                changes.fdb_removed += 1;
            }
        }
        for (ip, mac) in &desired.neighbours {
            let present = neighbours
                .iter()
                .any(|n| n.permanent && n.ip == IpAddr::V4(*ip) && n.mac[..] == mac[..]);
            if !present {
                nl.set_permanent_neighbour(index, IpAddr::V4(*ip), mac)
                    .await?;
                changes.neighbours_set += 1;
            }
        }
        for (mac, dst) in &desired.fdb {
            let present = fdb
                .iter()
                .any(|e| e.mac[..] == mac[..] && e.dst == Some(IpAddr::V4(*dst)));
            if !present {
                nl.set_fdb(index, mac, IpAddr::V4(*dst)).await?;
                changes.fdb_set += 1;
                info!(mac = %mac_to_string(mac), vtep = %dst, "set fdb entry");
            }
        }
    }
    for r in &desired.routes {
        if actual_routes.contains(r) {
            continue;
        }
        let ours = actual_routes.iter().any(|a| a.dst == r.dst);
        match nl.add_owned_route(r, ROUTE_PROTOCOL, ours).await {
            Ok(()) => {
                if ours {
                    changes.routes_replaced += 1;
                } else {
                    changes.routes_added += 1;
                }
                info!(dst = %r.dst, gateway = ?r.gateway, oif = r.oif, onlink = r.onlink, "programmed route to peer");
            }
            Err(e) if e.errno() == Some(EEXIST) => {
                warn!(dst = %r.dst, "a route to this peer subnet exists and is not cairn's; leaving it alone");
            }
            Err(e) => return Err(e.into()),
        }
    }
    Ok(changes)
}

/// The link the underlay traffic uses: the named one, else the one holding `node_ip`.
pub async fn underlay_link(
    nl: &Netlink,
    name: Option<&str>,
    node_ip: Ipv4Addr,
) -> Result<Link, NetControllerError> {
    match name {
        Some(n) => nl
            .link_by_name(n)
            .await?
            .ok_or_else(|| NetControllerError::Missing(format!("underlay interface {n}"))),
        None => nl
            .link_holding_address(IpAddr::V4(node_ip))
            .await?
            .ok_or_else(|| {
                NetControllerError::Missing(format!("no interface holds the node IP {node_ip}"))
            }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vtep_mac_is_stable_unicast_and_local() {
        let a = vtep_mac("node-a", 1);
        assert_eq!(a, vtep_mac("node-a", 1));
        assert_ne!(a, vtep_mac("node-b", 1));
        assert_ne!(a, vtep_mac("node-a", 2));
        assert_eq!(a[0] & 0x01, 0, "unicast");
        assert_eq!(a[0] & 0x02, 0x02, "locally administered");
    }

    #[test]
    fn forwarding_is_written_under_the_given_root() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("net/ipv4")).unwrap();
        std::fs::write(dir.path().join("net/ipv4/ip_forward"), "0\n").unwrap();
        enable_forwarding(dir.path()).unwrap();
        assert_eq!(
            std::fs::read_to_string(dir.path().join("net/ipv4/ip_forward")).unwrap(),
            "1"
        );
    }
}
