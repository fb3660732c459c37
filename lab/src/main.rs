//! cairn-lab: a multi-node cairn cluster on one host. See `cairn-lab --help`.

use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use anyhow::Context;
use cairn_lab::driver::Place;
use cairn_lab::plan::{DriverKind, LabOptions, LabStore, NetworkBackend, ProxyMode, Roots};
use cairn_lab::state::LabState;
use cairn_lab::up::UpSettings;
use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "cairn-lab",
    version = cairn_version::LONG,
    about = "Several cairn nodes on one host: up, down, status, kubeconfig, exec, logs, soak"
)]
struct Cli {
    /// The lab's name (1-8 lower-case letters or digits); labs of different names coexist.
    #[arg(long, global = true, default_value = "lab", env = "CAIRN_LAB")]
    name: String,
    /// Parent of the labs' data directories.
    #[arg(
        long,
        global = true,
        default_value = "/var/lib/cairn-lab",
        env = "CAIRN_LAB_DATA_ROOT"
    )]
    data_root: PathBuf,
    /// Parent of the labs' runtime directories (state file, sockets).
    #[arg(
        long,
        global = true,
        default_value = "/run/cairn-lab",
        env = "CAIRN_LAB_RUN_ROOT"
    )]
    run_root: PathBuf,
    /// Parent of the labs' log directories.
    #[arg(
        long,
        global = true,
        default_value = "/var/log/cairn-lab",
        env = "CAIRN_LAB_LOG_ROOT"
    )]
    log_root: PathBuf,
    #[command(subcommand)]
    command: Cmd,
}

#[derive(clap::Args)]
struct UpArgs {
    #[arg(long, default_value_t = 2)]
    pub nodes: usize,
    /// Where nodes live: netns (a network namespace each, on any root Linux host) or
    /// docker (a container each, kind-style, from a node image built offline).
    #[arg(long, value_enum, default_value = "netns")]
    pub driver: DriverKind,
    #[arg(long, value_enum, default_value = "nftables")]
    pub proxy_mode: ProxyMode,
    #[arg(long, value_enum, default_value = "host-gw")]
    pub network: NetworkBackend,
    /// Host port (on 127.0.0.1) forwarded to the API.
    #[arg(long, default_value_t = 6443)]
    pub api_port: u16,
    /// Directory of the cairn binaries (default: the one cairn-lab is in).
    #[arg(long)]
    pub bin_dir: Option<PathBuf>,
    /// An extra flag for `cairn-control serve` (repeatable), e.g.
    /// --control-arg=--node-monitor-grace-period=10
    #[arg(long = "control-arg", allow_hyphen_values = true)]
    pub control_args: Vec<String>,
    /// An extra flag for every node's `cairn-agent` (repeatable), e.g.
    /// --agent-arg=--dns-upstream=198.18.0.1:53
    #[arg(long = "agent-arg", allow_hyphen_values = true)]
    pub agent_args: Vec<String>,
    /// An extra flag for every node's `cairn-proxy` (repeatable), e.g.
    /// --proxy-arg=--ingress=false (no Ingress data plane on the nodes' ports 80 and 443)
    #[arg(long = "proxy-arg", allow_hyphen_values = true)]
    pub proxy_args: Vec<String>,
    /// cairn-control replicas, one on each of the first nodes (more than one needs
    /// --store etcd); the host's API address fails over between them.
    #[arg(long, default_value_t = 1)]
    pub control_replicas: usize,
    /// The control plane's store: sqlite (embedded) or etcd (a member beside each
    /// replica, Debian's etcd-server; netns driver).
    #[arg(long, value_enum, default_value = "sqlite")]
    pub store: LabStore,
    /// Seconds to wait for each daemon.
    #[arg(long, default_value_t = 120)]
    pub timeout: u64,
    /// Leave a lab that failed to come up in place, for inspection.
    #[arg(long)]
    pub keep_on_failure: bool,
}

#[derive(Subcommand)]
enum Cmd {
    /// Start a lab (taking down leftovers of an earlier one of the same name first).
    Up(UpArgs),
    /// Stop everything the lab started and remove what it made (logs stay unless --purge-logs).
    Down {
        #[arg(long)]
        purge_logs: bool,
    },
    /// Nodes, components, PIDs, logs.
    Status,
    /// Print the kubeconfig for kubectl on this host.
    Kubeconfig,
    /// Run a command inside a node (its network namespace).
    Exec {
        node: String,
        #[arg(last = true, required = true)]
        command: Vec<String>,
    },
    /// Stop components of a node (containerd, agent, proxy, control, etcd); their containers
    /// keep running, as after a crash.
    Stop {
        node: String,
        #[arg(required = true)]
        components: Vec<String>,
        /// SIGKILL instead of SIGTERM.
        #[arg(long)]
        kill: bool,
    },
    /// Start stopped components of a node again and wait until they answer.
    Start {
        node: String,
        #[arg(required = true)]
        components: Vec<String>,
        #[arg(long, default_value_t = 120)]
        timeout: u64,
    },
    /// The docker driver's node image: `ensure` builds/imports it when missing and prints
    /// its name; `run-flags` prints the `docker run` flags a node container gets, one per
    /// line (scripts/test-in-container.sh uses both).
    Image {
        #[arg(value_parser = ["ensure", "run-flags"])]
        action: String,
    },
    /// Churn on the lab while checking invariants (deleted pods gone within their grace
    /// period + 10 s, Jobs complete once, workloads converge, nothing left on the nodes);
    /// exits non-zero with the pod, its events and the agent's log lines on a violation.
    Soak {
        #[arg(long, default_value_t = 3.0)]
        minutes: f64,
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// The namespace the soak works in (created, and deleted at the end).
        #[arg(long, default_value = "soak")]
        namespace: String,
        /// Seconds between agent SIGKILL + restarts (a random node each time).
        #[arg(long, default_value_t = 45)]
        agent_restart_every: u64,
        /// Seconds between proxy restarts.
        #[arg(long, default_value_t = 80)]
        proxy_restart_every: u64,
    },
    /// Print a component's log (control, agent, proxy, containerd on a node; registry, forward).
    Logs {
        node: String,
        component: String,
        #[arg(long, short)]
        follow: bool,
    },
}

