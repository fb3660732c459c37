//! Command line and config file. Every flag has the same key in the `--config` TOML file
//! (kebab-case); the command line wins over the file, the file over the defaults.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use serde::Deserialize;

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("reading config file {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("parsing config file {path}: {message}")]
    Parse { path: PathBuf, message: String },
    #[error("invalid {key}: {message}")]
    Invalid { key: &'static str, message: String },
}

/// Flags of `cairn-agent run` (all optional here; defaults applied in [`AgentConfig::resolve`]).
#[derive(Debug, Default, Clone, clap::Args, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct AgentFlags {
    /// kubeconfig used to reach cairn-control. With `--token`, where the node's
    /// credentials are kept (default: `<root-dir>/kubeconfig`).
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,
    /// The API server to join (`https://host:6443`), with `--token`.
    #[arg(long)]
    pub server: Option<String>,
    /// Join token, `K10<sha256 of the CA>::<id>.<secret>` (`cairn-control token create`).
    #[arg(long, env = "CAIRN_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
    /// A file holding the join token.
    #[arg(long)]
    pub token_file: Option<PathBuf>,
    /// Node name (default: the host name).
    #[arg(long)]
    pub node_name: Option<String>,
    /// The node's InternalIP (default: the first global IPv4 address).
    #[arg(long)]
    pub node_ip: Option<String>,
    #[arg(long)]
    pub containerd_socket: Option<PathBuf>,
    /// containerd namespace for this agent's containers.
    #[arg(long)]
    pub containerd_namespace: Option<String>,
    #[arg(long)]
    pub root_dir: Option<PathBuf>,
    /// Runtime state (pinned namespaces); must be shared with containerd's mount namespace.
    #[arg(long)]
    pub state_dir: Option<PathBuf>,
    #[arg(long)]
    pub cni_conf_dir: Option<PathBuf>,
    /// CNI plugin directories, comma separated.
    #[arg(long)]
    pub cni_bin_dir: Option<String>,
    #[arg(long)]
    pub pod_log_dir: Option<PathBuf>,
    /// cgroup under which the pods' `kubepods` hierarchy lives.
    #[arg(long)]
    pub cgroup_root: Option<String>,
    /// Where cgroupfs is mounted.
    #[arg(long)]
    pub cgroupfs_mount: Option<PathBuf>,
    /// Address of the agent's HTTPS server (logs, exec, /pods, stats), the kubelet's
    /// port: every request authenticated and authorized through the API server.
    #[arg(long)]
    pub listen: Option<SocketAddr>,
    /// Address of the plain-HTTP `/healthz` (the kubelet's `--healthz-bind-address` and
    /// `--healthz-port`; loopback, 10248 by default).
    #[arg(long)]
    pub healthz_listen: Option<SocketAddr>,
    /// The CA whose client certificates the port accepts (the kubelet's
    /// `--client-ca-file`). Without it, the one the API server publishes in
    /// `kube-system/extension-apiserver-authentication`, read over the verified join.
    #[arg(long)]
    pub client_ca_file: Option<PathBuf>,
    /// Static pod manifests.
    #[arg(long)]
    pub static_pod_dir: Option<PathBuf>,
    /// containerd-style registry hosts dir (`<dir>/<host>/hosts.toml`).
    #[arg(long)]
    pub registry_config_dir: Option<PathBuf>,
    /// The `cairn-logger` binary the shim runs for container stdout/stderr.
    #[arg(long)]
    pub logger_path: Option<PathBuf>,
    #[arg(long)]
    pub max_pods: Option<u32>,
    /// Reserved for the system: CPU millicores.
    #[arg(long)]
    pub reserved_cpu_millis: Option<u64>,
    /// Reserved for the system: memory in MiB.
    #[arg(long)]
    pub reserved_memory_mib: Option<u64>,
    #[arg(long)]
    pub cluster_dns: Option<String>,
    #[arg(long)]
    pub cluster_domain: Option<String>,
    #[arg(long)]
    pub container_log_max_size_mib: Option<u64>,
    #[arg(long)]
    pub container_log_max_files: Option<u32>,
    /// Pod network controller to run inside the agent: none, host-gw or vxlan.
    #[arg(long)]
    pub network_backend: Option<String>,
    #[arg(long)]
    pub cluster_cidr: Option<String>,
    /// Subnet file the embedded network controller writes and the cairn-cni plugin reads.
    #[arg(long)]
    pub subnet_file: Option<PathBuf>,
    /// IPAM state dir written into the controller's conflist (default: the plugin's own).
    #[arg(long)]
    pub cni_data_dir: Option<PathBuf>,
    /// Seconds between node status checks (the status is written on change or every 5 min).
    #[arg(long)]
    pub node_status_update_seconds: Option<u64>,
    /// Seconds between stats housekeeping passes (the kubelet's `--housekeeping-interval`,
    /// 10 s).
    #[arg(long)]
    pub housekeeping_interval_seconds: Option<u64>,
    /// Hard eviction thresholds, the kubelet's syntax (default
    /// `memory.available<100Mi,nodefs.available<10%,nodefs.inodesFree<5%,imagefs.available<15%`;
    /// empty: none).
    #[arg(long)]
    pub eviction_hard: Option<String>,
    /// Seconds a pressure condition stays True after its threshold cleared (300).
    #[arg(long)]
    pub eviction_pressure_transition_period_seconds: Option<u64>,
    /// Percent of the image filesystem in use at which unused images are removed (85;
    /// 100: never).
    #[arg(long)]
    pub image_gc_high_threshold: Option<u8>,
    /// Percent the image garbage collector frees down to (80).
    #[arg(long)]
    pub image_gc_low_threshold: Option<u8>,
    /// How long an unused image stays before it may be removed (a Go duration, `2m`).
    #[arg(long)]
    pub minimum_image_ttl_duration: Option<String>,
    /// Seconds between image GC passes (upstream's fixed 5 minutes; a cairn flag).
    #[arg(long)]
    pub image_gc_period_seconds: Option<u64>,
    /// Where the `cairn.io/local-path` provisioner makes volume directories
    /// (default: `<root-dir>/local-path`).
    #[arg(long)]
    pub local_path_root: Option<PathBuf>,
    /// Serve cluster DNS on this address (UDP and TCP), e.g. `10.0.0.5:53`, or
    /// `node-ip:53` for the node's InternalIP, and publish it as this node's endpoint of
    /// `kube-system/kube-dns` (see `dns.rs`).
    #[arg(long)]
    pub dns_listen: Option<crate::dns::DnsListen>,
    /// Resolvers for names outside the cluster, comma-separated `ip:port` (default: the
    /// node's /etc/resolv.conf).
    #[arg(long)]
    pub dns_upstream: Option<String>,
}

