//! cairn-proxy: the service proxy of a cairn node (see the library for how it works).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context};
use cairn_netfilter::ipvs::IpvsNetlink;
use cairn_netfilter::{IptablesCommand, IptablesVariant};
use cairn_proxy::backend::ipvs::NetlinkHost;
use cairn_proxy::backend::{IptablesBackend, IpvsBackend, NftBackend, ProxyBackend};
use cairn_proxy::ingress::IngressConfig;
use cairn_proxy::netpol::Observed;
use cairn_proxy::sync_loop::{run, ProxyConfig};
use cairn_serviceproxy::iptables::IptConfig;
use cairn_serviceproxy::ipvs::IpvsConfig;
use cairn_serviceproxy::nftables::NftConfig;
use clap::Parser;
use ipnetwork::Ipv4Network;

cairn_alloc::small_pages_from_start!();

#[derive(Parser, Debug)]
#[command(
    name = "cairn-proxy",
    version = cairn_version::LONG,
    about = "Service proxy: ClusterIP, NodePort, external and load-balancer traffic to endpoints"
)]
struct Cli {
    /// kubeconfig used to reach cairn-control (default: in-cluster or ~/.kube/config).
    #[arg(long)]
    kubeconfig: Option<PathBuf>,
    /// This node's name (endpoints on it are local), default the host name.
    #[arg(long)]
    hostname_override: Option<String>,
    /// nftables, iptables or ipvs; default nftables on kernels from 5.13 (where
    /// kube-proxy's nftables mode is supported), iptables before.
    #[arg(long, default_value = "")]
    mode: String,
    /// The IPVS scheduler in ipvs mode (rr, lc, sh, ...).
    #[arg(long, default_value = "rr")]
    ipvs_scheduler: String,
    /// Which iptables in iptables mode: system (the `iptables-restore` the system's
    /// alternatives choose), nft or legacy.
    #[arg(long, default_value = "system")]
    iptables_variant: String,
    /// Pod network: traffic to a cluster IP from outside it is masqueraded.
    #[arg(long)]
    cluster_cidr: Option<ipnetwork::Ipv4Network>,
    /// Least time between two syncs, in seconds (changes meanwhile are batched).
    #[arg(long, default_value_t = 1.0)]
    min_sync_period: f64,
    /// Time between full syncs that repair drift, in seconds.
    #[arg(long, default_value_t = 30.0)]
    sync_period: f64,
    /// `/healthz` and `/livez`; empty to turn them off.
    #[arg(long, default_value = "0.0.0.0:10256")]
    healthz_bind_address: String,
    /// Prometheus metrics (`/metrics`); empty to turn them off.
    #[arg(long, default_value = "127.0.0.1:10249")]
    metrics_bind_address: String,
    /// Local addresses node ports answer on: comma-separated CIDRs, or `primary` (the
    /// node's InternalIP addresses); default every local address but loopback.
    #[arg(long, default_value = "")]
    nodeport_addresses: String,
    /// Remove stale UDP conntrack flows after syncs; `false` only to see what they break.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set, hide = true)]
    conntrack_cleanup: bool,
    /// Enforce NetworkPolicy on this node (nftables table `ip cairn-netpol`); needs
    /// credentials that may read every Pod, Namespace and NetworkPolicy (the
    /// `cairn:network-policy` role of `system:kube-proxy`).
    #[arg(long, default_value_t = true, num_args = 0..=1, default_missing_value = "true", action = clap::ArgAction::Set)]
    network_policy: bool,
    /// Serve Ingresses of the `cairn` class (and, when it is the default class, those
    /// naming none) and the Gateways of cairn's GatewayClasses on this node; needs
    /// credentials that may read Ingresses, IngressClasses, TLS Secrets, Namespaces and
    /// the Gateway API kinds (the `cairn:ingress` role of `system:kube-proxy`). While
    /// on, the node serves when the label `ingress.cairn.io/enabled` picks it (every node
    /// while no node has `=true`; never with `=false`).
    #[arg(long, default_value_t = true, num_args = 0..=1, default_missing_value = "true", action = clap::ArgAction::Set)]
    ingress: bool,
    /// The Ingress data plane's plain HTTP listener; empty to turn it off.
    #[arg(long, default_value = "0.0.0.0:80")]
    ingress_http_bind_address: String,
    /// The Ingress data plane's HTTPS listener; empty to turn it off.
    #[arg(long, default_value = "0.0.0.0:443")]
    ingress_https_bind_address: String,
    /// The Ingress data plane's threads, each serving every listener with its own
    /// connections to endpoints; 0: one per core.
    #[arg(long, default_value_t = 0)]
    ingress_workers: usize,
    /// Remove everything the proxy owns for the mode and its network policy table, then
    /// exit.
    #[arg(long)]
    cleanup: bool,
}

