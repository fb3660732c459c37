//! The kubelet's streaming endpoints, served by the agent and reached through the control
//! server's `pods/exec`, `pods/attach` and `pods/portforward` (an upgrade-aware proxy):
//! `/exec/{ns}/{pod}/{container}`, `/attach/{ns}/{pod}/{container}`,
//! `/portForward/{ns}/{pod}`. Wires: websocket channel protocol v5/v4 (kubectl ≥ 1.30),
//! SPDY/3.1 (older kubectl, and every kubectl's fallback), and for port-forward SPDY
//! tunnelled through websocket (kubectl ≥ 1.31).

mod attach;
pub mod exec;
pub mod options;
mod portforward;
mod spdy;
pub mod websocket;
mod ws_portforward;

use std::path::PathBuf;
use std::sync::Arc;

use axum::extract::ws::WebSocketUpgrade;
use axum::extract::{FromRequestParts, Path, Request, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::any;
use axum::Router;
use cairn_runtime::ContainerState;
use tracing::{info_span, Instrument};

use crate::Agent;
use exec::{outcome_status, run_exec};
use options::{negotiate, ExecOptions, Wire};

/// Why a streaming request is refused before any upgrade, in the kubelet's words.
#[derive(Debug, thiserror::Error)]
pub enum StreamError {
    #[error("pod {0} not found")]
    PodNotFound(String),
    #[error("container not found ({0:?})")]
    ContainerNotFound(String),
    #[error("{0}")]
    BadRequest(String),
    #[error("{0}")]
    Runtime(String),
}

impl IntoResponse for StreamError {
    fn into_response(self) -> Response {
        let code = match &self {
            StreamError::PodNotFound(_) | StreamError::ContainerNotFound(_) => {
                StatusCode::NOT_FOUND
            }
            StreamError::BadRequest(_) => StatusCode::BAD_REQUEST,
            StreamError::Runtime(_) => StatusCode::INTERNAL_SERVER_ERROR,
        };
        (code, self.to_string()).into_response()
    }
}

pub fn routes(agent: Arc<Agent>) -> Router {
    Router::new()
        .route("/exec/{ns}/{pod}/{container}", any(exec_handler))
        .route("/attach/{ns}/{pod}/{container}", any(attach_handler))
        .route("/portForward/{ns}/{pod}", any(port_forward_handler))
        .with_state(agent)
}

/// The pod's UID when this agent runs it.
fn pod_uid(agent: &Agent, ns: &str, pod: &str) -> Result<String, StreamError> {
    agent
        .ledger
        .pods()
        .into_iter()
        .find(|(_, p)| {
            p.metadata.namespace.as_deref().unwrap_or("default") == ns
                && crate::pod_meta::api_name(p) == pod
        })
        .map(|(uid, _)| uid)
        .ok_or_else(|| StreamError::PodNotFound(format!("{ns}/{pod}")))
}

/// The running instance of `container` in the pod.
async fn running_container(
    agent: &Agent,
    ns: &str,
    pod: &str,
    container: &str,
) -> Result<String, StreamError> {
    let uid = pod_uid(agent, ns, pod)?;
    let containers = agent
        .runtime
        .list_containers_of(&uid)
        .await
        .map_err(|e| StreamError::Runtime(e.to_string()))?;
    containers
        .into_iter()
        .filter(|c| c.name == container && c.state == ContainerState::Running)
        .max_by_key(|c| c.attempt)
        .map(|c| c.id)
        .ok_or_else(|| StreamError::ContainerNotFound(container.to_string()))
}

/// The network namespace of the pod's ready sandbox.
async fn pod_netns(agent: &Agent, ns: &str, pod: &str) -> Result<PathBuf, StreamError> {
    let uid = pod_uid(agent, ns, pod)?;
    let sandboxes = agent
        .runtime
        .list_pod_sandboxes_of(&uid)
        .await
        .map_err(|e| StreamError::Runtime(e.to_string()))?;
    sandboxes
        .into_iter()
        .filter(|s| s.state == cairn_runtime::SandboxState::Ready)
        .max_by_key(|s| s.attempt)
        .and_then(|s| s.netns)
        .ok_or_else(|| StreamError::BadRequest(format!("pod {ns}/{pod} has no network namespace")))
}

async fn exec_handler(
    State(agent): State<Arc<Agent>>,
    Path((ns, pod, container)): Path<(String, String, String)>,
    req: Request,
) -> Response {
    let span = info_span!("exec", pod = %format!("{ns}/{pod}"), container = %container);
    async move {
        let options = match ExecOptions::parse(req.uri().query(), true) {
            Ok(o) => o,
            Err(e) => return StreamError::BadRequest(e.to_string()).into_response(),
        };
        let wire = match negotiate(req.headers(), false) {
            Ok(w) => w,
            Err(e) => return StreamError::BadRequest(e.to_string()).into_response(),
        };
        let id = match running_container(&agent, &ns, &pod, &container).await {
            Ok(id) => id,
            Err(e) => return e.into_response(),
        };
        let wire_options = options.clone();
        let session = move |io| async move {
            let outcome = run_exec(agent.runtime.as_ref(), &id, &options, io).await;
            outcome_status(&outcome, &options.command)
        };
        serve_session(req, wire, wire_options, session).await
    }
    .instrument(span)
    .await
}

/// Answers the upgrade on `wire` and runs `session` on the connection.
async fn serve_session<F, Fut>(
    req: Request,
    wire: Wire,
    options: ExecOptions,
    session: F,
) -> Response
where
    F: FnOnce(exec::ExecIo) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = serde_json::Value> + Send,
{
    match wire {
        Wire::WebSocket { protocol } => {
            let (mut parts, _body) = req.into_parts();
            let upgrade = match WebSocketUpgrade::from_request_parts(&mut parts, &()).await {
                Ok(u) => u,
                Err(rejection) => return rejection.into_response(),
            };
            let span = tracing::Span::current();
            upgrade
                .protocols([protocol.clone()])
                .on_upgrade(move |socket| {
                    async move { websocket::serve(socket, &protocol, &options, session).await }
                        .instrument(span)
                })
        }
        Wire::Spdy { protocol } => spdy::serve_exec(req, protocol, options, session),
        Wire::SpdyOverWebSocket { .. } | Wire::PortForwardChannels { .. } => {
            StreamError::BadRequest("port-forward protocol on an exec endpoint".into())
                .into_response()
        }
    }
}

async fn attach_handler(
    State(agent): State<Arc<Agent>>,
    Path((ns, pod, container)): Path<(String, String, String)>,
    req: Request,
) -> Response {
    let span = info_span!("attach", pod = %format!("{ns}/{pod}"), container = %container);
    async move {
        let options = match ExecOptions::parse(req.uri().query(), false) {
            Ok(o) => o,
            Err(e) => return StreamError::BadRequest(e.to_string()).into_response(),
        };
        let wire = match negotiate(req.headers(), false) {
            Ok(w) => w,
            Err(e) => return StreamError::BadRequest(e.to_string()).into_response(),
        };
        if let Err(e) = running_container(&agent, &ns, &pod, &container).await {
            return e.into_response();
        }
        let location = match attach::log_location(&agent, &ns, &pod, &container) {
            Ok(l) => l,
            Err(e) => return e.into_response(),
        };
        let session = move |io| attach::follow(location, io);
        serve_session(req, wire, options, session).await
    }
    .instrument(span)
    .await
}

async fn port_forward_handler(
    State(agent): State<Arc<Agent>>,
    Path((ns, pod)): Path<(String, String)>,
    req: Request,
) -> Response {
    let span = info_span!("port-forward", pod = %format!("{ns}/{pod}"));
    async move {
        let wire = match negotiate(req.headers(), true) {
            Ok(w) => w,
            Err(e) => return StreamError::BadRequest(e.to_string()).into_response(),
        };
        let netns = match pod_netns(&agent, &ns, &pod).await {
            Ok(n) => n,
            Err(e) => return e.into_response(),
        };
        let target = portforward::Target {
            pod: format!("{ns}/{pod}"),
            netns,
        };
        if let Wire::PortForwardChannels { protocol } = wire {
            return port_forward_channels(req, protocol, target).await;
        }
        spdy::serve_port_forward(req, wire, target).await
    }
    .instrument(span)
    .await
}

/// Port-forward on the websocket channel protocol (`?ports=` names the ports).
async fn port_forward_channels(
    req: Request,
    protocol: String,
    target: portforward::Target,
) -> Response {
    let ports = match options::parse_ports(req.uri().query()) {
        Ok(p) if !p.is_empty() => p,
        Ok(_) => {
            let message = "query parameter \"port\" is required".to_string();
            return StreamError::BadRequest(message).into_response();
        }
        Err(e) => return StreamError::BadRequest(e.to_string()).into_response(),
    };
    let (mut parts, _body) = req.into_parts();
    let upgrade = match WebSocketUpgrade::from_request_parts(&mut parts, &()).await {
        Ok(u) => u,
        Err(rejection) => return rejection.into_response(),
    };
    let upgrade = if protocol.is_empty() {
        upgrade
    } else {
        upgrade.protocols([protocol.clone()])
    };
    let codec = websocket::Codec::of(&protocol);
    let span = tracing::Span::current();
    upgrade.on_upgrade(move |socket| {
        ws_portforward::serve(socket, codec, ports, target).instrument(span)
    })
}
