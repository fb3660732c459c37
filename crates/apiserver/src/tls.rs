//! The API's TLS: a serving certificate that can be swapped while connections stay up
//! (renewal without a restart), and client certificates that are asked for but not
//! required. A client certificate's chain is judged after the handshake, by the x509
//! authenticator (`authn::x509`), as kube-apiserver does: a certificate from another CA
//! is then a 401 with upstream's Status body, not a TLS alert a client cannot explain.
//! The handshake still proves the client holds the certificate's key.

use std::sync::Arc;

use arc_swap::ArcSwap;
use rustls::client::danger::HandshakeSignatureValid;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, UnixTime};
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::server::{ClientHello, ResolvesServerCert, WebPkiClientVerifier};
use rustls::sign::CertifiedKey;
use rustls::{DigitallySignedStruct, DistinguishedName, SignatureScheme};

#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("serving certificate: {0}")]
    Certificate(String),
    #[error("client CA: {0}")]
    ClientCa(String),
    #[error("TLS configuration: {0}")]
    Config(#[from] rustls::Error),
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// A certificate chain and key from PEM, ready to serve.
pub fn certified_key(cert_pem: &str, key_pem: &str) -> Result<CertifiedKey, TlsError> {
    let chain = CertificateDer::pem_slice_iter(cert_pem.as_bytes())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| TlsError::Certificate(e.to_string()))?;
    if chain.is_empty() {
        return Err(TlsError::Certificate("no certificate in the PEM".into()));
    }
    let key = PrivateKeyDer::from_pem_slice(key_pem.as_bytes())
        .map_err(|e| TlsError::Certificate(e.to_string()))?;
    let signing = provider()
        .key_provider
        .load_private_key(key)
        .map_err(|e| TlsError::Certificate(e.to_string()))?;
    Ok(CertifiedKey::new(chain, signing))
}

/// The serving certificate, replaced in place on renewal: handshakes after the swap get
/// the new one, established connections (and their watches) carry on.
#[derive(Debug)]
pub struct SwappableCert(ArcSwap<CertifiedKey>);

impl SwappableCert {
    pub fn new(key: CertifiedKey) -> Arc<SwappableCert> {
        Arc::new(SwappableCert(ArcSwap::from_pointee(key)))
    }

    pub fn swap(&self, key: CertifiedKey) {
        self.0.store(Arc::new(key));
    }
}

impl ResolvesServerCert for SwappableCert {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.0.load_full())
    }
}

/// Client certificates are optional at the handshake and their chain is checked later
/// (see the module's doc); their signature over the handshake is checked here.
#[derive(Debug)]
struct AskForClientCert {
    chain_check: Arc<dyn ClientCertVerifier>,
}

impl ClientCertVerifier for AskForClientCert {
    fn offer_client_auth(&self) -> bool {
        true
    }

    fn client_auth_mandatory(&self) -> bool {
        false
    }

    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        self.chain_check.root_hint_subjects()
    }

    fn verify_client_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _now: UnixTime,
    ) -> Result<ClientCertVerified, rustls::Error> {
        Ok(ClientCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.chain_check.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.chain_check.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.chain_check.supported_verify_schemes()
    }
}

/// Checks a client's chain against the client CA.
pub fn client_chain_verifier(client_ca_pem: &str) -> Result<Arc<dyn ClientCertVerifier>, TlsError> {
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(client_ca_pem.as_bytes()) {
        let cert = cert.map_err(|e| TlsError::ClientCa(e.to_string()))?;
        roots
            .add(cert)
            .map_err(|e| TlsError::ClientCa(e.to_string()))?;
    }
    WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider())
        .allow_unauthenticated()
        .build()
        .map_err(|e| TlsError::ClientCa(e.to_string()))
}

/// The server's rustls configuration: HTTP/1.1 (what every upgrade kubectl makes needs;
/// client-go falls back to it when h2 is not offered).
pub fn server_config(
    cert: Arc<SwappableCert>,
    chain_check: Arc<dyn ClientCertVerifier>,
) -> Result<Arc<rustls::ServerConfig>, TlsError> {
    let mut config = rustls::ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()?
        .with_client_cert_verifier(Arc::new(AskForClientCert { chain_check }))
        .with_cert_resolver(cert);
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}
