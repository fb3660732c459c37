//! From Node objects to what the data plane should hold: no IO here.
//!
//! Each Node publishes its backend, public IP and (vxlan) VTEP MAC in annotations, as
//! flannel's kube subnet manager does with its `flannel.alpha.coreos.com/*` ones; its pod
//! subnet is `spec.podCIDR` (given by cairn-control's node IPAM).

use std::collections::{BTreeMap, BTreeSet};
use std::net::Ipv4Addr;

use cairn_netlink::overlay::{mac_to_string, parse_mac, OwnedRoute};
use ipnetwork::Ipv4Network;
use k8s_openapi::api::core::v1::Node;

use super::Backend;

pub const ANNOTATION_BACKEND_TYPE: &str = "cairn.io/backend-type";
pub const ANNOTATION_PUBLIC_IP: &str = "cairn.io/public-ip";
pub const ANNOTATION_VTEP_MAC: &str = "cairn.io/vtep-mac";

/// The parts of a Node the controller uses.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct NodeView {
    pub name: String,
    pub pod_cidr: Option<Ipv4Network>,
    pub internal_ip: Option<Ipv4Addr>,
    pub public_ip_annotation: Option<Ipv4Addr>,
    pub backend_type: Option<String>,
    pub vtep_mac: Option<[u8; 6]>,
    pub deleting: bool,
}

impl NodeView {
    pub fn from_node(node: &Node) -> NodeView {
        let annotations = node.metadata.annotations.as_ref();
        let annotation = |k: &str| annotations.and_then(|a| a.get(k)).map(String::as_str);
        let spec = node.spec.as_ref();
        let pod_cidr = spec
            .and_then(|s| {
                s.pod_cidrs
                    .as_ref()
                    .and_then(|c| c.iter().find_map(|c| c.parse::<Ipv4Network>().ok()))
                    .or_else(|| s.pod_cidr.as_ref().and_then(|c| c.parse().ok()))
            })
            .map(|n: Ipv4Network| Ipv4Network::new(n.network(), n.prefix()).unwrap_or(n));
        let internal_ip = node
            .status
            .as_ref()
            .and_then(|s| s.addresses.as_ref())
            .and_then(|addrs| {
                addrs
                    .iter()
                    .filter(|a| a.type_ == "InternalIP")
                    .find_map(|a| a.address.parse::<Ipv4Addr>().ok())
            });
        NodeView {
            name: node.metadata.name.clone().unwrap_or_default(),
            pod_cidr,
            internal_ip,
            public_ip_annotation: annotation(ANNOTATION_PUBLIC_IP).and_then(|a| a.parse().ok()),
            backend_type: annotation(ANNOTATION_BACKEND_TYPE).map(str::to_string),
            vtep_mac: annotation(ANNOTATION_VTEP_MAC).and_then(parse_mac),
            deleting: node.metadata.deletion_timestamp.is_some(),
        }
    }

    /// Where the node's tunnel or routed traffic goes: its published public IP, else its
    /// InternalIP.
    pub fn public_ip(&self) -> Option<Ipv4Addr> {
        self.public_ip_annotation.or(self.internal_ip)
    }
}

/// Another node this one must reach.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Peer {
    pub name: String,
    pub subnet: Ipv4Network,
    pub public_ip: Ipv4Addr,
    pub vtep_mac: Option<[u8; 6]>,
}

