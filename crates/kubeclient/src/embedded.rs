//! The parts of a kubeconfig with embedded data that a certificate client needs.

use std::path::Path;

/// The server, CA and client certificate of a kubeconfig with embedded data (the first
/// cluster and user: cairn writes one of each).
#[derive(Debug, Clone)]
pub struct EmbeddedKubeconfig {
    pub server: String,
    pub ca_pem: String,
    pub cert_pem: String,
    pub key_pem: String,
}

impl EmbeddedKubeconfig {
    pub fn read(path: &Path) -> Result<EmbeddedKubeconfig, String> {
        let kc = kube::config::Kubeconfig::read_from(path).map_err(|e| e.to_string())?;
        Self::from_kubeconfig(&kc)
    }

    /// Whether the kubeconfig at `path` carries its client certificate and key inline.
    pub fn has_client_certificate(path: &Path) -> bool {
        let Ok(kc) = kube::config::Kubeconfig::read_from(path) else {
            return false;
        };
        kc.auth_infos
            .first()
            .and_then(|u| u.auth_info.as_ref())
            .is_some_and(|u| u.client_certificate_data.is_some() && u.client_key_data.is_some())
    }

    fn from_kubeconfig(kc: &kube::config::Kubeconfig) -> Result<EmbeddedKubeconfig, String> {
        use base64::Engine;
        use secrecy::ExposeSecret;
        let cluster = kc
            .clusters
            .first()
            .and_then(|c| c.cluster.as_ref())
            .ok_or("no cluster")?;
        let user = kc
            .auth_infos
            .first()
            .and_then(|u| u.auth_info.as_ref())
            .ok_or("no user")?;
        let decode = |what: &str, b64: Option<&str>| -> Result<String, String> {
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(b64.ok_or(format!("no {what}"))?.trim())
                .map_err(|e| format!("{what}: {e}"))?;
            String::from_utf8(bytes).map_err(|e| format!("{what}: {e}"))
        };
        Ok(EmbeddedKubeconfig {
            server: cluster.server.clone().ok_or("no server")?,
            ca_pem: decode(
                "certificate-authority-data",
                cluster.certificate_authority_data.as_deref(),
            )?,
            cert_pem: decode(
                "client-certificate-data",
                user.client_certificate_data.as_deref(),
            )?,
            key_pem: decode(
                "client-key-data",
                user.client_key_data.as_ref().map(|k| k.expose_secret()),
            )?,
        })
    }
}
