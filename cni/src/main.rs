//! cairn-cni: the CNI plugin binary, and with `controller` (when no `CNI_COMMAND` is set)
//! the node network controller run on its own. All logic lives in the library (`cairn_cni`).

use std::net::Ipv4Addr;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use cairn_cni::config::MasqBackend;
use cairn_cni::netctl::{self, Backend, NetControllerConfig};
use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "cairn-cni",
    version = cairn_version::LONG,
    about = "cairn bridge CNI plugin and node network controller"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the node network controller (host-gw or vxlan) against a cairn-control API.
    Controller(ControllerArgs),
}

#[derive(clap::Args)]
struct ControllerArgs {
    /// Kubeconfig of the API server.
    #[arg(long)]
    kubeconfig: PathBuf,
    /// This node's Node name.
    #[arg(long)]
    node_name: String,
    /// host-gw or vxlan.
    #[arg(long, default_value = "vxlan")]
    backend: Backend,
    /// The pod network all node subnets come from.
    #[arg(long, default_value = "10.244.0.0/16")]
    cluster_cidr: ipnetwork::IpNetwork,
    #[arg(long, default_value = netctl::DEFAULT_SUBNET_FILE)]
    subnet_file: PathBuf,
    #[arg(long, default_value = netctl::DEFAULT_CNI_CONF_DIR)]
    cni_conf_dir: PathBuf,
    /// IPAM state directory written into the conflist (default: the plugin's).
    #[arg(long)]
    cni_data_dir: Option<PathBuf>,
    /// Underlay interface (default: the one holding the node IP).
    #[arg(long)]
    iface: Option<String>,
    /// Node IP to publish and tunnel from (default: the Node's InternalIP).
    #[arg(long)]
    public_ip: Option<Ipv4Addr>,
    #[arg(long, default_value_t = 1)]
    vxlan_vni: u32,
    #[arg(long, default_value_t = 8472)]
    vxlan_port: u16,
    /// Masquerade pod traffic leaving the cluster CIDR.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set, num_args = 0..=1, default_missing_value = "true")]
    masquerade: bool,
    /// iptables or nftables (default: iptables when installed).
    #[arg(long)]
    masquerade_backend: Option<String>,
    /// Seconds between full reconciliations.
    #[arg(long, default_value_t = 60)]
    resync_seconds: u64,
}

fn main() -> ExitCode {
    // The plugin path stays exactly as the runtime expects it: anything but an explicit
    // `controller` (or `--version`) invocation without CNI_COMMAND is a CNI call.
    let first = std::env::args().nth(1);
    let command_line = std::env::var_os("CNI_COMMAND").is_none()
        && matches!(first.as_deref(), Some("controller" | "--version" | "-V"));
    if !command_line {
        return cairn_cni::run();
    }
    match run_controller(Cli::parse()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("cairn-cni controller: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn run_controller(cli: Cli) -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .init();
    let Command::Controller(args) = cli.command;
    let mut config = NetControllerConfig::new(args.node_name, args.backend, args.cluster_cidr);
    config.subnet_file = args.subnet_file;
    config.cni_conf_dir = args.cni_conf_dir;
    config.cni_data_dir = args.cni_data_dir;
    config.underlay_iface = args.iface;
    config.public_ip = args.public_ip;
    config.vxlan_vni = args.vxlan_vni;
    config.vxlan_port = args.vxlan_port;
    config.masquerade = args.masquerade;
    config.masquerade_backend = match args.masquerade_backend.as_deref() {
        None => None,
        Some("iptables") => Some(MasqBackend::Iptables),
        Some("nftables") => Some(MasqBackend::Nftables),
        Some(other) => {
            anyhow::bail!("--masquerade-backend {other:?} is neither iptables nor nftables")
        }
    };
    config.resync_interval = std::time::Duration::from_secs(args.resync_seconds.max(1));
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    runtime.block_on(async move {
        let kubeconfig = kube::config::Kubeconfig::read_from(&args.kubeconfig)
            .with_context(|| format!("reading kubeconfig {}", args.kubeconfig.display()))?;
        let client_config = kube::Config::from_custom_kubeconfig(
            kubeconfig,
            &kube::config::KubeConfigOptions::default(),
        )
        .await
        .context("loading kubeconfig")?;
        let client = kube::Client::try_from(client_config).context("building the API client")?;
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
            .context("installing the SIGTERM handler")?;
        let shutdown = async move {
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = term.recv() => {}
            }
        };
        netctl::run(client, config, shutdown).await?;
        Ok(())
    })
}
