//! What the policy controller last put in force, for people and Prometheus: each
//! policy's drop counter on `/metrics` (read from the kernel at each scrape) and each
//! local pod's effective policy on `/network-policy[/NAMESPACE/POD]`.

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use cairn_netfilter::NftDriver;
use cairn_netpol::nft::{Desired, TABLE, UNPROGRAMMED_COUNTER};
use cairn_netpol::{PodKey, PodPolicy};
use parking_lot::Mutex;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::MetricType;
use tracing::warn;

/// The controller's last sync, shared with the metrics server.
pub struct Observed {
    nft: Arc<dyn NftDriver>,
    last: Mutex<Last>,
}

#[derive(Default)]
struct Last {
    pods: Arc<BTreeMap<PodKey, PodPolicy>>,
    applied: Option<Arc<Desired>>,
}

impl std::fmt::Debug for Observed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Observed").finish_non_exhaustive()
    }
}

/// A named counter's values, from `nft list counters`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CounterValue {
    pub packets: u64,
    pub bytes: u64,
}

/// The named counters of a table listing: `counter NAME {` then `packets P bytes B`.
pub fn counters_of(listing: &str) -> BTreeMap<String, CounterValue> {
    let mut out = BTreeMap::new();
    let mut lines = listing.lines().map(str::trim);
    while let Some(line) = lines.next() {
        let Some(name) = line
            .strip_prefix("counter ")
            .and_then(|rest| rest.strip_suffix(" {"))
        else {
            continue;
        };
        let words: Vec<&str> = lines.next().unwrap_or_default().split(' ').collect();
        if let ["packets", packets, "bytes", bytes] = words[..] {
            let value = CounterValue {
                packets: packets.parse().unwrap_or(0),
                bytes: bytes.parse().unwrap_or(0),
            };
            out.insert(name.to_string(), value);
        }
    }
    out
}

impl Observed {
    pub fn new(nft: Arc<dyn NftDriver>) -> Arc<Observed> {
        Arc::new(Observed {
            nft,
            last: Mutex::new(Last::default()),
        })
    }

    pub(super) fn nft(&self) -> &dyn NftDriver {
        self.nft.as_ref()
    }

    pub(super) fn record(
        &self,
        pods: Arc<BTreeMap<PodKey, PodPolicy>>,
        applied: Option<Arc<Desired>>,
    ) {
        *self.last.lock() = Last { pods, applied };
    }

    /// Every local pod's effective policy, or one pod's.
    pub fn explain(&self, pod: Option<&PodKey>) -> Option<serde_json::Value> {
        let (pods, applied) = {
            let last = self.last.lock();
            (last.pods.clone(), last.applied.clone())
        };
        let applied = applied.as_deref();
        match pod {
            Some(key) => Some(cairn_netpol::explain(pods.get(key)?, applied)),
            None => Some(serde_json::Value::Array(
                pods.values()
                    .map(|p| cairn_netpol::explain(p, applied))
                    .collect(),
            )),
        }
    }

    /// Drops per policy: (namespace, policy, value), and the guard's.
    fn drops(&self) -> (Vec<(String, String, CounterValue)>, CounterValue) {
        let listing = match self.nft.list_counters("ip", TABLE) {
            Ok(listing) => listing.unwrap_or_default(),
            Err(e) => {
                warn!(error = %e, "reading the network policy counters");
                String::new()
            }
        };
        let values = counters_of(&listing);
        let applied = self.last.lock().applied.clone();
        let per_policy = applied
            .iter()
            .flat_map(|a| a.counters.iter())
            .filter_map(|(name, policy)| {
                let value = *values.get(name)?;
                Some((policy.namespace.clone(), policy.name.clone(), value))
            })
            .collect();
        let guard = values.get(UNPROGRAMMED_COUNTER).copied();
        (per_policy, guard.unwrap_or_default())
    }
}

