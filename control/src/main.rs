//! cairn-control: the control plane binary.

use std::net::{Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use clap::{Parser, Subcommand};

mod certs;
mod leader;
mod migrate;
mod snapshot;
mod store_args;
mod token;

#[derive(Parser)]
#[command(
    name = "cairn-control",
    version = cairn_version::LONG,
    about = "Kubernetes-compatible control plane"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Serve the Kubernetes API.
    Serve(Box<ServeArgs>),
    /// Run only the controllers, against any Kubernetes API server.
    Controllers {
        /// Kubeconfig of the API server to act for.
        #[arg(long)]
        kubeconfig: PathBuf,
        #[command(flatten)]
        controllers: ControllerArgs,
        /// HTTPS port for /healthz and /metrics (kube-controller-manager's); 0: none.
        #[arg(long, default_value_t = 10257)]
        secure_port: u16,
        /// Address the secure port listens on.
        #[arg(long, default_value = "0.0.0.0")]
        bind_address: std::net::IpAddr,
        #[command(flatten)]
        leader_election: leader::LeaderElectArgs,
    },
    /// Run only the scheduler, against any Kubernetes API server.
    Scheduler {
        /// Kubeconfig of the API server to schedule for.
        #[arg(long)]
        kubeconfig: PathBuf,
        /// KubeSchedulerConfiguration file (`kubescheduler.config.k8s.io/v1`).
        #[arg(long)]
        config: Option<PathBuf>,
        /// HTTPS port for /healthz and /metrics (kube-scheduler's); 0: none.
        #[arg(long, default_value_t = 10259)]
        secure_port: u16,
        /// Address the secure port listens on.
        #[arg(long, default_value = "0.0.0.0")]
        bind_address: std::net::IpAddr,
        #[command(flatten)]
        leader_election: leader::LeaderElectArgs,
    },
    /// Print a kubeconfig for this server with a new client certificate (default: the
    /// admin, `cairn-admin` in `system:masters`). Needs the data dir's client CA key.
    Kubeconfig {
        #[arg(long, default_value = "/var/lib/cairn/control")]
        data_dir: PathBuf,
        /// Server URL (default: the one the server recorded in the data dir).
        #[arg(long)]
        server: Option<String>,
        /// User name of the certificate (its CN).
        #[arg(long)]
        user: Option<String>,
        /// Group of the certificate (its O); at most one.
        #[arg(long)]
        group: Vec<String>,
    },
    /// Join tokens for nodes (`cairn-agent --server URL --token TOKEN`).
    Token {
        #[command(subcommand)]
        command: token::TokenCommand,
    },
    /// The cluster's certificates.
    Certs {
        #[command(subcommand)]
        command: certs::CertsCommand,
    },
    /// Backups of the store: save (while serving) and restore (SQLite, stopped).
    Snapshot {
        #[command(subcommand)]
        command: snapshot::SnapshotCommand,
    },
    /// Move the embedded store into an empty etcd (cairn-control stopped).
    Migrate(migrate::MigrateArgs),
}

