//! cairn-agent: the node agent (kubelet). See the crate docs of `cairn_agent`.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use cairn_agent::config::{AgentConfig, AgentFlags};
use cairn_agent::{events, images, node, pods, serving, static_pods, sysinfo, Agent};
use cairn_runtime::{CgroupManager, CniConfig, ContainerdRuntime, ContainerdRuntimeConfig};
use clap::Parser;
use futures::StreamExt;
use k8s_openapi::api::core::v1::Service;
use kube::runtime::{reflector, watcher, WatchStreamExt};
use tracing::{info, warn};

#[derive(Debug, Parser)]
#[command(name = "cairn-agent", version = cairn_version::LONG, about = "cairn node agent (kubelet)")]
struct Cli {
    /// TOML file with the same keys as the flags (kebab-case).
    #[arg(long, global = true)]
    config: Option<PathBuf>,
    #[command(flatten)]
    flags: AgentFlags,
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Debug, clap::Subcommand)]
enum Command {
    /// Import images from an OCI-layout or docker-archive tarball (air-gapped nodes).
    ImportImage { archive: PathBuf },
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| "info,kube=warn,tower=warn,hyper=warn,h2=warn".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    // One TLS provider for every rustls user in the process (kube, reqwest): ring, which
    // needs no C toolchain. Failing means one is already installed, which is fine.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let cli = Cli::parse();
    let config = AgentConfig::resolve(cli.flags, cli.config.as_deref())?;
    if let Some(Command::ImportImage { archive }) = cli.command {
        let channel = containerd_client::connect(&config.containerd_socket)
            .await
            .with_context(|| {
                format!(
                    "connecting to containerd at {}",
                    config.containerd_socket.display()
                )
            })?;
        let opts = cairn_image::PullOptions::default();
        let imported =
            cairn_image::import_archive(channel, &config.containerd_namespace, &archive, &opts)
                .await
                .with_context(|| format!("importing {}", archive.display()))?;
        for image in imported {
            println!("{} {}", image.name, image.id);
        }
        return Ok(());
    }
    run(config).await
}

async fn connect_runtime(config: &AgentConfig, cni: CniConfig) -> ContainerdRuntime {
    let rc = ContainerdRuntimeConfig {
        socket: config.containerd_socket.clone(),
        namespace: config.containerd_namespace.clone(),
        snapshotter: "overlayfs".into(),
        state_dir: config.state_dir.clone(),
        cni,
        cgroup_root: config.cgroupfs_mount.clone(),
    };
    loop {
        match ContainerdRuntime::connect(rc.clone()).await {
            Ok(r) => return r,
            Err(e) => {
                warn!(error = %e, "containerd not reachable yet; retrying");
                tokio::time::sleep(Duration::from_secs(2)).await;
            }
        }
    }
}

async fn client(config: &AgentConfig) -> anyhow::Result<kube::Client> {
    if let (Some(join), Some(path)) = (&config.join, &config.kubeconfig) {
        if !cairn_agent::join::has_valid_certificate(path) {
            cairn_agent::join::join(&join.server, &join.token, &config.node_name, path).await?;
        }
        return Ok(cairn_agent::join::node_client(path, &config.node_name)?);
    }
    let kube_config = match &config.kubeconfig {
        Some(path) => {
            let kc = kube::config::Kubeconfig::read_from(path)
                .with_context(|| format!("reading kubeconfig {}", path.display()))?;
            kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default())
                .await
                .with_context(|| format!("loading kubeconfig {}", path.display()))?
        }
        None => kube::Config::infer()
            .await
            .context("finding a kubeconfig")?,
    };
    kube::Client::try_from(kube_config).context("building the API client")
}

/// A reflector of every Service (the pods' environment variables), kept by its own task.
fn watch_services(client: &kube::Client) -> reflector::Store<Service> {
    let (services, services_writer) = reflector::store::<Service>();
    let services_stream = reflector(
        services_writer,
        watcher(
            kube::Api::<Service>::all(client.clone()),
            watcher::Config::default(),
        ),
    )
    .default_backoff();
    tokio::spawn(async move {
        futures::pin_mut!(services_stream);
        while let Some(ev) = services_stream.next().await {
            if let Err(e) = ev {
                warn!(error = %e, "service watch failed; retrying");
            }
        }
    });
    services
}

