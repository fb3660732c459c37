//! Joining a cluster with one token (`--server`, `--token K10<ca hash>::<id>.<secret>`),
//! as a kubelet's TLS bootstrap does:
//!
//! 1. fetch the cluster CA from `/cacerts` without trusting the server yet, and refuse it
//!    unless its sha256 is the one the token pins ([`cairn_pki::join`]);
//! 2. over TLS verified by that CA, authenticate with the bootstrap token and ask for a
//!    client certificate with a CertificateSigningRequest
//!    (`kubernetes.io/kube-apiserver-client-kubelet`, `system:node:<name>` in
//!    `system:nodes`), which the server's approver and signer answer;
//! 3. write a kubeconfig (`0600`) with the certificate, used from then on.
//!
//! The node then asks, with its new credentials, for its proxy's client certificate
//! (`system:kube-proxy`, [`proxy_credential`]): the proxy reads every Pod, Namespace and
//! NetworkPolicy to enforce policy, which the Node authorizer refuses the node itself.
//!
//! A node whose kubeconfig still holds a valid certificate does not join again; one
//! re-created under the same name joins as a new node would (nothing of the old one
//! is needed).

mod csr;
pub mod rotate;

use std::path::{Path, PathBuf};
use std::time::Duration;

use cairn_pki::join::{JoinToken, JoinTokenError};
use tracing::info;

pub use csr::{request_certificate, CertificateRequest, KUBE_PROXY_USER};

/// How long a joining node waits for its certificate before it gives up.
const ISSUE_TIMEOUT: Duration = Duration::from_secs(300);

#[derive(Debug, thiserror::Error)]
pub enum JoinError {
    #[error("{0}")]
    Token(#[from] JoinTokenError),
    #[error("fetching the cluster CA from {url}: {source}")]
    FetchCa {
        url: String,
        #[source]
        source: kube::Error,
    },
    #[error("connecting to {server}: {source}")]
    Client {
        server: String,
        #[source]
        source: kube::Error,
    },
    #[error("kubeconfig for {server}: {message}")]
    Kubeconfig { server: String, message: String },
    #[error(
        "{server} refused the join token (unknown, expired or a wrong secret: 401 Unauthorized)"
    )]
    TokenRefused { server: String },
    #[error("joining {server} with the token: {source}")]
    Request {
        server: String,
        #[source]
        source: csr::CsrError,
    },
    #[error("asking {server} for the proxy's client certificate: {message}")]
    ProxyCredential { server: String, message: String },
    #[error("writing {path}: {source}")]
    Write {
        path: PathBuf,
        #[source]
        source: cairn_pki::PkiError,
    },
}

/// Whether `kubeconfig` holds a client certificate that is still valid.
pub fn has_valid_certificate(kubeconfig: &Path) -> bool {
    let Ok(text) = std::fs::read_to_string(kubeconfig) else {
        return false;
    };
    cairn_pki::kubeconfig_client_cert(&text).is_some_and(|c| !c.expired(cairn_pki::inspect::now()))
}

/// A client from a kubeconfig document.
pub async fn client_from_text(server: &str, text: &str) -> Result<kube::Client, JoinError> {
    let bad = |message: String| JoinError::Kubeconfig {
        server: server.to_string(),
        message,
    };
    let kc = kube::config::Kubeconfig::from_yaml(text).map_err(|e| bad(e.to_string()))?;
    let config = kube::Config::from_custom_kubeconfig(kc, &Default::default())
        .await
        .map_err(|e| bad(e.to_string()))?;
    kube::Client::try_from(config).map_err(|source| JoinError::Client {
        server: server.to_string(),
        source,
    })
}

/// The cluster CA, fetched without trust and checked against the token's pin.
async fn pinned_ca(server: &str, token: &JoinToken) -> Result<String, JoinError> {
    let insecure = format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: {server}\n    insecure-skip-tls-verify: true\ncontexts:\n- name: c\n  context: {{cluster: c, user: u}}\ncurrent-context: c\nusers:\n- name: u\n  user: {{}}\n"
    );
    let client = client_from_text(server, &insecure).await?;
    let url = format!("{server}/cacerts");
    let request = http::Request::get("/cacerts")
        .body(Vec::new())
        .map_err(|e| JoinError::Kubeconfig {
            server: server.to_string(),
            message: e.to_string(),
        })?;
    let pem = client
        .request_text(request)
        .await
        .map_err(|source| JoinError::FetchCa { url, source })?;
    token.verify_ca(pem.as_bytes())?;
    Ok(pem)
}

