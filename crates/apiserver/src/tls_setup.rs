//! What `start` needs for a secure server: the PKI in the data directory, the names the
//! serving certificate must carry, the authenticator, the admin kubeconfig, and the loop
//! that renews the serving certificate and the admin kubeconfig before they expire.

use std::collections::BTreeSet;
use std::net::{IpAddr, Ipv4Addr};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use cairn_pki::cluster::{kubeconfig_client_cert, ADMIN_KUBECONFIG};
use cairn_pki::{ClusterPki, ServingNames};
use tracing::{info, warn};

use crate::agent_dial::AgentDialer;
use crate::authn::{token_file, Authenticator, ClientCertAuthenticator};
use crate::tls::{self, SwappableCert};
use crate::{ServerConfig, ServerError};

/// The admin identity of the kubeconfigs cairn-control writes and prints.
pub const ADMIN_USER: &str = "cairn-admin";
pub const ADMIN_GROUP: &str = cairn_auth::user::MASTERS;

pub(crate) struct Security {
    pub pki: Arc<ClusterPki>,
    pub names: ServingNames,
    pub cert: Arc<SwappableCert>,
    pub tls: Arc<rustls::ServerConfig>,
    pub authn: Arc<Authenticator>,
    pub agents: Arc<AgentDialer>,
}

pub(crate) fn setup(
    config: &ServerConfig,
    bind: IpAddr,
    advertise: Ipv4Addr,
) -> Result<Security, ServerError> {
    let names = serving_names(&config.tls_sans, bind, advertise, config.service_cidr);
    let pki = ClusterPki::ensure(&config.data_dir, &names, config.cert_lifetimes)
        .map_err(ServerError::Pki)?;
    let serving = pki.serving().map_err(ServerError::Pki)?;
    let cert = SwappableCert::new(
        tls::certified_key(&serving.cert_pem, &serving.key_pem).map_err(ServerError::Tls)?,
    );
    let chain_check =
        tls::client_chain_verifier(pki.client_ca.cert_pem()).map_err(ServerError::Tls)?;
    let tls = tls::server_config(Arc::clone(&cert), Arc::clone(&chain_check))
        .map_err(ServerError::Tls)?;
    let tokens = match &config.token_auth_file {
        Some(path) => token_file::load(path).map_err(ServerError::TokenFile)?,
        None => Default::default(),
    };
    let sa_key = cairn_pki::files::read(&pki.sa_key_paths().0).map_err(ServerError::Pki)?;
    let sa_key = crate::authn::jwt::SigningKey::from_pkcs8_pem(&sa_key)
        .map_err(|e| ServerError::Tls(tls::TlsError::Certificate(e.to_string())))?;
    let authn = Authenticator::new(
        ClientCertAuthenticator::new(chain_check),
        tokens,
        Some(crate::authn::ServiceAccountTokens::new(sa_key)),
    );
    let kubelet_client = pki.kubelet_client().map_err(ServerError::Pki)?;
    let agents =
        AgentDialer::new(pki.cluster_ca.cert_pem(), &kubelet_client).map_err(ServerError::Tls)?;
    Ok(Security {
        pki: Arc::new(pki),
        names,
        cert,
        tls,
        authn: Arc::new(authn),
        agents: Arc::new(agents),
    })
}

