//! Client certificate rotation, as the kubelet's certificate manager does it: the API
//! client presents whatever certificate [`ClientCerts`] holds (a rustls resolver), so a
//! renewal takes effect on the next connection without rebuilding the client or
//! dropping watches. When a third of the certificate's life is left the node asks for a
//! new one with its current credentials (a `selfnodeclient` request the server
//! approves), rewrites its kubeconfig and swaps the certificate in.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwap;
use cairn_pki::IssuedCert;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use rustls::client::ResolvesClientCert;
use rustls::sign::CertifiedKey;
use tower::Layer;
use tracing::{info, warn};

use super::closing::{ClosingConnector, Generation};
use super::csr::{request_certificate, CertificateRequest};

/// After a failed renewal, try again this soon.
const RETRY: Duration = Duration::from_secs(10);

#[derive(Debug, thiserror::Error)]
pub enum RotateError {
    #[error("reading the client certificate and key of {path}: {message}")]
    Credentials { path: PathBuf, message: String },
    #[error("the cluster CA of {path}: {message}")]
    Ca { path: PathBuf, message: String },
}

/// The client certificate the API client presents, swappable; swapping it ends the
/// connections made with the old one.
#[derive(Debug)]
pub struct ClientCerts {
    current: ArcSwap<CertifiedKey>,
    connections: Arc<Generation>,
}

fn certified(cert_pem: &str, key_pem: &str) -> Result<CertifiedKey, String> {
    cairn_pki::tls::certified_key(cert_pem, key_pem).map_err(|e| e.to_string())
}

impl ClientCerts {
    pub fn new(cert_pem: &str, key_pem: &str) -> Result<ClientCerts, String> {
        Ok(ClientCerts {
            current: ArcSwap::from_pointee(certified(cert_pem, key_pem)?),
            connections: Arc::default(),
        })
    }

    pub fn swap(&self, cert_pem: &str, key_pem: &str) -> Result<(), String> {
        self.current.store(Arc::new(certified(cert_pem, key_pem)?));
        self.connections.close_all();
        Ok(())
    }
}

impl ResolvesClientCert for ClientCerts {
    fn resolve(
        &self,
        _root_hint_subjects: &[&[u8]],
        _sigschemes: &[rustls::SignatureScheme],
    ) -> Option<Arc<CertifiedKey>> {
        Some(self.current.load_full())
    }

    fn has_certs(&self) -> bool {
        true
    }
}

/// A kube client for `server` that trusts `ca_pem` and presents `certs`.
pub fn client(
    server: &http::Uri,
    ca_pem: &str,
    certs: Arc<ClientCerts>,
) -> Result<kube::Client, String> {
    let roots = cairn_pki::tls::roots(ca_pem).map_err(|e| e.to_string())?;
    let generation = Arc::clone(&certs.connections);
    let mut tls = rustls::ClientConfig::builder()
        .with_root_certificates(roots)
        .with_client_cert_resolver(certs);
    // A resumed session keeps the client certificate of its first handshake.
    tls.resumption = rustls::client::Resumption::disabled();
    let mut http = HttpConnector::new();
    http.enforce_http(false);
    http.set_connect_timeout(Some(Duration::from_secs(30)));
    // HTTP/1.1 only (ALPN from the builder), as cairn-control serves.
    let https = hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config(tls)
        .https_only()
        .enable_http1()
        .wrap_connector(http);
    let https = ClosingConnector {
        inner: https,
        generation,
    };
    let hyper_client = hyper_util::client::legacy::Client::builder(TokioExecutor::new())
        .build::<_, kube::client::Body>(https);
    let service = kube::client::middleware::BaseUriLayer::new(server.clone()).layer(hyper_client);
    Ok(kube::Client::new(service, "default"))
}

/// When `cert` should be renewed: once a third of its life is left.
pub(crate) fn renewal_wait(cert_pem: &str) -> Duration {
    let Ok(info) = cairn_pki::CertInfo::from_pem(cert_pem) else {
        return Duration::ZERO;
    };
    let life = info.not_after - info.not_before;
    let due = info.not_before + life * 2 / 3;
    let now = cairn_pki::inspect::now();
    Duration::from_secs(u64::try_from(due - now).unwrap_or(0))
}

/// What the rotation loop keeps current.
pub struct Rotation {
    pub client: kube::Client,
    pub certs: Arc<ClientCerts>,
    pub kubeconfig: PathBuf,
    pub server: String,
    pub ca_pem: String,
    pub node: String,
    pub cert_pem: String,
}

/// Renews the client certificate before it expires, forever.
pub async fn run(mut r: Rotation) {
    loop {
        tokio::time::sleep(renewal_wait(&r.cert_pem)).await;
        match renew(&r).await {
            Ok(issued) => {
                info!(node = %r.node, "client certificate renewed");
                r.cert_pem = issued.cert_pem;
            }
            Err(e) => {
                warn!(node = %r.node, error = %e, "renewing the client certificate; retrying");
                tokio::time::sleep(RETRY).await;
            }
        }
    }
}

async fn renew(r: &Rotation) -> Result<IssuedCert, String> {
    let request = CertificateRequest::kubelet_client(&r.node);
    let issued = request_certificate(&r.client, &request, Duration::from_secs(120))
        .await
        .map_err(|e| e.to_string())?;
    let user = format!("system:node:{}", r.node);
    let text = cairn_pki::kubeconfig::render(&r.server, &r.ca_pem, &user, &issued);
    cairn_pki::files::write_private(&r.kubeconfig, text.as_bytes()).map_err(|e| e.to_string())?;
    r.certs.swap(&issued.cert_pem, &issued.key_pem)?;
    Ok(issued)
}
