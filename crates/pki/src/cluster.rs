//! The PKI files of a control data directory (`<data>/pki/`), made on first start and
//! renewed while the server runs:
//!
//! | file | what |
//! |---|---|
//! | `ca.crt`, `ca.key` | cluster CA (10 years): signs the serving certificates; clients trust it |
//! | `client-ca.crt`, `client-ca.key` | client CA (10 years): signs every client certificate |
//! | `apiserver.crt`, `apiserver.key` | the API's serving certificate (every name it is reached by) |
//! | `apiserver-kubelet-client.crt`, `.key` | the API's client certificate for the agents' ports |
//! | `sa.key`, `sa.pub` | the ServiceAccount token signing key pair |
//!
//! Private keys are `0600`. A CA is never replaced; leaf certificates are.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::inspect::{now, CertInfo};
use crate::{files, kubeconfig, Authority, IssuedCert, PkiError};

/// Upstream's and kubeadm's lifetimes: CAs 10 years, leaf certificates one year.
#[derive(Debug, Clone, Copy)]
pub struct Lifetimes {
    pub ca: Duration,
    pub leaf: Duration,
}

impl Default for Lifetimes {
    fn default() -> Self {
        Lifetimes {
            ca: Duration::from_secs(10 * 365 * 86400),
            leaf: Duration::from_secs(365 * 86400),
        }
    }
}

/// The DNS names and addresses the serving certificate must carry.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ServingNames(pub Vec<String>);

pub struct ClusterPki {
    dir: PathBuf,
    pub cluster_ca: Authority,
    pub client_ca: Authority,
    pub lifetimes: Lifetimes,
}

/// One certificate of the data directory, for `cairn-control certs check`.
#[derive(Debug, Clone)]
pub struct CertEntry {
    pub file: PathBuf,
    pub info: CertInfo,
}

const SERVING: &str = "apiserver";
const KUBELET_CLIENT: &str = "apiserver-kubelet-client";

/// The user the API server is when it calls an agent (kubeadm's name), bound to
/// `system:kubelet-api-admin`.
pub const KUBELET_CLIENT_USER: &str = "kube-apiserver-kubelet-client";

impl ClusterPki {
    /// Loads the PKI of `data_dir`, creating what is missing; the serving certificate is
    /// (re)issued when missing, due for renewal, or lacking one of `names`.
    pub fn ensure(
        data_dir: &Path,
        names: &ServingNames,
        lifetimes: Lifetimes,
    ) -> Result<ClusterPki, PkiError> {
        let dir = data_dir.join("pki");
        std::fs::create_dir_all(&dir).map_err(|source| PkiError::Io {
            path: dir.clone(),
            source,
        })?;
        let cluster_ca = ensure_ca(&dir, "ca", "cairn-ca", lifetimes.ca)?;
        let client_ca = ensure_ca(&dir, "client-ca", "cairn-client-ca", lifetimes.ca)?;
        ensure_sa_keys(&dir)?;
        let pki = ClusterPki {
            dir,
            cluster_ca,
            client_ca,
            lifetimes,
        };
        pki.renew_serving_if_due(names)?;
        pki.renew_kubelet_client_if_due()?;
        Ok(pki)
    }