/// The mode when `--mode` is not given: nftables from kernel 5.13.
fn default_mode() -> &'static str {
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    let mut parts = release
        .trim()
        .split(['.', '-'])
        .map(|p| p.parse::<u32>().unwrap_or(0));
    let version = (parts.next().unwrap_or(0), parts.next().unwrap_or(0));
    if version >= (5, 13) {
        "nftables"
    } else {
        "iptables"
    }
}

fn backend(cli: &Cli, nodeport_cidrs: Vec<Ipv4Network>) -> anyhow::Result<Box<dyn ProxyBackend>> {
    let mode = if cli.mode.is_empty() {
        default_mode()
    } else {
        cli.mode.as_str()
    };
    match mode {
        "nftables" => {
            let nft = cairn_netfilter::NftCommand::new().context("nftables mode")?;
            let config = NftConfig {
                cluster_cidr: cli.cluster_cidr,
                nodeport_cidrs,
            };
            Ok(Box::new(NftBackend::new(Arc::new(nft), config)))
        }
        "iptables" => {
            let variant = match cli.iptables_variant.as_str() {
                "system" => IptablesVariant::System,
                "nft" => IptablesVariant::Nft,
                "legacy" => IptablesVariant::Legacy,
                other => bail!("--iptables-variant {other}: must be system, nft or legacy"),
            };
            let ipt = IptablesCommand::new(variant).context("iptables mode")?;
            let config = IptConfig {
                cluster_cidr: cli.cluster_cidr,
                nodeport_cidrs,
            };
            Ok(Box::new(IptablesBackend::new(Arc::new(ipt), config)))
        }
        "ipvs" => {
            let config = IpvsConfig {
                cluster_cidr: cli.cluster_cidr,
                scheduler: cli.ipvs_scheduler.clone(),
                nodeport_cidrs,
            };
            let host = NetlinkHost::new().context("ipvs mode: opening rtnetlink")?;
            let nft = cairn_netfilter::NftCommand::new().context("ipvs mode")?;
            Ok(Box::new(IpvsBackend::new(
                Arc::new(IpvsNetlink::new()),
                Arc::new(nft),
                Box::new(host),
                config,
            )))
        }
        other => bail!("--mode {other}: must be nftables, iptables or ipvs"),
    }
}

/// A `--*-bind-address` value: `None` when empty (the server is off).
fn bind_address(value: &str, flag: &str) -> anyhow::Result<Option<SocketAddr>> {
    if value.is_empty() {
        return Ok(None);
    }
    value.parse().map(Some).context(flag.to_string())
}

/// `--nodeport-addresses`: CIDRs, or `primary`: the node's InternalIPs, read once from its
/// Node object, as kube-proxy does.
async fn nodeport_cidrs(
    spec: &str,
    client: &kube::Client,
    node: &str,
) -> anyhow::Result<Vec<Ipv4Network>> {
    if spec != "primary" {
        return spec
            .split(',')
            .filter(|s| !s.trim().is_empty())
            .map(|s| {
                s.trim()
                    .parse::<Ipv4Network>()
                    .with_context(|| format!("--nodeport-addresses: {s:?} is not an IPv4 CIDR"))
            })
            .collect();
    }
    let nodes: kube::Api<k8s_openapi::api::core::v1::Node> = kube::Api::all(client.clone());
    let n = nodes
        .get(node)
        .await
        .with_context(|| format!("--nodeport-addresses primary: reading node {node}"))?;
    let cidrs: Vec<Ipv4Network> = n
        .status
        .and_then(|s| s.addresses)
        .unwrap_or_default()
        .into_iter()
        .filter(|a| a.type_ == "InternalIP")
        .filter_map(|a| a.address.parse::<std::net::Ipv4Addr>().ok())
        .filter_map(|ip| Ipv4Network::new(ip, 32).ok())
        .collect();
    if cidrs.is_empty() {
        bail!("--nodeport-addresses primary: node {node} has no IPv4 InternalIP");
    }
    Ok(cidrs)
}

