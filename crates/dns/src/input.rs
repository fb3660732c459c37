//! What the zone keeps of each Service, EndpointSlice and Namespace: only what
//! [`crate::ClusterZone`] reads, converted once when the object arrives. Kubernetes types
//! stay large even when their optional fields are empty, and the watch caches of
//! [`crate::source`] hold every object of the cluster.

use std::net::IpAddr;

use k8s_openapi::api::core::v1::{Namespace, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;

/// The label naming a slice's service.
pub const SERVICE_NAME_LABEL: &str = "kubernetes.io/service-name";

/// How a Service is answered (CoreDNS's `object.Service` reading).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum ServiceKind {
    /// `spec.clusterIPs` (or `spec.clusterIP`): ClusterIP, NodePort and LoadBalancer
    /// services. Empty while no address is allocated or when it does not parse.
    ClusterIp(Vec<IpAddr>),
    /// `clusterIP: None`: answered with the service's ready endpoints.
    Headless,
    /// `type: ExternalName`: a CNAME to `spec.externalName`.
    ExternalName(String),
}

/// A port of a Service or of an EndpointSlice.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct PortInfo {
    /// Empty for an unnamed port.
    pub name: String,
    /// Upper case as the API writes it (`TCP`, `UDP`, `SCTP`); `TCP` when unset.
    pub protocol: String,
    /// -1 when unset (a slice port without a number, CoreDNS's sentinel).
    pub port: i32,
}

/// A Service, as the zone reads it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ServiceInfo {
    pub namespace: String,
    pub name: String,
    pub kind: ServiceKind,
    pub ports: Vec<PortInfo>,
}

/// A ready endpoint of a slice (not-ready ones are dropped on conversion, as CoreDNS does).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct EndpointInfo {
    pub addresses: Vec<IpAddr>,
    /// `hostname` (StatefulSet pods and pods with `spec.subdomain`).
    pub hostname: Option<String>,
}

/// An EndpointSlice, as the zone reads it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct SliceInfo {
    pub namespace: String,
    pub name: String,
    /// The `kubernetes.io/service-name` label.
    pub service: String,
    pub ports: Vec<PortInfo>,
    pub endpoints: Vec<EndpointInfo>,
}

fn port_info(name: Option<&String>, protocol: Option<&String>, port: Option<i32>) -> PortInfo {
    PortInfo {
        name: name.cloned().unwrap_or_default(),
        protocol: protocol.cloned().unwrap_or_else(|| "TCP".to_string()),
        port: port.unwrap_or(-1),
    }
}

impl ServiceInfo {
    /// None for a Service without a name or namespace (never stored by an API server).
    pub fn from_service(svc: &Service) -> Option<ServiceInfo> {
        let namespace = svc.metadata.namespace.clone()?;
        let name = svc.metadata.name.clone()?;
        let spec = svc.spec.as_ref();
        let kind = match spec {
            Some(s) if s.type_.as_deref() == Some("ExternalName") => {
                ServiceKind::ExternalName(s.external_name.clone().unwrap_or_default())
            }
            Some(s) => {
                let ips: Vec<&String> = match &s.cluster_ips {
                    Some(ips) if !ips.is_empty() => ips.iter().collect(),
                    _ => s.cluster_ip.iter().collect(),
                };
                if ips.first().is_some_and(|ip| ip.as_str() == "None") {
                    ServiceKind::Headless
                } else {
                    ServiceKind::ClusterIp(ips.iter().filter_map(|ip| ip.parse().ok()).collect())
                }
            }
            None => ServiceKind::ClusterIp(Vec::new()),
        };
        let ports = spec
            .and_then(|s| s.ports.as_ref())
            .into_iter()
            .flatten()
            .map(|p| port_info(p.name.as_ref(), p.protocol.as_ref(), Some(p.port)))
            .collect();
        Some(ServiceInfo {
            namespace,
            name,
            kind,
            ports,
        })
    }
}

impl SliceInfo {
    /// None for a slice without the service-name label (nothing to answer) or of
    /// `addressType: FQDN` (deprecated, and not addresses).
    pub fn from_slice(slice: &EndpointSlice) -> Option<SliceInfo> {
        let service = slice
            .metadata
            .labels
            .as_ref()?
            .get(SERVICE_NAME_LABEL)?
            .clone();
        if slice.address_type == "FQDN" {
            return None;
        }
        let ports = slice
            .ports
            .iter()
            .flatten()
            .map(|p| port_info(p.name.as_ref(), p.protocol.as_ref(), p.port))
            .collect();
        let endpoints = slice
            .endpoints
            .iter()
            // Unset `ready` means ready (CoreDNS's `endpointsliceReady`).
            .filter(|e| e.conditions.as_ref().and_then(|c| c.ready).unwrap_or(true))
            .map(|e| EndpointInfo {
                addresses: e.addresses.iter().filter_map(|a| a.parse().ok()).collect(),
                hostname: e.hostname.clone().filter(|h| !h.is_empty()),
            })
            .collect();
        Some(SliceInfo {
            namespace: slice.metadata.namespace.clone().unwrap_or_default(),
            name: slice.metadata.name.clone().unwrap_or_default(),
            service,
            ports,
            endpoints,
        })
    }
}

/// A Namespace's name (None for one without).
pub fn namespace_name(ns: &Namespace) -> Option<String> {
    ns.metadata.name.clone()
}
