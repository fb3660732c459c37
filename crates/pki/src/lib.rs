//! The cluster's public key infrastructure, as kubeadm lays it out: a cluster CA that
//! signs serving certificates, a client CA that signs every client certificate (admin,
//! nodes, components), a ServiceAccount signing key pair, and the kubeconfigs built from
//! them. Keys are ECDSA P-256; private key files are written `0600`.
//!
//! - [`authority`]: make or load a CA and issue leaf certificates from it.
//! - [`csr`]: certificate signing requests: make, read and verify, sign.
//! - [`inspect`]: read a certificate's subject, names and validity; when to renew.
//! - [`cluster`]: the files in a data directory, created on first start, renewed after.
//! - [`etcd`]: an etcd member's CA and certificates, as kubeadm lays them out.
//! - [`kubeconfig`]: a kubeconfig with the CA and a client certificate embedded.
//! - [`files`]: atomic writes with the right modes.
//! - [`tls`]: rustls configurations from them: swappable serving and client certificates.

pub mod authority;
pub mod cluster;
pub mod csr;
pub mod etcd;
pub mod files;
pub mod inspect;
pub mod join;
pub mod kubeconfig;
pub mod tls;

use std::path::PathBuf;

pub use authority::{Authority, IssuedCert};
pub use cluster::{kubeconfig_client_cert, ClusterPki, Lifetimes, ServingNames, ADMIN_KUBECONFIG};
pub use csr::{
    generate_request, parse_request, usage_from_k8s, CsrError, RequestInfo, RequestSubject, Usage,
};
pub use inspect::CertInfo;

#[derive(Debug, thiserror::Error)]
pub enum PkiError {
    #[error("generating {what}: {source}")]
    Generate { what: String, source: rcgen::Error },
    #[error("reading certificate {what}: {reason}")]
    Parse { what: String, reason: String },
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
}