impl Collector for Observed {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let (per_policy, guard) = self.drops();
        for (name, help, pick) in [
            (
                "cairn_netpol_dropped_packets",
                "Packets dropped because a NetworkPolicy isolates their pod and allows them not",
                (|v: &CounterValue| v.packets) as fn(&CounterValue) -> u64,
            ),
            (
                "cairn_netpol_dropped_bytes",
                "Bytes dropped because a NetworkPolicy isolates their pod and allows them not",
                |v: &CounterValue| v.bytes,
            ),
        ] {
            let mut family = encoder.encode_descriptor(name, help, None, MetricType::Counter)?;
            for (namespace, policy, value) in &per_policy {
                let labels = [
                    ("namespace", namespace.as_str()),
                    ("policy", policy.as_str()),
                ];
                ConstCounter::new(pick(value)).encode(family.encode_family(&labels)?)?;
            }
        }
        let counter = ConstCounter::new(guard.packets);
        counter.encode(encoder.encode_descriptor(
            "cairn_netpol_unprogrammed_dropped_packets",
            "Packets dropped on their way to a local pod whose policy was not yet in force",
            None,
            counter.metric_type(),
        )?)
    }
}

/// `/network-policy` (every local pod) and `/network-policy/NAMESPACE/POD`.
pub fn routes(observed: Arc<Observed>) -> axum::Router {
    axum::Router::new()
        .route("/network-policy", axum::routing::get(all))
        .route("/network-policy/{namespace}/{pod}", axum::routing::get(one))
        .with_state(observed)
}

fn json(value: &serde_json::Value) -> Response {
    let content_type = [(axum::http::header::CONTENT_TYPE, "application/json")];
    (content_type, format!("{value:#}\n")).into_response()
}

async fn all(State(observed): State<Arc<Observed>>) -> Response {
    json(&observed.explain(None).unwrap_or_default())
}

async fn one(
    State(observed): State<Arc<Observed>>,
    Path((namespace, pod)): Path<(String, String)>,
) -> Response {
    let key = PodKey::new(&namespace, &pod);
    match observed.explain(Some(&key)) {
        Some(text) => json(&text),
        None => (
            StatusCode::NOT_FOUND,
            format!("pod {key} is not on this node's pod network\n"),
        )
            .into_response(),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use cairn_netfilter::RecordingNft;
    use cairn_netpol::PolicyKey;
    use prometheus_client::registry::Registry;

    use super::*;

    /// What `nft list table ip cairn-netpol` prints for two counters.
    const LISTING: &str = "table ip cairn-netpol {\n\tcounter unprogrammed {\n\t\tpackets 3 bytes 180\n\t}\n\n\tcounter drops_00000000000000aa {\n\t\tpackets 7 bytes 420\n\t}\n}\n";

    #[test]
    fn counters_are_read_from_the_listing_and_exposed_per_policy() {
        let values = counters_of(LISTING);
        assert_eq!(
            values["drops_00000000000000aa"],
            CounterValue {
                packets: 7,
                bytes: 420
            }
        );
        let nft = Arc::new(RecordingNft::default());
        nft.tables
            .lock()
            .insert("ip cairn-netpol".into(), LISTING.into());
        let observed = Observed::new(nft);
        let mut applied = Desired::default();
        applied.counters.insert(
            "drops_00000000000000aa".into(),
            PolicyKey {
                namespace: "x".into(),
                name: "deny".into(),
            },
        );
        observed.record(Arc::default(), Some(Arc::new(applied)));
        let mut registry = Registry::default();
        registry.register_collector(Box::new(observed.clone()));
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
        assert!(
            text.contains("cairn_netpol_dropped_packets_total{namespace=\"x\",policy=\"deny\"} 7"),
            "{text}"
        );
        assert!(
            text.contains("cairn_netpol_dropped_bytes_total{namespace=\"x\",policy=\"deny\"} 420")
        );
        assert!(text.contains("cairn_netpol_unprogrammed_dropped_packets_total 3"));
        assert_eq!(observed.explain(None), Some(serde_json::json!([])));
        assert_eq!(observed.explain(Some(&PodKey::new("x", "a"))), None);
    }
}