fn load(cli: &Cli, roots: &Roots) -> anyhow::Result<LabState> {
    LabState::load(roots, &cli.name)?.with_context(|| {
        format!(
            "no lab named {} is up ({} does not exist)",
            cli.name,
            roots.state_file(&cli.name).display()
        )
    })
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    let roots = Roots {
        data: cli.data_root.clone(),
        run: cli.run_root.clone(),
        log: cli.log_root.clone(),
    };
    match &cli.command {
        Cmd::Up(args) => run_up(&cli.name, roots, args)?,
        Cmd::Down { purge_logs } => cairn_lab::down::down(&roots, &cli.name, *purge_logs)?,
        Cmd::Status => print!("{}", cairn_lab::status::render(&load(&cli, &roots)?)),
        Cmd::Kubeconfig => {
            let path = load(&cli, &roots)?.plan.kubeconfig();
            print!(
                "{}",
                std::fs::read_to_string(&path).with_context(|| path.display().to_string())?
            );
        }
        Cmd::Exec { node, command } => {
            let state = load(&cli, &roots)?;
            let plan = &state.plan;
            let argv = cairn_lab::drivers::for_plan(plan).command(
                plan,
                Place::Node(plan.node(node)?),
                command.clone(),
            );
            let err = Command::new(&argv[0]).args(&argv[1..]).exec();
            anyhow::bail!("{}: {err}", argv.join(" "));
        }
        Cmd::Stop {
            node,
            components,
            kill,
        } => cairn_lab::up::stop_components(&load(&cli, &roots)?, node, components, *kill)?,
        Cmd::Start {
            node,
            components,
            timeout,
        } => {
            let mut state = load(&cli, &roots)?;
            cairn_lab::up::start_components(
                &mut state,
                node,
                components,
                Duration::from_secs(*timeout),
            )?
        }
        Cmd::Image { action } => {
            if action == "ensure" {
                cairn_lab::docker::ensure_image()?;
                println!("{}", cairn_lab::docker::NODE_IMAGE);
            } else {
                println!("{}", cairn_lab::docker::node_run_flags().join("\n"));
            }
        }
        Cmd::Soak {
            minutes,
            seed,
            namespace,
            agent_restart_every,
            proxy_restart_every,
        } => {
            let mut state = load(&cli, &roots)?;
            let options = cairn_lab::soak::SoakOptions {
                duration: Duration::from_secs_f64(minutes * 60.0),
                seed: *seed,
                namespace: namespace.clone(),
                agent_restart_every: Duration::from_secs(*agent_restart_every),
                proxy_restart_every: Duration::from_secs(*proxy_restart_every),
            };
            let report = cairn_lab::soak::run(&mut state, &options)?;
            print!("{}", report.render());
        }
        Cmd::Logs {
            node,
            component,
            follow,
        } => {
            let state = load(&cli, &roots)?;
            let p = state.process(node, component).with_context(|| {
                format!(
                    "lab {} has no {component} on {node} (see cairn-lab status)",
                    cli.name
                )
            })?;
            let mut tail = Command::new("tail");
            tail.args(if *follow {
                ["-n", "+1", "-F"].as_slice()
            } else {
                ["-n", "+1"].as_slice()
            })
            .arg(&p.log);
            let err = tail.exec();
            anyhow::bail!("tail {}: {err}", p.log.display());
        }
    }
    Ok(())
}

fn run_up(name: &str, roots: Roots, a: &UpArgs) -> anyhow::Result<()> {
    let bin_dir = match &a.bin_dir {
        Some(d) => d.clone(),
        None => std::env::current_exe()?
            .parent()
            .context("cairn-lab's directory")?
            .to_path_buf(),
    };
    let options = LabOptions {
        name: name.to_string(),
        nodes: a.nodes,
        driver: a.driver,
        proxy_mode: a.proxy_mode,
        network: a.network,
        api_port: a.api_port,
        bin_dir,
        control_args: a.control_args.clone(),
        agent_args: a.agent_args.clone(),
        proxy_args: a.proxy_args.clone(),
        control_replicas: a.control_replicas,
        store: a.store,
        roots,
    };
    let settings = UpSettings {
        timeout: Duration::from_secs(a.timeout),
        keep_on_failure: a.keep_on_failure,
    };
    let state = cairn_lab::up::up(options, &settings)?;
    print!("{}", cairn_lab::status::render(&state));
    println!(
        "\n  export KUBECONFIG={}\n  kubectl get nodes -o wide",
        state.plan.kubeconfig().display()
    );
    Ok(())
}