/// `cairn-control serve`.
#[derive(clap::Args)]
struct ServeArgs {
    /// Where the embedded store and server state live.
    #[arg(long, default_value = "/var/lib/cairn/control")]
    data_dir: PathBuf,
    /// Address to listen on (HTTPS; clients authenticate, see ARCHITECTURE.md's
    /// "Security model").
    #[arg(long, default_value = "0.0.0.0:6443")]
    bind: SocketAddr,
    /// Extra names or addresses for the serving certificate (repeatable).
    #[arg(long = "tls-san")]
    tls_sans: Vec<String>,
    /// Static bearer tokens, upstream's CSV: `token,user,uid,"group1,group2"`.
    #[arg(long)]
    token_auth_file: Option<PathBuf>,
    /// Upstream's EncryptionConfiguration for data at rest. Default:
    /// `<data-dir>/encryption-config.yaml`, made on first start (Secrets encrypted with
    /// secretbox under a fresh key; identity reads older data).
    #[arg(long)]
    encryption_provider_config: Option<PathBuf>,
    #[command(flatten)]
    audit: AuditArgs,
    /// Authorization: `Node,RBAC` (RBAC over the stored roles and bindings, with
    /// upstream's bootstrap policy) or `AlwaysAllow` (every authenticated user may do
    /// everything). `system:masters` is always allowed.
    #[arg(long, default_value = "Node,RBAC")]
    authorization_mode: String,
    /// Read requests served at once (0: no limit); more get 429 with Retry-After.
    #[arg(long, default_value_t = 400)]
    max_requests_inflight: usize,
    /// Mutating requests served at once (0: no limit).
    #[arg(long, default_value_t = 200)]
    max_mutating_requests_inflight: usize,
    /// How long a request may take (watches and streams excepted): `60s`, `1m`, `90`.
    #[arg(long, default_value = "60s")]
    request_timeout: String,
    /// How often the built-in metrics API (`kubectl top`) scrapes every Ready node's
    /// `/metrics/resource`: metrics-server's `--metric-resolution`.
    #[arg(long, default_value = "15s")]
    metric_resolution: String,
    /// Lifetime of the leaf certificates cairn-control issues, in seconds (tests shorten
    /// it to watch renewal; upstream's and kubeadm's one year by default).
    #[arg(long, default_value_t = 365 * 86400, hide = true)]
    cert_lifetime_seconds: u64,
    /// Longest ServiceAccount token issued, in seconds (tests shorten it to watch the
    /// agent replace mounted tokens; 0: as asked).
    #[arg(long, default_value_t = 0, hide = true)]
    service_account_token_max_seconds: i64,
    /// Range ClusterIPs are allocated from; the first address is the `kubernetes` Service's.
    #[arg(long, default_value = "10.96.0.0/12")]
    service_cluster_ip_range: ipnetwork::Ipv4Network,
    /// NodePort range, `FIRST-LAST`.
    #[arg(long, default_value = "30000-32767")]
    service_node_port_range: String,
    /// Seconds between event-log compactions.
    #[arg(long, default_value_t = 300)]
    compaction_interval_seconds: u64,
    /// Seconds between passes of the allocation claims' repair (a claim no Service holds
    /// goes after three; tests shorten it).
    #[arg(long, default_value_t = 180, hide = true)]
    allocation_repair_interval_seconds: u64,
    #[command(flatten)]
    store: store_args::StoreArgs,
    /// Events kept in memory for resumed watches.
    #[arg(long, default_value_t = 100_000)]
    watch_history: usize,
    /// Address published in the `kubernetes` Endpoints.
    #[arg(long)]
    advertise_address: Option<Ipv4Addr>,
    /// Give every Node a pod CIDR (`spec.podCIDR`) from --cluster-cidr.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set, num_args = 0..=1, default_missing_value = "true")]
    allocate_node_cidrs: bool,
    /// Range the Nodes' pod CIDRs are carved from.
    #[arg(long, default_value = "10.244.0.0/16")]
    cluster_cidr: ipnetwork::Ipv4Network,
    /// Prefix length of each Node's pod CIDR.
    #[arg(long, default_value_t = 24)]
    node_cidr_mask_size: u8,
    /// Run the scheduler in this process (a client of the API above).
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set, num_args = 0..=1, default_missing_value = "true")]
    scheduler: bool,
    /// KubeSchedulerConfiguration file for the embedded scheduler.
    #[arg(long)]
    scheduler_config: Option<PathBuf>,
    /// Seconds pods tolerate a `node.kubernetes.io/not-ready` NoExecute taint unless
    /// they say otherwise (taint-based eviction waits this long).
    #[arg(long, default_value_t = 300)]
    default_not_ready_toleration_seconds: i64,
    /// Seconds pods tolerate a `node.kubernetes.io/unreachable` NoExecute taint unless
    /// they say otherwise.
    #[arg(long, default_value_t = 300)]
    default_unreachable_toleration_seconds: i64,
    /// Create the default `local-path` StorageClass (provisioner `cairn.io/local-path`,
    /// served by every agent; WaitForFirstConsumer, reclaim Delete) when missing.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    local_path_storage_class: bool,
    /// Create the `cairn` IngressClass (controller `cairn.io/ingress`, served by every
    /// node's cairn-proxy) as the cluster's default class when missing.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    default_ingress_class: bool,
    /// Create the `kube-system/kube-dns` Service (10th address of the service range,
    /// served by every agent) when missing.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    cluster_dns_service: bool,
    #[command(flatten)]
    controllers: ControllerArgs,
    #[command(flatten)]
    leader_election: leader::LeaderElectArgs,
}

