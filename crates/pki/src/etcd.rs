//! An etcd member's certificates, as kubeadm's `init phase certs etcd-*` lays them out in
//! one directory (kubeadm's `/etc/kubernetes/pki/etcd/`):
//!
//! | file | what |
//! |---|---|
//! | `ca.crt`, `ca.key` | etcd's own CA (10 years), the same on every member: copy it before the second |
//! | `server.crt`, `.key` | the member's client port: its name, `localhost`, loopback and its addresses |
//! | `peer.crt`, `.key` | the member's peer port, and its client certificate to the other members |
//! | `apiserver-etcd-client.crt`, `.key` | cairn-control's client certificate (`kube-apiserver-etcd-client`) |
//!
//! Server and peer certificates carry both server and client usage, as kubeadm's. A leaf
//! is issued when missing, lacking one of the wanted names, or due for renewal; the CA is
//! never replaced.

use std::path::Path;

use crate::cluster::{ensure_ca, Lifetimes};
use crate::inspect::{issued_by, now, CertInfo};
use crate::{files, Authority, IssuedCert, PkiError};

/// The client certificate's user, kubeadm's.
pub const APISERVER_CLIENT_USER: &str = "kube-apiserver-etcd-client";

/// Makes what is missing in `dir` for the member `name` reached at `addresses`.
pub fn ensure_member(
    dir: &Path,
    name: &str,
    addresses: &[String],
    lifetimes: Lifetimes,
) -> Result<(), PkiError> {
    std::fs::create_dir_all(dir).map_err(|source| PkiError::Io {
        path: dir.to_path_buf(),
        source,
    })?;
    let ca = ensure_ca(dir, "ca", "etcd-ca", lifetimes.ca)?;
    let mut names = vec![name.to_string(), "localhost".into(), "127.0.0.1".into()];
    names.extend(addresses.iter().cloned());
    for leaf in ["server", "peer"] {
        ensure_leaf(dir, &ca, leaf, &names, || {
            ca.issue_peer(name, &names, lifetimes.leaf)
        })?;
    }
    ensure_leaf(dir, &ca, "apiserver-etcd-client", &[], || {
        client(&ca, lifetimes)
    })
}

fn client(ca: &Authority, lifetimes: Lifetimes) -> Result<IssuedCert, PkiError> {
    ca.issue_client(APISERVER_CLIENT_USER, &[], lifetimes.leaf)
}

/// Keeps the leaf when it is `ca`'s, covers `names` and is not due; else issues it.
fn ensure_leaf(
    dir: &Path,
    ca: &Authority,
    leaf: &str,
    names: &[String],
    issue: impl FnOnce() -> Result<IssuedCert, PkiError>,
) -> Result<(), PkiError> {
    let (cert, key) = (
        dir.join(format!("{leaf}.crt")),
        dir.join(format!("{leaf}.key")),
    );
    let current = files::read(&cert)
        .ok()
        .filter(|pem| issued_by(pem, ca.cert_pem()))
        .and_then(|pem| CertInfo::from_pem(&pem).ok());
    let good = current.is_some_and(|c| c.names_cover(names) && !c.renewal_due(now()));
    if good && key.exists() {
        return Ok(());
    }
    let issued = issue()?;
    files::write_private(&key, issued.key_pem.as_bytes())?;
    files::write_public(&cert, issued.cert_pem.as_bytes())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn a_member_gets_server_peer_and_client_certificates_from_one_ca() {
        let dir = tempfile::tempdir().unwrap();
        let addresses = vec!["198.18.0.11".to_string()];
        ensure_member(dir.path(), "node-1", &addresses, Lifetimes::default()).unwrap();
        let info =
            |f: &str| CertInfo::from_pem(&files::read(&dir.path().join(f)).unwrap()).unwrap();
        for leaf in ["server.crt", "peer.crt"] {
            let names = ["node-1", "localhost", "127.0.0.1", "198.18.0.11"].map(String::from);
            assert!(info(leaf).names_cover(&names), "{leaf}");
        }
        assert_eq!(
            info("apiserver-etcd-client.crt").common_name,
            APISERVER_CLIENT_USER
        );
        assert_eq!(info("ca.crt").common_name, "etcd-ca");

        // A second member with the first one's CA: same CA, its own names; the first's
        // files are kept as they are when asked again.
        let other = tempfile::tempdir().unwrap();
        for f in ["ca.crt", "ca.key"] {
            std::fs::copy(dir.path().join(f), other.path().join(f)).unwrap();
        }
        let addresses2 = vec!["198.18.0.12".to_string()];
        ensure_member(other.path(), "node-2", &addresses2, Lifetimes::default()).unwrap();
        let read = |d: &Path, f: &str| files::read(&d.join(f)).unwrap();
        assert_eq!(read(dir.path(), "ca.crt"), read(other.path(), "ca.crt"));
        let before = read(dir.path(), "server.crt");
        ensure_member(dir.path(), "node-1", &addresses, Lifetimes::default()).unwrap();
        assert_eq!(before, read(dir.path(), "server.crt"));
        // A new address reissues.
        let more = vec!["198.18.0.11".to_string(), "198.18.0.99".to_string()];
        ensure_member(dir.path(), "node-1", &more, Lifetimes::default()).unwrap();
        assert_ne!(before, read(dir.path(), "server.crt"));
        // A replaced CA: every leaf is reissued by the new one, though names and
        // lifetimes would do.
        let old_ca = read(dir.path(), "ca.crt");
        let leaves = ["server.crt", "peer.crt", "apiserver-etcd-client.crt"];
        for leaf in leaves {
            assert!(issued_by(&read(dir.path(), leaf), &old_ca), "{leaf}");
        }
        for f in ["ca.crt", "ca.key"] {
            std::fs::remove_file(dir.path().join(f)).unwrap();
        }
        ensure_member(dir.path(), "node-1", &more, Lifetimes::default()).unwrap();
        let new_ca = read(dir.path(), "ca.crt");
        assert_ne!(old_ca, new_ca);
        for leaf in leaves {
            let pem = read(dir.path(), leaf);
            assert!(
                issued_by(&pem, &new_ca) && !issued_by(&pem, &old_ca),
                "{leaf}"
            );
        }
    }
}
