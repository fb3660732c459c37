//! The HTTP API server of cairn-control.
//!
//! Request flow: [`handlers`] parses the path and query ([`request`]), then reads through
//! the watch cache or writes through [`state::ApiState`], which runs decoding, defaulting,
//! admission and validation (from `cairn-api`) before the durable store
//! (`cairn-store`). Watches stream from the cache ([`watch`]).

pub mod admission;
pub mod agent_dial;
pub mod allocator;
pub mod audit;
pub mod authn;
pub mod authz;
pub mod conversion_webhook;
pub mod csr;
pub mod custom;
pub mod decorate;
mod decorate_raw;
pub mod default_class;
pub mod discovery;
pub mod handlers;
pub mod in_process;
pub mod limitranger;
pub mod limits;
pub mod metered_store;
pub mod metrics_api;
pub mod nodeipam;
pub mod object_fields;
pub mod objects;
pub mod openapi;
pub mod podlog;
pub mod podstream;
pub mod priority;
pub mod proxy;
mod quota;
pub mod render;
pub mod request;
pub mod selectors;
mod serve;
pub mod server_metrics;
pub mod serviceaccount_admission;
pub mod state;
pub mod storage;
pub use cairn_pki::tls;
mod tls_setup;
pub mod watch;

use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use cairn_store::cache::WatchCache;
use cairn_store::sqlite::SqliteBackend;
use cairn_store::Backend;
use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tracing::{info, warn};

use crate::state::{ApiState, ServerSettings};

/// Name of the file in the data dir holding the URL the server listens on.
pub const SERVER_URL_FILE: &str = "server-url";

#[derive(Debug, Clone)]
pub struct ServerConfig {
    pub data_dir: PathBuf,
    pub bind: SocketAddr,
    pub service_cidr: ipnetwork::Ipv4Network,
    pub node_port_range: (u16, u16),
    /// Events kept in memory for watches resumed from an older resourceVersion.
    pub watch_history: usize,
    /// How often the event log is compacted (to the revision of the previous round).
    pub compaction_interval: Duration,
    /// How often every replica looks for allocation claims no Service holds (upstream's
    /// repair controllers run every 3 minutes).
    pub allocation_repair_interval: Duration,
    /// Address published in the `kubernetes` Endpoints (defaults to the bind address,
    /// or 127.0.0.1 when bound to all addresses).
    pub advertise_address: Option<Ipv4Addr>,
    /// Pod CIDR allocation to Nodes (`--allocate-node-cidrs`); None turns it off.
    pub node_ipam: Option<nodeipam::NodeIpamConfig>,
    /// Whether the server runs the CSR approving and signing controllers itself; off when
    /// the caller runs [`RunningServer::csr_controllers`] under a lease, so that of
    /// several replicas one acts.
    pub csr_controllers: bool,
    /// Seconds of the default `not-ready` and `unreachable` tolerations added to pods.
    pub default_toleration_seconds: (i64, i64),
    /// Whether bootstrap creates the default `local-path` StorageClass.
    pub local_path_storage_class: bool,
    /// Whether bootstrap creates the default `cairn` IngressClass.
    pub default_ingress_class: bool,
    /// Create the `kube-system/kube-dns` Service when missing.
    pub cluster_dns_service: bool,
    /// Names and addresses the serving certificate carries besides the ones found.
    pub tls_sans: Vec<String>,
    /// Lifetimes of the CAs and of the certificates issued from them.
    pub cert_lifetimes: cairn_pki::Lifetimes,
    /// Static bearer tokens (`--token-auth-file`, upstream's CSV format).
    pub token_auth_file: Option<PathBuf>,
    /// Upstream's `--encryption-provider-config`; `<data>/encryption-config.yaml` (made
    /// on first start: Secrets under secretbox) when not given.
    pub encryption_provider_config: Option<PathBuf>,
    /// `--authorization-mode`.
    pub authorization_mode: authz::Mode,
    /// In-flight limits and the request timeout.
    pub limits: limits::RequestLimits,
    /// Caps ServiceAccount tokens' lifetime (0: none); for tests of token refresh.
    pub max_token_seconds: i64,
    /// `--audit-policy-file`; auditing is on when it and `audit_log` are both set.
    pub audit_policy_file: Option<PathBuf>,
    /// `--audit-log-path` and its rotation settings.
    pub audit_log: Option<cairn_audit::LogSettings>,
    /// How often the metrics API scrapes the nodes (metrics-server's
    /// `--metric-resolution`, 15 s).
    pub metric_resolution: Duration,
    /// The store: the embedded SQLite in the data directory (None), or etcd
    /// (`--store etcd --etcd-servers …`).
    pub etcd: Option<cairn_store_etcd::EtcdConfig>,
}