/// The default not-ready and unreachable toleration seconds, each at least 0.
fn default_tolerations(not_ready: i64, unreachable: i64) -> anyhow::Result<(i64, i64)> {
    for (flag, secs) in [
        ("default-not-ready-toleration-seconds", not_ready),
        ("default-unreachable-toleration-seconds", unreachable),
    ] {
        anyhow::ensure!(secs >= 0, "--{flag} {secs}: must be >= 0");
    }
    Ok((not_ready, unreachable))
}

fn parse_port_range(s: &str) -> anyhow::Result<(u16, u16)> {
    let (a, b) = s.split_once('-').context("port range must be FIRST-LAST")?;
    let (a, b): (u16, u16) = (a.trim().parse()?, b.trim().parse()?);
    anyhow::ensure!(a <= b, "port range {s} is empty");
    Ok((a, b))
}

/// The service behind a client of this process's own API server under `user`'s identity:
/// in process, so the scheduler's and controllers' watches cost no TLS or HTTP framing
/// (see `cairn_apiserver::in_process`).
fn in_process_service(
    server: &cairn_apiserver::RunningServer,
    user: &str,
    groups: &[&str],
) -> anyhow::Result<cairn_apiserver::in_process::InProcessService> {
    let groups = groups.iter().map(|g| g.to_string()).collect();
    server
        .in_process_service(user, groups)
        .with_context(|| format!("building the in-process API client of {user}"))
}

async fn run_scheduler(
    client: kube::Client,
    config: cairn_scheduler::config::SchedulerConfig,
) -> anyhow::Result<()> {
    cairn_scheduler::scheduling_loop::Scheduler::run(client, config).await?;
    anyhow::bail!("scheduler stopped")
}

/// A standalone component's secure port (`/healthz`, `/metrics` of what `install` puts
/// in its registry) on `addr`; none when the port is 0.
async fn serve_secure_port(
    (ip, port): (std::net::IpAddr, u16),
    component: &'static str,
    client: &kube::Client,
    install: impl FnOnce(&mut prometheus_client::registry::Registry),
) -> anyhow::Result<()> {
    if port == 0 {
        return Ok(());
    }
    let mut registry = prometheus_client::registry::Registry::default();
    install(&mut registry);
    let listener = tokio::net::TcpListener::bind((ip, port))
        .await
        .with_context(|| format!("binding the secure port {ip}:{port}"))?;
    let metrics = move || {
        let mut out = String::new();
        match prometheus_client::encoding::text::encode(&mut out, &registry) {
            Ok(()) => out,
            Err(e) => format!("# encoding the metrics failed: {e}\n"),
        }
    };
    let port = cairn_delegated::SecurePort {
        component,
        client: client.clone(),
        metrics: std::sync::Arc::new(metrics),
    };
    cairn_delegated::secure_port::start(listener, port).await?;
    Ok(())
}

async fn client_from_kubeconfig(path: &std::path::Path) -> anyhow::Result<kube::Client> {
    let kc = kube::config::Kubeconfig::read_from(path)
        .with_context(|| format!("reading kubeconfig {}", path.display()))?;
    let kconf =
        kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default())
            .await
            .with_context(|| format!("loading kubeconfig {}", path.display()))?;
    kube::Client::try_from(kconf).context("building the API client")
}

