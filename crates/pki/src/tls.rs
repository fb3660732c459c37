//! TLS for cairn's HTTPS servers (the API's :6443, the agent's :10250) and their
//! clients: a serving certificate that can be swapped while connections stay up (renewal
//! without a restart), and client certificates that are asked for but not required. A
//! client certificate's chain is judged after the handshake, by the server's x509
//! authenticator, as kube-apiserver and the kubelet do: a certificate from another CA is
//! then a 401 with upstream's Status body, not a TLS alert a client cannot explain. The
//! handshake still proves the client holds the certificate's key.

use std::sync::Arc;

use arc_swap::{ArcSwap, ArcSwapOption};
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
    #[error("CA bundle: {0}")]
    Ca(String),
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
    let certified = CertifiedKey::new(chain, signing);
    // A key from another write than its certificate (a crash between the two) must
    // not be served as if it belonged.
    certified.keys_match().map_err(|e| {
        TlsError::Certificate(format!("the key does not match the certificate: {e}"))
    })?;
    Ok(certified)
}

/// The serving certificate, replaced in place on renewal: handshakes after the swap get
/// the new one, established connections (and their watches) carry on. An empty one
/// (a node still waiting for its certificate) fails every handshake.
#[derive(Debug)]
pub struct SwappableCert(ArcSwapOption<CertifiedKey>);

impl SwappableCert {
    pub fn new(key: CertifiedKey) -> Arc<SwappableCert> {
        Arc::new(SwappableCert(ArcSwapOption::from_pointee(key)))
    }

    pub fn empty() -> Arc<SwappableCert> {
        Arc::new(SwappableCert(ArcSwapOption::empty()))
    }

    pub fn swap(&self, key: CertifiedKey) {
        self.0.store(Some(Arc::new(key)));
    }

    pub fn is_set(&self) -> bool {
        self.0.load().is_some()
    }
}

impl ResolvesServerCert for SwappableCert {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        self.0.load_full()
    }
}

/// The client certificate a client presents, replaced in place on renewal: the next
/// handshake presents the new one.
#[derive(Debug)]
pub struct SwappableClientCert(ArcSwap<CertifiedKey>);

impl SwappableClientCert {
    pub fn new(key: CertifiedKey) -> Arc<SwappableClientCert> {
        Arc::new(SwappableClientCert(ArcSwap::from_pointee(key)))
    }

    pub fn swap(&self, key: CertifiedKey) {
        self.0.store(Arc::new(key));
    }
}

impl rustls::client::ResolvesClientCert for SwappableClientCert {
    fn resolve(
        &self,
        _root_hint_subjects: &[&[u8]],
        _sigschemes: &[SignatureScheme],
    ) -> Option<Arc<CertifiedKey>> {
        Some(self.0.load_full())
    }

    fn has_certs(&self) -> bool {
        true
    }
}

/// The roots of a PEM bundle (a CA file).
pub fn roots(ca_pem: &str) -> Result<rustls::RootCertStore, TlsError> {
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(ca_pem.as_bytes()) {
        let cert = cert.map_err(|e| TlsError::Ca(e.to_string()))?;
        roots.add(cert).map_err(|e| TlsError::Ca(e.to_string()))?;
    }
    if roots.is_empty() {
        return Err(TlsError::Ca("no certificate in the PEM".into()));
    }
    Ok(roots)
}

/// A client configuration that trusts `ca_pem` only and presents `cert`. Session
/// resumption is off: a resumed session keeps the client certificate of its first
/// handshake, which would outlive a rotation.
pub fn client_config(
    ca_pem: &str,
    cert: Arc<SwappableClientCert>,
) -> Result<rustls::ClientConfig, TlsError> {
    let mut config = rustls::ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()?
        .with_root_certificates(roots(ca_pem)?)
        .with_client_cert_resolver(cert);
    config.resumption = rustls::client::Resumption::disabled();
    Ok(config)
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
    let roots = roots(client_ca_pem).map_err(|e| TlsError::ClientCa(e.to_string()))?;
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