#[derive(Debug, Clone)]
pub struct AgentConfig {
    pub kubeconfig: Option<PathBuf>,
    /// Join `server` with `token` when the kubeconfig holds no valid certificate.
    pub join: Option<JoinConfig>,
    pub node_name: String,
    pub node_ip: Option<String>,
    pub containerd_socket: PathBuf,
    pub containerd_namespace: String,
    pub root_dir: PathBuf,
    pub state_dir: PathBuf,
    pub cni_conf_dir: PathBuf,
    pub cni_bin_dirs: Vec<PathBuf>,
    pub pod_log_dir: PathBuf,
    pub cgroup_root: String,
    pub cgroupfs_mount: PathBuf,
    pub listen: SocketAddr,
    pub healthz_listen: SocketAddr,
    pub client_ca_file: Option<PathBuf>,
    pub static_pod_dir: PathBuf,
    pub registry_config_dir: PathBuf,
    pub logger_path: PathBuf,
    pub max_pods: u32,
    pub reserved_cpu_millis: u64,
    pub reserved_memory_bytes: u64,
    pub cluster_dns: Vec<String>,
    pub cluster_domain: String,
    pub container_log_max_bytes: u64,
    pub container_log_max_files: u32,
    pub network_backend: Option<String>,
    pub cluster_cidr: String,
    pub subnet_file: PathBuf,
    pub cni_data_dir: Option<PathBuf>,
    pub node_status_update_seconds: u64,
    pub housekeeping_interval: std::time::Duration,
    pub eviction_hard: Vec<crate::eviction::thresholds::Threshold>,
    pub eviction_pressure_transition: std::time::Duration,
    pub image_gc: crate::image_gc::GcSettings,
    pub local_path_root: PathBuf,
    pub dns_listen: Option<crate::dns::DnsListen>,
    pub dns_upstreams: Vec<SocketAddr>,
}

