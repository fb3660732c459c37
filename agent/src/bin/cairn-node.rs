//! cairn-node: joins this host to a cluster with one command, and resets it.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use cairn_agent::node_cmd::join::{join_node, JoinOptions};
use cairn_agent::node_cmd::reset::{reset_node, ResetOptions};
use cairn_agent::node_cmd::units::Systemctl;
use cairn_agent::node_cmd::{paths, NodePaths};
use clap::{Parser, Subcommand};

#[derive(Parser, Debug)]
#[command(
    name = "cairn-node",
    version = cairn_version::LONG,
    about = "Join this host to a cairn cluster as a node, or reset it"
)]
struct Cli {
    #[command(subcommand)]
    command: Cmd,
}

#[derive(clap::Args, Debug)]
struct Dirs {
    /// Configuration directory (the units' environment files, the token).
    #[arg(long, default_value = paths::DEFAULT_ETC)]
    etc_dir: PathBuf,
    /// The agent's root directory (the node's kubeconfig and state).
    #[arg(long, default_value = paths::DEFAULT_ROOT)]
    root_dir: PathBuf,
    /// The systemctl to run (tests substitute their own).
    #[arg(long, default_value = "systemctl", hide = true)]
    systemctl: PathBuf,
}

#[derive(Subcommand, Debug)]
enum Cmd {
    /// Join the cluster at --server with the token `cairn-control token create` printed,
    /// start cairn-agent and cairn-proxy and wait until the node is Ready.
    Join {
        /// The API server, e.g. https://10.0.0.1:6443.
        #[arg(long)]
        server: String,
        /// The join token (K10<CA hash>::<id>.<secret>).
        #[arg(
            long,
            conflicts_with = "token_file",
            required_unless_present = "token_file"
        )]
        token: Option<String>,
        /// A file holding the join token.
        #[arg(long)]
        token_file: Option<PathBuf>,
        /// This node's name (default: the host name, lower-cased).
        #[arg(long)]
        node_name: Option<String>,
        /// This node's address on the cluster's network (default: its first global IPv4
        /// address; set it on hosts whose first interface is a NAT one, as Vagrant's).
        #[arg(long)]
        node_ip: Option<std::net::IpAddr>,
        /// Give up waiting for Ready after this many seconds.
        #[arg(long, default_value_t = 300)]
        timeout_seconds: u64,
        #[command(flatten)]
        dirs: Dirs,
    },
    /// Stop and disable the units, remove the pods, cairn's network state and what join
    /// wrote; put /etc/cairn back as it was.
    Reset {
        #[command(flatten)]
        dirs: Dirs,
        /// Leave the pods' containers and cairn's network state in place.
        #[arg(long, hide = true)]
        keep_host_state: bool,
    },
}

fn node_paths(d: &Dirs) -> NodePaths {
    NodePaths {
        etc: d.etc_dir.clone(),
        root: d.root_dir.clone(),
    }
}

fn token(token: Option<String>, file: Option<PathBuf>) -> Result<String, String> {
    match (token, file) {
        (Some(t), _) => Ok(t.trim().to_string()),
        (None, Some(path)) => std::fs::read_to_string(&path)
            .map(|t| t.trim().to_string())
            .map_err(|e| format!("reading the token from {}: {e}", path.display())),
        (None, None) => Err("a token is needed: --token or --token-file".into()),
    }
}

async fn run(cli: Cli) -> Result<(), String> {
    let mut say = |line: &str| println!("{line}");
    match cli.command {
        Cmd::Join {
            server,
            token: t,
            token_file,
            node_name: n,
            node_ip,
            timeout_seconds,
            dirs,
        } => {
            let options = JoinOptions {
                server: server.trim_end_matches('/').to_string(),
                token: token(t, token_file)?,
                node: cairn_agent::config::node_name(n).map_err(|e| e.to_string())?,
                node_ip: node_ip.map(|ip| ip.to_string()),
                paths: node_paths(&dirs),
                timeout: Duration::from_secs(timeout_seconds),
            };
            let units = Systemctl {
                program: dirs.systemctl,
            };
            join_node(&options, &units, &mut say)
                .await
                .map_err(|e| e.to_string())
        }
        Cmd::Reset {
            dirs,
            keep_host_state,
        } => {
            let options = ResetOptions {
                paths: node_paths(&dirs),
                host_state: !keep_host_state,
            };
            let units = Systemctl {
                program: dirs.systemctl,
            };
            reset_node(&options, &units, &mut say).map_err(|e| e.to_string())
        }
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let cli = Cli::parse();
    match run(cli).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("cairn-node: {e}");
            ExitCode::FAILURE
        }
    }
}
