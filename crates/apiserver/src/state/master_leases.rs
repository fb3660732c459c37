//! Upstream's lease endpoint reconciler: each replica keeps a lease on its advertised
//! address in the store (`/cairn.io/masterleases/<ip>`, renewed every 10 s, live for
//! 15 s) and writes the `kubernetes` Endpoints and EndpointSlice to list the addresses
//! of the live leases, so clients in pods reach only replicas that are up. A replica
//! stopping gracefully removes its own lease at once; a crashed one's lease expires.
//! Upstream's leases are etcd keys with a TTL; the store here has no TTL, so a lease holds
//! its renewal time and replicas' clocks must agree to within a few seconds.

use std::collections::BTreeSet;
use std::net::Ipv4Addr;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use cairn_api::registry;
use cairn_api::status::Status;
use cairn_store::{KeyValue, StoreError};
use serde_json::{json, Value};
use tracing::warn;

use super::{ApiState, WriteOptions};

const LEASES: &str = "/cairn.io/masterleases/";
/// Upstream's `DefaultEndpointReconcilerInterval` and master lease TTL.
pub const RECONCILE_INTERVAL: Duration = Duration::from_secs(10);
const LEASE_TTL_SECONDS: f64 = 15.0;

fn unix_now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or_default()
}

/// The live leases' addresses (sorted), and the keys of expired ones, at `now`.
fn live_addresses(leases: &[KeyValue], now: f64) -> (Vec<Ipv4Addr>, Vec<&KeyValue>) {
    let mut live = BTreeSet::new();
    let mut expired = Vec::new();
    for kv in leases {
        let renewed = serde_json::from_slice::<Value>(&kv.value)
            .ok()
            .and_then(|v| v["renewTime"].as_f64());
        let ip = kv.key.strip_prefix(LEASES).and_then(|ip| ip.parse().ok());
        match (renewed, ip) {
            (Some(t), Some(ip)) if t + LEASE_TTL_SECONDS > now => {
                live.insert(ip);
            }
            _ => expired.push(kv),
        }
    }
    (live.into_iter().collect(), expired)
}

fn internal(e: StoreError) -> Status {
    Status::internal(format!("the apiserver's endpoint lease: {e}"))
}

impl ApiState {
    fn own_lease(&self) -> String {
        format!("{LEASES}{}", self.settings.advertise_address)
    }

    /// Creates or renews this replica's lease.
    async fn renew_own_lease(&self) -> Result<(), Status> {
        let backend = self.cache.backend();
        let key = self.own_lease();
        let value = || Bytes::from(json!({"renewTime": unix_now()}).to_string());
        for _ in 0..3 {
            let result = match backend.get(&key).await.map_err(internal)? {
                None => backend.create(&key, value()).await,
                Some(kv) => backend.update(&key, value(), kv.mod_revision).await,
            };
            match result {
                Ok(_) => return Ok(()),
                // Another writer in between (a replica deleting it as expired): again.
                Err(
                    StoreError::AlreadyExists { .. }
                    | StoreError::Conflict { .. }
                    | StoreError::NotFound { .. },
                ) => {}
                Err(e) => return Err(internal(e)),
            }
        }
        Err(Status::internal(
            "the apiserver's endpoint lease kept changing",
        ))
    }

    /// Renews this replica's lease, drops expired ones and makes the `kubernetes`
    /// Endpoints and EndpointSlice list the live replicas.
    pub async fn reconcile_kubernetes_endpoints(&self) -> Result<(), Status> {
        self.renew_own_lease().await?;
        self.write_kubernetes_endpoints().await
    }

    async fn write_kubernetes_endpoints(&self) -> Result<(), Status> {
        let backend = self.cache.backend();
        let (leases, _) = backend.list(LEASES).await.map_err(internal)?;
        let (live, expired) = live_addresses(&leases, unix_now());
        for kv in expired {
            // Lost to a renewal in between: it is live again.
            let _ = backend.delete(&kv.key, Some(kv.mod_revision)).await;
        }
        let opts = WriteOptions {
            field_manager: Some("cairn-control".into()),
            ..Default::default()
        };
        self.ensure_kubernetes_endpoints(&live, &opts).await?;
        self.ensure_kubernetes_endpointslice(&live, &opts).await
    }