impl AgentFlags {
    fn merge(self, file: AgentFlags) -> AgentFlags {
        macro_rules! pick {
            ($($f:ident),*) => { AgentFlags { $($f: self.$f.or(file.$f)),* } };
        }
        pick!(
            kubeconfig,
            server,
            token,
            token_file,
            node_name,
            node_ip,
            containerd_socket,
            containerd_namespace,
            root_dir,
            state_dir,
            cni_conf_dir,
            cni_bin_dir,
            pod_log_dir,
            cgroup_root,
            cgroupfs_mount,
            listen,
            healthz_listen,
            client_ca_file,
            static_pod_dir,
            registry_config_dir,
            logger_path,
            max_pods,
            reserved_cpu_millis,
            reserved_memory_mib,
            cluster_dns,
            cluster_domain,
            container_log_max_size_mib,
            container_log_max_files,
            network_backend,
            cluster_cidr,
            subnet_file,
            cni_data_dir,
            node_status_update_seconds,
            housekeeping_interval_seconds,
            eviction_hard,
            eviction_pressure_transition_period_seconds,
            image_gc_high_threshold,
            image_gc_low_threshold,
            minimum_image_ttl_duration,
            image_gc_period_seconds,
            local_path_root,
            dns_listen,
            dns_upstream
        )
    }
}

/// The server and token to join with (the token is a secret: never in a message).
#[derive(Clone)]
pub struct JoinConfig {
    pub server: String,
    pub token: String,
}

impl std::fmt::Debug for JoinConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JoinConfig")
            .field("server", &self.server)
            .finish_non_exhaustive()
    }
}

fn join_config(f: &AgentFlags) -> Result<Option<JoinConfig>, ConfigError> {
    let token = match (&f.token, &f.token_file) {
        (Some(t), _) => Some(t.trim().to_string()),
        (None, Some(path)) => Some(
            std::fs::read_to_string(path)
                .map_err(|source| ConfigError::Read {
                    path: path.clone(),
                    source,
                })?
                .trim()
                .to_string(),
        ),
        (None, None) => None,
    };
    match (token, &f.server) {
        (None, _) => Ok(None),
        (Some(token), Some(server)) => Ok(Some(JoinConfig {
            server: server.trim_end_matches('/').to_string(),
            token,
        })),
        (Some(_), None) => Err(ConfigError::Invalid {
            key: "token",
            message: "a join token needs --server".into(),
        }),
    }
}

fn default_logger() -> PathBuf {
    // Next to the agent binary (cargo target dir, /usr/bin), else the packaged location.
    std::env::current_exe()
        .ok()
        .and_then(|p| p.parent().map(|d| d.join("cairn-logger")))
        .filter(|p| p.exists())
        .unwrap_or_else(|| PathBuf::from("/usr/lib/cairn/cairn-logger"))
}

impl AgentConfig {
    pub fn resolve(flags: AgentFlags, config_file: Option<&Path>) -> Result<Self, ConfigError> {
        let file = match config_file {
            Some(path) => read_config_file(path)?,
            None => AgentFlags::default(),
        };
        let f = flags.merge(file);
        let node_name = node_name(f.node_name.clone())?;
        let backend = network_backend(&f)?;
        let dns_upstreams = dns_upstreams(f.dns_upstream.as_deref())?;
        let eviction_hard = eviction_hard(&f)?;
        let image_gc = image_gc(&f)?;
        let join = join_config(&f)?;
        // A joining node keeps the credentials it gets beside its other state.
        let kubeconfig = f.kubeconfig.clone().or_else(|| {
            join.as_ref().map(|_| {
                f.root_dir
                    .clone()
                    .unwrap_or_else(default_root)
                    .join("kubeconfig")
            })
        });
        Ok(AgentConfig {
            kubeconfig,
            join,
            node_name,
            node_ip: f.node_ip,
            containerd_socket: f
                .containerd_socket
                .unwrap_or_else(|| "/run/containerd/containerd.sock".into()),
            containerd_namespace: f.containerd_namespace.unwrap_or_else(|| "cairn".into()),
            local_path_root: f.local_path_root.clone().unwrap_or_else(|| {
                f.root_dir
                    .clone()
                    .unwrap_or_else(default_root)
                    .join("local-path")
            }),
            root_dir: f.root_dir.unwrap_or_else(default_root),
            state_dir: f.state_dir.unwrap_or_else(|| "/run/cairn-agent".into()),
            cni_conf_dir: f.cni_conf_dir.unwrap_or_else(|| "/etc/cni/net.d".into()),
            cni_bin_dirs: f
                .cni_bin_dir
                .unwrap_or_else(|| "/opt/cni/bin".into())
                .split([',', ':'])
                .filter(|s| !s.is_empty())
                .map(PathBuf::from)
                .collect(),
            pod_log_dir: f.pod_log_dir.unwrap_or_else(|| "/var/log/pods".into()),
            cgroup_root: f.cgroup_root.unwrap_or_else(|| "/cairn".into()),
            cgroupfs_mount: f.cgroupfs_mount.unwrap_or_else(|| "/sys/fs/cgroup".into()),
            listen: f
                .listen
                .unwrap_or_else(|| SocketAddr::from(([0, 0, 0, 0], 10250))),
            healthz_listen: f
                .healthz_listen
                .unwrap_or_else(|| SocketAddr::from(([127, 0, 0, 1], 10248))),
            client_ca_file: f.client_ca_file,
            static_pod_dir: f
                .static_pod_dir
                .unwrap_or_else(|| "/etc/cairn/manifests".into()),
            registry_config_dir: f
                .registry_config_dir
                .unwrap_or_else(|| "/etc/cairn/certs.d".into()),
            logger_path: f.logger_path.unwrap_or_else(default_logger),
            max_pods: f.max_pods.unwrap_or(110),
            reserved_cpu_millis: f.reserved_cpu_millis.unwrap_or(0),
            reserved_memory_bytes: f.reserved_memory_mib.unwrap_or(0) << 20,
            cluster_dns: f
                .cluster_dns
                .map(|d| d.split(',').map(str::to_string).collect())
                .unwrap_or_default(),
            cluster_domain: f.cluster_domain.unwrap_or_else(|| "cluster.local".into()),
            container_log_max_bytes: f.container_log_max_size_mib.unwrap_or(10) << 20,
            container_log_max_files: f.container_log_max_files.unwrap_or(5),
            network_backend: backend,
            cluster_cidr: f.cluster_cidr.unwrap_or_else(|| "10.244.0.0/16".into()),
            subnet_file: f
                .subnet_file
                .unwrap_or_else(|| "/run/cairn/subnet.env".into()),
            cni_data_dir: f.cni_data_dir,
            node_status_update_seconds: f.node_status_update_seconds.unwrap_or(10),
            housekeeping_interval: std::time::Duration::from_secs(
                f.housekeeping_interval_seconds.unwrap_or(10).max(1),
            ),
            eviction_hard,
            eviction_pressure_transition: std::time::Duration::from_secs(
                f.eviction_pressure_transition_period_seconds.unwrap_or(300),
            ),
            image_gc,
            dns_listen: f.dns_listen,
            dns_upstreams,
        })
    }
}

