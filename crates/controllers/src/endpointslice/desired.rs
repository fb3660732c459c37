//! What a Service's endpoints should be: one endpoint per pod that belongs in them, with
//! the ports it resolves (upstream `ShouldPodBeInEndpoints`, `podToEndpoint`, `FindPort`,
//! `ShouldSetHostname`). Pure: the EndpointSlice and the Endpoints controllers both read it.

use std::collections::BTreeMap;

use cairn_semantics::pod_state::{self, PodView};
use k8s_openapi::api::core::v1::{ObjectReference, Service, ServicePort};
use k8s_openapi::api::discovery::v1::{Endpoint, EndpointConditions, EndpointPort};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use crate::cached_pod::{CachedPod, PodNetwork};

/// Whether a pod has a place among a Service's endpoints: not finished, with an address,
/// and (unless `include_terminating`) not being deleted.
pub fn should_be_in_endpoints(pod: &CachedPod, include_terminating: bool) -> bool {
    !pod_state::is_terminal(pod)
        && pod.network.is_some()
        && (include_terminating || !pod.deleting())
}

/// The container port a service port reaches on `pod`: a numeric targetPort as it is, a
/// named one looked up among the pod's named ports of the same protocol; `None` when the
/// name is not found (the pod is then left out for that port).
pub fn find_port(net: &PodNetwork, port: &ServicePort) -> Option<i32> {
    let protocol = port.protocol.as_deref().unwrap_or("TCP");
    match &port.target_port {
        None => Some(port.port),
        Some(IntOrString::Int(n)) => Some(*n),
        Some(IntOrString::String(name)) => net
            .named_ports
            .iter()
            .find(|(n, p, _)| n == name && p == protocol)
            .map(|(_, _, port)| *port)
            .or_else(|| name.parse().ok()),
    }
}

/// The hostname an endpoint carries: the pod's own, when its subdomain is the service.
pub fn hostname(pod: &CachedPod, service: &Service) -> Option<String> {
    let net = pod.network.as_ref()?;
    let same_ns = pod.metadata.namespace == service.metadata.namespace;
    let subdomain_is_service = net.subdomain.is_some() && net.subdomain == service.metadata.name;
    net.hostname
        .clone()
        .filter(|h| !h.is_empty() && same_ns && subdomain_is_service)
}

pub fn target_ref(pod: &CachedPod) -> ObjectReference {
    ObjectReference {
        kind: Some("Pod".into()),
        namespace: pod.metadata.namespace.clone(),
        name: pod.metadata.name.clone(),
        uid: pod.metadata.uid.clone(),
        ..Default::default()
    }
}

pub fn publishes_not_ready(service: &Service) -> bool {
    service
        .spec
        .as_ref()
        .and_then(|s| s.publish_not_ready_addresses)
        == Some(true)
}

/// `IPv4` or `IPv6`, by the address's form.
pub fn address_type(ip: &str) -> &'static str {
    if ip.contains(':') {
        "IPv6"
    } else {
        "IPv4"
    }
}

/// The address families a service serves (`spec.ipFamilies`, IPv4 by default).
pub fn address_types(service: &Service) -> Vec<&'static str> {
    let families = service.spec.as_ref().and_then(|s| s.ip_families.as_ref());
    let mut out: Vec<&'static str> = families
        .into_iter()
        .flatten()
        .map(|f| if f == "IPv6" { "IPv6" } else { "IPv4" })
        .collect();
    if out.is_empty() {
        out.push("IPv4");
    }
    out
}

/// The endpoint of `pod` for `service` among addresses of `address_type`, `None` when the
/// pod has none of that family.
pub fn endpoint(
    pod: &CachedPod,
    service: &Service,
    address_type: &str,
    zone: Option<String>,
) -> Option<Endpoint> {
    let net = pod.network.as_ref()?;
    let addresses: Vec<String> = net
        .ips
        .iter()
        .filter(|ip| self::address_type(ip) == address_type)
        .cloned()
        .collect();
    if addresses.is_empty() {
        return None;
    }
    let serving = pod_state::is_ready(pod);
    let terminating = pod.deleting();
    let publish = publishes_not_ready(service);
    // Never ready while terminating, unless the service publishes not-ready addresses.
    let ready = publish || (serving && !terminating);
    Some(Endpoint {
        addresses,
        conditions: Some(EndpointConditions {
            ready: Some(ready),
            serving: Some(serving),
            terminating: Some(terminating),
        }),
        hostname: hostname(pod, service),
        node_name: pod.node_name.clone().filter(|n| !n.is_empty()),
        target_ref: Some(target_ref(pod)),
        zone,
        ..Default::default()
    })
}

/// The slice ports `pod` resolves for `service`, in the service's order; a port whose
/// named targetPort the pod lacks is left out.
pub fn endpoint_ports(net: &PodNetwork, service: &Service) -> Vec<EndpointPort> {
    let ports = service.spec.iter().flat_map(|s| s.ports.iter().flatten());
    ports
        .filter_map(|p| {
            Some(EndpointPort {
                name: Some(p.name.clone().unwrap_or_default()),
                port: Some(find_port(net, p)?),
                protocol: Some(p.protocol.clone().unwrap_or_else(|| "TCP".into())),
                app_protocol: p.app_protocol.clone(),
            })
        })
        .collect()
}

/// Endpoints sharing one address type and port set: what one or more slices hold.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Group {
    pub address_type: String,
    pub ports: Vec<EndpointPort>,
    pub endpoints: Vec<Endpoint>,
}

/// A group's identity: its address type and ports (a slice holds one group's endpoints).
pub fn group_key(address_type: &str, ports: &[EndpointPort]) -> String {
    let mut ports: Vec<String> = ports
        .iter()
        .map(|p| {
            format!(
                "{}/{}/{}/{}",
                p.name.as_deref().unwrap_or(""),
                p.protocol.as_deref().unwrap_or(""),
                p.port.unwrap_or(0),
                p.app_protocol.as_deref().unwrap_or("")
            )
        })
        .collect();
    ports.sort();
    format!("{address_type}|{}", ports.join(","))
}

/// Every endpoint `service`'s selected `pods` make, grouped by address type and ports, in
/// pod-name order. `zone_of` gives a node's zone label.
pub fn groups(
    service: &Service,
    pods: &[&CachedPod],
    zone_of: &dyn Fn(&str) -> Option<String>,
) -> BTreeMap<String, Group> {
    let mut pods: Vec<&CachedPod> = pods
        .iter()
        .copied()
        .filter(|p| should_be_in_endpoints(p, true))
        .collect();
    pods.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    let mut out: BTreeMap<String, Group> = BTreeMap::new();
    for address_type in address_types(service) {
        for pod in &pods {
            let Some(net) = pod.network.as_ref() else {
                continue;
            };
            let zone = pod.node_name.as_deref().and_then(zone_of);
            let Some(ep) = endpoint(pod, service, address_type, zone) else {
                continue;
            };
            let ports = endpoint_ports(net, service);
            let group = out
                .entry(group_key(address_type, &ports))
                .or_insert_with(|| Group {
                    address_type: address_type.to_string(),
                    ports,
                    endpoints: Vec::new(),
                });
            group.endpoints.push(ep);
        }
    }
    out
}
