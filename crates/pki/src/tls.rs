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

/// The servers' provider: ring's suites with AES-128-GCM first, chosen in the server's
/// order. Go's crypto/tls (kube-apiserver, the kubelet) picks AES-128-GCM for clients
/// that prefer AES; rustls clients offer AES-256-GCM first, whose 14 rounds cost a
/// third more on every byte of a long watch stream, for no protection either side asks for.
pub fn server_provider() -> Arc<rustls::crypto::CryptoProvider> {
    let mut provider = rustls::crypto::ring::default_provider();
    // A stable sort keeps ring's order among the rest (TLS 1.3 before 1.2, ChaCha last).
    provider
        .cipher_suites
        .sort_by_key(|suite| !is_aes_128_gcm(suite.suite()));
    Arc::new(provider)
}

fn is_aes_128_gcm(suite: rustls::CipherSuite) -> bool {
    use rustls::CipherSuite as Suite;
    matches!(
        suite,
        Suite::TLS13_AES_128_GCM_SHA256
            | Suite::TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256
            | Suite::TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256
    )
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
    let mut config = rustls::ServerConfig::builder_with_provider(server_provider())
        .with_safe_default_protocol_versions()?
        .with_client_cert_verifier(Arc::new(AskForClientCert { chain_check }))
        .with_cert_resolver(cert);
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    config.ignore_client_order = true;
    Ok(Arc::new(config))
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::authority::Authority;

    /// Runs a handshake in memory between `client` and `server` until both are done.
    fn handshake(client: &mut rustls::ClientConnection, server: &mut rustls::ServerConnection) {
        for _ in 0..10 {
            if !client.is_handshaking() && !server.is_handshaking() {
                return;
            }
            let mut wire = Vec::new();
            client.write_tls(&mut wire).expect("client writes");
            server.read_tls(&mut wire.as_slice()).expect("server reads");
            server.process_new_packets().expect("server processes");
            let mut wire = Vec::new();
            server.write_tls(&mut wire).expect("server writes");
            client.read_tls(&mut wire.as_slice()).expect("client reads");
            client.process_new_packets().expect("client processes");
        }
        panic!("the handshake did not finish");
    }

    #[test]
    fn the_server_picks_aes_128_gcm_over_a_clients_aes_256_preference() {
        let ca = Authority::generate("test-ca", Duration::from_secs(3600)).expect("CA");
        let leaf = ca
            .issue_serving("server", &["localhost".into()], Duration::from_secs(3600))
            .expect("serving cert");
        let cert = SwappableCert::new(certified_key(&leaf.cert_pem, &leaf.key_pem).expect("key"));
        let verifier = client_chain_verifier(ca.cert_pem()).expect("verifier");
        let server_config = server_config(cert, verifier).expect("server config");
        // ring's default client order: AES-256-GCM first.
        let client_config = rustls::ClientConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .expect("versions")
            .with_root_certificates(roots(ca.cert_pem()).expect("roots"))
            .with_no_client_auth();
        let first_offered = client_config.crypto_provider().cipher_suites[0].suite();
        assert_eq!(first_offered, rustls::CipherSuite::TLS13_AES_256_GCM_SHA384);
        let name = "localhost".try_into().expect("name");
        let mut client =
            rustls::ClientConnection::new(Arc::new(client_config), name).expect("client");
        let mut server = rustls::ServerConnection::new(server_config).expect("server");
        handshake(&mut client, &mut server);
        let chosen = server.negotiated_cipher_suite().expect("a suite").suite();
        assert_eq!(chosen, rustls::CipherSuite::TLS13_AES_128_GCM_SHA256);
    }
}