async fn client(path: Option<&PathBuf>) -> anyhow::Result<kube::Client> {
    let config = match path {
        // The node's own kubeconfig, which the agent rewrites when it renews the
        // certificate: follow it rather than keep a certificate that will expire.
        Some(p) if cairn_kubeclient::EmbeddedKubeconfig::has_client_certificate(p) => {
            return cairn_kubeclient::following(p)
                .with_context(|| format!("loading kubeconfig {}", p.display()));
        }
        Some(p) => {
            let kc = kube::config::Kubeconfig::read_from(p)
                .with_context(|| format!("reading kubeconfig {}", p.display()))?;
            kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default())
                .await
                .with_context(|| format!("loading kubeconfig {}", p.display()))?
        }
        None => kube::Config::infer()
            .await
            .context("finding a kubeconfig")?,
    };
    kube::Client::try_from(config).context("building the API client")
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .with_writer(std::io::stderr)
        // Escape codes only on a terminal: logs go to files too.
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    // Not at once: the Ingress data plane frees and reuses connection buffers all the time.
    cairn_alloc::purge_freed_pages_in_background(std::time::Duration::from_secs(1))
        .context("starting the allocator's purge thread")?;
    let cli = Cli::parse();
    if cli.cleanup {
        backend(&cli, Vec::new())?
            .cleanup()
            .context("cleaning up")?;
        return cairn_proxy::netpol::cleanup().context("removing the network policy table");
    }
    let node_name = match &cli.hostname_override {
        Some(n) => n.clone(),
        None => std::fs::read_to_string("/proc/sys/kernel/hostname")
            .context("reading the host name")?
            .trim()
            .to_string(),
    };
    let healthz = bind_address(&cli.healthz_bind_address, "--healthz-bind-address")?;
    let metrics = bind_address(&cli.metrics_bind_address, "--metrics-bind-address")?;
    let network_policy = match cli.network_policy {
        true => network_policy_driver(),
        false => None,
    };
    let ingress_metrics = cli
        .ingress
        .then(cairn_ingress_proxy::RequestMetrics::default);
    let config = ProxyConfig {
        node_name,
        min_sync_period: Duration::from_secs_f64(cli.min_sync_period.max(0.0)),
        sync_period: Duration::from_secs_f64(cli.sync_period.max(1.0)),
        healthz,
        metrics,
        conntrack_cleanup: cli.conntrack_cleanup,
        network_policy: network_policy.clone(),
        ingress_metrics: ingress_metrics.clone(),
    };
    let client = client(cli.kubeconfig.as_ref()).await?;
    let cidrs = nodeport_cidrs(&cli.nodeport_addresses, &client, &config.node_name).await?;
    let backend = backend(&cli, cidrs)?;
    if let Some(observed) = network_policy {
        start_network_policy(&client, &config.node_name, observed);
    }
    let ingress = match ingress_metrics {
        Some(metrics) => Some(IngressConfig {
            http: bind_address(
                &cli.ingress_http_bind_address,
                "--ingress-http-bind-address",
            )?,
            https: bind_address(
                &cli.ingress_https_bind_address,
                "--ingress-https-bind-address",
            )?,
            workers: cli.ingress_workers,
            metrics,
        }),
        None => None,
    };
    let (stop_ingress, ingress) = start_ingress(&client, &config.node_name, ingress);
    let mut terminate = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .context("handling SIGTERM")?;
    tokio::select! {
        result = run(client, config, backend) => result?,
        _ = terminate.recv() => {
            // The service proxy's rules stay in the kernel; the Ingress listeners close
            // and open requests finish first.
            let _ = stop_ingress.send(true);
            if let Some(ingress) = ingress {
                let _ = ingress.await;
            }
        }
    }
    Ok(())
}

/// The Ingress data plane beside the proxy's own loop, while this node is picked to
/// serve; stopped (drained) through the returned sender. A port in use or a refused
/// watch is logged: Services keep working.
fn start_ingress(
    client: &kube::Client,
    node: &str,
    config: Option<IngressConfig>,
) -> (
    tokio::sync::watch::Sender<bool>,
    Option<tokio::task::JoinHandle<()>>,
) {
    let (stop, stopping) = tokio::sync::watch::channel(false);
    let Some(config) = config else {
        return (stop, None);
    };
    let (client, node) = (client.clone(), node.to_string());
    let task = tokio::spawn(async move {
        let run = cairn_proxy::ingress::run_where_picked(client, &node, config, stopping);
        if let Err(e) = run.await {
            tracing::error!(error = %e, "the Ingress data plane is off");
        }
    });
    (stop, Some(task))
}

/// The nft driver for NetworkPolicy, or `None` (logged) when nft is missing.
fn network_policy_driver() -> Option<Arc<Observed>> {
    match cairn_netfilter::NftCommand::new() {
        Ok(nft) => Some(Observed::new(Arc::new(nft))),
        Err(e) => {
            tracing::warn!(error = %e, "NetworkPolicy is not enforced on this node");
            None
        }
    }
}

/// The node's NetworkPolicy enforcement beside the proxy's own loop.
fn start_network_policy(client: &kube::Client, node: &str, observed: Arc<Observed>) {
    let (client, node) = (client.clone(), node.to_string());
    tokio::spawn(async move {
        let shutdown = std::future::pending();
        if let Err(e) = cairn_proxy::netpol::run(client, node, observed, shutdown).await {
            tracing::warn!(error = %e, "network policy enforcement stopped");
        }
    });
}
