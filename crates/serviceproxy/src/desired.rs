//! Services + EndpointSlices + this node → the [`ProxyState`] to program.
//!
//! Skipped, with a warning: ports with an unknown protocol or a port out of range, IPv6
//! slices (the proxy programs IPv4). Headless and ExternalName services have nothing to
//! proxy and are left out silently, as kube-proxy does.

use std::collections::{BTreeMap, BTreeSet};
use std::net::Ipv4Addr;

use k8s_openapi::api::core::v1::{Service, ServicePort as K8sServicePort};
use k8s_openapi::api::discovery::v1::EndpointSlice;

use crate::model::*;

const SERVICE_NAME_LABEL: &str = "kubernetes.io/service-name";
/// `sessionAffinityConfig.clientIP.timeoutSeconds` when unset (3 hours).
const DEFAULT_AFFINITY_SECONDS: u32 = 10_800;

/// The desired state, and a warning per thing left out.
/// Borrows the objects (the proxy's caches hold them; a sync copies none).
pub fn desired_state<'a>(
    services: impl IntoIterator<Item = &'a Service>,
    slices: impl IntoIterator<Item = &'a EndpointSlice>,
    node: &str,
) -> (ProxyState, Vec<String>) {
    let mut by_service: BTreeMap<(String, String), Vec<&EndpointSlice>> = BTreeMap::new();
    let mut warnings = Vec::new();
    for s in slices {
        let Some(svc) = s
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(SERVICE_NAME_LABEL))
        else {
            continue;
        };
        let ns = s.metadata.namespace.clone().unwrap_or_default();
        if s.address_type != "IPv4" {
            warnings.push(format!(
                "{ns}/{svc}: {} endpoints ignored (this proxy programs IPv4)",
                s.address_type
            ));
            continue;
        }
        by_service.entry((ns, svc.clone())).or_default().push(s);
    }
    let mut state = ProxyState::new();
    for svc in services {
        let key = (
            svc.metadata.namespace.clone().unwrap_or_default(),
            svc.metadata.name.clone().unwrap_or_default(),
        );
        let slices = by_service.get(&key).map(Vec::as_slice).unwrap_or_default();
        add_service(&mut state, &mut warnings, svc, &key, slices, node);
    }
    crate::conflicts::resolve(&mut state, &mut warnings);
    (state, warnings)
}

fn add_service(
    state: &mut ProxyState,
    warnings: &mut Vec<String>,
    svc: &Service,
    (ns, name): &(String, String),
    slices: &[&EndpointSlice],
    node: &str,
) {
    let Some(spec) = &svc.spec else {
        return;
    };
    let ty = spec.type_.as_deref().unwrap_or("ClusterIP");
    let cluster_ip = spec
        .cluster_ip
        .as_deref()
        .and_then(|ip| ip.parse::<Ipv4Addr>().ok());
    if ty == "ExternalName" || (cluster_ip.is_none() && spec.cluster_ip.as_deref() == Some("None"))
    {
        return;
    }
    let exposes_node_ports = matches!(ty, "NodePort" | "LoadBalancer");
    let external = spec.external_traffic_policy.as_deref() == Some("Local");
    let affinity = (spec.session_affinity.as_deref() == Some("ClientIP")).then(|| {
        spec.session_affinity_config
            .as_ref()
            .and_then(|c| c.client_ip.as_ref())
            .and_then(|c| c.timeout_seconds)
            .and_then(|t| u32::try_from(t).ok())
            .unwrap_or(DEFAULT_AFFINITY_SECONDS)
    });
    let parse_ips = |ips: Vec<String>| {
        ips.iter()
            .filter_map(|i| i.parse().ok())
            .collect::<Vec<Ipv4Addr>>()
    };
    let lb_ips: Vec<String> = svc
        .status
        .as_ref()
        .and_then(|s| s.load_balancer.as_ref())
        .and_then(|lb| lb.ingress.clone())
        .unwrap_or_default()
        .into_iter()
        .filter_map(|i| i.ip)
        .collect();
    for p in spec.ports.iter().flatten() {
        let Some(protocol) = Protocol::parse(p.protocol.as_deref()) else {
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
        let port_name = p.name.clone().unwrap_or_default();
        let sp = ServicePort {
            cluster_ip,
            port,
            node_port: node_port.filter(|n| *n != 0 && exposes_node_ports),
            external_ips: parse_ips(spec.external_ips.clone().unwrap_or_default()),
            load_balancer_ips: if ty == "LoadBalancer" {
                parse_ips(lb_ips.clone())
            } else {
                Vec::new()
            },
            affinity_seconds: affinity,
            external_local: external
                && (exposes_node_ports
                    || spec.external_ips.as_ref().is_some_and(|e| !e.is_empty())),
            internal_local: spec.internal_traffic_policy.as_deref() == Some("Local"),
            health_check_node_port: spec
                .health_check_node_port
                .and_then(|n| u16::try_from(n).ok()),
        };
        let endpoints = endpoints_for(slices, p, protocol, node);
        let entry = categorize(sp, endpoints);
        let key = ServicePortName {
            namespace: ns.clone(),
            name: name.clone(),
            port: port_name,
            protocol,
        };
        state.insert(key, entry);
    }
}

/// Every distinct endpoint of the slices for the service port `p` (matched by port name
/// and protocol, as kube-proxy matches slice ports).
fn endpoints_for(
    slices: &[&EndpointSlice],
    p: &K8sServicePort,
    protocol: Protocol,
    node: &str,
) -> Vec<Endpoint> {
    let name = p.name.clone().unwrap_or_default();
    let mut seen = BTreeSet::new();
    let mut out = Vec::new();
    for s in slices {
        let port = s.ports.iter().flatten().find(|sp| {
            sp.name.clone().unwrap_or_default() == name
                && Protocol::parse(sp.protocol.as_deref()) == Some(protocol)
        });
        let Some(port) = port
            .and_then(|sp| sp.port)
            .and_then(|n| u16::try_from(n).ok())
        else {
            continue;
        };
        for e in &s.endpoints {
            let Some(ip) = e.addresses.first().and_then(|a| a.parse::<Ipv4Addr>().ok()) else {
                continue;
            };
            if !seen.insert((ip, port)) {
                continue;
            }
            let c = e.conditions.clone().unwrap_or_default();
            // Unset `ready` means ready; unset `serving` means as ready (upstream's reading).
            let ready = c.ready.unwrap_or(true);
            out.push(Endpoint {
                ip,
                port,
                ready,
                serving: c.serving.unwrap_or(ready),
                terminating: c.terminating.unwrap_or(false),
                local: e.node_name.as_deref() == Some(node),
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
