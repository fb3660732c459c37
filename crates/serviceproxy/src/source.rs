//! What the proxy keeps of each Service and EndpointSlice between syncs: only what
//! [`crate::desired_state_from`] reads, parsed once when the object arrives. The
//! Kubernetes types are large even when emptied (every optional field takes its room), and
//! at 10,000 services the caches were most of the proxy's memory.

use std::net::Ipv4Addr;

use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::discovery::v1::EndpointSlice;

use crate::model::Protocol;

/// The label naming a slice's service.
pub const SERVICE_NAME_LABEL: &str = "kubernetes.io/service-name";
/// The annotation holding when the change a slice reflects was triggered (RFC 3339).
pub const TRIGGER_TIME: &str = "endpoints.kubernetes.io/last-change-trigger-time";
/// `sessionAffinityConfig.clientIP.timeoutSeconds` when unset (3 hours).
const DEFAULT_AFFINITY_SECONDS: u32 = 10_800;

/// A Service port as written (checked when the desired state is built, so a bad one is
/// reported every sync).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PortSource {
    pub name: String,
    /// None: a protocol the proxy does not handle.
    pub protocol: Option<Protocol>,
    pub port: i32,
    pub node_port: Option<i32>,
}

/// A Service, as the proxy reads it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ServiceSource {
    pub namespace: String,
    pub name: String,
    /// False for ExternalName and headless services: nothing to proxy.
    pub proxied: bool,
    pub cluster_ip: Option<Ipv4Addr>,
    /// NodePort or LoadBalancer.
    pub exposes_node_ports: bool,
    pub external_ips: Vec<Ipv4Addr>,
    /// `status.loadBalancer.ingress` IPs of a LoadBalancer service.
    pub load_balancer_ips: Vec<Ipv4Addr>,
    /// `externalTrafficPolicy: Local`.
    pub external_local: bool,
    /// `internalTrafficPolicy: Local`.
    pub internal_local: bool,
    /// ClientIP affinity timeout.
    pub affinity_seconds: Option<u32>,
    pub health_check_node_port: Option<u16>,
    pub ports: Vec<PortSource>,
}

fn ipv4s<'a>(ips: impl IntoIterator<Item = &'a String>) -> Vec<Ipv4Addr> {
    ips.into_iter().filter_map(|i| i.parse().ok()).collect()
}

impl ServiceSource {
    pub fn from_service(svc: &Service) -> ServiceSource {
        let namespace = svc.metadata.namespace.clone().unwrap_or_default();
        let name = svc.metadata.name.clone().unwrap_or_default();
        let Some(spec) = &svc.spec else {
            return ServiceSource {
                namespace,
                name,
                ..Default::default()
            };
        };
        let ty = spec.type_.as_deref().unwrap_or("ClusterIP");
        let raw_ip = spec.cluster_ip.as_deref();
        let cluster_ip = raw_ip.and_then(|ip| ip.parse::<Ipv4Addr>().ok());
        let headless = cluster_ip.is_none() && raw_ip == Some("None");
        let affinity_seconds = (spec.session_affinity.as_deref() == Some("ClientIP")).then(|| {
            spec.session_affinity_config
                .as_ref()
                .and_then(|c| c.client_ip.as_ref())
                .and_then(|c| c.timeout_seconds)
                .and_then(|t| u32::try_from(t).ok())
                .unwrap_or(DEFAULT_AFFINITY_SECONDS)
        });
        let ingress = svc.status.as_ref().and_then(|s| s.load_balancer.as_ref());
        let lb_ips: Vec<&String> = ingress
            .and_then(|lb| lb.ingress.as_ref())
            .into_iter()
            .flatten()
            .filter_map(|i| i.ip.as_ref())
            .collect();
        let ports = spec.ports.iter().flatten().map(|p| PortSource {
            name: p.name.clone().unwrap_or_default(),
            protocol: Protocol::parse(p.protocol.as_deref()),
            port: p.port,
            node_port: p.node_port,
        });
        ServiceSource {
            proxied: ty != "ExternalName" && !headless,
            cluster_ip,
            exposes_node_ports: matches!(ty, "NodePort" | "LoadBalancer"),
            external_ips: ipv4s(spec.external_ips.iter().flatten()),
            load_balancer_ips: if ty == "LoadBalancer" {
                ipv4s(lb_ips)
            } else {
                Vec::new()
            },
            external_local: spec.external_traffic_policy.as_deref() == Some("Local"),
            internal_local: spec.internal_traffic_policy.as_deref() == Some("Local"),
            affinity_seconds,
            health_check_node_port: spec
                .health_check_node_port
                .and_then(|n| u16::try_from(n).ok()),
            ports: ports.collect(),
            namespace,
            name,
        }
    }
}

/// One endpoint of a slice.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EndpointSource {
    /// The first address, when it is IPv4.
    pub ip: Option<Ipv4Addr>,
    pub node: Option<String>,
    pub ready: bool,
    pub serving: bool,
    pub terminating: bool,
}

/// An EndpointSlice, as the proxy reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SliceSource {
    pub namespace: String,
    pub name: String,
    /// The service it belongs to (its `kubernetes.io/service-name` label).
    pub service: String,
    /// `IPv4`, `IPv6` or `FQDN`.
    pub address_type: String,
    /// Name, protocol (None: unhandled) and port of each slice port.
    pub ports: Vec<(String, Option<Protocol>, Option<i32>)>,
    pub endpoints: Vec<EndpointSource>,
    /// The `last-change-trigger-time` annotation, for the programming latency metric.
    pub trigger_time: Option<String>,
}

impl SliceSource {
    /// None for a slice without the service-name label (not the proxy's concern).
    pub fn from_slice(s: &EndpointSlice) -> Option<SliceSource> {
        let service = s.metadata.labels.as_ref()?.get(SERVICE_NAME_LABEL)?.clone();
        let ports = s.ports.iter().flatten().map(|p| {
            let name = p.name.clone().unwrap_or_default();
            (name, Protocol::parse(p.protocol.as_deref()), p.port)
        });
        let endpoints = s.endpoints.iter().map(|e| {
            let c = e.conditions.as_ref();
            // Unset `ready` means ready; unset `serving` means as ready (upstream's reading).
            let ready = c.and_then(|c| c.ready).unwrap_or(true);
            EndpointSource {
                ip: e.addresses.first().and_then(|a| a.parse().ok()),
                node: e.node_name.clone(),
                ready,
                serving: c.and_then(|c| c.serving).unwrap_or(ready),
                terminating: c.and_then(|c| c.terminating).unwrap_or(false),
            }
        });
        Some(SliceSource {
            namespace: s.metadata.namespace.clone().unwrap_or_default(),
            name: s.metadata.name.clone().unwrap_or_default(),
            service,
            address_type: s.address_type.clone(),
            ports: ports.collect(),
            endpoints: endpoints.collect(),
            trigger_time: s
                .metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(TRIGGER_TIME))
                .cloned(),
        })
    }
}