/// The CA a kubeconfig trusts (its first cluster's embedded data): the cluster CA the
/// root CA publisher hands to pods, as upstream's `--root-ca-file` defaults to it.
fn kubeconfig_ca(path: &std::path::Path) -> Option<String> {
    use base64::Engine;
    let kc = kube::config::Kubeconfig::read_from(path).ok()?;
    let data = kc
        .clusters
        .first()?
        .cluster
        .as_ref()?
        .certificate_authority_data
        .clone()?;
    let pem = base64::engine::general_purpose::STANDARD
        .decode(data.trim())
        .ok()?;
    String::from_utf8(pem).ok()
}

/// Which controllers run, and their tunables.
/// Upstream's `--audit-*` flags.
#[derive(clap::Args)]
struct AuditArgs {
    /// Upstream's audit Policy (`audit.k8s.io/v1`). Auditing is on when this and
    /// --audit-log-path are both given.
    #[arg(long)]
    audit_policy_file: Option<PathBuf>,
    /// Where audit events go, one JSON line each (`-`: standard output).
    #[arg(long)]
    audit_log_path: Option<PathBuf>,
    /// Megabytes the audit log may reach before it is rotated (0: 100).
    #[arg(long, default_value_t = 0)]
    audit_log_maxsize: u64,
    /// Rotated audit logs kept (0: all).
    #[arg(long, default_value_t = 0)]
    audit_log_maxbackup: usize,
    /// Days a rotated audit log is kept (0: no limit).
    #[arg(long, default_value_t = 0)]
    audit_log_maxage: u32,
}

impl AuditArgs {
    /// The policy file and the log settings (sizes in bytes).
    fn into_config(self) -> (Option<PathBuf>, Option<cairn_audit::LogSettings>) {
        let log = self.audit_log_path.map(|path| cairn_audit::LogSettings {
            path,
            max_bytes: self.audit_log_maxsize.saturating_mul(1024 * 1024),
            max_backups: self.audit_log_maxbackup,
            max_age_days: self.audit_log_maxage,
        });
        (self.audit_policy_file, log)
    }
}

#[derive(clap::Args, Debug)]
struct ControllerArgs {
    /// Controllers to run, kube-controller-manager's syntax: `*` for the default set,
    /// `name` to add one, `-name` to leave one out, `` for none.
    #[arg(long, default_value = "*")]
    controllers: String,
    /// Seconds a Job waits before replacing its first failed pod; the wait doubles with
    /// each failure, up to six minutes (upstream's fixed back-off starts at 10 s).
    #[arg(long, default_value_t = 10.0)]
    job_backoff_seconds: f64,
    /// Seconds a node may stay silent (no Lease renewal, no status) before its conditions
    /// turn Unknown and it is tainted unreachable.
    #[arg(long, default_value_t = 40.0)]
    node_monitor_grace_period: f64,
    /// Seconds between two looks at every node's health.
    #[arg(long, default_value_t = 5.0)]
    node_monitor_period: f64,
    /// Nodes per second that may be tainted for eviction in a healthy zone.
    #[arg(long, default_value_t = 0.1)]
    node_eviction_rate: f64,
    /// Nodes per second in a large zone where most nodes are unhealthy.
    #[arg(long, default_value_t = 0.01)]
    secondary_node_eviction_rate: f64,
    /// Share of unhealthy nodes from which a zone counts as partly disrupted.
    #[arg(long, default_value_t = 0.55)]
    unhealthy_zone_threshold: f64,
    /// Zones up to this many nodes stop evicting when partly disrupted.
    #[arg(long, default_value_t = 50)]
    large_cluster_size_threshold: usize,
    /// Finished pods kept before the oldest are deleted (0: keep all).
    #[arg(long, default_value_t = 12500)]
    terminated_pod_gc_threshold: usize,
    /// How often every HorizontalPodAutoscaler is synced.
    #[arg(long, default_value = "15s")]
    horizontal_pod_autoscaler_sync_period: String,
    /// How long an HPA waits for higher recommendations before it scales down.
    #[arg(long, default_value = "5m")]
    horizontal_pod_autoscaler_downscale_stabilization: String,
    /// How far the usage ratio may stray from 1.0 before an HPA acts.
    #[arg(long, default_value_t = 0.1)]
    horizontal_pod_autoscaler_tolerance: f64,
    /// After a pod starts, how long its CPU samples count only once it is Ready.
    #[arg(long, default_value = "5m")]
    horizontal_pod_autoscaler_cpu_initialization_period: String,
    /// After a pod starts, how long its readiness may still change as start-up.
    #[arg(long, default_value = "30s")]
    horizontal_pod_autoscaler_initial_readiness_delay: String,
}