fn default_root() -> PathBuf {
    "/var/lib/cairn-agent".into()
}

/// `--network-backend`: none (the default), host-gw or vxlan.
fn network_backend(f: &AgentFlags) -> Result<Option<String>, ConfigError> {
    let backend = f.network_backend.clone().filter(|b| b != "none");
    match backend.as_deref() {
        None | Some("host-gw" | "vxlan") => Ok(backend),
        Some(b) => Err(ConfigError::Invalid {
            key: "network-backend",
            message: format!("{b:?} is not one of none, host-gw, vxlan"),
        }),
    }
}

/// The image GC flags, checked as the kubelet checks them (its messages).
fn image_gc(f: &AgentFlags) -> Result<crate::image_gc::GcSettings, ConfigError> {
    let defaults = crate::image_gc::GcSettings::default();
    let high = f.image_gc_high_threshold.unwrap_or(defaults.high_percent);
    let low = f.image_gc_low_threshold.unwrap_or(defaults.low_percent);
    let invalid = |key, message| Err(ConfigError::Invalid { key, message });
    for (key, flag, value) in [
        (
            "image-gc-high-threshold",
            "imageGCHighThresholdPercent",
            high,
        ),
        ("image-gc-low-threshold", "imageGCLowThresholdPercent", low),
    ] {
        if value > 100 {
            let message =
                format!("{flag} (--{key}) of {value} must be between 0 and 100, inclusive");
            return invalid(key, message);
        }
    }
    if low >= high {
        let message = format!("imageGCLowThresholdPercent (--image-gc-low-threshold) of {low} must be less than imageGCHighThresholdPercent (--image-gc-high-threshold) of {high}");
        return invalid("image-gc-low-threshold", message);
    }
    let minimum_age = match f.minimum_image_ttl_duration.as_deref() {
        None => defaults.minimum_age,
        Some(text) => match cairn_semantics::duration::parse_go(text) {
            Some(d) => d,
            None => {
                let message = format!("{text:?} is not a duration (e.g. 2m, 90s)");
                return invalid("minimum-image-ttl-duration", message);
            }
        },
    };
    let period = f.image_gc_period_seconds.map_or(defaults.period, |s| {
        std::time::Duration::from_secs(s.max(1))
    });
    Ok(crate::image_gc::GcSettings {
        high_percent: high,
        low_percent: low,
        minimum_age,
        period,
    })
}