/// The embedded network controller (`--network-backend`): the node's subnet, routes or
/// vxlan peers, and the CNI configuration.
fn start_network_controller(agent: &Agent, backend: &str) -> anyhow::Result<()> {
    let config = &agent.config;
    let backend = match backend {
        "vxlan" => cairn_cni::netctl::Backend::Vxlan,
        _ => cairn_cni::netctl::Backend::HostGw,
    };
    let cidr: ipnetwork::IpNetwork = config
        .cluster_cidr
        .parse()
        .with_context(|| format!("parsing cluster-cidr {}", config.cluster_cidr))?;
    let mut nc =
        cairn_cni::netctl::NetControllerConfig::new(config.node_name.clone(), backend, cidr);
    nc.cni_conf_dir = config.cni_conf_dir.clone();
    nc.subnet_file = config.subnet_file.clone();
    nc.cni_data_dir = config.cni_data_dir.clone();
    if let Some(ip) = agent.node_ip.as_ref().and_then(|i| i.parse().ok()) {
        nc.public_ip = Some(ip);
    }
    let client = agent.client.clone();
    tokio::spawn(async move {
        if let Err(e) = cairn_cni::netctl::run(client, nc, std::future::pending()).await {
            warn!(error = %e, "network controller stopped");
        }
    });
    Ok(())
}

async fn run(config: AgentConfig) -> anyhow::Result<()> {
    let client = client(&config).await?;
    for dir in [&config.root_dir, &config.state_dir, &config.pod_log_dir] {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    let cni = CniConfig {
        conf_dir: config.cni_conf_dir.clone(),
        bin_dirs: config.cni_bin_dirs.clone(),
        ifname: "eth0".into(),
    };
    let containerd = connect_runtime(&config, cni.clone()).await;
    let node_ip = config.node_ip.clone().or_else(sysinfo::detect_node_ip);
    info!(node = %config.node_name, node_ip = ?node_ip, "starting cairn-agent");

    let services = watch_services(&client);
    let agent = Arc::new(Agent {
        images: Arc::new(images::ImageManager::new(
            containerd.channel(),
            &config.containerd_namespace,
            config.registry_config_dir.clone(),
        )),
        events: Arc::new(events::EventRecorder::new(
            client.clone(),
            &config.node_name,
        )),
        cgroups: CgroupManager::detect(&config.cgroupfs_mount),
        qos: cairn_agent::qos::QosCgroups::new(&config.cgroup_root),
        runtime: Arc::new(containerd),
        cni,
        host: sysinfo::HostRoot::default(),
        node_ip,
        services,
        client: client.clone(),
        ledger: Default::default(),
        stats: Arc::new(cairn_agent::stats::Stats::new(
            &config.cgroupfs_mount,
            std::path::Path::new("/proc"),
            config.housekeeping_interval,
        )),
        metrics: Arc::new(cairn_agent::metrics::AgentMetrics::new(&config.node_name)),
        eviction: Default::default(),
        image_gc: Default::default(),
        config: config.clone(),
    });

    node::register(&agent).await?;
    tokio::spawn(node::run(agent.clone()));
    tokio::spawn(cairn_agent::stats::run(agent.clone()));
    let local_path = Arc::new(cairn_agent::local_path::LocalPath {
        client: client.clone(),
        node: config.node_name.clone(),
        root: config.local_path_root.clone(),
        events: agent.events.clone(),
    });
    tokio::spawn(local_path.run());

    if let Some(listen) = config.dns_listen {
        let listen = listen.resolve(agent.node_ip.as_deref())?;
        let upstreams = cairn_agent::dns::upstreams(&config.dns_upstreams, listen);
        cairn_agent::dns::start(agent.clone(), listen, upstreams).await?;
    }

    if let Some(backend) = &config.network_backend {
        start_network_controller(&agent, backend)?;
    }

    let listener = tokio::net::TcpListener::bind(config.listen)
        .await
        .with_context(|| format!("binding {}", config.listen))?;
    serving::start(&agent, listener)
        .await
        .context("starting the agent's HTTPS port")?;
    let healthz = tokio::net::TcpListener::bind(config.healthz_listen)
        .await
        .with_context(|| format!("binding {}", config.healthz_listen))?;
    tokio::spawn(serving::serve_healthz(healthz));

    let manager = pods::PodManager::new(pods::Handles::of_agent(&agent), client.clone());
    // Registered, and the port serves: the unit is up (pods follow as they sync).
    cairn_systemd::ready("node registered; serving the node port");
    let _watchdog = cairn_systemd::spawn_watchdog();
    tokio::spawn(static_pods::run(agent.clone(), manager.clone()));
    let watch = tokio::spawn(manager.clone().watch_api_pods());
    tokio::spawn(cairn_agent::eviction::run(agent.clone(), manager.clone()));
    tokio::spawn(cairn_agent::image_gc::run(agent.clone()));

    // Pods keep running when the agent stops (like the kubelet): just exit.
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .context("installing SIGTERM handler")?;
    tokio::select! {
        _ = term.recv() => info!("SIGTERM: exiting; pods keep running"),
        _ = tokio::signal::ctrl_c() => info!("interrupted: exiting; pods keep running"),
        _ = watch => warn!("pod watch ended"),
    }
    Ok(())
}
