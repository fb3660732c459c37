//! Service address allocation: ClusterIPs, NodePorts and health-check node ports, made
//! for one write and released if it fails, recovered from the stored Services at start.

use std::net::Ipv4Addr;

use cairn_api::registry;
use cairn_api::status::{Cause, Status};
use serde_json::{json, Value};
use tracing::info;

use super::ApiState;
use crate::allocator::AllocError;

/// Service allocations made for one write, released if the write fails.
#[derive(Default)]
pub(super) struct Allocations {
    pub(super) ips: Vec<Ipv4Addr>,
    pub(super) ports: Vec<u16>,
}

pub(super) fn service_ips(svc: &Value) -> Vec<Ipv4Addr> {
    let mut out = Vec::new();
    if let Some(ips) = svc.pointer("/spec/clusterIPs").and_then(Value::as_array) {
        out.extend(
            ips.iter()
                .filter_map(|i| i.as_str()?.parse::<Ipv4Addr>().ok()),
        );
    }
    if let Some(ip) = svc
        .pointer("/spec/clusterIP")
        .and_then(Value::as_str)
        .and_then(|i| i.parse().ok())
    {
        if !out.contains(&ip) {
            out.push(ip);
        }
    }
    out
}

pub(super) fn service_node_ports(svc: &Value) -> Vec<u16> {
    svc.pointer("/spec/ports")
        .and_then(Value::as_array)
        .map(|ports| {
            ports
                .iter()
                .filter_map(|p| {
                    p.get("nodePort")?
                        .as_u64()
                        .and_then(|n| u16::try_from(n).ok())
                })
                .filter(|p| *p != 0)
                .chain(health_check_node_port(svc))
                .collect()
        })
        .unwrap_or_default()
}

pub(super) fn health_check_node_port(svc: &Value) -> Option<u16> {
    svc.pointer("/spec/healthCheckNodePort")
        .and_then(Value::as_u64)
        .and_then(|n| u16::try_from(n).ok())
        .filter(|p| *p != 0)
}

/// A LoadBalancer with `externalTrafficPolicy: Local` gets a health-check node port.
pub(super) fn needs_health_check_port(svc: &Value) -> bool {
    svc.pointer("/spec/type").and_then(Value::as_str) == Some("LoadBalancer")
        && svc
            .pointer("/spec/externalTrafficPolicy")
            .and_then(Value::as_str)
            == Some("Local")
}

pub(super) fn needs_node_ports(svc: &Value) -> bool {
    matches!(
        svc.pointer("/spec/type").and_then(Value::as_str),
        Some("NodePort") | Some("LoadBalancer")
    )
}

impl ApiState {
    /// Rebuilds the allocators from the stored Services.
    pub(super) fn restore_allocations(&self) {
        let Some(services) = registry::find("", "v1", "services") else {
            return;
        };
        let (objects, _) = self.cache.list(&services.list_prefix(None));
        let mut ips = self.cluster_ips.lock();
        let mut ports = self.node_ports.lock();
        for o in objects {
            if let Ok(svc) = serde_json::from_slice::<Value>(&o.bytes) {
                service_ips(&svc).into_iter().for_each(|ip| ips.restore(ip));
                service_node_ports(&svc)
                    .into_iter()
                    .for_each(|p| ports.restore(p));
            }
        }
        info!(cluster_ips = ips.in_use(), "restored service allocations");
    }

    pub(super) fn release(&self, allocs: &Allocations) {
        if !allocs.ips.is_empty() {
            let mut ips = self.cluster_ips.lock();
            allocs.ips.iter().for_each(|ip| ips.release(*ip));
        }
        if !allocs.ports.is_empty() {
            let mut ports = self.node_ports.lock();
            allocs.ports.iter().for_each(|p| ports.release(*p));
        }
    }

