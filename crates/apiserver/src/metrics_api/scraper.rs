//! Scrapes every Ready node's `/metrics/resource` through the API server's agent client
//! (its `kube-apiserver-kubelet-client` certificate), all nodes at once, each bounded by
//! a timeout. A node that does not answer is dropped from the store until it does.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use cairn_resourcemetrics::{decode, NodeScrape};
use serde_json::Value;
use tracing::debug;

use crate::podlog::{join_host_port, kubelet_endpoint};
use crate::state::ApiState;

/// metrics-server's `--kubelet-request-timeout` default.
const SCRAPE_TIMEOUT: Duration = Duration::from_secs(10);

pub async fn scrape_loop(state: Arc<ApiState>, resolution: Duration) {
    let mut tick = tokio::time::interval(resolution);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        scrape_once(&state).await;
    }
}

/// One round over the Ready nodes.
pub async fn scrape_once(state: &ApiState) {
    let nodes = ready_nodes(state);
    let scrapes = futures::future::join_all(nodes.iter().map(|(name, node)| async move {
        match scrape_node(state, node).await {
            Ok(scrape) => Some((name.clone(), scrape)),
            Err(message) => {
                debug!(node = %name, %message, "scraping resource metrics");
                None
            }
        }
    }))
    .await;
    let mut store = state.resource_metrics.store();
    let mut answered = HashSet::new();
    for (name, scrape) in scrapes.into_iter().flatten() {
        store.store(&name, scrape);
        answered.insert(name);
    }
    store.retain(&answered);
}

fn ready_nodes(state: &ApiState) -> Vec<(String, Value)> {
    let Some(nodes) = state.find_resource("", "v1", "nodes") else {
        return Vec::new();
    };
    let (objects, _) = state.cache.list(&nodes.list_prefix(None));
    objects
        .iter()
        .filter_map(|o| serde_json::from_slice::<Value>(&o.bytes).ok())
        .filter(is_ready)
        .filter_map(|n| Some((n.pointer("/metadata/name")?.as_str()?.to_string(), n)))
        .collect()
}

fn is_ready(node: &Value) -> bool {
    let conditions = node.pointer("/status/conditions").and_then(Value::as_array);
    conditions.is_some_and(|cs| {
        cs.iter()
            .any(|c| c["type"] == "Ready" && c["status"] == "True")
    })
}

async fn scrape_node(state: &ApiState, node: &Value) -> Result<NodeScrape, String> {
    let (host, port) = kubelet_endpoint(node).map_err(|s| s.message)?;
    let url = format!("https://{}/metrics/resource", join_host_port(&host, port));
    let request = state.agents.http().get(&url).timeout(SCRAPE_TIMEOUT).send();
    let response = request.await.map_err(|e| format!("{url}: {e}"))?;
    if !response.status().is_success() {
        return Err(format!("{url}: {}", response.status()));
    }
    let text = response.text().await.map_err(|e| format!("{url}: {e}"))?;
    decode(&text).map_err(|e| format!("{url}: {e}"))
}
