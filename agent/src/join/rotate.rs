//! Client certificate rotation, as the kubelet's certificate manager does it: the API
//! client presents whatever certificate [`ClientCerts`] holds ([`cairn_kubeclient`]), so
//! a renewal takes effect on the next connection without rebuilding the client or
//! dropping watches. When a third of the certificate's life is left the node asks for a
//! new one with its current credentials (a `selfnodeclient` request the server
//! approves), rewrites its kubeconfig and swaps the certificate in. The same loop
//! renews the node's proxy's `system:kube-proxy` certificate with the node's
//! credentials; the proxy follows its kubeconfig file.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use cairn_kubeclient::ClientCerts;
use cairn_pki::IssuedCert;
use tracing::{info, warn};

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
    /// The client the request is made with (the node's).
    pub client: kube::Client,
    /// Where a renewal is swapped in, when the certificate is this process's own.
    pub certs: Option<Arc<ClientCerts>>,
    pub kubeconfig: PathBuf,
    pub server: String,
    pub ca_pem: String,
    /// The certificate's user, for the kubeconfig and the log.
    pub user: String,
    pub request: CertificateRequest,
    pub cert_pem: String,
}

/// Renews the client certificate before it expires, forever.
pub async fn run(mut r: Rotation) {
    loop {
        tokio::time::sleep(renewal_wait(&r.cert_pem)).await;
        match renew(&r).await {
            Ok(issued) => {
                info!(user = %r.user, "client certificate renewed");
                r.cert_pem = issued.cert_pem;
            }
            Err(e) => {
                warn!(user = %r.user, error = %e, "renewing the client certificate; retrying");
                tokio::time::sleep(RETRY).await;
            }
        }
    }
}

/// Asks for a certificate as `r` says, writes its kubeconfig and swaps it in.
pub(crate) async fn renew(r: &Rotation) -> Result<IssuedCert, String> {
    let issued = request_certificate(&r.client, &r.request, Duration::from_secs(120))
        .await
        .map_err(|e| e.to_string())?;
    let text = cairn_pki::kubeconfig::render(&r.server, &r.ca_pem, &r.user, &issued);
    cairn_pki::files::write_private(&r.kubeconfig, text.as_bytes()).map_err(|e| e.to_string())?;
    if let Some(certs) = &r.certs {
        certs.swap(&issued.cert_pem, &issued.key_pem)?;
    }
    Ok(issued)
}
