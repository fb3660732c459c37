//! Service allocations claimed in the store, so that several replicas sharing one store
//! never hand out the same ClusterIP or NodePort: each value is a key under
//! `/cairn.io/allocations/` created (atomically, in etcd or SQLite) for the Service that
//! holds it. The in-memory allocators only pick candidates; a claim another Service holds
//! sends an automatic pick to the next candidate and a requested value to upstream's
//! "already allocated" error.

use std::net::Ipv4Addr;

use bytes::Bytes;
use cairn_api::registry;
use cairn_api::status::{Cause, Status};
use cairn_store::StoreError;
use serde_json::{json, Value};
use tracing::{debug, warn};

use super::allocate::{needs_node_ports, service_ips, service_node_ports, Allocations};
use super::ApiState;
use crate::allocator::AllocError;

pub(super) const CLAIMS: &str = "/cairn.io/allocations/";
/// Automatic picks taken elsewhere before one is free: then the range is treated as full.
const MAX_PICKS: usize = 64;

fn ip_key(ip: Ipv4Addr) -> String {
    format!("{CLAIMS}clusterips/{ip}")
}

fn port_key(port: u16) -> String {
    format!("{CLAIMS}nodeports/{port}")
}

/// Whose claim a key is: the Service's `namespace/name`.
pub(super) fn owner_of(value: &[u8]) -> String {
    serde_json::from_slice::<Value>(value)
        .ok()
        .and_then(|v| v["service"].as_str().map(str::to_string))
        .unwrap_or_default()
}

/// A claim held by another Service.
struct Taken {
    key: String,
}

impl ApiState {
    /// Creates the claim `key` for `owner`; a claim `owner` already holds is fine.
    async fn claim(&self, key: &str, owner: &str) -> Result<Result<(), Taken>, Status> {
        let backend = self.cache.backend();
        // A claim released between our create and our read is created again; a key that
        // keeps flipping is an internal error rather than an endless loop.
        for _ in 0..3 {
            let value = Bytes::from(json!({"service": owner}).to_string());
            match backend.create(key, value).await {
                Ok(_) => return Ok(Ok(())),
                Err(StoreError::AlreadyExists { .. }) => {}
                Err(e) => return Err(internal(e)),
            }
            match backend.get(key).await.map_err(internal)? {
                Some(kv) if owner_of(&kv.value) != owner => {
                    return Ok(Err(Taken {
                        key: key.to_string(),
                    }))
                }
                Some(_) => return Ok(Ok(())),
                None => continue,
            }
        }
        Err(Status::internal(format!(
            "allocation claim {key} keeps being created and released"
        )))
    }

    /// Deletes the claim `key` if `owner` holds it.
    async fn unclaim(&self, key: &str, owner: &str) {
        let backend = self.cache.backend();
        let held = match backend.get(key).await {
            Ok(Some(kv)) if owner_of(&kv.value) == owner => kv,
            Ok(_) => return,
            Err(e) => return warn!(%key, error = %e, "reading an allocation claim"),
        };
        if let Err(e) = backend.delete(key, Some(held.mod_revision)).await {
            // Left for the owner's next release or a conflict check to find.
            debug!(%key, error = %e, "releasing an allocation claim");
        }
    }

    /// Claims every value in `allocs` for `owner`; on a value held elsewhere, releases the
    /// claims made so far and returns it.
    async fn claim_all(
        &self,
        allocs: &Allocations,
        owner: &str,
    ) -> Result<Result<(), Taken>, Status> {
        let keys: Vec<String> = allocs
            .ips
            .iter()
            .map(|ip| ip_key(*ip))
            .chain(allocs.ports.iter().map(|p| port_key(*p)))
            .collect();
        for (i, key) in keys.iter().enumerate() {
            if let Err(taken) = self.claim(key, owner).await? {
                for made in &keys[..i] {
                    self.unclaim(made, owner).await;
                }
                return Ok(Err(taken));
            }
        }
        Ok(Ok(()))
    }

    /// Releases `allocs` in memory and their claims in the store.
    pub(super) async fn release_claimed(&self, allocs: &Allocations, owner: &str) {
        self.release(allocs);
        for ip in &allocs.ips {
            self.unclaim(&ip_key(*ip), owner).await;
        }
        for port in &allocs.ports {
            self.unclaim(&port_key(*port), owner).await;
        }
    }

    /// `allocate_service`, then the claims: a value another replica's Service holds is
    /// kept as used in memory and the allocation made again, so an automatic pick moves
    /// on and a requested value fails as upstream's does.
    pub(super) async fn allocate_and_claim(
        &self,
        svc: &mut Value,
        old: Option<&Value>,
        allocs: &mut Allocations,
        (name, owner): (&str, &str),
    ) -> Result<(), Status> {
        let original = svc.clone();
        for _ in 0..MAX_PICKS {
            *svc = original.clone();
            let mut fresh = Allocations::default();
            self.allocate_service(svc, old, &mut fresh, name)?;
            let taken = match self.claim_all(&fresh, owner).await {
                Ok(Ok(())) => {
                    *allocs = fresh;
                    return Ok(());
                }
                Ok(Err(taken)) => taken,
                Err(status) => {
                    self.release(&fresh);
                    return Err(status);
                }
            };
            // Everything but the taken value goes back; that one stays used here.
            fresh.ips.retain(|ip| ip_key(*ip) != taken.key);
            fresh.ports.retain(|p| port_key(*p) != taken.key);
            self.release(&fresh);
            if let Some(status) = requested_taken(&original, &taken.key, name) {
                return Err(status);
            }
        }
        Err(Status::invalid(
            "Service",
            "",
            name,
            vec![Cause::invalid(
                "spec.clusterIPs",
                "",
                &AllocError::Full.to_string(),
            )],
        ))
    }