    /// Allocates the ClusterIP and NodePorts a Service needs (on create, `old` is None).
    pub(super) fn allocate_service(
        &self,
        svc: &mut Value,
        old: Option<&Value>,
        allocs: &mut Allocations,
        name: &str,
    ) -> Result<(), Status> {
        let invalid = |field: &str, value: &str, e: AllocError| {
            Status::invalid(
                "Service",
                "",
                name,
                vec![Cause::invalid(field, value, &e.to_string())],
            )
        };
        let ty = svc
            .pointer("/spec/type")
            .and_then(Value::as_str)
            .unwrap_or("ClusterIP")
            .to_string();
        let old_ips = old.map(service_ips).unwrap_or_default();
        if ty != "ExternalName" {
            let requested = svc
                .pointer("/spec/clusterIP")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string();
            if requested == "None" {
                svc["spec"]["clusterIPs"] = json!(["None"]);
            } else if requested.is_empty() {
                if let Some(ip) = old_ips.first() {
                    svc["spec"]["clusterIP"] = json!(ip.to_string());
                    svc["spec"]["clusterIPs"] = json!([ip.to_string()]);
                } else {
                    let ip = self
                        .cluster_ips
                        .lock()
                        .allocate()
                        .map_err(|e| invalid("spec.clusterIPs", "", e))?;
                    allocs.ips.push(ip);
                    svc["spec"]["clusterIP"] = json!(ip.to_string());
                    svc["spec"]["clusterIPs"] = json!([ip.to_string()]);
                }
            } else {
                let ip: Ipv4Addr = requested.parse().map_err(|_| {
                    Status::invalid(
                        "Service",
                        "",
                        name,
                        vec![Cause::invalid(
                            "spec.clusterIPs[0]",
                            &requested,
                            "must be a valid IP address",
                        )],
                    )
                })?;
                if !old_ips.contains(&ip) {
                    claimed_decides(self.cluster_ips.lock().reserve(ip))
                        .map_err(|e| invalid("spec.clusterIPs", &requested, e))?;
                    allocs.ips.push(ip);
                }
                svc["spec"]["clusterIPs"] = json!([requested]);
            }
        }
        if needs_node_ports(svc) {
            let old_ports = old.map(service_node_ports).unwrap_or_default();
            if let Some(ports) = svc.pointer_mut("/spec/ports").and_then(Value::as_array_mut) {
                for (i, p) in ports.iter_mut().enumerate() {
                    let requested = p.get("nodePort").and_then(Value::as_u64).unwrap_or(0);
                    if requested == 0 {
                        let port =
                            self.node_ports.lock().allocate().map_err(|e| {
                                invalid(&format!("spec.ports[{i}].nodePort"), "", e)
                            })?;
                        allocs.ports.push(port);
                        p["nodePort"] = json!(port);
                    } else {
                        let port = u16::try_from(requested).unwrap_or(0);
                        if !old_ports.contains(&port) {
                            claimed_decides(self.node_ports.lock().reserve(port)).map_err(|e| {
                                invalid(
                                    &format!("spec.ports[{i}].nodePort"),
                                    &requested.to_string(),
                                    e,
                                )
                            })?;
                            allocs.ports.push(port);
                        }
                    }
                }
            }
        }
        if needs_health_check_port(svc) {
            self.allocate_health_check_port(svc, old, allocs, name)?;
        }
        Ok(())
    }

    /// `spec.healthCheckNodePort`: kept from the old object, reserved when asked for, else
    /// allocated from the node port range (as kube-apiserver does).
    pub(super) fn allocate_health_check_port(
        &self,
        svc: &mut Value,
        old: Option<&Value>,
        allocs: &mut Allocations,
        name: &str,
    ) -> Result<(), Status> {
        let old_port = old.and_then(health_check_node_port);
        let port = match (health_check_node_port(svc), old_port) {
            (Some(p), Some(o)) if p == o => return Ok(()),
            (None, Some(o)) => o,
            (Some(p), _) => {
                claimed_decides(self.node_ports.lock().reserve(p)).map_err(|e| {
                    Status::invalid(
                        "Service",
                        "",
                        name,
                        vec![Cause::invalid(
                            "spec.healthCheckNodePort",
                            &p.to_string(),
                            &e.to_string(),
                        )],
                    )
                })?;
                allocs.ports.push(p);
                p
            }
            (None, None) => {
                let p = self.node_ports.lock().allocate().map_err(|e| {
                    Status::invalid(
                        "Service",
                        "",
                        name,
                        vec![Cause::invalid(
                            "spec.healthCheckNodePort",
                            "",
                            &e.to_string(),
                        )],
                    )
                })?;
                allocs.ports.push(p);
                p
            }
        };
        svc["spec"]["healthCheckNodePort"] = json!(port);
        Ok(())
    }
}

/// A requested value this replica believes in use may have been released by another
/// replica since: whether it is taken is the store claim's to decide (`claims.rs`).
fn claimed_decides(reserved: Result<(), AllocError>) -> Result<(), AllocError> {
    match reserved {
        Err(AllocError::IpInUse | AllocError::PortInUse) => Ok(()),
        other => other,
    }
}