/// The peers of `me` among `nodes`, and why others were left out (node name, reason).
pub fn peers(
    nodes: &[NodeView],
    me: &NodeView,
    backend: Backend,
    cluster: Ipv4Network,
) -> (Vec<Peer>, Vec<(String, String)>) {
    let mut out = Vec::new();
    let mut skipped = Vec::new();
    for n in nodes.iter().filter(|n| n.name != me.name) {
        let Some(subnet) = n.pod_cidr else {
            continue;
        };
        let Some(public_ip) = n.public_ip() else {
            skipped.push((n.name.clone(), "no InternalIP".to_string()));
            continue;
        };
        if !cluster.contains(subnet.network()) || subnet.prefix() < cluster.prefix() {
            skipped.push((
                n.name.clone(),
                format!("pod CIDR {subnet} is outside the cluster CIDR {cluster}"),
            ));
            continue;
        }
        if me.pod_cidr.is_some_and(|mine| mine.overlaps(subnet)) {
            skipped.push((
                n.name.clone(),
                format!("pod CIDR {subnet} overlaps this node's"),
            ));
            continue;
        }
        if let Some(theirs) = n.backend_type.as_deref() {
            if theirs != backend.as_str() {
                skipped.push((
                    n.name.clone(),
                    format!("backend {theirs} differs from this node's {backend}"),
                ));
                continue;
            }
        }
        let vtep_mac = match backend {
            Backend::HostGw => None,
            Backend::Vxlan => match n.vtep_mac {
                Some(m) => Some(m),
                None => {
                    skipped.push((n.name.clone(), "no VTEP MAC published yet".to_string()));
                    continue;
                }
            },
        };
        out.push(Peer {
            name: n.name.clone(),
            subnet,
            public_ip,
            vtep_mac,
        });
    }
    out.sort();
    (out, skipped)
}

/// What the data plane should hold for a set of peers.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Desired {
    pub routes: BTreeSet<OwnedRoute>,
    /// Permanent neighbours on the vxlan device: peer subnet's first address → VTEP MAC.
    pub neighbours: BTreeMap<Ipv4Addr, [u8; 6]>,
    /// FDB of the vxlan device: VTEP MAC → peer public IP.
    pub fdb: BTreeMap<[u8; 6], Ipv4Addr>,
}

/// host-gw: a route to each peer's subnet via its IP on the underlay link.
pub fn desired_host_gw(peers: &[Peer], underlay_index: u32) -> Desired {
    Desired {
        routes: peers
            .iter()
            .map(|p| OwnedRoute {
                dst: p.subnet,
                gateway: Some(p.public_ip),
                oif: underlay_index,
                onlink: false,
            })
            .collect(),
        ..Default::default()
    }
}

/// vxlan (flannel's scheme): neighbour `<subnet>.0` → VTEP MAC, FDB VTEP MAC → public IP,
/// and an onlink route `<subnet> via <subnet>.0 dev <vxlan>`.
pub fn desired_vxlan(peers: &[Peer], vxlan_index: u32) -> Desired {
    let mut d = Desired::default();
    for p in peers {
        let Some(mac) = p.vtep_mac else { continue };
        let gw = p.subnet.network();
        d.routes.insert(OwnedRoute {
            dst: p.subnet,
            gateway: Some(gw),
            oif: vxlan_index,
            onlink: true,
        });
        d.neighbours.insert(gw, mac);
        d.fdb.insert(mac, p.public_ip);
    }
    d
}

/// The annotations this node publishes.
pub fn own_annotations(
    backend: Backend,
    public_ip: Ipv4Addr,
    vtep_mac: Option<&[u8]>,
) -> BTreeMap<String, Option<String>> {
    let mut a = BTreeMap::new();
    a.insert(
        ANNOTATION_BACKEND_TYPE.to_string(),
        Some(backend.as_str().to_string()),
    );
    a.insert(
        ANNOTATION_PUBLIC_IP.to_string(),
        Some(public_ip.to_string()),
    );
    a.insert(ANNOTATION_VTEP_MAC.to_string(), vtep_mac.map(mac_to_string));
    a
}

#[cfg(test)]
mod tests {
    use super::*;

    fn view(name: &str, cidr: Option<&str>, ip: Option<&str>) -> NodeView {
        NodeView {
            name: name.into(),
            pod_cidr: cidr.map(|c| c.parse().unwrap()),
            internal_ip: ip.map(|i| i.parse().unwrap()),
            ..Default::default()
        }
    }