    /// Claims the allocations of the Services stored before claims existed (or written by
    /// a replica that crashed before claiming); a conflict is logged, not resolved.
    pub(super) async fn claim_stored_services(&self, services: Vec<Value>) {
        for svc in services {
            let owner = owner_name(&svc);
            for key in keys_of(&svc) {
                match self.claim(&key, &owner).await {
                    Ok(Ok(())) => {}
                    Ok(Err(_)) => {
                        warn!(%key, service = %owner, "allocation claimed by another Service")
                    }
                    Err(e) => {
                        warn!(%key, service = %owner, error = %e.message, "claiming an allocation")
                    }
                }
            }
        }
    }

    /// Claims in the store what the stored Services hold but no claim records yet (Services
    /// from before claims, or from a replica that crashed before claiming), then marks
    /// every claim as used. Before serving, so no request can take an unclaimed value.
    pub async fn claim_allocations(&self) {
        let Some(services) = registry::find("", "v1", "services") else {
            return;
        };
        let (objects, _) = self.cache.list(&services.list_prefix(None));
        let (claims, _) = self.cache.list(CLAIMS);
        let claimed: std::collections::HashSet<&str> =
            claims.iter().map(|c| c.key.as_str()).collect();
        let unclaimed = objects
            .iter()
            .filter_map(|o| serde_json::from_slice::<Value>(&o.bytes).ok())
            .filter(|svc| keys_of(svc).iter().any(|k| !claimed.contains(k.as_str())))
            .collect();
        self.claim_stored_services(unclaimed).await;
        self.restore_claims();
    }

    pub(super) async fn release_dropped_service_allocations(
        &self,
        old: &Value,
        new: &Value,
        owner: &str,
    ) {
        let new_ips = service_ips(new);
        let new_ports = if needs_node_ports(new) {
            service_node_ports(new)
        } else {
            Vec::new()
        };
        let allocs = Allocations {
            ips: service_ips(old)
                .into_iter()
                .filter(|ip| !new_ips.contains(ip))
                .collect(),
            ports: service_node_ports(old)
                .into_iter()
                .filter(|p| !new_ports.contains(p))
                .collect(),
        };
        self.release_claimed(&allocs, owner).await;
    }

    /// Marks every value claimed in the store (by any replica) as used in memory.
    pub(super) fn restore_claims(&self) {
        let (objects, _) = self.cache.list(CLAIMS);
        let mut ips = self.cluster_ips.lock();
        let mut ports = self.node_ports.lock();
        for o in objects {
            match claimed_value(&o.key) {
                Some(Claimed::Ip(ip)) => ips.restore(ip),
                Some(Claimed::Port(port)) => ports.restore(port),
                None => {}
            }
        }
    }
}

/// The value a claim key is for.
pub(super) enum Claimed {
    Ip(Ipv4Addr),
    Port(u16),
}

pub(super) fn claimed_value(key: &str) -> Option<Claimed> {
    let value = key.rsplit('/').next()?;
    if key.starts_with(&format!("{CLAIMS}clusterips/")) {
        value.parse().ok().map(Claimed::Ip)
    } else {
        value.parse().ok().map(Claimed::Port)
    }
}

/// The claim keys of what `svc` holds.
pub(super) fn keys_of(svc: &Value) -> Vec<String> {
    service_ips(svc)
        .into_iter()
        .map(ip_key)
        .chain(service_node_ports(svc).into_iter().map(port_key))
        .collect()
}

/// The Service's `namespace/name`, as its claims name it.
pub(super) fn owner_name(svc: &Value) -> String {
    let meta = &svc["metadata"];
    format!(
        "{}/{}",
        meta["namespace"].as_str().unwrap_or_default(),
        meta["name"].as_str().unwrap_or_default()
    )
}

/// Upstream's error when the taken value is one the Service asked for.
fn requested_taken(svc: &Value, key: &str, name: &str) -> Option<Status> {
    let invalid = |field: String, value: String, e: AllocError| {
        Status::invalid(
            "Service",
            "",
            name,
            vec![Cause::invalid(&field, &value, &e.to_string())],
        )
    };
    if let Some(ip) = key.strip_prefix(&format!("{CLAIMS}clusterips/")) {
        let asked = svc.pointer("/spec/clusterIP").and_then(Value::as_str) == Some(ip);
        return asked.then(|| {
            invalid(
                "spec.clusterIPs".into(),
                ip.to_string(),
                AllocError::IpInUse,
            )
        });
    }
    let port: u64 = key.rsplit('/').next()?.parse().ok()?;
    if svc
        .pointer("/spec/healthCheckNodePort")
        .and_then(Value::as_u64)
        == Some(port)
    {
        return Some(invalid(
            "spec.healthCheckNodePort".into(),
            port.to_string(),
            AllocError::PortInUse,
        ));
    }
    let ports = svc.pointer("/spec/ports").and_then(Value::as_array)?;
    let i = ports
        .iter()
        .position(|p| p.get("nodePort").and_then(Value::as_u64) == Some(port))?;
    Some(invalid(
        format!("spec.ports[{i}].nodePort"),
        port.to_string(),
        AllocError::PortInUse,
    ))
}

fn internal(e: StoreError) -> Status {
    Status::internal(format!("claiming a Service allocation: {e}"))
}
