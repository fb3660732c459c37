//! The agent's HTTP server (kubelet port 10250, plain HTTP): `/healthz`, `/pods`,
//! `/stats/summary`, `/containerLogs/{ns}/{pod}/{container}` (served by `cairn_podlogs`)
//! and the streaming endpoints (`crate::streaming`).

use std::sync::Arc;

use axum::routing::get;
use axum::Router;

use crate::pod_logs::AgentLogs;
use crate::Agent;

/// The kubelet's Summary API (`/stats/summary`) from the last housekeeping passes.
pub async fn summary(agent: &Agent) -> serde_json::Value {
    let pods = crate::stats::targets(agent).await;
    let facts = crate::stats::NodeFacts {
        name: agent.config.node_name.clone(),
        fs: crate::sysinfo::filesystem_bytes(&agent.config.root_dir),
    };
    crate::stats::summary(&facts, &pods, &agent.stats.collector())
}

/// A few of the kubelet's own metrics (`/metrics`), in the Prometheus text format.
pub async fn metrics(agent: &Agent) -> String {
    let containers = agent.runtime.list_containers().await.unwrap_or_default();
    let running = containers
        .iter()
        .filter(|c| c.state == cairn_runtime::ContainerState::Running)
        .count();
    let sandboxes = agent.runtime.list_pod_sandboxes().await.unwrap_or_default();
    let ready = sandboxes
        .iter()
        .filter(|s| s.state == cairn_runtime::SandboxState::Ready)
        .count();
    format!(
        "# HELP kubelet_node_name The node's name. The count is always 1.\n\
         # TYPE kubelet_node_name gauge\n\
         kubelet_node_name{{node=\"{node}\"}} 1\n\
         # HELP kubelet_running_pods Number of pods that have a running pod sandbox\n\
         # TYPE kubelet_running_pods gauge\n\
         kubelet_running_pods {ready}\n\
         # HELP kubelet_running_containers Number of containers currently running\n\
         # TYPE kubelet_running_containers gauge\n\
         kubelet_running_containers{{container_state=\"running\"}} {running}\n",
        node = agent.config.node_name,
    )
}

pub fn router(agent: Arc<Agent>) -> Router {
    let pods_agent = agent.clone();
    let metrics_agent = agent.clone();
    let stats_agent = agent.clone();
    let ledger = agent.ledger.clone();
    let streaming = crate::streaming::routes(agent.clone());
    let logs = Arc::new(AgentLogs { agent, ledger });
    cairn_podlogs::router(logs)
        .merge(streaming)
        .route("/healthz", get(|| async { "ok" }))
        .route(
            "/metrics",
            get(move || {
                let agent = metrics_agent.clone();
                async move {
                    let body = metrics(&agent).await;
                    let ct = "text/plain; version=0.0.4; charset=utf-8";
                    ([(axum::http::header::CONTENT_TYPE, ct)], body)
                }
            }),
        )
        .route(
            "/stats/summary",
            get(move || {
                let agent = stats_agent.clone();
                async move {
                    let body = summary(&agent).await;
                    ([(axum::http::header::CONTENT_TYPE, "application/json")], body.to_string())
                }
            }),
        )
        .route(
            "/pods",
            get(move || {
                let agent = pods_agent.clone();
                async move {
                    let items: Vec<serde_json::Value> = agent
                        .ledger
                        .pods()
                        .values()
                        .filter_map(|p| serde_json::to_value(p).ok())
                        .collect();
                    let body = serde_json::json!({"kind": "PodList", "apiVersion": "v1", "metadata": {}, "items": items});
                    ([(axum::http::header::CONTENT_TYPE, "application/json")], body.to_string())
                }
            }),
        )
}