    /// Loads an existing PKI without creating anything (`certs check`, `kubeconfig`).
    pub fn load(data_dir: &Path, lifetimes: Lifetimes) -> Result<ClusterPki, PkiError> {
        let dir = data_dir.join("pki");
        let load = |name: &str| {
            Authority::load(
                &files::read(&dir.join(format!("{name}.crt")))?,
                &files::read(&dir.join(format!("{name}.key")))?,
            )
        };
        Ok(ClusterPki {
            cluster_ca: load("ca")?,
            client_ca: load("client-ca")?,
            dir,
            lifetimes,
        })
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn serving_paths(&self) -> (PathBuf, PathBuf) {
        self.leaf_paths(SERVING)
    }

    pub fn kubelet_client_paths(&self) -> (PathBuf, PathBuf) {
        self.leaf_paths(KUBELET_CLIENT)
    }

    fn leaf_paths(&self, name: &str) -> (PathBuf, PathBuf) {
        (
            self.dir.join(format!("{name}.crt")),
            self.dir.join(format!("{name}.key")),
        )
    }

    fn read_leaf(&self, name: &str) -> Result<IssuedCert, PkiError> {
        let (cert, key) = self.leaf_paths(name);
        Ok(IssuedCert {
            cert_pem: files::read(&cert)?,
            key_pem: files::read(&key)?,
        })
    }

    /// Writes the leaf `name` from `issue` unless the stored one is readable, not due
    /// for renewal and `fits`; returns it when it did.
    fn renew_leaf_if_due(
        &self,
        name: &str,
        fits: impl Fn(&CertInfo) -> bool,
        issue: impl Fn() -> Result<IssuedCert, PkiError>,
    ) -> Result<Option<IssuedCert>, PkiError> {
        let (cert_path, key_path) = self.leaf_paths(name);
        let current = files::read(&cert_path)
            .ok()
            .and_then(|pem| CertInfo::from_pem(&pem).ok());
        let fresh = current.is_some_and(|c| !c.renewal_due(now()) && fits(&c) && key_path.exists());
        if fresh {
            return Ok(None);
        }
        let issued = issue()?;
        files::write_private(&key_path, issued.key_pem.as_bytes())?;
        files::write_public(&cert_path, issued.cert_pem.as_bytes())?;
        Ok(Some(issued))
    }

    /// The API server's client certificate for agents, as stored.
    pub fn kubelet_client(&self) -> Result<IssuedCert, PkiError> {
        self.read_leaf(KUBELET_CLIENT)
    }

    /// Issues a new client certificate for agents when the stored one is missing,
    /// unreadable or due for renewal; returns it when it did.
    pub fn renew_kubelet_client_if_due(&self) -> Result<Option<IssuedCert>, PkiError> {
        self.renew_leaf_if_due(
            KUBELET_CLIENT,
            |c| c.common_name == KUBELET_CLIENT_USER,
            || {
                self.client_ca
                    .issue_client(KUBELET_CLIENT_USER, &[], self.lifetimes.leaf)
            },
        )
    }

    pub fn sa_key_paths(&self) -> (PathBuf, PathBuf) {
        (self.dir.join("sa.key"), self.dir.join("sa.pub"))
    }

    /// The serving certificate and key as stored.
    pub fn serving(&self) -> Result<IssuedCert, PkiError> {
        self.read_leaf(SERVING)
    }

    /// Issues a new serving certificate when the stored one is missing, unreadable, due
    /// for renewal or missing a name; returns it when it did.
    pub fn renew_serving_if_due(
        &self,
        names: &ServingNames,
    ) -> Result<Option<IssuedCert>, PkiError> {
        self.renew_leaf_if_due(
            SERVING,
            |c| c.names_cover(&names.0),
            || {
                self.cluster_ca
                    .issue_serving("cairn-control", &names.0, self.lifetimes.leaf)
            },
        )
    }

    /// A kubeconfig for `server` with a fresh client certificate for `user` in `groups`.
    pub fn client_kubeconfig(
        &self,
        server: &str,
        user: &str,
        groups: &[String],
    ) -> Result<String, PkiError> {
        let client = self
            .client_ca
            .issue_client(user, groups, self.lifetimes.leaf)?;
        Ok(kubeconfig::render(
            server,
            self.cluster_ca.cert_pem(),
            user,
            &client,
        ))
    }

    /// Every certificate file under `pki/`, and any kubeconfig beside it, with its expiry.
    pub fn check(&self, data_dir: &Path) -> Vec<CertEntry> {
        let mut out = Vec::new();
        for name in ["ca", "client-ca", SERVING, KUBELET_CLIENT] {
            let file = self.dir.join(format!("{name}.crt"));
            if let Some(info) = files::read(&file)
                .ok()
                .and_then(|p| CertInfo::from_pem(&p).ok())
            {
                out.push(CertEntry { file, info });
            }
        }
        let admin = data_dir.join(ADMIN_KUBECONFIG);
        if let Some(info) = files::read(&admin)
            .ok()
            .and_then(|k| kubeconfig_client_cert(&k))
        {
            out.push(CertEntry { file: admin, info });
        }
        out
    }
}

/// File name of the admin kubeconfig in the data directory.
pub const ADMIN_KUBECONFIG: &str = "admin.kubeconfig";

/// The client certificate embedded in a kubeconfig this crate rendered.
pub fn kubeconfig_client_cert(kubeconfig: &str) -> Option<CertInfo> {
    use base64::Engine;
    let data = kubeconfig
        .lines()
        .find_map(|l| l.trim().strip_prefix("client-certificate-data:"))?;
    let pem = base64::engine::general_purpose::STANDARD
        .decode(data.trim())
        .ok()?;
    CertInfo::from_pem(&String::from_utf8(pem).ok()?).ok()
}

pub(crate) fn ensure_ca(
    dir: &Path,
    name: &str,
    common_name: &str,
    lifetime: Duration,
) -> Result<Authority, PkiError> {
    let cert = dir.join(format!("{name}.crt"));
    let key = dir.join(format!("{name}.key"));
    if cert.exists() && key.exists() {
        return Authority::load(&files::read(&cert)?, &files::read(&key)?);
    }
    let ca = Authority::generate(common_name, lifetime)?;
    // The key first: a certificate without its key would be taken for a complete CA.
    files::write_private(&key, ca.key_pem().as_bytes())?;
    files::write_public(&cert, ca.cert_pem().as_bytes())?;
    Ok(ca)
}

fn ensure_sa_keys(dir: &Path) -> Result<(), PkiError> {
    let (private, public) = (dir.join("sa.key"), dir.join("sa.pub"));
    if private.exists() && public.exists() {
        return Ok(());
    }
    let key = rcgen::KeyPair::generate().map_err(|source| PkiError::Generate {
        what: "ServiceAccount signing key".into(),
        source,
    })?;
    files::write_private(&private, key.serialize_pem().as_bytes())?;
    files::write_public(&public, key.public_key_pem().as_bytes())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn names(n: &[&str]) -> ServingNames {
        ServingNames(n.iter().map(|s| s.to_string()).collect())
    }

    #[test]
    fn first_start_creates_everything_with_private_keys_0600() {
        let dir = tempfile::tempdir().unwrap();
        let pki =
            ClusterPki::ensure(dir.path(), &names(&["127.0.0.1"]), Lifetimes::default()).unwrap();
        let keys = [
            "ca.key",
            "client-ca.key",
            "apiserver.key",
            "apiserver-kubelet-client.key",
            "sa.key",
        ];
        for key in keys {
            let mode = std::fs::metadata(pki.dir().join(key))
                .unwrap()
                .permissions()
                .mode();
            assert_eq!(mode & 0o777, 0o600, "{key}");
        }
        let serving = CertInfo::from_pem(&pki.serving().unwrap().cert_pem).unwrap();
        assert_eq!(serving.issuer_common_name, "cairn-ca");
        let client = CertInfo::from_pem(&pki.kubelet_client().unwrap().cert_pem).unwrap();
        assert_eq!(client.issuer_common_name, "cairn-client-ca");
        assert_eq!(client.common_name, KUBELET_CLIENT_USER);
        assert!(pki.renew_kubelet_client_if_due().unwrap().is_none());
        assert_eq!(pki.check(dir.path()).len(), 4);
    }

    #[test]
    fn a_restart_keeps_the_cas_and_a_new_name_reissues_the_serving_certificate() {
        let dir = tempfile::tempdir().unwrap();
        let first = ClusterPki::ensure(dir.path(), &names(&["a"]), Lifetimes::default()).unwrap();
        let serial = |p: &ClusterPki| {
            CertInfo::from_pem(&p.serving().unwrap().cert_pem)
                .unwrap()
                .serial
        };
        let s1 = serial(&first);
        let again = ClusterPki::ensure(dir.path(), &names(&["a"]), Lifetimes::default()).unwrap();
        assert_eq!(again.cluster_ca.cert_pem(), first.cluster_ca.cert_pem());
        assert_eq!(serial(&again), s1);
        let more =
            ClusterPki::ensure(dir.path(), &names(&["a", "b"]), Lifetimes::default()).unwrap();
        assert_ne!(serial(&more), s1);
    }

    #[test]
    fn kubeconfigs_embed_a_client_certificate_for_the_user() {
        let dir = tempfile::tempdir().unwrap();
        let pki = ClusterPki::ensure(dir.path(), &names(&["a"]), Lifetimes::default()).unwrap();
        let kc = pki
            .client_kubeconfig("https://a:6443", "system:node:n1", &["system:nodes".into()])
            .unwrap();
        let info = kubeconfig_client_cert(&kc).unwrap();
        assert_eq!(info.common_name, "system:node:n1");
        assert_eq!(info.issuer_common_name, "cairn-client-ca");
        assert!(kc.contains("name: \"system:node:n1\""));
    }
}