    /// On a graceful stop: this replica's lease goes and the Endpoints follow at once.
    pub async fn remove_own_endpoint(&self) {
        let backend = self.cache.backend();
        if let Ok(Some(kv)) = backend.get(&self.own_lease()).await {
            let _ = backend.delete(&kv.key, Some(kv.mod_revision)).await;
        }
        if let Err(e) = self.write_kubernetes_endpoints().await {
            warn!(error = %e.message, "removing this replica from the kubernetes Endpoints");
        }
    }

    async fn ensure_kubernetes_endpoints(
        &self,
        live: &[Ipv4Addr],
        opts: &WriteOptions,
    ) -> Result<(), Status> {
        let eps = registry::find("", "v1", "endpoints")
            .ok_or_else(|| Status::internal("endpoints not registered"))?;
        let addresses: Vec<Value> = live
            .iter()
            .map(|ip| json!({"ip": ip.to_string()}))
            .collect();
        // No live replica (only when the last one stops): no subset, as upstream writes.
        let subsets = if addresses.is_empty() {
            json!([])
        } else {
            json!([{
                "addresses": addresses,
                "ports": [{"name": "https", "port": self.settings.advertise_port, "protocol": "TCP"}],
            }])
        };
        let desired = json!({
            "metadata": {"name": "kubernetes", "namespace": "default", "labels": {"endpointslice.kubernetes.io/skip-mirror": "true"}},
            "subsets": subsets,
        });
        self.create_or_converge(eps, desired, &["subsets"], opts)
            .await
    }

    /// The slice upstream's endpoint reconciler writes beside the Endpoints (the
    /// EndpointSlice controller leaves selectorless Services alone).
    async fn ensure_kubernetes_endpointslice(
        &self,
        live: &[Ipv4Addr],
        opts: &WriteOptions,
    ) -> Result<(), Status> {
        let slices = registry::find("discovery.k8s.io", "v1", "endpointslices")
            .ok_or_else(|| Status::internal("endpointslices not registered"))?;
        let endpoints: Vec<Value> = live
            .iter()
            .map(|ip| json!({"addresses": [ip.to_string()], "conditions": {"ready": true}}))
            .collect();
        let desired = json!({
            "metadata": {"name": "kubernetes", "namespace": "default", "labels": {"kubernetes.io/service-name": "kubernetes"}},
            "addressType": "IPv4",
            "endpoints": endpoints,
            "ports": [{"name": "https", "port": self.settings.advertise_port, "protocol": "TCP"}],
        });
        self.create_or_converge(slices, desired, &["endpoints", "ports"], opts)
            .await
    }
}

/// Reconciles every `RECONCILE_INTERVAL` until the server stops.
pub async fn endpoint_reconciler_loop(state: Arc<ApiState>) {
    loop {
        tokio::time::sleep(RECONCILE_INTERVAL).await;
        if let Err(e) = state.reconcile_kubernetes_endpoints().await {
            warn!(error = %e.message, "reconciling the kubernetes Endpoints");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lease(ip: &str, renewed: f64) -> KeyValue {
        KeyValue {
            key: format!("{LEASES}{ip}"),
            value: Bytes::from(json!({"renewTime": renewed}).to_string()),
            create_revision: 1,
            mod_revision: 1,
        }
    }

    #[test]
    fn leases_renewed_within_the_ttl_are_live_and_the_rest_expired() {
        let leases = [
            lease("10.0.0.3", 100.0),
            lease("10.0.0.1", 110.0),
            lease("10.0.0.2", 94.0),
            KeyValue {
                value: Bytes::from_static(b"garbage"),
                ..lease("10.0.0.4", 110.0)
            },
        ];
        let (live, expired) = live_addresses(&leases, 114.0);
        assert_eq!(
            live,
            [
                "10.0.0.1".parse::<Ipv4Addr>().unwrap(),
                "10.0.0.3".parse().unwrap()
            ]
        );
        let expired: Vec<&str> = expired.iter().map(|kv| kv.key.as_str()).collect();
        assert_eq!(
            expired,
            [format!("{LEASES}10.0.0.2"), format!("{LEASES}10.0.0.4")]
        );
        let (live, _) = live_addresses(&leases, 115.0);
        assert_eq!(
            live,
            ["10.0.0.1".parse::<Ipv4Addr>().unwrap()],
            "10.0.0.3's 15 s ran out"
        );
    }
}
