//! How the API server reaches agents (logs, exec/attach/port-forward, the node proxy):
//! HTTPS with its own client certificate (`kube-apiserver-kubelet-client`, which the
//! bootstrap policy binds to `system:kubelet-api-admin`), verifying the agent's serving
//! certificate against the cluster CA that signed it (upstream's
//! `--kubelet-certificate-authority`). A renewed client certificate is swapped in: the
//! next connection presents it.

use std::sync::Arc;
use std::time::Duration;

use cairn_pki::tls::{self, SwappableClientCert, TlsError};
use cairn_pki::IssuedCert;
use rustls::pki_types::ServerName;
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;
use tokio_rustls::TlsConnector;

/// How long dialling an agent may take (kube-apiserver's dialer: 30 s; agents answer
/// on the node network, so less).
/// Go's `http.Transport` default, which kube-apiserver's kubelet client keeps.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

pub struct AgentDialer {
    cert: Arc<SwappableClientCert>,
    tls: Arc<rustls::ClientConfig>,
    http: reqwest::Client,
}

#[derive(Debug, thiserror::Error)]
pub enum DialError {
    #[error("dial tcp {addr}: {message}")]
    Connect { addr: String, message: String },
    #[error("tls: {addr}: {message}")]
    Handshake { addr: String, message: String },
}

impl AgentDialer {
    pub fn new(cluster_ca_pem: &str, client: &IssuedCert) -> Result<AgentDialer, TlsError> {
        let cert = SwappableClientCert::new(tls::certified_key(&client.cert_pem, &client.key_pem)?);
        let mut config = tls::client_config(cluster_ca_pem, Arc::clone(&cert))?;
        // Agents serve HTTP/1.1: the upgrades exec, attach and port-forward make need it.
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        let http = reqwest::Client::builder()
            .use_preconfigured_tls(config.clone())
            // Never follow an agent's redirect: it would carry this certificate to
            // wherever the agent points (CVE-2020-8559); the answer goes back as it is.
            .redirect(reqwest::redirect::Policy::none())
            .connect_timeout(CONNECT_TIMEOUT)
            .no_proxy()
            .build()
            .map_err(|e| TlsError::Certificate(format!("the agents' HTTPS client: {e}")))?;
        Ok(AgentDialer {
            cert,
            tls: Arc::new(config),
            http,
        })
    }

    /// Presents `client` from the next connection on.
    pub fn renewed(&self, client: &IssuedCert) -> Result<(), TlsError> {
        self.cert
            .swap(tls::certified_key(&client.cert_pem, &client.key_pem)?);
        Ok(())
    }

    /// The HTTPS client for requests that need no upgrade.
    pub fn http(&self) -> &reqwest::Client {
        &self.http
    }

    /// A TLS connection to the agent at `host:port` (`addr` is the two joined), its
    /// certificate checked for `host`.
    pub async fn connect(&self, host: &str, addr: &str) -> Result<TlsStream<TcpStream>, DialError> {
        let connect_err = |message: String| DialError::Connect {
            addr: addr.to_string(),
            message,
        };
        let tcp = tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(addr))
            .await
            .map_err(|_| connect_err("i/o timeout".into()))?
            .map_err(|e| connect_err(e.to_string()))?;
        let _ = tcp.set_nodelay(true);
        let name = ServerName::try_from(host.to_string()).map_err(|e| DialError::Handshake {
            addr: addr.to_string(),
            message: format!("server name {host:?}: {e}"),
        })?;
        // An agent that accepts but never answers must not hold the request forever.
        let handshake = TlsConnector::from(Arc::clone(&self.tls)).connect(name, tcp);
        let handshake_err = |message: String| DialError::Handshake {
            addr: addr.to_string(),
            message,
        };
        tokio::time::timeout(HANDSHAKE_TIMEOUT, handshake)
            .await
            .map_err(|_| handshake_err("TLS handshake timeout".into()))?
            .map_err(|e| handshake_err(e.to_string()))
    }
}
