//! HTTPS clients of a cairn-control for tests that speak raw HTTP: the cluster CA and the
//! credentials are read from a kubeconfig (embedded data, as `cairn-control kubeconfig`
//! prints it), so a test authenticates exactly as kubectl would.

use std::path::Path;
use std::sync::Arc;

use anyhow::{anyhow, bail, Context, Result};
use base64::Engine;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

/// reqwest's TLS (on, for the cluster's HTTPS) needs a process-wide rustls provider even
/// for plain-HTTP clients: ring, as every cairn binary installs it.
pub fn install_crypto_provider() {
    // Err: one is installed already, which is all that is needed.
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// A reqwest builder for plain HTTP (agents' ports, test servers).
pub fn plain_http_builder() -> reqwest::ClientBuilder {
    install_crypto_provider();
    reqwest::Client::builder()
}

/// What a kubeconfig's current user and cluster hold.
pub struct Credentials {
    pub server: String,
    pub ca_pem: String,
    pub client_cert_pem: Option<String>,
    pub client_key_pem: Option<String>,
    pub token: Option<String>,
}

fn field<'a>(text: &'a str, key: &str) -> Option<&'a str> {
    text.lines()
        .find_map(|l| l.trim().strip_prefix(key))
        .map(|v| v.trim().trim_matches('"'))
}

fn decoded(text: &str, key: &str) -> Result<Option<String>> {
    let Some(v) = field(text, key) else {
        return Ok(None);
    };
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(v)
        .with_context(|| format!("{key} is not base64"))?;
    Ok(Some(String::from_utf8(bytes)?))
}

impl Credentials {
    /// Reads a single-cluster, single-user kubeconfig.
    pub fn from_kubeconfig(path: &Path) -> Result<Credentials> {
        let text =
            std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        Credentials::from_kubeconfig_text(&text)
    }

    /// A plain-HTTP server (an older cairn-control) needs no certificate-authority-data.
    pub fn from_kubeconfig_text(text: &str) -> Result<Credentials> {
        let server = field(text, "server:")
            .ok_or_else(|| anyhow!("kubeconfig has no server"))?
            .to_string();
        let ca_pem = match decoded(text, "certificate-authority-data:")? {
            Some(ca) => ca,
            None if server.starts_with("http://") => String::new(),
            None => bail!("kubeconfig has no certificate-authority-data"),
        };
        Ok(Credentials {
            server,
            ca_pem,
            client_cert_pem: decoded(text, "client-certificate-data:")?,
            client_key_pem: decoded(text, "client-key-data:")?,
            token: field(text, "token:").map(str::to_string),
        })
    }

    /// A rustls client configuration trusting the cluster CA, presenting the client
    /// certificate if there is one.
    pub fn tls_config(&self) -> Result<rustls::ClientConfig> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut roots = rustls::RootCertStore::empty();
        for cert in CertificateDer::pem_slice_iter(self.ca_pem.as_bytes()) {
            roots.add(cert?)?;
        }
        let builder = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()?
            .with_root_certificates(roots);
        Ok(match (&self.client_cert_pem, &self.client_key_pem) {
            (Some(cert), Some(key)) => {
                let chain = CertificateDer::pem_slice_iter(cert.as_bytes())
                    .collect::<Result<Vec<_>, _>>()?;
                let key = PrivateKeyDer::from_pem_slice(key.as_bytes())?;
                builder.with_client_auth_cert(chain, key)?
            }
            _ => builder.with_no_client_auth(),
        })
    }

    /// Whether the server speaks plain HTTP (an older cairn-control, for A/B runs).
    pub fn is_plain_http(&self) -> bool {
        self.server.starts_with("http://")
    }

    /// A reqwest client builder with this TLS and, for token users, the bearer token; for
    /// a plain-HTTP server a plain builder (no TLS, no credentials sent in the clear).
    pub fn reqwest_builder(&self) -> Result<reqwest::ClientBuilder> {
        if self.is_plain_http() {
            return Ok(plain_http_builder());
        }
        let mut builder = reqwest::Client::builder().use_preconfigured_tls(self.tls_config()?);
        if let Some(token) = &self.token {
            let mut headers = reqwest::header::HeaderMap::new();
            headers.insert(
                reqwest::header::AUTHORIZATION,
                format!("Bearer {token}").parse()?,
            );
            builder = builder.default_headers(headers);
        }
        Ok(builder)
    }

    /// A blocking-free reqwest client as the kubeconfig's user.
    pub fn reqwest(&self) -> Result<reqwest::Client> {
        Ok(self.reqwest_builder()?.build()?)
    }
}

/// A reqwest client as the user of the kubeconfig at `path`.
pub fn http_client(kubeconfig: &Path) -> Result<reqwest::Client> {
    Credentials::from_kubeconfig(kubeconfig)?.reqwest()
}

#[cfg(test)]
mod tests {
    use super::*;

    const PLAIN: &str = "clusters:\n- cluster:\n    server: http://127.0.0.1:6443\n  name: cairn\n";

    #[test]
    fn a_plain_http_kubeconfig_needs_no_ca_and_gives_a_plain_client() {
        let creds = Credentials::from_kubeconfig_text(PLAIN).unwrap();
        assert!(creds.is_plain_http());
        assert!(creds.ca_pem.is_empty());
        creds.reqwest().unwrap();
    }

    #[test]
    fn an_https_kubeconfig_without_a_ca_is_refused() {
        let text = PLAIN.replace("http://", "https://");
        let err = Credentials::from_kubeconfig_text(&text).err().unwrap();
        assert!(err.to_string().contains("certificate-authority-data"));
    }
}
