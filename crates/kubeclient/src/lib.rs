//! API clients whose client certificate can change under them without a restart or a
//! dropped watch, as the kubelet's certificate manager does it.
//!
//! The client presents whatever certificate [`ClientCerts`] holds (a rustls resolver);
//! swapping it ends the connections made with the old one ([`closing`]), so requests
//! and watches carry on over new connections with the new certificate. The agent swaps
//! in the certificates it renews; a process that reads the node's kubeconfig without
//! renewing it (the proxy) follows the file ([`follow`]).

pub mod closing;
mod embedded;
pub mod failover;
mod follow;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwap;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use rustls::client::ResolvesClientCert;
use rustls::sign::CertifiedKey;
use tower::Layer;

pub use embedded::EmbeddedKubeconfig;
pub use follow::{follow, FOLLOW_PERIOD};

use closing::{ClosingConnector, Generation};
use failover::{FailoverConnector, Servers};

#[derive(Debug, thiserror::Error)]
pub enum KubeclientError {
    #[error("kubeconfig {path}: {message}")]
    Kubeconfig { path: PathBuf, message: String },
    #[error("client for {server}: {message}")]
    Client { server: String, message: String },
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
    let given = server
        .authority()
        .ok_or_else(|| format!("{server}: no host"))?;
    client_with(server, Servers::new(given.clone()), ca_pem, certs)
}

/// `client`, failing over between `servers` (`server` is the one requests name).
pub fn client_with(
    server: &http::Uri,
    servers: Arc<Servers>,
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
    // Short: a server that does not answer gives way to the next one.
    http.set_connect_timeout(Some(Duration::from_secs(5)));
    // HTTP/1.1 only (ALPN from the builder), as cairn-control serves.
    let https = hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config(tls)
        .https_only()
        .enable_http1()
        .wrap_connector(http);
    let https = ClosingConnector {
        inner: FailoverConnector {
            inner: https,
            servers,
        },
        generation,
    };
    let hyper_client = hyper_util::client::legacy::Client::builder(TokioExecutor::new())
        .build::<_, kube::client::Body>(https);
    let service = kube::client::middleware::BaseUriLayer::new(server.clone()).layer(hyper_client);
    Ok(kube::Client::new(service, "default"))
}

/// A client from a kubeconfig with an embedded client certificate, with the
/// certificate holder to swap renewals into; it fails over to the other control replicas
/// it learns of.
pub fn from_embedded(
    path: &Path,
) -> Result<(kube::Client, Arc<ClientCerts>, EmbeddedKubeconfig), KubeclientError> {
    let bad = |message: String| KubeclientError::Kubeconfig {
        path: path.to_path_buf(),
        message,
    };
    let parts = EmbeddedKubeconfig::read(path).map_err(bad)?;
    let uri: http::Uri = parts
        .server
        .parse()
        .map_err(|e| bad(format!("server: {e}")))?;
    let certs = Arc::new(ClientCerts::new(&parts.cert_pem, &parts.key_pem).map_err(bad)?);
    let given = uri
        .authority()
        .ok_or_else(|| bad(format!("server {}: no host", parts.server)))?;
    let servers = Servers::new(given.clone());
    let client = client_with(
        &uri,
        Arc::clone(&servers),
        &parts.ca_pem,
        Arc::clone(&certs),
    )
    .map_err(|message| KubeclientError::Client {
        server: parts.server.clone(),
        message,
    })?;
    // The other control replicas, from the `kubernetes` EndpointSlice.
    tokio::spawn(failover::learn(client.clone(), servers));
    Ok((client, certs, parts))
}

/// A client from a kubeconfig with an embedded client certificate that another process
/// renews: the file is followed and each new certificate swapped in.
pub fn following(path: &Path) -> Result<kube::Client, KubeclientError> {
    let (client, certs, parts) = from_embedded(path)?;
    tokio::spawn(follow(path.to_path_buf(), certs, parts.cert_pem));
    Ok(client)
}