impl ServerConfig {
    pub fn new(data_dir: impl Into<PathBuf>) -> Self {
        ServerConfig {
            data_dir: data_dir.into(),
            bind: SocketAddr::from(([127, 0, 0, 1], 6443)),
            service_cidr: ipnetwork::Ipv4Network::new(Ipv4Addr::new(10, 96, 0, 0), 12)
                .unwrap_or_else(|_| ipnetwork::Ipv4Network::from(Ipv4Addr::new(10, 96, 0, 0))),
            node_port_range: (30000, 32767),
            watch_history: 100_000,
            compaction_interval: Duration::from_secs(300),
            allocation_repair_interval: Duration::from_secs(180),
            advertise_address: None,
            node_ipam: Some(nodeipam::NodeIpamConfig::kubernetes_default()),
            csr_controllers: true,
            default_toleration_seconds: (
                cairn_api::defaults::DEFAULT_TOLERATION_SECONDS,
                cairn_api::defaults::DEFAULT_TOLERATION_SECONDS,
            ),
            local_path_storage_class: true,
            default_ingress_class: true,
            cluster_dns_service: true,
            tls_sans: Vec::new(),
            cert_lifetimes: cairn_pki::Lifetimes::default(),
            token_auth_file: None,
            encryption_provider_config: None,
            authorization_mode: authz::Mode::NODE_RBAC,
            limits: limits::RequestLimits::default(),
            audit_policy_file: None,
            audit_log: None,
            max_token_seconds: 0,
            metric_resolution: Duration::from_secs(15),
            etcd: None,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    #[error("creating data dir {path}: {source}")]
    DataDir {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("opening store in {path}: {source}")]
    Store {
        path: PathBuf,
        source: cairn_store::StoreError,
    },
    #[error("opening the etcd store: {0}")]
    Etcd(#[from] cairn_store_etcd::EtcdError),
    #[error("binding {addr}: {source}")]
    Bind {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error("bootstrapping cluster objects: {0}")]
    Bootstrap(cairn_api::status::Status),
    #[error("writing {path}: {source}")]
    WriteFile {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("serving HTTP: {0}")]
    Serve(std::io::Error),
    #[error("certificates: {0}")]
    Pki(cairn_pki::PkiError),
    #[error("{0}")]
    Tls(tls::TlsError),
    #[error("{0}")]
    TokenFile(authn::token_file::TokenFileError),
    #[error("{0}")]
    Encryption(cairn_encryption::EncryptionConfigError),
    #[error("{path}: missing, but the store holds encrypted Secrets; restore the file (or pass --encryption-provider-config) so they can be read")]
    EncryptionConfigLost { path: PathBuf },
    #[error("{0}")]
    AuditPolicy(cairn_audit::PolicyError),
    #[error("{0}")]
    AuditLog(cairn_audit::sink::SinkError),
}

/// The auditor `config` asks for: upstream audits only with both a policy and a log.
fn auditor(config: &ServerConfig) -> Result<Option<Arc<audit::Auditor>>, ServerError> {
    let (Some(policy), Some(log)) = (&config.audit_policy_file, &config.audit_log) else {
        return Ok(None);
    };
    let policy = cairn_audit::Policy::load(policy).map_err(ServerError::AuditPolicy)?;
    let sink = cairn_audit::FileSink::open(log.clone()).map_err(ServerError::AuditLog)?;
    Ok(Some(Arc::new(audit::Auditor {
        policy,
        sink: Arc::new(sink),
    })))
}

/// A server running in the background of the current tokio runtime.
pub struct RunningServer {
    pub addr: SocketAddr,
    pub state: Arc<ApiState>,
    pki: Arc<cairn_pki::ClusterPki>,
    authn: Arc<authn::Authenticator>,
    guards: serve::Guards,
    shutdown: Option<oneshot::Sender<()>>,
    task: JoinHandle<Result<(), ServerError>>,
    background: Vec<JoinHandle<()>>,
    /// Held while the server runs on the embedded store.
    _store_lock: Option<cairn_store::sqlite::DataDirLock>,
}

impl RunningServer {
    /// The URL clients in this process use (loopback when bound to every address).
    pub fn url(&self) -> String {
        format!("https://{}", loopback_addr(self.addr))
    }

    /// A kubeconfig with a fresh client certificate for `user` in `groups`.
    pub fn kubeconfig_for(&self, user: &str, groups: &[String]) -> Result<String, ServerError> {
        self.pki
            .client_kubeconfig(&self.url(), user, groups)
            .map_err(ServerError::Pki)
    }

    /// The CSR approving and signing controllers over this server's state and CA keys,
    /// for a caller that runs them itself ([`ServerConfig::csr_controllers`] off).
    pub fn csr_controllers(&self) -> csr::CsrControllers {
        csr::CsrControllers {
            state: Arc::clone(&self.state),
            authorizer: Arc::clone(&self.guards.authorizer),
            pki: Arc::clone(&self.pki),
        }
    }

    /// A kubeconfig of the admin (`system:masters`).
    pub fn admin_kubeconfig(&self) -> Result<String, ServerError> {
        self.kubeconfig_for(tls_setup::ADMIN_USER, &[tls_setup::ADMIN_GROUP.to_string()])
    }

    /// An in-process connection for `user` in `groups`, authenticated by a token of its
    /// own like a loopback kubeconfig, without TLS and HTTP framing (the embedded
    /// scheduler and controllers).
    pub fn in_process_service(
        &self,
        user: &str,
        groups: Vec<String>,
    ) -> Option<in_process::InProcessService> {
        let token = tls_setup::random_token();
        self.authn
            .add_token(token.clone(), cairn_auth::UserInfo::new(user, groups));
        in_process::InProcessService::new(Arc::clone(&self.state), self.guards.clone(), &token)
    }

    /// Stops accepting requests and waits for the server task.
    pub async fn stop(mut self) -> Result<(), ServerError> {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        for b in &self.background {
            b.abort();
        }
        match self.task.await {
            Ok(r) => r,
            Err(e) => Err(ServerError::Serve(std::io::Error::other(e.to_string()))),
        }
    }

    /// Waits until the server stops by itself (it does not, unless it fails).
    pub async fn wait(self) -> Result<(), ServerError> {
        match self.task.await {
            Ok(r) => r,
            Err(e) => Err(ServerError::Serve(std::io::Error::other(e.to_string()))),
        }
    }
}

/// The server's own loops: compaction, certificate renewal, the CSR approver and
/// signer, the metrics API's scraper, node IPAM.
fn spawn_background(
    config: &ServerConfig,
    state: &Arc<ApiState>,
    authorizer: &Arc<authz::Authorizer>,
    security: &tls_setup::Security,
    backend: Arc<dyn Backend>,
    url: String,
) -> Vec<tokio::task::JoinHandle<()>> {
    let mut background = vec![
        tokio::spawn(compaction_loop(backend, config.compaction_interval)),
        tokio::spawn(tls_setup::renewal_loop(
            tls_setup::Renewed {
                pki: Arc::clone(&security.pki),
                names: security.names.clone(),
                cert: Arc::clone(&security.cert),
                agents: Arc::clone(&security.agents),
            },
            config.data_dir.clone(),
            url,
        )),
    ];
    if config.csr_controllers {
        background.push(tokio::spawn(csr::run(csr::CsrControllers {
            state: Arc::clone(state),
            authorizer: Arc::clone(authorizer),
            pki: Arc::clone(&security.pki),
        })));
    }
    background.push(tokio::spawn(
        state::master_leases::endpoint_reconciler_loop(Arc::clone(state)),
    ));
    background.push(tokio::spawn(state::claim_repair::claim_repair_loop(
        Arc::clone(state),
        config.allocation_repair_interval,
    )));
    background.push(tokio::spawn(metrics_api::scrape_loop(
        Arc::clone(state),
        config.metric_resolution,
    )));
    if let Some(ipam) = config.node_ipam {
        background.push(tokio::spawn(nodeipam::node_ipam_loop(
            Arc::clone(state),
            ipam,
        )));
    }
    background
}

/// The store (metered) and the watch cache over it.
async fn open_store_and_cache(
    config: &ServerConfig,
    metrics: &Arc<server_metrics::ServerMetrics>,
) -> Result<(Arc<dyn Backend>, Arc<WatchCache>), ServerError> {
    let backend = open_store(config, metrics).await?;
    let cache = WatchCache::start(
        Arc::clone(&backend),
        Arc::new(decorate::ObjectDecorator),
        config.watch_history,
    )
    .await
    .map_err(|source| ServerError::Store {
        path: config.data_dir.clone(),
        source,
    })?;
    Ok((backend, cache))
}

async fn bind(addr: SocketAddr) -> Result<(TcpListener, SocketAddr), ServerError> {
    let bind_err = |source| ServerError::Bind { addr, source };
    let listener = TcpListener::bind(addr).await.map_err(bind_err)?;
    let local = listener.local_addr().map_err(bind_err)?;
    Ok((listener, local))
}

/// Opens the store, loads the cache, bootstraps the cluster objects and starts serving.
pub async fn start(config: ServerConfig) -> Result<RunningServer, ServerError> {
    // The built-in kinds' OpenAPI documents take a moment to generate: not in a request.
    tokio::task::spawn_blocking(openapi::builtin::documents);
    std::fs::create_dir_all(&config.data_dir).map_err(|source| ServerError::DataDir {
        path: config.data_dir.clone(),
        source,
    })?;
    // The embedded store is this server's alone (a restore waits for it to stop).
    let store_lock = match &config.etcd {
        Some(_) => None,
        None => Some(
            cairn_store::sqlite::DataDirLock::take(&config.data_dir).map_err(|source| {
                ServerError::Store {
                    path: config.data_dir.clone(),
                    source,
                }
            })?,
        ),
    };
    let metrics = Arc::new(server_metrics::ServerMetrics::new());
    let (backend, cache) = open_store_and_cache(&config, &metrics).await?;
    let (listener, addr) = bind(config.bind).await?;
    let advertise = config.advertise_address.unwrap_or(match addr.ip() {
        std::net::IpAddr::V4(ip) if !ip.is_unspecified() => ip,
        _ => Ipv4Addr::LOCALHOST,
    });
    let security = tls_setup::setup(&config, addr.ip(), advertise)?;
    let url = format!("https://{}", loopback_addr(addr));
    tls_setup::refresh_admin_kubeconfig(&security.pki, &config.data_dir, &url)?;
    let state = ApiState::new(
        cache,
        ServerSettings {
            advertise_address: advertise,
            advertise_port: addr.port(),
            default_toleration_seconds: config.default_toleration_seconds,
            local_path_storage_class: config.local_path_storage_class,
            default_ingress_class: config.default_ingress_class,
            cluster_dns_service: config.cluster_dns_service,
            max_token_seconds: config.max_token_seconds,
        },
        config.service_cidr,
        config.node_port_range,
        metrics,
        Arc::clone(&security.agents),
    );
    state.claim_allocations().await;
    state.bootstrap().await.map_err(ServerError::Bootstrap)?;
    state
        .publish_client_ca(security.pki.client_ca.cert_pem())
        .await
        .map_err(ServerError::Bootstrap)?;
    let authorizer = Arc::new(authz::Authorizer::new(config.authorization_mode));
    let index_sync = authz::sync::start(Arc::clone(&authorizer), Arc::clone(&state.cache));
    state.refresh_custom_resources();
    let audit = auditor(&config)?;
    write_server_url(&config.data_dir, &url)?;

    let mut background = index_sync;
    background.extend(spawn_background(
        &config,
        &state,
        &authorizer,
        &security,
        backend,
        url,
    ));
    let (tx, rx) = oneshot::channel::<()>();
    let guards = serve::Guards {
        authn: Arc::clone(&security.authn),
        authorizer,
        limiter: Arc::new(limits::Limiter::new(config.limits)),
        cluster_ca_pem: Arc::from(security.pki.cluster_ca.cert_pem()),
        audit,
    };
    let serving = serve::serve(
        listener,
        security.tls,
        Arc::clone(&state),
        guards.clone(),
        rx,
    );
    let task = tokio::spawn(async move {
        serving.await;
        Ok(())
    });
    info!(%addr, data_dir = %config.data_dir.display(), "cairn-control serving HTTPS");
    Ok(RunningServer {
        addr,
        state,
        pki: security.pki,
        authn: security.authn,
        guards,
        shutdown: Some(tx),
        task,
        background,
        _store_lock: store_lock,
    })
}

/// The store behind the encryption configuration: the one given, else the data
/// directory's, written with a fresh key on first start.
async fn encrypted(
    stored: Arc<dyn Backend>,
    config: &ServerConfig,
) -> Result<Arc<dyn Backend>, ServerError> {
    let path = match &config.encryption_provider_config {
        Some(path) => path.clone(),
        None => {
            let path = config.data_dir.join(ENCRYPTION_CONFIG_FILE);
            if !path.exists() {
                // A new key cannot read what an old one wrote: a lost configuration
                // must be restored, not silently replaced.
                if holds_encrypted_secrets(&*stored).await {
                    return Err(ServerError::EncryptionConfigLost { path });
                }
                let text = cairn_encryption::EncryptionConfig::default_document();
                cairn_pki::files::write_private(&path, text.as_bytes())
                    .map_err(ServerError::Pki)?;
            }
            path
        }
    };
    let encryption =
        cairn_encryption::EncryptionConfig::load(&path).map_err(ServerError::Encryption)?;
    Ok(Arc::new(cairn_encryption::EncryptingBackend::new(
        stored, encryption,
    )))
}

/// The store (SQLite in the data directory, or etcd), timed, behind the encryption
/// configuration.
async fn open_store(
    config: &ServerConfig,
    metrics: &Arc<server_metrics::ServerMetrics>,
) -> Result<Arc<dyn Backend>, ServerError> {
    let backend: Arc<dyn Backend> = match &config.etcd {
        Some(etcd) => Arc::new(cairn_store_etcd::EtcdBackend::connect(etcd).await?),
        None => SqliteBackend::open(&config.data_dir).map_err(|source| ServerError::Store {
            path: config.data_dir.clone(),
            source,
        })?,
    };
    let stored = Arc::new(metered_store::MeteredBackend::new(
        backend,
        Arc::clone(metrics),
    ));
    encrypted(stored, config).await
}

/// Whether any stored Secret was written by an encrypting provider.
async fn holds_encrypted_secrets(stored: &dyn Backend) -> bool {
    let Some(secrets) = cairn_api::registry::find("", "v1", "secrets") else {
        return false;
    };
    match stored.list(&secrets.key_prefix()).await {
        Ok((values, _)) => values
            .iter()
            .any(|kv| kv.value.starts_with(cairn_encryption::ENCRYPTED_PREFIX)),
        // The store's own error surfaces at its first real read.
        Err(_) => false,
    }
}

/// The default encryption configuration in a data directory.
pub const ENCRYPTION_CONFIG_FILE: &str = "encryption-config.yaml";

fn write_server_url(data_dir: &Path, url: &str) -> Result<(), ServerError> {
    let path = data_dir.join(SERVER_URL_FILE);
    let tmp = data_dir.join(format!("{SERVER_URL_FILE}.tmp"));
    std::fs::write(&tmp, format!("{url}\n"))
        .and_then(|_| std::fs::rename(&tmp, &path))
        .map_err(|source| ServerError::WriteFile { path, source })
}

/// Keeps at least one interval of history: each round compacts to the revision the
/// previous round saw, as kube-apiserver does with etcd.
async fn compaction_loop(backend: Arc<dyn Backend>, interval: Duration) {
    let mut previous: Option<i64> = None;
    loop {
        tokio::time::sleep(interval).await;
        let current = match backend.current_revision().await {
            Ok(r) => r,
            Err(e) => {
                warn!(error = %e, "compaction: reading current revision");
                continue;
            }
        };
        if let Some(rev) = previous {
            match backend.compact(rev).await {
                Ok(()) => info!(revision = rev, "compacted event log"),
                Err(e) => warn!(revision = rev, error = %e, "compaction failed"),
            }
        }
        previous = Some(current);
    }
}

/// The address clients in this host dial: loopback for a server bound to all addresses.
fn loopback_addr(addr: SocketAddr) -> SocketAddr {
    if addr.ip().is_unspecified() {
        SocketAddr::from((Ipv4Addr::LOCALHOST, addr.port()))
    } else {
        addr
    }
}

pub use tls_setup::{ADMIN_GROUP, ADMIN_USER};

/// The server URL recorded in a data dir by a running (or previous) server.
pub fn server_url_from_data_dir(data_dir: &Path) -> Result<String, std::io::Error> {
    Ok(std::fs::read_to_string(data_dir.join(SERVER_URL_FILE))?
        .trim()
        .to_string())
}