/// Joins `server` as `node` with `token` and writes the node's kubeconfig.
pub async fn join(
    server: &str,
    token: &str,
    node: &str,
    kubeconfig: &Path,
) -> Result<(), JoinError> {
    let token = JoinToken::parse(token)?;
    let ca = pinned_ca(server, &token).await?;
    let bootstrap_user = format!("system:bootstrap:{}", token.id);
    let bootstrap =
        cairn_pki::kubeconfig::render_token(server, &ca, &bootstrap_user, &token.bootstrap_token());
    let client = client_from_text(server, &bootstrap).await?;
    let request = CertificateRequest::kubelet_client(node);
    let issued = request_certificate(&client, &request, ISSUE_TIMEOUT)
        .await
        .map_err(|source| match source {
            csr::CsrError::Create(kube::Error::Api(ref e)) if e.code == 401 => {
                JoinError::TokenRefused {
                    server: server.to_string(),
                }
            }
            source => JoinError::Request {
                server: server.to_string(),
                source,
            },
        })?;
    let user = format!("system:node:{node}");
    let text = cairn_pki::kubeconfig::render(server, &ca, &user, &issued);
    if let Some(dir) = kubeconfig.parent() {
        // A missing directory shows up as the write's error below.
        let _ = std::fs::create_dir_all(dir);
    }
    cairn_pki::files::write_private(kubeconfig, text.as_bytes()).map_err(|source| {
        JoinError::Write {
            path: kubeconfig.to_path_buf(),
            source,
        }
    })?;
    info!(node, server, "joined: client certificate issued");
    Ok(())
}

/// Where join writes the proxy's kubeconfig: beside the node's.
pub fn proxy_kubeconfig(node_kubeconfig: &Path) -> PathBuf {
    node_kubeconfig.with_file_name("proxy.kubeconfig")
}

fn unreadable(path: &Path, e: impl std::fmt::Display) -> JoinError {
    JoinError::Kubeconfig {
        server: path.display().to_string(),
        message: e.to_string(),
    }
}

/// Asks for the proxy's `system:kube-proxy` certificate with the node's credentials
/// (from `node_kubeconfig`) and writes the proxy's kubeconfig (`0600`) to `path`.
pub async fn proxy_credential(node_kubeconfig: &Path, path: &Path) -> Result<(), JoinError> {
    let (client, _, parts) = cairn_kubeclient::from_embedded(node_kubeconfig)
        .map_err(|e| unreadable(node_kubeconfig, e))?;
    let server = parts.server.clone();
    let rotation = proxy_rotation(client, parts, path.to_path_buf());
    rotate::renew(&rotation)
        .await
        .map(|_| ())
        .map_err(|message| JoinError::ProxyCredential { server, message })
}

/// The proxy's certificate, asked for with the node's `client`.
fn proxy_rotation(
    client: kube::Client,
    node: cairn_kubeclient::EmbeddedKubeconfig,
    path: PathBuf,
) -> rotate::Rotation {
    rotate::Rotation {
        client,
        certs: None,
        kubeconfig: path,
        server: node.server,
        ca_pem: node.ca_pem,
        user: KUBE_PROXY_USER.to_string(),
        request: CertificateRequest::kube_proxy_client(),
        cert_pem: String::new(),
    }
}

/// The node's API client from the kubeconfig it joined with, its client certificate
/// renewed in the background ([`rotate`]), and the proxy's beside it: asked for once
/// when missing (a node joined before the proxy had its own), then renewed.
pub fn node_client(kubeconfig: &Path, node: &str) -> Result<kube::Client, JoinError> {
    let (client, certs, parts) =
        cairn_kubeclient::from_embedded(kubeconfig).map_err(|e| unreadable(kubeconfig, e))?;
    let proxy = proxy_rotation(client.clone(), parts.clone(), proxy_kubeconfig(kubeconfig));
    tokio::spawn(keep_proxy_credential(proxy));
    tokio::spawn(rotate::run(rotate::Rotation {
        client: client.clone(),
        certs: Some(certs),
        kubeconfig: kubeconfig.to_path_buf(),
        server: parts.server,
        ca_pem: parts.ca_pem,
        user: format!("system:node:{node}"),
        request: CertificateRequest::kubelet_client(node),
        cert_pem: parts.cert_pem,
    }));
    Ok(client)
}

/// Renews the proxy's certificate; asks for it first when the file is missing, and
/// leaves it at a warning when that is refused (an operator may hand proxy credentials
/// out themselves: `cairn:node-autoapprove-kube-proxy`).
async fn keep_proxy_credential(mut r: rotate::Rotation) {
    match cairn_kubeclient::EmbeddedKubeconfig::read(&r.kubeconfig) {
        Ok(current) => r.cert_pem = current.cert_pem,
        Err(_) => match rotate::renew(&r).await {
            Ok(issued) => {
                info!(path = %r.kubeconfig.display(), "the proxy's client certificate (system:kube-proxy) written");
                r.cert_pem = issued.cert_pem;
            }
            Err(e) => {
                return tracing::warn!(error = %e, "no client certificate for the proxy, which needs system:kube-proxy to enforce NetworkPolicy");
            }
        },
    }
    rotate::run(r).await
}
