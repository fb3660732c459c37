//! The HTTPS listener's TLS: certificates chosen per handshake by SNI from the snapshot
//! in force, so a Secret update is served from the next handshake on while open
//! connections keep the certificate they were made with.

use std::sync::Arc;

use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;

use crate::snapshot::Routes;

/// Picks the certificate per handshake from the snapshot in force.
#[derive(Debug)]
pub struct SniResolver {
    routes: Arc<Routes>,
    fallback: Arc<CertifiedKey>,
    /// The listener's port: Gateway HTTPS listeners on it are asked first.
    port: u16,
    /// Whether the Ingress TLS hosts are served on this port.
    ingress: bool,
}

impl SniResolver {
    pub fn new(
        routes: Arc<Routes>,
        fallback: Arc<CertifiedKey>,
        port: u16,
        ingress: bool,
    ) -> SniResolver {
        SniResolver {
            routes,
            fallback,
            port,
            ingress,
        }
    }
}

impl ResolvesServerCert for SniResolver {
    fn resolve(&self, hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        let snapshot = self.routes.current();
        let found = hello
            .server_name()
            .and_then(|name| snapshot.certificate_on(self.port, self.ingress, name));
        Some(found.unwrap_or(&self.fallback).clone())
    }
}

/// The HTTPS listener's configuration: certificates by SNI, HTTP/2 and HTTP/1.1.
pub fn server_config(
    resolver: Arc<SniResolver>,
) -> Result<Arc<rustls::ServerConfig>, rustls::Error> {
    let mut config = rustls::ServerConfig::builder_with_provider(cairn_pki::tls::server_provider())
        .with_safe_default_protocol_versions()?
        .with_no_client_auth()
        .with_cert_resolver(resolver);
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    // Session tickets, as nginx sends by default: a returning client resumes without a
    // new signature (keys rotate every 6 hours, in memory only).
    config.ticketer = rustls::crypto::ring::Ticketer::new()?;
    Ok(Arc::new(config))
}
