//! `cairn-node join --server https://HOST:6443 --token T`.

use std::path::Path;
use std::time::Duration;

use super::env_file::{args_of, check_value, with_args, without_flags};
use super::units::{Units, NODE_UNITS};
use super::{io, NodeError, NodePaths, Progress};

#[derive(Debug, Clone)]
pub struct JoinOptions {
    pub server: String,
    pub token: String,
    pub node: String,
    /// The node's address on the cluster's network, when not its first one.
    pub node_ip: Option<String>,
    pub paths: NodePaths,
    pub timeout: Duration,
}

/// The flags join owns in each unit's arguments; the operator's others are kept.
const AGENT_FLAGS: &[&str] = &[
    "--server",
    "--token",
    "--token-file",
    "--node-name",
    "--kubeconfig",
    "--root-dir",
];
const PROXY_FLAGS: &[&str] = &["--kubeconfig", "--hostname-override"];

pub async fn join_node(
    o: &JoinOptions,
    units: &dyn Units,
    say: Progress<'_>,
) -> Result<(), NodeError> {
    refuse_second_join(&o.paths)?;
    for (what, value) in [
        ("server", o.server.as_str()),
        ("node name", &o.node),
        ("root dir", &o.paths.root.display().to_string()),
        ("etc dir", &o.paths.etc.display().to_string()),
    ] {
        check_value(what, value).map_err(NodeError::Value)?;
    }
    say(&format!(
        "Joining {} as node {}: checking the cluster CA against the token, asking for a client certificate",
        o.server, o.node
    ));
    crate::join::join(&o.server, &o.token, &o.node, &o.paths.kubeconfig()).await?;
    say(&format!(
        "Client certificate for system:node:{} written to {}",
        o.node,
        o.paths.kubeconfig().display()
    ));
    crate::join::proxy_credential(&o.paths.kubeconfig(), &o.paths.proxy_kubeconfig()).await?;
    say(&format!(
        "Client certificate for the proxy (system:kube-proxy) written to {}",
        o.paths.proxy_kubeconfig().display()
    ));
    write_configuration(o)?;
    say(&format!(
        "Configuration written: {}, {}, {}",
        o.paths.env("agent").display(),
        o.paths.env("proxy").display(),
        o.paths.token().display()
    ));
    units.enable_now(&NODE_UNITS)?;
    say(&format!("Started {}", NODE_UNITS.join(", ")));
    let wait = super::ready::ReadyWait {
        server: &o.server,
        node: &o.node,
        kubeconfig: &o.paths.kubeconfig(),
        timeout: o.timeout,
    };
    super::ready::wait_until_ready(&wait, say).await
}

/// A joined node is reset before it joins again: a second join over the first would
/// leave two configurations' state behind.
fn refuse_second_join(paths: &NodePaths) -> Result<(), NodeError> {
    let path = paths.joined();
    let Ok(text) = std::fs::read_to_string(&path) else {
        return Ok(());
    };
    let field = |key: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(key)?.strip_prefix('='))
            .unwrap_or("?")
            .to_string()
    };
    Err(NodeError::AlreadyJoined {
        server: field("server"),
        node: field("node"),
        path,
    })
}

fn write_configuration(o: &JoinOptions) -> Result<(), NodeError> {
    let p = &o.paths;
    std::fs::create_dir_all(p.node_dir()).map_err(io(&p.node_dir()))?;
    write_private(&p.token(), &format!("{}\n", o.token))?;
    let root = p.root.display().to_string();
    let proxy_kubeconfig = p.proxy_kubeconfig().display().to_string();
    let token = p.token().display().to_string();
    let mut agent = vec![
        "--root-dir",
        &root,
        "--node-name",
        &o.node,
        "--server",
        &o.server,
        "--token-file",
        &token,
    ];
    let mut owned = AGENT_FLAGS.to_vec();
    // Given, --node-ip replaces the operator's; not given, theirs stays.
    if let Some(ip) = &o.node_ip {
        agent.extend(["--node-ip", ip]);
        owned.push("--node-ip");
    }
    set_unit_args(p, "agent", "CAIRN_AGENT_ARGS", &owned, &agent)?;
    let proxy = [
        "--kubeconfig",
        &proxy_kubeconfig,
        "--hostname-override",
        &o.node,
    ];
    set_unit_args(p, "proxy", "CAIRN_PROXY_ARGS", PROXY_FLAGS, &proxy)?;
    let joined = format!("server={}\nnode={}\n", o.server, o.node);
    std::fs::write(p.joined(), joined).map_err(io(&p.joined()))
}

/// Sets join's flags in `unit`'s environment file, keeping a copy of the file as it was
/// for reset.
fn set_unit_args(
    p: &NodePaths,
    unit: &str,
    var: &str,
    owned: &[&str],
    ours: &[&str],
) -> Result<(), NodeError> {
    let path = p.env(unit);
    let before = match std::fs::read_to_string(&path) {
        Ok(text) => {
            let backup = p.env_before_join(unit);
            std::fs::write(&backup, &text).map_err(io(&backup))?;
            text
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(e) => return Err(io(&path)(e)),
    };
    let mut args = without_flags(&args_of(&before, var), owned);
    args.extend(ours.iter().map(|s| s.to_string()));
    std::fs::write(&path, with_args(&before, var, &args)).map_err(io(&path))
}

fn write_private(path: &Path, text: &str) -> Result<(), NodeError> {
    cairn_pki::files::write_private(path, text.as_bytes()).map_err(NodeError::Private)
}
