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
    let pods = agent.stats.pass_targets();
    let facts = crate::stats::NodeFacts {
        name: agent.config.node_name.clone(),
        fs: crate::sysinfo::filesystem_bytes(&agent.config.root_dir),
    };
    crate::stats::summary(&facts, &pods, &agent.stats.collector())
}

/// The kubelet's own metrics (`/metrics`), the running counts taken at the scrape.
pub async fn metrics(agent: Arc<Agent>) -> Result<String, std::fmt::Error> {
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
    agent.metrics.set_running(ready, running);
    agent.metrics.encode_kubelet()
}

async fn probe_metrics(agent: Arc<Agent>) -> Result<String, std::fmt::Error> {
    agent.metrics.encode_probes()
}

/// A GET route answering `render(agent)` in OpenMetrics text (what prometheus-client writes).
fn openmetrics<F, Fut>(agent: &Arc<Agent>, render: F) -> axum::routing::MethodRouter
where
    F: Fn(Arc<Agent>) -> Fut + Clone + Send + Sync + 'static,
    Fut: std::future::Future<Output = Result<String, std::fmt::Error>> + Send + 'static,
{
    use axum::response::IntoResponse;
    let agent = agent.clone();
    get(move || {
        let (agent, render) = (agent.clone(), render.clone());
        async move {
            match render(agent).await {
                Ok(body) => {
                    let ct = crate::metrics::OPENMETRICS;
                    ([(axum::http::header::CONTENT_TYPE, ct)], body).into_response()
                }
                Err(e) => {
                    tracing::error!(error = %e, "encoding the agent's metrics");
                    axum::http::StatusCode::INTERNAL_SERVER_ERROR.into_response()
                }
            }
        }
    })
}

/// The Prometheus text format's content type.
const PROMETHEUS_TEXT: &str = "text/plain; version=0.0.4; charset=utf-8";

/// A GET route answering `render(agent)` in the Prometheus text format.
fn prometheus<F, Fut>(agent: &Arc<Agent>, render: F) -> axum::routing::MethodRouter
where
    F: Fn(Arc<Agent>) -> Fut + Clone + Send + Sync + 'static,
    Fut: std::future::Future<Output = String> + Send + 'static,
{
    let agent = agent.clone();
    get(move || {
        let (agent, render) = (agent.clone(), render.clone());
        async move {
            let body = render(agent).await;
            ([(axum::http::header::CONTENT_TYPE, PROMETHEUS_TEXT)], body)
        }
    })
}

pub fn router(agent: Arc<Agent>) -> Router {
    let pods_agent = agent.clone();
    let stats_agent = agent.clone();
    let ledger = agent.ledger.clone();
    let streaming = crate::streaming::routes(agent.clone());
    let metrics_routes = Router::new()
        .route("/metrics", openmetrics(&agent, metrics))
        .route("/metrics/probes", openmetrics(&agent, probe_metrics))
        .route(
            "/metrics/resource",
            prometheus(&agent, crate::stats::resource_text),
        )
        .route(
            "/metrics/cadvisor",
            prometheus(&agent, crate::stats::cadvisor_text),
        );
    let logs = Arc::new(AgentLogs { agent, ledger });
    cairn_podlogs::router(logs)
        .merge(streaming)
        .merge(metrics_routes)
        .route("/healthz", get(|| async { "ok" }))
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