/// `--eviction-hard`, upstream's Linux defaults when absent.
fn eviction_hard(
    f: &AgentFlags,
) -> Result<Vec<crate::eviction::thresholds::Threshold>, ConfigError> {
    match f.eviction_hard.as_deref() {
        None => Ok(crate::eviction::thresholds::defaults()),
        Some(flag) => crate::eviction::thresholds::parse(flag).map_err(|e| ConfigError::Invalid {
            key: "eviction-hard",
            message: e.to_string(),
        }),
    }
}

fn read_config_file(path: &Path) -> Result<AgentFlags, ConfigError> {
    let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    toml::from_str::<AgentFlags>(&text).map_err(|e| ConfigError::Parse {
        path: path.to_path_buf(),
        message: e.to_string(),
    })
}

/// `--node-name`, else the host name, lower-cased; it must be a DNS subdomain.
pub fn node_name(flag: Option<String>) -> Result<String, ConfigError> {
    let node_name = match flag {
        Some(n) => n,
        None => nix::unistd::gethostname()
            .ok()
            .and_then(|h| h.into_string().ok())
            .unwrap_or_else(|| "localhost".into()),
    }
    .to_ascii_lowercase();
    if node_name.is_empty()
        || node_name.len() > 253
        || !node_name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '.')
    {
        return Err(ConfigError::Invalid {
            key: "node-name",
            message: format!("{node_name:?} is not a valid DNS subdomain"),
        });
    }
    Ok(node_name)
}

/// `--dns-upstream`: comma-separated `ip:port`s.
fn dns_upstreams(list: Option<&str>) -> Result<Vec<SocketAddr>, ConfigError> {
    list.into_iter()
        .flat_map(|list| list.split(','))
        .filter(|s| !s.trim().is_empty())
        .map(|s| {
            s.trim()
                .parse::<SocketAddr>()
                .map_err(|e| ConfigError::Invalid {
                    key: "dns-upstream",
                    message: format!("{s:?}: {e} (want ip:port)"),
                })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn command_line_wins_over_file_over_defaults() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("agent.toml");
        std::fs::write(
            &file,
            "node-name = \"from-file\"\nmax-pods = 7\nlisten = \"127.0.0.1:1\"\n",
        )
        .unwrap();
        let flags = AgentFlags {
            node_name: Some("from-flag".into()),
            ..Default::default()
        };
        let c = AgentConfig::resolve(flags, Some(&file)).unwrap();
        assert_eq!(c.node_name, "from-flag");
        assert_eq!(c.max_pods, 7);
        assert_eq!(c.listen.port(), 1);
        assert_eq!(c.pod_log_dir, PathBuf::from("/var/log/pods"));
    }

    #[test]
    fn bad_values_are_errors() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("agent.toml");
        std::fs::write(&file, "no-such-key = 1\n").unwrap();
        assert!(matches!(
            AgentConfig::resolve(AgentFlags::default(), Some(&file)),
            Err(ConfigError::Parse { .. })
        ));
        let flags = AgentFlags {
            node_name: Some("Bad_Name".into()),
            ..Default::default()
        };
        assert!(AgentConfig::resolve(flags, None).is_err());
        let flags = AgentFlags {
            node_name: Some("n".into()),
            network_backend: Some("udp".into()),
            ..Default::default()
        };
        assert!(AgentConfig::resolve(flags, None).is_err());
    }

    #[test]
    fn image_gc_flags_are_checked_in_the_kubelets_words() {
        let with = |high, low, ttl: Option<&str>| AgentFlags {
            node_name: Some("n".into()),
            image_gc_high_threshold: high,
            image_gc_low_threshold: low,
            minimum_image_ttl_duration: ttl.map(str::to_string),
            ..Default::default()
        };
        let message = |flags| match AgentConfig::resolve(flags, None) {
            Err(ConfigError::Invalid { message, .. }) => message,
            other => panic!("{:?}", other.map(|c| c.image_gc)),
        };
        assert_eq!(
            message(with(Some(101), None, None)),
            "imageGCHighThresholdPercent (--image-gc-high-threshold) of 101 must be between 0 and 100, inclusive"
        );
        assert_eq!(
            message(with(Some(70), None, None)),
            "imageGCLowThresholdPercent (--image-gc-low-threshold) of 80 must be less than imageGCHighThresholdPercent (--image-gc-high-threshold) of 70"
        );
        assert!(message(with(None, None, Some("soon"))).contains("\"soon\" is not a duration"));
        let ok = AgentConfig::resolve(with(Some(90), Some(50), Some("1m30s")), None).unwrap();
        assert_eq!(
            (ok.image_gc.high_percent, ok.image_gc.low_percent),
            (90, 50)
        );
        assert_eq!(ok.image_gc.minimum_age, std::time::Duration::from_secs(90));
    }
}
