//! Services + EndpointSlices + this node → the [`ProxyState`] to program.
//!
//! Skipped, with a warning: ports with an unknown protocol or a port out of range, IPv6
//! slices (the proxy programs IPv4). Headless and ExternalName services have nothing to
//! proxy and are left out silently, as kube-proxy does.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::discovery::v1::EndpointSlice;

use crate::model::*;
use crate::source::{PortSource, ServiceSource, SliceSource};

/// The desired state from the Kubernetes objects (converted on the way; the proxy keeps
/// [`ServiceSource`]s and [`SliceSource`]s and calls [`desired_state_from`]).
pub fn desired_state<'a>(
    services: impl IntoIterator<Item = &'a Service>,
    slices: impl IntoIterator<Item = &'a EndpointSlice>,
    node: &str,
) -> (ProxyState, Vec<String>) {
    let services: Vec<ServiceSource> = services
        .into_iter()
        .map(ServiceSource::from_service)
        .collect();
    let slices: Vec<SliceSource> = slices
        .into_iter()
        .filter_map(SliceSource::from_slice)
        .collect();
    desired_state_from(&services, &slices, node)
}

/// The desired state, and a warning per thing left out. Borrows the sources (the proxy's
/// caches hold them; a sync copies none).
pub fn desired_state_from<'a>(
    services: impl IntoIterator<Item = &'a ServiceSource>,
    slices: impl IntoIterator<Item = &'a SliceSource>,
    node: &str,
) -> (ProxyState, Vec<String>) {
    let mut by_service: BTreeMap<(&str, &str), Vec<&SliceSource>> = BTreeMap::new();
    let mut warnings = Vec::new();
    for s in slices {
        if s.address_type != "IPv4" {
            warnings.push(format!(
                "{}/{}: {} endpoints ignored (this proxy programs IPv4)",
                s.namespace, s.service, s.address_type
            ));
            continue;
        }
        by_service
            .entry((&s.namespace, &s.service))
            .or_default()
            .push(s);
    }
    let mut state = ProxyState::new();
    for svc in services {
        let key = (svc.namespace.as_str(), svc.name.as_str());
        let slices = by_service.get(&key).map(Vec::as_slice).unwrap_or_default();
        add_service(&mut state, &mut warnings, svc, slices, node);
    }
    crate::conflicts::resolve(&mut state, &mut warnings);
    (state, warnings)
}

fn add_service(
    state: &mut ProxyState,
    warnings: &mut Vec<String>,
    svc: &ServiceSource,
    slices: &[&SliceSource],
    node: &str,
) {
    if !svc.proxied {
        return;
    }
    let (ns, name) = (&svc.namespace, &svc.name);
    for p in &svc.ports {
        let Some(protocol) = p.protocol else {
            warnings.push(format!(
                "{ns}/{name}: port {} has an unsupported protocol",
                p.port
            ));
            continue;
        };
        let (Ok(port), node_port) = (
            u16::try_from(p.port),
            p.node_port.and_then(|n| u16::try_from(n).ok()),
        ) else {
            warnings.push(format!("{ns}/{name}: port {} is out of range", p.port));
            continue;
        };
        let sp = ServicePort {
            cluster_ip: svc.cluster_ip,
            port,
            node_port: node_port.filter(|n| *n != 0 && svc.exposes_node_ports),
            external_ips: svc.external_ips.clone(),
            load_balancer_ips: svc.load_balancer_ips.clone(),
            affinity_seconds: svc.affinity_seconds,
            external_local: svc.external_local
                && (svc.exposes_node_ports || !svc.external_ips.is_empty()),
            internal_local: svc.internal_local,
            health_check_node_port: svc.health_check_node_port,
        };
        let endpoints = endpoints_for(slices, p, protocol, node);
        let key = ServicePortName {
            namespace: ns.clone(),
            name: name.clone(),
            port: p.name.clone(),
            protocol,
        };
        state.insert(key, categorize(sp, endpoints));
    }
}

/// Every distinct endpoint of the slices for the service port `p` (matched by port name
/// and protocol, as kube-proxy matches slice ports).
fn endpoints_for(
    slices: &[&SliceSource],
    p: &PortSource,
    protocol: Protocol,
    node: &str,
) -> Vec<Endpoint> {
    let mut seen = BTreeSet::new();
    let mut out = Vec::new();
    for s in slices {
        let port = s
            .ports
            .iter()
            .find(|(name, proto, _)| *name == p.name && *proto == Some(protocol));
        let Some(port) = port
            .and_then(|(_, _, port)| *port)
            .and_then(|n| u16::try_from(n).ok())
        else {
            continue;
        };
        for e in &s.endpoints {
            let Some(ip) = e.ip else {
                continue;
            };
            if !seen.insert((ip, port)) {
                continue;
            }
            out.push(Endpoint {
                ip,
                port,
                ready: e.ready,
                serving: e.serving,
                terminating: e.terminating,
                local: e.node.as_deref() == Some(node),
            });
        }
    }
    out.sort();
    out
}
/// Ready endpoints, else the serving-terminating ones (upstream `CategorizeEndpoints`).
fn usable<'a>(eps: impl Iterator<Item = &'a Endpoint> + Clone) -> Vec<Endpoint> {
    let ready: Vec<Endpoint> = eps.clone().filter(|e| e.ready).cloned().collect();
    if !ready.is_empty() {
        return ready;
    }
    eps.filter(|e| e.serving && e.terminating)
        .cloned()
        .collect()
}

fn categorize(port: ServicePort, endpoints: Vec<Endpoint>) -> ServiceEntry {
    let all = usable(endpoints.iter());
    let local = usable(endpoints.iter().filter(|e| e.local));
    ServiceEntry {
        cluster: if port.internal_local {
            local.clone()
        } else {
            all.clone()
        },
        external: if port.external_local {
            local.clone()
        } else {
            all
        },
        local_count: local.len(),
        port,
    }
}
