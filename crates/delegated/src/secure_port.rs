//! The secure port of a standalone component (kube-scheduler's :10259,
//! kube-controller-manager's :10257): HTTPS with a self-signed certificate made at start
//! (what upstream does without `--tls-cert-file`), `/healthz`, `/livez` and `/readyz` for
//! anyone (upstream's always-allowed paths), and `/metrics` through the [`Gate`] as `get`
//! on that path (upstream's `system:monitoring` role grants it). Client certificates are
//! checked against the client CA the API server publishes; anonymous requests get 401
//! where upstream would review `system:anonymous` (who may not read `/metrics` either).

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use cairn_auth::x509::ClientCertAuthenticator;
use cairn_pki::tls::SwappableCert;
use cairn_pki::Authority;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use k8s_openapi::api::core::v1::ConfigMap;
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::server::TlsStream;
use tokio_rustls::TlsAcceptor;
use tracing::{debug, info};

use crate::access::Access;
use crate::gate::Gate;
use crate::review::ApiReviewer;
use crate::tls_listener;

/// Where the API server publishes the CA of the client certificates it accepts.
pub const CLIENT_CA_CONFIGMAP: &str = "extension-apiserver-authentication";
pub const CLIENT_CA_KEY: &str = "client-ca-file";
/// The self-signed certificate's lifetime; it is made anew at every start.
const SELF_SIGNED_LIFETIME: Duration = Duration::from_secs(365 * 24 * 3600);

#[derive(Debug, thiserror::Error)]
pub enum PortError {
    #[error("reading the client CA from kube-system/{CLIENT_CA_CONFIGMAP}: {0}")]
    ClientCa(String),
    #[error("the self-signed serving certificate of {component}: {source}")]
    Certificate {
        component: String,
        #[source]
        source: cairn_pki::PkiError,
    },
    #[error("the port's TLS configuration: {0}")]
    Tls(#[from] cairn_pki::tls::TlsError),
}

/// The CA of the client certificates the API server accepts, as it publishes it.
pub async fn published_client_ca(client: &kube::Client) -> Result<String, PortError> {
    let cms: kube::Api<ConfigMap> = kube::Api::namespaced(client.clone(), "kube-system");
    let cm = cms
        .get(CLIENT_CA_CONFIGMAP)
        .await
        .map_err(|e| PortError::ClientCa(e.to_string()))?;
    cm.data
        .and_then(|mut d| d.remove(CLIENT_CA_KEY))
        .ok_or_else(|| PortError::ClientCa(format!("no {CLIENT_CA_KEY}")))
}

/// What a component serves on its port.
pub struct SecurePort {
    /// `kube-scheduler`, `kube-controller-manager`: the certificate's name.
    pub component: &'static str,
    /// The component's credentials: the reviews are made with them.
    pub client: kube::Client,
    /// The Prometheus text of `/metrics`.
    pub metrics: Arc<dyn Fn() -> String + Send + Sync>,
}

struct Served {
    port: SecurePort,
    gate: Gate,
}

/// Makes the certificate and the gate, then serves `listener` until the task is dropped.
pub async fn start(listener: TcpListener, port: SecurePort) -> Result<(), PortError> {
    let ca = published_client_ca(&port.client).await?;
    let chain_check = cairn_pki::tls::client_chain_verifier(&ca)?;
    let cert = self_signed(port.component)?;
    let tls = cairn_pki::tls::server_config(cert, Arc::clone(&chain_check))?;
    let gate = Gate::new(
        ClientCertAuthenticator::new(chain_check),
        Arc::new(ApiReviewer(port.client.clone())),
    );
    if let Ok(addr) = listener.local_addr() {
        info!(%addr, component = port.component, "serving /healthz and /metrics over HTTPS");
    }
    let served = Arc::new(Served { port, gate });
    tokio::spawn(tls_listener::accept_tls(
        listener,
        TlsAcceptor::from(tls),
        "secure port",
        move |stream| connection(stream, Arc::clone(&served)),
    ));
    Ok(())
}

fn self_signed(component: &str) -> Result<Arc<SwappableCert>, PortError> {
    let err = |source| PortError::Certificate {
        component: component.to_string(),
        source,
    };
    let now = cairn_pki::inspect::now();
    let ca =
        Authority::generate(&format!("{component}-ca@{now}"), SELF_SIGNED_LIFETIME).map_err(err)?;
    let names = ["localhost".to_string(), "127.0.0.1".to_string()];
    let issued = ca
        .issue_serving(&format!("{component}@{now}"), &names, SELF_SIGNED_LIFETIME)
        .map_err(err)?;
    let key = cairn_pki::tls::certified_key(&issued.cert_pem, &issued.key_pem)?;
    Ok(SwappableCert::new(key))
}

async fn connection(stream: TlsStream<TcpStream>, served: Arc<Served>) {
    let peer = Arc::new(
        served
            .gate
            .x509
            .peer(stream.get_ref().1.peer_certificates()),
    );
    let service = hyper::service::service_fn(move |req: http::Request<Incoming>| {
        let (served, peer) = (Arc::clone(&served), Arc::clone(&peer));
        async move { Ok::<_, Infallible>(answer(&served, &peer, &req).await) }
    });
    let result = tls_listener::http1()
        .serve_connection(TokioIo::new(stream), service)
        .await;
    if let Err(e) = result {
        debug!(error = %e, "secure port connection ended");
    }
}

async fn answer<B>(
    served: &Served,
    peer: &cairn_auth::x509::PeerCert,
    req: &http::Request<B>,
) -> http::Response<Full<Bytes>> {
    let path = req.uri().path();
    match path {
        "/healthz" | "/livez" | "/readyz" => text(200, "ok".into(), "text/plain; charset=utf-8"),
        "/metrics" => {
            let access = Access::NonResource {
                verb: crate::access::verb(req.method()),
                path: path.to_string(),
            };
            match served.gate.admit(&access, req.headers(), peer).await {
                Ok(_) => text(
                    200,
                    (served.port.metrics)(),
                    "text/plain; version=0.0.4; charset=utf-8",
                ),
                Err(refusal) => text(
                    refusal.status(),
                    format!("{}\n", refusal.message()),
                    "text/plain; charset=utf-8",
                ),
            }
        }
        _ => text(
            404,
            "404 page not found\n".into(),
            "text/plain; charset=utf-8",
        ),
    }
}

fn text(status: u16, body: String, content_type: &'static str) -> http::Response<Full<Bytes>> {
    let mut response = http::Response::new(Full::new(Bytes::from(body)));
    *response.status_mut() =
        http::StatusCode::from_u16(status).unwrap_or(http::StatusCode::INTERNAL_SERVER_ERROR);
    response.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static(content_type),
    );
    response
}
