//! Cluster DNS served by the agent on its node (`--dns-listen`, e.g. `<node-ip>:53`).
//!
//! Where it runs, and why: on every node inside the agent rather than as a Deployment of
//! DNS pods. Each node answers its own pods' queries, so there is no DNS image to ship,
//! no cross-node hop, and a node that can run pods can resolve names. The
//! `kube-system/kube-dns` Service (10th service address, made by cairn-control) has no
//! selector; each agent publishes its own address in an EndpointSlice
//! `kube-dns-<node>` (owned by its Node, so it goes with the node), and the Service's
//! `internalTrafficPolicy: Local` makes every node's proxy send `10.96.0.10:53` to that
//! node's own agent. Pods keep the Service's ClusterIP in their resolv.conf, as the seed
//! describes. The DNAT that remains is node-local; NodeLocal DNSCache's link-local
//! address without DNAT would need a dummy interface this project's test kernels lack.

use std::net::SocketAddr;
use std::sync::Arc;

use cairn_dns::{ClusterZone, DnsServer, ServerConfig, ZoneConfig};
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::api::{Api, PostParams};
use tracing::{info, warn};

use crate::Agent;

/// Where the cluster DNS server listens (`--dns-listen`): an address, or `node-ip:PORT`,
/// the node's InternalIP, so that one packaged agent.env serves every node.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize)]
#[serde(try_from = "String")]
pub enum DnsListen {
    Addr(SocketAddr),
    NodeIp(u16),
}

impl std::str::FromStr for DnsListen {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        let expected = || format!("expected IP:PORT or node-ip:PORT, got {text:?}");
        match text.strip_prefix("node-ip:") {
            Some(port) => port.parse().map(DnsListen::NodeIp).map_err(|_| expected()),
            None => text.parse().map(DnsListen::Addr).map_err(|_| expected()),
        }
    }
}

impl TryFrom<String> for DnsListen {
    type Error = String;

    fn try_from(text: String) -> Result<Self, String> {
        text.parse()
    }
}

