//! The port's serving certificate, as the kubelet's `serverTLSBootstrap` gets it: once
//! the Node reports its addresses, a `kubernetes.io/kubelet-serving` request for the
//! node's name and addresses (which the API server approves only for the node's own),
//! kept in `<root-dir>/pki/` and renewed when a third of its life is left. Until the
//! first one is issued every handshake fails, as the kubelet's does.

use std::net::IpAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use cairn_pki::tls::SwappableCert;
use cairn_pki::{CertInfo, IssuedCert};
use k8s_openapi::api::core::v1::Node;
use kube::Api;
use tracing::{info, warn};

use crate::join::rotate::renewal_wait;
use crate::join::{request_certificate, CertificateRequest};

/// After a failure, try again this soon.
const RETRY: Duration = Duration::from_secs(5);
/// How long one wait for the Node's addresses, or for an issued certificate, lasts.
const WAIT: Duration = Duration::from_secs(120);

#[derive(Debug, thiserror::Error)]
pub enum ServingCertError {
    #[error("waiting for node {node} to report its addresses: {message}")]
    Addresses { node: String, message: String },
    #[error("asking for the serving certificate of node {node}: {message}")]
    Request { node: String, message: String },
    #[error("storing the serving certificate in {path}: {message}")]
    Store { path: PathBuf, message: String },
}

pub struct ServingCert {
    pub client: kube::Client,
    pub node: String,
    pub node_ip: Option<String>,
    /// `<root-dir>/pki`.
    pub dir: PathBuf,
    pub cert: Arc<SwappableCert>,
}

impl ServingCert {
    fn names(&self) -> (Vec<String>, Vec<IpAddr>) {
        let ips = self
            .node_ip
            .iter()
            .filter_map(|ip| ip.parse().ok())
            .collect();
        (vec![self.node.clone()], ips)
    }

    fn paths(&self) -> (PathBuf, PathBuf) {
        (
            self.dir.join("kubelet-server.crt"),
            self.dir.join("kubelet-server.key"),
        )
    }

    /// The stored certificate when it names this node's names and is not due.
    fn stored(&self) -> Option<IssuedCert> {
        let (cert, key) = self.paths();
        let issued = IssuedCert {
            cert_pem: std::fs::read_to_string(cert).ok()?,
            key_pem: std::fs::read_to_string(key).ok()?,
        };
        let info = CertInfo::from_pem(&issued.cert_pem).ok()?;
        let (dns, ips) = self.names();
        let wanted: Vec<String> = dns
            .into_iter()
            .chain(ips.iter().map(IpAddr::to_string))
            .collect();
        (!info.renewal_due(cairn_pki::inspect::now()) && info.names_cover(&wanted))
            .then_some(issued)
    }

    /// Waits until the Node's status lists every address the request will name.
    async fn addresses_published(&self) -> Result<(), ServingCertError> {
        let (_, ips) = self.names();
        let wanted: Vec<String> = ips.iter().map(IpAddr::to_string).collect();
        let published = move |node: Option<&Node>| {
            let addresses = node
                .and_then(|n| n.status.as_ref())
                .and_then(|s| s.addresses.as_ref());
            addresses.is_some_and(|a| wanted.iter().all(|w| a.iter().any(|x| &x.address == w)))
        };
        let nodes: Api<Node> = Api::all(self.client.clone());
        let wait = kube::runtime::wait::await_condition(nodes, &self.node, published);
        let failed = |message: String| ServingCertError::Addresses {
            node: self.node.clone(),
            message,
        };
        tokio::time::timeout(WAIT, wait)
            .await
            .map_err(|_| failed(format!("not within {WAIT:?}")))?
            .map_err(|e| failed(e.to_string()))?;
        Ok(())
    }

    async fn obtain(&self) -> Result<IssuedCert, ServingCertError> {
        self.addresses_published().await?;
        let (dns, ips) = self.names();
        let request = CertificateRequest::kubelet_serving(&self.node, dns, ips);
        let issued = request_certificate(&self.client, &request, WAIT)
            .await
            .map_err(|e| ServingCertError::Request {
                node: self.node.clone(),
                message: e.to_string(),
            })?;
        let (cert, key) = self.paths();
        let store = |path: &PathBuf, e: cairn_pki::PkiError| ServingCertError::Store {
            path: path.clone(),
            message: e.to_string(),
        };
        std::fs::create_dir_all(&self.dir).map_err(|e| ServingCertError::Store {
            path: self.dir.clone(),
            message: e.to_string(),
        })?;
        cairn_pki::files::write_private(&key, issued.key_pem.as_bytes())
            .map_err(|e| store(&key, e))?;
        cairn_pki::files::write_public(&cert, issued.cert_pem.as_bytes())
            .map_err(|e| store(&cert, e))?;
        info!(node = %self.node, "serving certificate issued");
        Ok(issued)
    }

    fn serve(&self, issued: &IssuedCert) -> bool {
        match cairn_pki::tls::certified_key(&issued.cert_pem, &issued.key_pem) {
            Ok(key) => {
                self.cert.swap(key);
                true
            }
            Err(e) => {
                warn!(node = %self.node, error = %e, "loading the serving certificate");
                false
            }
        }
    }
}

/// Keeps the port's certificate current, forever.
pub async fn run(s: ServingCert) {
    loop {
        let issued = match s.stored() {
            Some(stored) => stored,
            None => match s.obtain().await {
                Ok(issued) => issued,
                Err(e) => {
                    warn!(error = %e, "serving certificate; retrying");
                    tokio::time::sleep(RETRY).await;
                    continue;
                }
            },
        };
        if !s.serve(&issued) {
            // A file that does not load is asked for again.
            let _ = std::fs::remove_file(s.paths().0);
            tokio::time::sleep(RETRY).await;
            continue;
        }
        // At least a second: a clock that disagrees with the certificate must not spin.
        tokio::time::sleep(renewal_wait(&issued.cert_pem).max(Duration::from_secs(1))).await;
    }
}
