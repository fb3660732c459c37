//! The desired state's shapes.

use std::collections::BTreeMap;
use std::net::Ipv4Addr;

pub use cairn_semantics::protocol::Protocol;

/// `namespace/name:port-name`, kube-proxy's `ServicePortName`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ServicePortName {
    pub namespace: String,
    pub name: String,
    pub port: String,
    pub protocol: Protocol,
}

impl std::fmt::Display for ServicePortName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)?;
        if !self.port.is_empty() {
            write!(f, ":{}", self.port)?;
        }
        Ok(())
    }
}

/// What a service port exposes (default: nothing, no policies).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ServicePort {
    pub cluster_ip: Option<Ipv4Addr>,
    pub port: u16,
    pub node_port: Option<u16>,
    pub external_ips: Vec<Ipv4Addr>,
    pub load_balancer_ips: Vec<Ipv4Addr>,
    /// `sessionAffinity: ClientIP` timeout, in seconds.
    pub affinity_seconds: Option<u32>,
    /// `externalTrafficPolicy: Local` (for NodePort, external and load-balancer traffic).
    pub external_local: bool,
    /// `internalTrafficPolicy: Local` (for cluster-IP traffic).
    pub internal_local: bool,
    pub health_check_node_port: Option<u16>,
}

/// One backend of a service port.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Endpoint {
    pub ip: Ipv4Addr,
    pub port: u16,
    pub ready: bool,
    pub serving: bool,
    pub terminating: bool,
    /// On this node.
    pub local: bool,
}

impl Endpoint {
    /// A ready endpoint on another node.
    pub fn ready(ip: Ipv4Addr, port: u16) -> Endpoint {
        Endpoint {
            ip,
            port,
            ready: true,
            serving: true,
            terminating: false,
            local: false,
        }
    }
}

/// A service port and the endpoints traffic may go to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServiceEntry {
    pub port: ServicePort,
    /// For cluster-IP traffic (all usable endpoints, or the local ones under
    /// `internalTrafficPolicy: Local`).
    pub cluster: Vec<Endpoint>,
    /// For node-port, external and load-balancer traffic.
    pub external: Vec<Endpoint>,
    /// Local usable endpoints (what the health-check node port reports).
    pub local_count: usize,
}

impl ServiceEntry {
    /// `port` with the same endpoints for cluster and external traffic (no `Local`
    /// policy), counting the local ones.
    pub fn with_endpoints(port: ServicePort, endpoints: Vec<Endpoint>) -> ServiceEntry {
        ServiceEntry {
            local_count: endpoints.iter().filter(|e| e.local).count(),
            cluster: endpoints.clone(),
            external: endpoints,
            port,
        }
    }
}

/// Every service port the node should serve.
pub type ProxyState = BTreeMap<ServicePortName, ServiceEntry>;