/// Every name the server is reached by: loopback, the host's name and addresses, the
/// advertised and bound addresses, the `kubernetes` Service's names and ClusterIP, and
/// the operator's `--tls-san`s.
pub(crate) fn serving_names(
    extra: &[String],
    bind: IpAddr,
    advertise: Ipv4Addr,
    service_cidr: ipnetwork::Ipv4Network,
) -> ServingNames {
    let mut names: BTreeSet<String> = [
        "localhost",
        "127.0.0.1",
        "kubernetes",
        "kubernetes.default",
        "kubernetes.default.svc",
        "kubernetes.default.svc.cluster.local",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let service_ip = Ipv4Addr::from(u32::from(service_cidr.network()).saturating_add(1));
    names.insert(service_ip.to_string());
    names.insert(advertise.to_string());
    if !bind.is_unspecified() {
        names.insert(bind.to_string());
    }
    if let Ok(host) = nix::unistd::gethostname() {
        if let Some(h) = host.to_str().filter(|h| !h.is_empty()) {
            names.insert(h.to_string());
        }
    }
    names.extend(local_addresses().iter().map(IpAddr::to_string));
    names.extend(extra.iter().cloned());
    ServingNames(names.into_iter().collect())
}

fn local_addresses() -> Vec<IpAddr> {
    let Ok(addrs) = nix::ifaddrs::getifaddrs() else {
        return Vec::new();
    };
    addrs
        .filter_map(|a| a.address)
        .filter_map(|sa| {
            if let Some(v4) = sa.as_sockaddr_in() {
                Some(IpAddr::V4(v4.ip()))
            } else {
                sa.as_sockaddr_in6().map(|v6| IpAddr::V6(v6.ip()))
            }
        })
        // Link-local v6 addresses need a zone to be dialled: no client names them.
        .filter(|ip| !matches!(ip, IpAddr::V6(v6) if (v6.segments()[0] & 0xffc0) == 0xfe80))
        .collect()
}

pub(crate) fn admin_kubeconfig_path(data_dir: &Path) -> PathBuf {
    data_dir.join(ADMIN_KUBECONFIG)
}

/// Writes `<data>/admin.kubeconfig` when it is missing, names another server, or its
/// certificate is due for renewal.
pub(crate) fn refresh_admin_kubeconfig(
    pki: &ClusterPki,
    data_dir: &Path,
    url: &str,
) -> Result<bool, ServerError> {
    let path = admin_kubeconfig_path(data_dir);
    let current = std::fs::read_to_string(&path).ok();
    let fresh = current.as_deref().is_some_and(|kc| {
        kc.contains(&format!("server: {url}\n"))
            && kubeconfig_client_cert(kc).is_some_and(|c| !c.renewal_due(cairn_pki::inspect::now()))
    });
    if fresh {
        return Ok(false);
    }
    let kc = pki
        .client_kubeconfig(url, ADMIN_USER, &[ADMIN_GROUP.to_string()])
        .map_err(ServerError::Pki)?;
    cairn_pki::files::write_private(&path, kc.as_bytes()).map_err(ServerError::Pki)?;
    Ok(true)
}

/// The certificates the renewal loop keeps current, and where each goes.
pub(crate) struct Renewed {
    pub pki: Arc<ClusterPki>,
    pub names: ServingNames,
    pub cert: Arc<SwappableCert>,
    pub agents: Arc<AgentDialer>,
}

/// Renews the serving certificate (swapped in place: open connections and watches stay),
/// the client certificate for agents and the admin kubeconfig, checking 30 times per
/// leaf lifetime, at most every minute.
pub(crate) async fn renewal_loop(r: Renewed, data_dir: PathBuf, url: String) {
    let pki = &r.pki;
    let period =
        (pki.lifetimes.leaf / 30).clamp(Duration::from_millis(200), Duration::from_secs(60));
    loop {
        tokio::time::sleep(period).await;
        match pki.renew_serving_if_due(&r.names) {
            Ok(Some(issued)) => match tls::certified_key(&issued.cert_pem, &issued.key_pem) {
                Ok(key) => {
                    r.cert.swap(key);
                    info!("renewed the serving certificate");
                }
                Err(e) => warn!(error = %e, "loading the renewed serving certificate"),
            },
            Ok(None) => {}
            Err(e) => warn!(error = %e, "renewing the serving certificate"),
        }
        match pki.renew_kubelet_client_if_due() {
            Ok(Some(issued)) => match r.agents.renewed(&issued) {
                Ok(()) => info!("renewed the client certificate for agents"),
                Err(e) => warn!(error = %e, "loading the renewed client certificate for agents"),
            },
            Ok(None) => {}
            Err(e) => warn!(error = %e, "renewing the client certificate for agents"),
        }
        match refresh_admin_kubeconfig(pki, &data_dir, &url) {
            Ok(true) => info!("renewed the admin kubeconfig's certificate"),
            Ok(false) => {}
            Err(e) => warn!(error = %e, "renewing the admin kubeconfig"),
        }
    }
}

/// A random bearer token: 32 bytes, URL-safe base64.
pub(crate) fn random_token() -> String {
    use base64::Engine;
    let bytes: [u8; 32] = rand::random();
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}