    #[test]
    fn node_view_reads_spec_status_and_annotations() {
        let node: Node = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "n1", "annotations": {
                "cairn.io/backend-type": "vxlan", "cairn.io/public-ip": "198.18.0.9",
                "cairn.io/vtep-mac": "0a:00:00:00:00:01"}},
            "spec": {"podCIDR": "10.244.3.0/24", "podCIDRs": ["10.244.3.0/24"]},
            "status": {"addresses": [{"type": "Hostname", "address": "n1"},
                                     {"type": "InternalIP", "address": "198.18.0.1"}]}
        }))
        .unwrap();
        let v = NodeView::from_node(&node);
        assert_eq!(v.pod_cidr, Some("10.244.3.0/24".parse().unwrap()));
        assert_eq!(v.internal_ip, Some(Ipv4Addr::new(198, 18, 0, 1)));
        assert_eq!(v.public_ip(), Some(Ipv4Addr::new(198, 18, 0, 9)));
        assert_eq!(v.backend_type.as_deref(), Some("vxlan"));
        assert_eq!(v.vtep_mac, Some([0x0a, 0, 0, 0, 0, 1]));
        assert!(!v.deleting);
    }

    #[test]
    fn peers_skip_self_unready_and_mismatched_nodes() {
        let cluster: Ipv4Network = "10.244.0.0/16".parse().unwrap();
        let me = view("me", Some("10.244.0.0/24"), Some("198.18.0.1"));
        let mut vx = view("vx", Some("10.244.1.0/24"), Some("198.18.0.2"));
        vx.backend_type = Some("vxlan".into());
        vx.vtep_mac = Some([2, 0, 0, 0, 0, 2]);
        let mut hg = view("hg", Some("10.244.2.0/24"), Some("198.18.0.3"));
        hg.backend_type = Some("host-gw".into());
        let nodes = vec![
            me.clone(),
            vx.clone(),
            hg.clone(),
            view("no-cidr", None, Some("198.18.0.4")),
            view("no-ip", Some("10.244.5.0/24"), None),
            view("outside", Some("192.168.0.0/24"), Some("198.18.0.6")),
            view("clash", Some("10.244.0.0/24"), Some("198.18.0.7")),
            view("fresh", Some("10.244.8.0/24"), Some("198.18.0.8")),
        ];
        let (p, skipped) = peers(&nodes, &me, Backend::HostGw, cluster);
        let names: Vec<&str> = p.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(names, ["fresh", "hg"]);
        let skipped: Vec<&str> = skipped.iter().map(|s| s.0.as_str()).collect();
        assert_eq!(skipped, ["vx", "no-ip", "outside", "clash"]);
        let (p, _) = peers(&nodes, &me, Backend::Vxlan, cluster);
        let names: Vec<&str> = p.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(names, ["vx"]);
    }

    #[test]
    fn desired_state_per_backend() {
        let peer = Peer {
            name: "b".into(),
            subnet: "10.244.1.0/24".parse().unwrap(),
            public_ip: Ipv4Addr::new(198, 18, 0, 2),
            vtep_mac: Some([2, 0, 0, 0, 0, 2]),
        };
        let hg = desired_host_gw(std::slice::from_ref(&peer), 7);
        assert_eq!(
            hg.routes.into_iter().collect::<Vec<_>>(),
            [OwnedRoute {
                dst: "10.244.1.0/24".parse().unwrap(),
                gateway: Some(Ipv4Addr::new(198, 18, 0, 2)),
                oif: 7,
                onlink: false
            }]
        );
        let vx = desired_vxlan(&[peer], 9);
        assert_eq!(
            vx.routes.iter().next().unwrap(),
            &OwnedRoute {
                dst: "10.244.1.0/24".parse().unwrap(),
                gateway: Some(Ipv4Addr::new(10, 244, 1, 0)),
                oif: 9,
                onlink: true
            }
        );
        assert_eq!(
            vx.neighbours.get(&Ipv4Addr::new(10, 244, 1, 0)),
            Some(&[2, 0, 0, 0, 0, 2])
        );
        assert_eq!(
            vx.fdb.get(&[2, 0, 0, 0, 0, 2]),
            Some(&Ipv4Addr::new(198, 18, 0, 2))
        );
    }
}
