//! Certificates from `kubernetes.io/tls` Secrets, and the default one for hosts without
//! a valid one ([`crate::tls`] picks among them per handshake).

use std::time::Duration;

use k8s_openapi::api::core::v1::Secret;
use rustls::sign::CertifiedKey;

/// The Secret type TLS certificates live in.
pub const TLS_SECRET_TYPE: &str = "kubernetes.io/tls";

#[derive(Debug, thiserror::Error)]
pub enum CertificateError {
    #[error("secret \"{namespace}/{name}\" not found")]
    Missing { namespace: String, name: String },
    #[error("secret \"{namespace}/{name}\" is of type {kind:?}, not {TLS_SECRET_TYPE:?}")]
    WrongType {
        namespace: String,
        name: String,
        kind: String,
    },
    #[error("secret \"{namespace}/{name}\" has no {key}")]
    MissingKey {
        namespace: String,
        name: String,
        key: &'static str,
    },
    #[error("secret \"{namespace}/{name}\" does not hold a usable certificate and key: {reason}")]
    Invalid {
        namespace: String,
        name: String,
        reason: String,
    },
    #[error("the default certificate: {0}")]
    Default(String),
}

/// The certificate and key of a `kubernetes.io/tls` Secret (`tls.crt`, `tls.key`).
pub fn secret_certificate(
    secret: Option<&Secret>,
    namespace: &str,
    name: &str,
) -> Result<CertifiedKey, CertificateError> {
    let (namespace, name) = (namespace.to_string(), name.to_string());
    let Some(secret) = secret else {
        return Err(CertificateError::Missing { namespace, name });
    };
    let kind = secret.type_.clone().unwrap_or_default();
    if kind != TLS_SECRET_TYPE {
        return Err(CertificateError::WrongType {
            namespace,
            name,
            kind,
        });
    }
    let data = secret.data.as_ref();
    let field = |key: &'static str| {
        let bytes = data.and_then(|d| d.get(key)).map(|b| b.0.as_slice());
        match bytes.map(std::str::from_utf8) {
            Some(Ok(text)) if !text.trim().is_empty() => Ok(text),
            _ => Err(key),
        }
    };
    let (cert, key) = match (field("tls.crt"), field("tls.key")) {
        (Ok(c), Ok(k)) => (c, k),
        (Err(key), _) | (_, Err(key)) => {
            return Err(CertificateError::MissingKey {
                namespace,
                name,
                key,
            })
        }
    };
    cairn_pki::tls::certified_key(cert, key).map_err(|e| CertificateError::Invalid {
        namespace,
        name,
        reason: e.to_string(),
    })
}

/// A certificate for handshakes no Ingress has a valid certificate for, from a CA made
/// for it and thrown away (as ingress-nginx's "Fake Certificate", for `ingress.local`):
/// the client's verification fails, clearly, rather than the handshake.
pub fn default_certificate() -> Result<CertifiedKey, CertificateError> {
    let year = Duration::from_secs(365 * 24 * 3600);
    let default = |e: cairn_pki::PkiError| CertificateError::Default(e.to_string());
    let authority = cairn_pki::authority::Authority::generate("cairn ingress default CA", year)
        .map_err(default)?;
    let leaf = authority
        .issue_serving(
            "cairn ingress default certificate",
            &["ingress.local".into()],
            year,
        )
        .map_err(default)?;
    cairn_pki::tls::certified_key(&leaf.cert_pem, &leaf.key_pem)
        .map_err(|e| CertificateError::Default(e.to_string()))
}
