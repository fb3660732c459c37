//! Client certificates: the chain must lead to the client CA and be valid now; the user
//! is the subject's CN and the groups its O values (upstream's x509 authenticator with
//! `CommonNameUserConversion`).

use std::sync::Arc;

use crate::UserInfo;
use rustls::pki_types::{CertificateDer, UnixTime};
use rustls::server::danger::ClientCertVerifier;

/// What a connection's client certificate says, decided once after its handshake.
#[derive(Debug, Clone)]
pub enum PeerCert {
    Absent,
    Valid { user: UserInfo, not_after: i64 },
    Invalid(String),
}

pub struct ClientCertAuthenticator {
    chain_check: Arc<dyn ClientCertVerifier>,
}

impl ClientCertAuthenticator {
    pub fn new(chain_check: Arc<dyn ClientCertVerifier>) -> ClientCertAuthenticator {
        ClientCertAuthenticator { chain_check }
    }

    /// Judges the certificates a client presented (none, or its chain).
    pub fn peer(&self, certs: Option<&[CertificateDer<'static>]>) -> PeerCert {
        let Some((end_entity, intermediates)) = certs.and_then(|c| c.split_first()) else {
            return PeerCert::Absent;
        };
        if let Err(e) =
            self.chain_check
                .verify_client_cert(end_entity, intermediates, UnixTime::now())
        {
            return PeerCert::Invalid(format!("verifying certificate: {e}"));
        }
        match cairn_pki::CertInfo::from_der(end_entity) {
            Ok(info) if !info.common_name.is_empty() => PeerCert::Valid {
                user: UserInfo::new(info.common_name, info.organizations),
                not_after: info.not_after,
            },
            Ok(_) => PeerCert::Invalid("certificate has no common name".into()),
            Err(e) => PeerCert::Invalid(e.to_string()),
        }
    }
}
