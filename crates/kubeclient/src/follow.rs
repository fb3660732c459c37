//! Following a kubeconfig that another process rewrites when it renews the client
//! certificate (the agent, for the proxy that shares the node's credentials).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use tracing::{info, warn};

use crate::{ClientCerts, EmbeddedKubeconfig};

/// How often the file is read. Renewal starts with a third of the certificate's life
/// left, so a poll is ample; the file is small.
pub const FOLLOW_PERIOD: Duration = Duration::from_secs(10);

/// Swaps in the client certificate of `kubeconfig` whenever it differs from
/// `cert_pem`, forever. A file caught half-written or unreadable is read again at the
/// next period; the certificate in use stays until then.
pub async fn follow(kubeconfig: PathBuf, certs: Arc<ClientCerts>, mut cert_pem: String) {
    loop {
        tokio::time::sleep(FOLLOW_PERIOD).await;
        if let Some(next) = changed(&kubeconfig, &certs, &cert_pem) {
            cert_pem = next;
        }
    }
}

/// One look at the file: the new certificate once it is swapped in.
fn changed(kubeconfig: &Path, certs: &ClientCerts, cert_pem: &str) -> Option<String> {
    let parts = match EmbeddedKubeconfig::read(kubeconfig) {
        Ok(parts) => parts,
        Err(message) => {
            warn!(path = %kubeconfig.display(), %message, "reading the kubeconfig to follow");
            return None;
        }
    };
    if parts.cert_pem == cert_pem {
        return None;
    }
    match certs.swap(&parts.cert_pem, &parts.key_pem) {
        Ok(()) => {
            info!(path = %kubeconfig.display(), "client certificate changed; presenting the new one");
            Some(parts.cert_pem)
        }
        Err(message) => {
            warn!(path = %kubeconfig.display(), %message, "the kubeconfig's new client certificate");
            None
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use cairn_pki::Authority;

    fn issue(ca: &Authority) -> cairn_pki::IssuedCert {
        ca.issue_client(
            "system:node:n1",
            &["system:nodes".to_string()],
            Duration::from_secs(3600),
        )
        .unwrap()
    }

    fn presented(certs: &ClientCerts) -> Vec<u8> {
        use rustls::client::ResolvesClientCert;
        let key = certs.resolve(&[], &[]).unwrap();
        key.cert[0].as_ref().to_vec()
    }

    #[test]
    fn a_rewritten_kubeconfig_swaps_the_certificate_and_an_unchanged_one_does_not() {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("kubeconfig");
        let ca = Authority::generate("test-ca", Duration::from_secs(7200)).unwrap();
        let write = |c: &cairn_pki::IssuedCert| {
            let text = cairn_pki::kubeconfig::render("https://a:6443", ca.cert_pem(), "u", c);
            std::fs::write(&path, text).unwrap();
        };
        let first = issue(&ca);
        write(&first);
        let certs = ClientCerts::new(&first.cert_pem, &first.key_pem).unwrap();
        let before = presented(&certs);
        assert_eq!(changed(&path, &certs, &first.cert_pem), None);

        let second = issue(&ca);
        write(&second);
        assert_eq!(
            changed(&path, &certs, &first.cert_pem),
            Some(second.cert_pem.clone())
        );
        assert_ne!(presented(&certs), before);

        // Half-written or gone: the certificate in use stays.
        std::fs::write(&path, "apiVersion: v1\nkind: Con").unwrap();
        assert_eq!(changed(&path, &certs, &second.cert_pem), None);
        std::fs::remove_file(&path).unwrap();
        assert_eq!(changed(&path, &certs, &second.cert_pem), None);
    }
}
