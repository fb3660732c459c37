//! The agent's HTTP server (kubelet port 10250, plain HTTP): `/healthz`, `/pods`,
//! `/stats/summary`, `/containerLogs/{ns}/{pod}/{container}` (served by `cairn_podlogs`)
//! and the streaming endpoints (`crate::streaming`).

use std::sync::Arc;

use axum::routing::get;
use axum::Router;

use crate::pod_logs::AgentLogs;
use crate::Agent;

/// The kubelet's Summary API shape (`/stats/summary`), from cgroup files (cAdvisor-style).
pub async fn summary(agent: &Agent) -> serde_json::Value {
    use serde_json::json;
    let now = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    let stat = |s: &cairn_runtime::CgroupStats| {
        json!({
            "cpu": {"time": now, "usageCoreNanoSeconds": s.cpu_usage_nanos},
            "memory": {"time": now, "usageBytes": s.memory_usage_bytes, "workingSetBytes": s.memory_working_set_bytes, "rssBytes": s.memory_rss_bytes},
        })
    };
    let containers = agent.runtime.list_containers().await.unwrap_or_default();
    let mut pods = Vec::new();
    for pod in agent.ledger.pods().values() {
        let uid = pod.metadata.uid.clone().unwrap_or_default();
        let s = agent.cgroups.stats(&crate::pod_meta::cgroup_parent(
            &agent.config.cgroup_root,
            pod,
        ));
        let mut entry = stat(&s);
        entry["podRef"] =
            json!({"name": pod.metadata.name, "namespace": pod.metadata.namespace, "uid": uid});
        entry["process_stats"] = json!({"process_count": s.pids});
        entry["containers"] = json!(containers
            .iter()
            .filter(|c| c.pod_uid == uid && c.state == cairn_runtime::ContainerState::Running)
            .map(|c| {
                let mut e = stat(&agent.cgroups.stats(&c.cgroup));
                e["name"] = json!(c.name);
                e["startTime"] = json!(c.started_at.map(|t| t.to_rfc3339()));
                e
            })
            .collect::<Vec<_>>());
        pods.push(entry);
    }
    let mem = agent.host.meminfo().unwrap_or_default();
    let (fs_total, fs_avail) =
        crate::sysinfo::filesystem_bytes(&agent.config.root_dir).unwrap_or((0, 0));
    json!({
        "node": {
            "nodeName": agent.config.node_name,
            "memory": {"time": now, "availableBytes": mem.available_bytes, "usageBytes": mem.total_bytes.saturating_sub(mem.available_bytes), "workingSetBytes": mem.total_bytes.saturating_sub(mem.available_bytes)},
            "fs": {"time": now, "capacityBytes": fs_total, "availableBytes": fs_avail, "usedBytes": fs_total.saturating_sub(fs_avail)},
            "rlimit": {"time": now, "maxpid": agent.host.pid_max(), "curproc": agent.host.process_count()},
        },
        "pods": pods,
    })
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
