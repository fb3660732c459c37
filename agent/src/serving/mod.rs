//! The agent's HTTPS port (the kubelet's :10250): TLS with a certificate the cluster
//! signed for this node ([`cert`]), a handshake deadline and a header read deadline
//! against slow clients, then every request through the [`Gate`] (client certificate
//! or bearer token, SubjectAccessReview) before the router sees it. The client CA the
//! gate checks certificates against is the one the API server publishes in
//! `kube-system/extension-apiserver-authentication`. Liveness is a separate plain-HTTP
//! `/healthz` on loopback, as the kubelet's `--healthz-port`.

pub mod cert;

use std::convert::Infallible;
use std::sync::Arc;

use axum::Router;
use cairn_auth::x509::{ClientCertAuthenticator, PeerCert};
use cairn_delegated::tls_listener;
use cairn_pki::tls::SwappableCert;
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::server::TlsStream;
use tokio_rustls::TlsAcceptor;
use tower::ServiceExt;
use tracing::{debug, warn};

use crate::server_auth::{request_attributes, ApiReviewer, Gate};
use crate::Agent;

/// The gate and the node whose subresources the agent's requests ask for.
struct NodeGate {
    gate: Gate,
    node: String,
}

#[derive(Debug, thiserror::Error)]
pub enum PortError {
    #[error("{0}")]
    ClientCa(String),
    #[error("reading the client CA from {}: {message}", path.display())]
    ClientCaFile {
        path: std::path::PathBuf,
        message: String,
    },
    #[error("the port's TLS configuration: {0}")]
    Tls(#[from] cairn_pki::tls::TlsError),
}

/// The client CA from `--client-ca-file`, else the one the API server publishes.
async fn client_ca(agent: &Agent) -> Result<String, PortError> {
    if let Some(path) = &agent.config.client_ca_file {
        return std::fs::read_to_string(path).map_err(|e| PortError::ClientCaFile {
            path: path.clone(),
            message: e.to_string(),
        });
    }
    cairn_delegated::published_client_ca(&agent.client)
        .await
        .map_err(|e| PortError::ClientCa(e.to_string()))
}

/// Starts the port on `listener` and the task that gets and renews its certificate.
pub async fn start(agent: &Arc<Agent>, listener: TcpListener) -> Result<(), PortError> {
    let ca = client_ca(agent).await?;
    let chain_check = cairn_pki::tls::client_chain_verifier(&ca)?;
    let cert = SwappableCert::empty();
    let tls = cairn_pki::tls::server_config(Arc::clone(&cert), Arc::clone(&chain_check))?;
    let gate = NodeGate {
        gate: Gate::new(
            ClientCertAuthenticator::new(chain_check),
            Arc::new(ApiReviewer(agent.client.clone())),
        ),
        node: agent.config.node_name.clone(),
    };
    tokio::spawn(cert::run(cert::ServingCert {
        client: agent.client.clone(),
        node: agent.config.node_name.clone(),
        node_ip: agent.node_ip.clone(),
        dir: agent.config.root_dir.join("pki"),
        cert,
    }));
    let router = crate::server::router(Arc::clone(agent));
    let gate = Arc::new(gate);
    tokio::spawn(tls_listener::accept_tls(
        listener,
        TlsAcceptor::from(tls),
        "the agent's port",
        move |stream| connection(stream, Arc::clone(&gate), router.clone()),
    ));
    Ok(())
}

async fn connection(stream: TlsStream<TcpStream>, gate: Arc<NodeGate>, router: Router) {
    let peer = Arc::new(gate.gate.x509.peer(stream.get_ref().1.peer_certificates()));
    let service = hyper::service::service_fn(move |req: http::Request<Incoming>| {
        let gate = Arc::clone(&gate);
        let peer = Arc::clone(&peer);
        let router = router.clone();
        async move {
            let req = req.map(axum::body::Body::new);
            Ok::<_, Infallible>(guarded(&gate, &peer, router, req).await)
        }
    });
    let served = tls_listener::http1()
        .serve_connection(TokioIo::new(stream), service)
        .with_upgrades()
        .await;
    if let Err(e) = served {
        debug!(error = %e, "agent connection ended");
    }
}

async fn guarded(
    gate: &NodeGate,
    peer: &PeerCert,
    router: Router,
    req: axum::extract::Request,
) -> axum::response::Response {
    let access = request_attributes(req.method(), req.uri().path(), &gate.node).access();
    let admitted = gate.gate.admit(&access, req.headers(), peer).await;
    match admitted {
        Ok(_) => match router.oneshot(req).await {
            Ok(response) => response,
            Err(never) => match never {},
        },
        Err(refusal) => {
            let mut response = axum::response::Response::new(axum::body::Body::from(format!(
                "{}\n",
                refusal.message()
            )));
            *response.status_mut() = http::StatusCode::from_u16(refusal.status())
                .unwrap_or(http::StatusCode::INTERNAL_SERVER_ERROR);
            response.headers_mut().insert(
                http::header::CONTENT_TYPE,
                http::HeaderValue::from_static("text/plain; charset=utf-8"),
            );
            response
        }
    }
}

/// The plain-HTTP liveness endpoint: `/healthz` answers `ok` and nothing else is served.
pub async fn serve_healthz(listener: TcpListener) {
    let router = Router::new().route("/healthz", axum::routing::get(|| async { "ok" }));
    if let Err(e) = axum::serve(listener, router).await {
        warn!(error = %e, "the agent's healthz server stopped");
    }
}