impl DnsListen {
    /// The address to bind, given the node's InternalIP.
    pub fn resolve(self, node_ip: Option<&str>) -> Result<SocketAddr, DnsError> {
        match self {
            DnsListen::Addr(addr) => Ok(addr),
            DnsListen::NodeIp(port) => node_ip
                .and_then(|ip| ip.parse().ok())
                .map(|ip| SocketAddr::new(ip, port))
                .ok_or(DnsError::NoNodeIp { port }),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum DnsError {
    #[error(
        "cluster DNS on node-ip:{port}: the node has no IPv4 address to serve on (set --node-ip)"
    )]
    NoNodeIp { port: u16 },
    #[error("cluster DNS zone for domain {domain}: {message}")]
    Zone { domain: String, message: String },
    #[error("cluster DNS server on {listen}: {message}")]
    Bind { listen: SocketAddr, message: String },
}

/// Upstream resolvers: the flag's, else the node's resolv.conf minus our own address.
pub fn upstreams(configured: &[SocketAddr], listen: SocketAddr) -> Vec<SocketAddr> {
    let from_node = || {
        cairn_dns::read_resolv_conf(std::path::Path::new("/etc/resolv.conf")).unwrap_or_default()
    };
    let list = if configured.is_empty() {
        from_node()
    } else {
        configured.to_vec()
    };
    list.into_iter().filter(|a| a.ip() != listen.ip()).collect()
}

/// Binds the server, keeps its zone in step with the API, and publishes this node as an
/// endpoint of `kube-dns`.
pub async fn start(
    agent: Arc<Agent>,
    listen: SocketAddr,
    upstreams: Vec<SocketAddr>,
) -> Result<(), DnsError> {
    let domain = agent.config.cluster_domain.clone();
    let zone_config = ZoneConfig {
        domain: domain.clone(),
        ..Default::default()
    };
    let zone = ClusterZone::pending(&zone_config).map_err(|e| DnsError::Zone {
        domain: domain.clone(),
        message: e.to_string(),
    })?;
    let config = ServerConfig {
        listen,
        upstreams,
        ..Default::default()
    };
    let server = DnsServer::bind_metered(config, zone, agent.metrics.dns.clone())
        .await
        .map_err(|e| DnsError::Bind {
            listen,
            message: e.to_string(),
        })?;
    let server = Arc::new(server);
    info!(%listen, %domain, "cluster DNS serving");
    let client = agent.client.clone();
    tokio::spawn(async move {
        if let Err(e) = cairn_dns::source::run_with(client, server, zone_config).await {
            warn!(error = %e, "cluster DNS source stopped");
        }
    });
    tokio::spawn(publish_endpoint(agent, listen));
    Ok(())
}

fn endpoint_slice(node: &Node, node_name: &str, ip: &str) -> serde_json::Value {
    serde_json::json!({
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {
            "name": format!("kube-dns-{node_name}"),
            "namespace": "kube-system",
            "labels": {
                "kubernetes.io/service-name": "kube-dns",
                "endpointslice.kubernetes.io/managed-by": "cairn-agent",
            },
            "ownerReferences": [{
                "apiVersion": "v1", "kind": "Node", "name": node_name,
                "uid": node.metadata.uid.clone().unwrap_or_default(),
            }],
        },
        "addressType": "IPv4",
        "endpoints": [{
            "addresses": [ip],
            "conditions": {"ready": true, "serving": true, "terminating": false},
            "nodeName": node_name,
        }],
        "ports": [
            {"name": "dns", "port": 53, "protocol": "UDP"},
            {"name": "dns-tcp", "port": 53, "protocol": "TCP"},
        ],
    })
}

/// Creates (or corrects) this node's slice of `kube-dns`, retrying until it is written.
async fn publish_endpoint(agent: Arc<Agent>, listen: SocketAddr) {
    let node_name = agent.config.node_name.clone();
    let ip = listen.ip().to_string();
    let nodes: Api<Node> = Api::all(agent.client.clone());
    let slices: Api<EndpointSlice> = Api::namespaced(agent.client.clone(), "kube-system");
    let name = format!("kube-dns-{node_name}");
    loop {
        let written = async {
            let node = nodes.get(&node_name).await?;
            let desired: EndpointSlice =
                serde_json::from_value(endpoint_slice(&node, &node_name, &ip))
                    .map_err(kube::Error::SerdeError)?;
            match slices.get_opt(&name).await? {
                None => slices
                    .create(&PostParams::default(), &desired)
                    .await
                    .map(|_| ()),
                Some(cur) if cur.endpoints == desired.endpoints && cur.ports == desired.ports => {
                    Ok(())
                }
                Some(cur) => {
                    let mut next = desired;
                    next.metadata.resource_version = cur.metadata.resource_version;
                    slices
                        .replace(&name, &PostParams::default(), &next)
                        .await
                        .map(|_| ())
                }
            }
        }
        .await;
        match written {
            Ok(()) => return,
            Err(e) => {
                warn!(slice = %name, error = %e, "publishing the node's kube-dns endpoint");
                tokio::time::sleep(std::time::Duration::from_secs(5)).await;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn own_address_is_never_an_upstream() {
        let listen: SocketAddr = "198.18.0.11:53".parse().unwrap();
        let configured: Vec<SocketAddr> = vec![
            "198.18.0.11:53".parse().unwrap(),
            "9.9.9.9:53".parse().unwrap(),
        ];
        assert_eq!(
            upstreams(&configured, listen),
            vec!["9.9.9.9:53".parse::<SocketAddr>().unwrap()]
        );
    }

    #[test]
    fn listen_is_an_address_or_the_node_ip() {
        let node: DnsListen = "node-ip:53".parse().unwrap();
        assert_eq!(
            node.resolve(Some("198.18.0.11")).unwrap(),
            "198.18.0.11:53".parse::<SocketAddr>().unwrap()
        );
        assert_eq!(
            node.resolve(None).unwrap_err().to_string(),
            "cluster DNS on node-ip:53: the node has no IPv4 address to serve on (set --node-ip)"
        );
        let fixed: DnsListen = "10.0.0.5:5353".parse().unwrap();
        assert_eq!(
            fixed.resolve(None).unwrap(),
            "10.0.0.5:5353".parse::<SocketAddr>().unwrap()
        );
        for bad in ["node-ip", "node-ip:dns", "localhost:53", "10.0.0.5"] {
            assert_eq!(
                bad.parse::<DnsListen>().unwrap_err(),
                format!("expected IP:PORT or node-ip:PORT, got {bad:?}")
            );
        }
        let from_toml: DnsListen = serde_json::from_value(serde_json::json!("node-ip:53")).unwrap();
        assert_eq!(from_toml, DnsListen::NodeIp(53));
    }

    #[test]
    fn slice_names_the_node_and_its_owner() {
        let mut node = Node::default();
        node.metadata.uid = Some("uid-1".into());
        let s = endpoint_slice(&node, "node-1", "198.18.0.11");
        assert_eq!(s["metadata"]["name"], "kube-dns-node-1");
        assert_eq!(
            s["metadata"]["labels"]["kubernetes.io/service-name"],
            "kube-dns"
        );
        assert_eq!(s["metadata"]["ownerReferences"][0]["uid"], "uid-1");
        assert_eq!(s["endpoints"][0]["nodeName"], "node-1");
        let typed: EndpointSlice = serde_json::from_value(s).unwrap();
        assert_eq!(typed.ports.unwrap().len(), 2);
    }
}