/// A Go duration flag (`90s`, `2m`, `1m30s`, `1h`), or bare seconds (`90`); above zero.
fn go_duration(flag: &str, text: &str) -> anyhow::Result<Duration> {
    let parsed = match text.parse::<u64>() {
        Ok(secs) => Some(Duration::from_secs(secs)),
        Err(_) => cairn_semantics::duration::parse_go(text),
    };
    match parsed {
        Some(d) if !d.is_zero() => Ok(d),
        _ => anyhow::bail!("--{flag} {text}: not a duration (e.g. 60s, 1m30s)"),
    }
}

fn seconds(flag: &str, secs: f64) -> anyhow::Result<Duration> {
    Duration::try_from_secs_f64(secs).map_err(|e| anyhow::anyhow!("--{flag} {secs}: {e}"))
}

impl ControllerArgs {
    fn parse(&self) -> anyhow::Result<(cairn_controllers::Selection, cairn_controllers::Settings)> {
        let selection = cairn_controllers::Selection::parse(&self.controllers)?;
        let job_backoff = seconds("job-backoff-seconds", self.job_backoff_seconds)?;
        for (flag, rate) in [
            ("node-eviction-rate", self.node_eviction_rate),
            (
                "secondary-node-eviction-rate",
                self.secondary_node_eviction_rate,
            ),
            ("unhealthy-zone-threshold", self.unhealthy_zone_threshold),
        ] {
            anyhow::ensure!(
                rate.is_finite() && rate >= 0.0,
                "--{flag} {rate}: must be a number >= 0"
            );
        }
        let node_lifecycle = cairn_controllers::nodelifecycle::NodeLifecycleSettings {
            grace_period: seconds("node-monitor-grace-period", self.node_monitor_grace_period)?,
            monitor_period: seconds("node-monitor-period", self.node_monitor_period)?
                .max(Duration::from_millis(100)),
            pacing: cairn_controllers::nodelifecycle::zones::Pacing {
                eviction_rate: self.node_eviction_rate,
                secondary_eviction_rate: self.secondary_node_eviction_rate,
                unhealthy_zone_threshold: self.unhealthy_zone_threshold,
                large_cluster_size_threshold: self.large_cluster_size_threshold,
            },
        };
        let settings = cairn_controllers::Settings {
            job_backoff,
            node_lifecycle,
            terminated_pod_gc_threshold: self.terminated_pod_gc_threshold,
            root_ca_pem: None,
            hpa: self.hpa()?,
        };
        Ok((selection, settings))
    }

    fn hpa(&self) -> anyhow::Result<cairn_controllers::hpa::HpaSettings> {
        let flag = |name: &str, text: &str| {
            go_duration(&format!("horizontal-pod-autoscaler-{name}"), text)
        };
        let tolerance = self.horizontal_pod_autoscaler_tolerance;
        anyhow::ensure!(
            tolerance.is_finite() && tolerance >= 0.0,
            "--horizontal-pod-autoscaler-tolerance {tolerance}: must be a number >= 0"
        );
        Ok(cairn_controllers::hpa::HpaSettings {
            sync_period: flag("sync-period", &self.horizontal_pod_autoscaler_sync_period)?,
            downscale_stabilization: flag(
                "downscale-stabilization",
                &self.horizontal_pod_autoscaler_downscale_stabilization,
            )?,
            tolerance,
            cpu_initialization_period: flag(
                "cpu-initialization-period",
                &self.horizontal_pod_autoscaler_cpu_initialization_period,
            )?,
            initial_readiness_delay: flag(
                "initial-readiness-delay",
                &self.horizontal_pod_autoscaler_initial_readiness_delay,
            )?,
        })
    }
}

