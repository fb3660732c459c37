//! Health-check node ports of `externalTrafficPolicy: Local` services (kube-proxy's
//! service health server): `GET` on `spec.healthCheckNodePort` answers 200 with the count
//! of local endpoints while this node has some, 503 when it has none, so an external load
//! balancer sends traffic only to nodes that can serve it without a second hop.

use std::collections::HashMap;
use std::sync::Arc;

use cairn_serviceproxy::ProxyState;
use parking_lot::Mutex;
use tracing::{info, warn};

#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Target {
    namespace: String,
    name: String,
    local_endpoints: usize,
}

/// One listener per health-check node port in use.
#[derive(Default)]
pub struct HealthChecks {
    servers: HashMap<u16, (Arc<Mutex<Target>>, tokio::task::JoinHandle<()>)>,
}

/// Port → what it reports, from the service ports that ask for one.
fn desired(state: &ProxyState) -> HashMap<u16, Target> {
    let mut out: HashMap<u16, Target> = HashMap::new();
    for (name, e) in state {
        let Some(port) = e
            .port
            .health_check_node_port
            .filter(|_| e.port.external_local)
        else {
            continue;
        };
        let t = out.entry(port).or_insert_with(|| Target {
            namespace: name.namespace.clone(),
            name: name.name.clone(),
            local_endpoints: 0,
        });
        t.local_endpoints = t.local_endpoints.max(e.local_count);
    }
    out
}

fn answer(t: &Target) -> axum::response::Response {
    use axum::http::{header, StatusCode};
    let status = if t.local_endpoints > 0 {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    let body = format!(
        r#"{{"service":{{"namespace":"{}","name":"{}"}},"localEndpoints":{},"serviceProxyHealthy":true}}"#,
        t.namespace, t.name, t.local_endpoints
    );
    axum::response::Response::builder()
        .status(status)
        .header(header::CONTENT_TYPE, "application/json")
        .header("X-Content-Type-Options", "nosniff")
        .header(
            "X-Load-Balancing-Endpoint-Weight",
            t.local_endpoints.to_string(),
        )
        .body(axum::body::Body::from(body))
        .unwrap_or_default()
}

impl HealthChecks {
    /// Opens, updates and closes listeners to match `state`.
    pub async fn sync(&mut self, state: &ProxyState) {
        let want = desired(state);
        self.servers.retain(|port, (_, task)| {
            let keep = want.contains_key(port);
            if !keep {
                task.abort();
                info!(port, "health-check node port closed");
            }
            keep
        });
        for (port, target) in want {
            if let Some((shared, _)) = self.servers.get(&port) {
                *shared.lock() = target;
                continue;
            }
            let listener = match tokio::net::TcpListener::bind(("0.0.0.0", port)).await {
                Ok(l) => l,
                Err(e) => {
                    warn!(port, service = %format!("{}/{}", target.namespace, target.name), error = %e, "cannot open the health-check node port");
                    continue;
                }
            };
            let shared = Arc::new(Mutex::new(target));
            let view = shared.clone();
            let app = axum::Router::new().fallback(move || {
                let t = view.lock().clone();
                async move { answer(&t) }
            });
            let task = tokio::spawn(async move {
                if let Err(e) = axum::serve(listener, app).await {
                    warn!(port, error = %e, "health-check server stopped");
                }
            });
            info!(port, "health-check node port open");
            self.servers.insert(port, (shared, task));
        }
    }
}