async fn run_controllers(
    client: kube::Client,
    (selection, settings): (cairn_controllers::Selection, cairn_controllers::Settings),
) -> anyhow::Result<()> {
    if selection.names().is_empty() {
        return std::future::pending().await;
    }
    cairn_controllers::run(client, &selection, settings).await;
    anyhow::bail!("controllers stopped")
}

/// What runs beside the API server: the scheduler (None: off), the controllers and,
/// with `--leader-elect`, the election's timing.
struct Components {
    scheduler: Option<cairn_scheduler::config::SchedulerConfig>,
    controllers: (cairn_controllers::Selection, cairn_controllers::Settings),
    election: Option<cairn_leaderelection::Timing>,
}

/// Serves the API with the scheduler and controllers beside it until one stops, or
/// SIGINT/SIGTERM (leases released first).
async fn serve(
    mut config: cairn_apiserver::ServerConfig,
    mut components: Components,
) -> anyhow::Result<()> {
    let data_dir = config.data_dir.clone();
    let ca_path = data_dir.join("pki").join("ca.crt");
    // The node IPAM allocates from in-memory state: one replica at a time runs it.
    let node_ipam = config.node_ipam.take();
    // So do the CSR controllers: replicas signing at once would race on every request.
    config.csr_controllers = false;
    let server = cairn_apiserver::start(config).await?;
    // The CA the server just made or loaded, for the root CA publisher.
    let ca = std::fs::read_to_string(&ca_path)
        .with_context(|| format!("reading the cluster CA {}", ca_path.display()))?;
    components.controllers.1.root_ca_pem = Some(ca);
    // The in-process scheduler's and controllers' metrics join the server's `/metrics`.
    let mut registry = prometheus_client::registry::Registry::default();
    cairn_scheduler::metrics::SchedulerMetrics::install(&mut registry);
    cairn_controllers::queue_metrics::QueueMetrics::install(&mut registry);
    cairn_leaderelection::LeaderMetrics::install(&mut registry);
    server.state.metrics.add(registry);
    // The identities upstream's bootstrap policy binds for these two components, and the
    // API server's own loopback identity (upstream's `system:apiserver`) for the IPAM.
    let controllers_service = in_process_service(&server, "system:kube-controller-manager", &[])?;
    let scheduler_service = in_process_service(&server, "system:kube-scheduler", &[])?;
    let apiserver_service = in_process_service(&server, "system:apiserver", &["system:masters"])?;
    // The listener accepts and the API answers from here on.
    cairn_systemd::ready("serving the API");
    let _watchdog = cairn_systemd::spawn_watchdog();
    let shutdown = leader::shutdown_signal();
    let Components {
        scheduler,
        controllers,
        election,
    } = components;
    let identity = leader::identity_in(&data_dir)?;
    let election = (election, identity.as_str());
    let client = |service: &cairn_apiserver::in_process::InProcessService| {
        kube::Client::new(service.clone(), "default")
    };
    let scheduling = scheduler.map(|cfg| {
        let service = scheduler_service.clone();
        move || run_scheduler(kube::Client::new(service.clone(), "default"), cfg.clone())
    });
    // None selected (`--controllers=`): no campaign, so a standalone controller manager
    // can hold the lease.
    let controlling = (!controllers.0.names().is_empty()).then(|| {
        let service = controllers_service.clone();
        move || {
            run_controllers(
                kube::Client::new(service.clone(), "default"),
                controllers.clone(),
            )
        }
    });
    let allocating = node_ipam.map(|ipam| {
        let state = std::sync::Arc::clone(&server.state);
        move || run_node_ipam(std::sync::Arc::clone(&state), ipam)
    });
    let csr = server.csr_controllers();
    let signing = Some(move || run_csr_controllers(csr.clone()));
    let stop = || shutdown.clone();
    let state = std::sync::Arc::clone(&server.state);
    tokio::select! {
        r = server.wait() => r?,
        r = async {
            tokio::try_join!(
                leader::run_elected_if(scheduling, election, "kube-scheduler", client(&scheduler_service), stop()),
                leader::run_elected_if(controlling, election, "kube-controller-manager", client(&controllers_service), stop()),
                leader::run_elected_if(allocating, election, "cairn-node-ipam", client(&apiserver_service), stop()),
                leader::run_elected_if(signing, election, "cairn-csr-controllers", client(&apiserver_service), stop()),
            )
        } => { r?; }
    }
    // Stopping: clients in pods are no longer sent here.
    state.remove_own_endpoint().await;
    Ok(())
}

async fn run_node_ipam(
    state: std::sync::Arc<cairn_apiserver::state::ApiState>,
    config: cairn_apiserver::nodeipam::NodeIpamConfig,
) -> anyhow::Result<()> {
    cairn_apiserver::nodeipam::node_ipam_loop(state, config).await;
    anyhow::bail!("node IPAM stopped")
}

async fn run_csr_controllers(csr: cairn_apiserver::csr::CsrControllers) -> anyhow::Result<()> {
    cairn_apiserver::csr::run(csr).await;
    anyhow::bail!("CSR controllers stopped")
}

/// The API server's configuration, the in-process scheduler's (None: off) and the
/// controllers to run, from the flags. A config error stops startup before anything
/// listens.
fn serve_config(args: ServeArgs) -> anyhow::Result<(cairn_apiserver::ServerConfig, Components)> {
    let ServeArgs {
        data_dir,
        bind,
        service_cluster_ip_range,
        service_node_port_range,
        compaction_interval_seconds,
        allocation_repair_interval_seconds,
        store,
        watch_history,
        advertise_address,
        allocate_node_cidrs,
        cluster_cidr,
        node_cidr_mask_size,
        scheduler,
        scheduler_config,
        default_not_ready_toleration_seconds,
        default_unreachable_toleration_seconds,
        local_path_storage_class,
        default_ingress_class,
        cluster_dns_service,
        tls_sans,
        token_auth_file,
        encryption_provider_config,
        audit,
        authorization_mode,
        max_requests_inflight,
        max_mutating_requests_inflight,
        request_timeout,
        metric_resolution,
        cert_lifetime_seconds,
        service_account_token_max_seconds,
        controllers,
        leader_election,
    } = args;
    let controllers = controllers.parse()?;
    let election = leader_election.timing()?;
    let scheduler_config = match (scheduler, scheduler_config) {
        (false, _) => None,
        (true, Some(path)) => Some(cairn_scheduler::config::SchedulerConfig::load(&path)?),
        (true, None) => Some(cairn_scheduler::config::SchedulerConfig::default()),
    };
    let mut config = cairn_apiserver::ServerConfig::new(data_dir);
    config.bind = bind;
    config.service_cidr = service_cluster_ip_range;
    config.node_port_range = parse_port_range(&service_node_port_range)?;
    config.compaction_interval = Duration::from_secs(compaction_interval_seconds.max(1));
    config.allocation_repair_interval =
        Duration::from_secs(allocation_repair_interval_seconds.max(1));
    config.etcd = store.etcd()?;
    config.watch_history = watch_history;
    config.advertise_address = advertise_address;
    config.default_toleration_seconds = default_tolerations(
        default_not_ready_toleration_seconds,
        default_unreachable_toleration_seconds,
    )?;
    config.local_path_storage_class = local_path_storage_class;
    config.default_ingress_class = default_ingress_class;
    config.cluster_dns_service = cluster_dns_service;
    config.tls_sans = tls_sans;
    config.token_auth_file = token_auth_file;
    config.encryption_provider_config = encryption_provider_config;
    (config.audit_policy_file, config.audit_log) = audit.into_config();
    config.authorization_mode =
        cairn_apiserver::authz::Mode::parse(&authorization_mode).map_err(anyhow::Error::msg)?;
    config.limits = cairn_apiserver::limits::RequestLimits {
        max_inflight: max_requests_inflight,
        max_mutating_inflight: max_mutating_requests_inflight,
        timeout: go_duration("request-timeout", &request_timeout)?,
    };
    config.metric_resolution = go_duration("metric-resolution", &metric_resolution)?;
    anyhow::ensure!(
        !config.metric_resolution.is_zero(),
        "--metric-resolution {metric_resolution}: must be positive"
    );
    anyhow::ensure!(
        cert_lifetime_seconds >= 3,
        "--cert-lifetime-seconds {cert_lifetime_seconds}: must be at least 3"
    );
    config.cert_lifetimes.leaf = Duration::from_secs(cert_lifetime_seconds);
    config.max_token_seconds = service_account_token_max_seconds.max(0);
    config.node_ipam = if allocate_node_cidrs {
        Some(cairn_apiserver::nodeipam::NodeIpamConfig::new(
            cluster_cidr,
            node_cidr_mask_size,
        )?)
    } else {
        None
    };
    let components = Components {
        scheduler: scheduler_config,
        controllers,
        election,
    };
    Ok((config, components))
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .init();
    // One TLS provider for every rustls user in the process (kube, reqwest): ring, which
    // needs no C toolchain. Failing means one is already installed, which is fine.
    let _ = rustls::crypto::ring::default_provider().install_default();
    match Cli::parse().command {
        Command::Serve(args) => {
            let (config, components) = serve_config(*args)?;
            serve(config, components).await?;
            // Stopped by a signal, leases released: exit now rather than wait for the
            // runtime's blocking threads (the store's), as the signal's default would.
            std::process::exit(0)
        }
        Command::Scheduler {
            kubeconfig,
            config,
            secure_port,
            bind_address,
            leader_election,
        } => {
            let cfg = match config {
                Some(path) => cairn_scheduler::config::SchedulerConfig::load(&path)?,
                None => cairn_scheduler::config::SchedulerConfig::default(),
            };
            let election = leader_election.timing()?;
            let client = client_from_kubeconfig(&kubeconfig).await?;
            let port = (bind_address, secure_port);
            serve_secure_port(port, "kube-scheduler", &client, |registry| {
                cairn_scheduler::metrics::SchedulerMetrics::install(registry);
                cairn_leaderelection::LeaderMetrics::install(registry);
            })
            .await?;
            let work = move || {
                let (kubeconfig, cfg) = (kubeconfig.clone(), cfg.clone());
                async move { run_scheduler(client_from_kubeconfig(&kubeconfig).await?, cfg).await }
            };
            let identity = cairn_leaderelection::identity();
            let shutdown = leader::shutdown_signal();
            leader::run_elected(
                (election, &identity),
                "kube-scheduler",
                client,
                work,
                shutdown,
            )
            .await
        }
        Command::Controllers {
            kubeconfig,
            controllers,
            secure_port,
            bind_address,
            leader_election,
        } => {
            cairn_alloc::purge_freed_pages_at_once();
            let mut controllers = controllers.parse()?;
            controllers.1.root_ca_pem = kubeconfig_ca(&kubeconfig);
            let election = leader_election.timing()?;
            let client = client_from_kubeconfig(&kubeconfig).await?;
            let port = (bind_address, secure_port);
            serve_secure_port(port, "kube-controller-manager", &client, |registry| {
                cairn_controllers::queue_metrics::QueueMetrics::install(registry);
                cairn_leaderelection::LeaderMetrics::install(registry);
            })
            .await?;
            let work = move || {
                let (kubeconfig, controllers) = (kubeconfig.clone(), controllers.clone());
                async move {
                    run_controllers(client_from_kubeconfig(&kubeconfig).await?, controllers).await
                }
            };
            let identity = cairn_leaderelection::identity();
            let shutdown = leader::shutdown_signal();
            leader::run_elected(
                (election, &identity),
                "kube-controller-manager",
                client,
                work,
                shutdown,
            )
            .await
        }
        Command::Kubeconfig {
            data_dir,
            server,
            user,
            group,
        } => certs::print_kubeconfig(&data_dir, server, user, &group),
        Command::Certs { command } => certs::run(command),
        Command::Snapshot { command } => snapshot::run(command).await,
        Command::Migrate(args) => migrate::run(args).await,
        Command::Token { command } => token::run(command, go_duration).await,
    }
}
