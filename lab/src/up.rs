//! `cairn-lab up`: network, registry and images, then per node containerd, agent and
//! proxy (cairn-control on node-1), each waited for. A failure takes the lab down again
//! (logs kept) unless asked to keep it.

use std::net::TcpListener;
use std::path::Path;
use std::time::{Duration, Instant};

use crate::args;
use crate::cmd::{run, succeeds};
use crate::components::{self, Daemon};
use crate::daemon::{answers, record_of, start};
use crate::down;
use crate::driver::Place;
use crate::drivers;
use crate::error::{LabError, Result};
use crate::images;
use crate::plan::{LabOptions, LabPlan, LabStore, NodePlan};
use crate::process::{self, wait_for};
use crate::replicas;
use crate::state::LabState;

pub const BINARIES: [&str; 5] = [
    "cairn-control",
    "cairn-agent",
    "cairn-cni",
    "cairn-logger",
    "cairn-proxy",
];

/// How `up` goes about it.
#[derive(Debug, Clone)]
pub struct UpSettings {
    /// For each daemon to become ready.
    pub timeout: Duration,
    /// Leave what was started in place when a step fails (for its logs).
    pub keep_on_failure: bool,
}

pub fn up(options: LabOptions, settings: &UpSettings) -> Result<LabState> {
    let plan = LabPlan::new(options)?;
    preflight(&plan)?;
    let driver = drivers::for_plan(&plan);
    driver.preflight(&plan)?;
    if let Some(old) = LabState::load(&plan.options.roots, plan.name())? {
        say(&format!(
            "lab {} has leftovers of an earlier run; taking them down first",
            plan.name()
        ));
        down::teardown(&old, false)?;
    } else if !driver.leftovers(&plan).is_empty() {
        return Err(LabError::Usage(format!(
            "found {}, but lab {} has no record of them; remove them (ip netns delete, \
             docker rm, docker network rm) or choose another --name",
            driver.leftovers(&plan).join(", "),
            plan.name()
        )));
    }
    check_port_free(plan.options.api_port)?;
    let mut state = LabState::new(plan);
    state.save()?;
    let started = Instant::now();
    match bring_up(&mut state, settings) {
        Ok(()) => {
            state.ready = true;
            state.save()?;
            say(&format!(
                "lab {} is up in {:.1}s",
                state.plan.name(),
                started.elapsed().as_secs_f64()
            ));
            Ok(state)
        }
        Err(e) if settings.keep_on_failure => Err(e),
        Err(e) => {
            say(&format!(
                "up failed; taking the lab down (logs stay in {})",
                state.plan.log_dir.display()
            ));
            if let Err(down_err) = down::teardown(&state, false) {
                say(&format!("and taking it down failed too: {down_err}"));
            }
            Err(e)
        }
    }
}

fn say(line: &str) {
    eprintln!("cairn-lab: {line}");
}

fn preflight(plan: &LabPlan) -> Result<()> {
    if !nix::unistd::geteuid().is_root() {
        return Err(LabError::Usage(
            "run cairn-lab as root (network namespaces, containerd, cgroups)".into(),
        ));
    }
    let missing: Vec<String> = BINARIES
        .iter()
        .map(|b| plan.options.bin_dir.join(b))
        .filter(|p| !p.is_file())
        .map(|p| p.display().to_string())
        .collect();
    if !missing.is_empty() {
        return Err(LabError::Usage(format!(
            "missing {}: build them (cargo build --release --bins) or pass --bin-dir",
            missing.join(", ")
        )));
    }
    for tool in [
        "ip",
        "nsenter",
        "setsid",
        "containerd",
        "ctr",
        "docker-registry",
        "socat",
        "curl",
        "kubectl",
        "python3",
    ]
    .into_iter()
    .chain((plan.options.store == LabStore::Etcd).then_some("etcd"))
    {
        if !succeeds(args!["sh", "-c", format!("command -v {tool}")]) {
            return Err(LabError::Usage(format!(
                "{tool} is not installed (scripts/install-deps.sh installs what the lab needs)"
            )));
        }
    }
    Ok(())
}

fn check_port_free(port: u16) -> Result<()> {
    TcpListener::bind(("127.0.0.1", port))
        .map(drop)
        .map_err(|e| {
            LabError::Usage(format!(
                "127.0.0.1:{port} is taken ({e}): another lab or API server? choose --api-port"
            ))
        })
}

fn bring_up(state: &mut LabState, settings: &UpSettings) -> Result<()> {
    let plan = state.plan.clone();
    let driver = drivers::for_plan(&plan);
    prepare_dirs(&plan)?;
    say(&format!(
        "network: {} driver, {} node(s) on {}",
        plan.options.driver.as_str(),
        plan.nodes.len(),
        plan.subnet()
    ));
    driver.create(&plan)?;
    write(
        &components::registry_config_path(&plan),
        &components::registry_config(&plan),
    )?;
    let registry = start(state, Place::Switch, &components::registry(&plan))?;
    for node in &plan.nodes {
        write(
            &components::containerd_config_path(node),
            &components::containerd_config(node),
        )?;
        start(state, Place::Node(node), &components::containerd(node))?;
    }
    replicas::start_etcd(state, settings.timeout)?;
    let control_node = plan.control_node().clone();
    write(
        &components::audit_policy_path(&control_node),
        components::AUDIT_POLICY,
    )?;
    let control = start(
        state,
        Place::Node(&control_node),
        &components::control(&plan, &control_node),
    )?;
    let t = settings.timeout;
    let registry_url = format!("http://{}/v2/", plan.registry());
    wait_for(&registry, "an answer on /v2/", t, || {
        succeeds(driver.command(&plan, Place::Switch, args!["curl", "-fsS", registry_url]))
    })?;
    say("images: busybox and httpd into the lab registry");
    images::push_all(&plan, driver.as_ref())?;
    for node in &plan.nodes {
        let containerd = record_of(state, &node.name, "containerd")?;
        wait_for(&containerd, "an answer on its socket", t, || {
            answers(&plan, node, "containerd")
        })?;
    }
    wait_for(&control, "an answer on /readyz", t, || {
        answers(&plan, &control_node, "control")
    })?;
    replicas::start_other_replicas(state, t)?;
    start_agents(state, t)?;
    start_proxies(state, t)
}

/// A kubeconfig from cairn-control's PKI: the admin's, or `(user, group)`'s.
fn kubeconfig(plan: &LabPlan, server: &str, who: Option<(&str, Option<&str>)>) -> Result<String> {
    let mut argv = args![
        plan.bin("cairn-control").display(),
        "kubeconfig",
        "--data-dir",
        plan.control_data_dir().display(),
        "--server",
        server
    ];
    if let Some((user, group)) = who {
        argv.extend(args!["--user", user]);
        if let Some(g) = group {
            argv.extend(args!["--group", g]);
        }
    }
    run(argv)
}

fn start_agents(state: &mut LabState, t: Duration) -> Result<()> {
    let plan = state.plan.clone();
    write(
        &plan.kubeconfig(),
        &kubeconfig(&plan, &plan.api_url_host(), None)?,
    )?;
    let api = format!("{}/readyz", plan.api_url_host());
    let through = if drivers::for_plan(&plan).needs_api_forward() {
        replicas::start_forward(state)?
    } else {
        record_of(state, &plan.control_node().name, "control")?
    };
    let ca = plan.cluster_ca();
    wait_for(&through, "the API from the host", t, || {
        succeeds(args!["curl", "-fsS", "--cacert", ca.display(), api])
    })?;
    // Nodes join as real ones do: one token that pins the CA, a CSR for their
    // client certificate.
    let token = join_token(&plan)?;
    let inside = plan.api_url_inside();
    for node in &plan.nodes {
        write_private(&components::join_token_file(node), &token)?;
        let creds = kubeconfig(&plan, &inside, Some(("system:kube-proxy", None)))?;
        write(&components::proxy_kubeconfig(node), &creds)?;
        write(
            &node.data_dir.join("certs.d/docker.io/hosts.toml"),
            &components::registry_hosts_toml(&plan),
        )?;
        say(&format!("{}: cairn-agent ({})", node.name, node.ip));
        start(state, Place::Node(node), &components::agent(&plan, node))?;
    }
    for node in &plan.nodes {
        let agent = record_of(state, &node.name, "agent")?;
        wait_for(
            &agent,
            &format!("Node {} Ready and untainted", node.name),
            t,
            || node_ready(&plan, &node.name),
        )?;
        // Its port serves once the cluster signed its serving certificate: wait, so a
        // first `kubectl exec` or `logs` does not race it.
        wait_for(&agent, "the agent's HTTPS port", t, || {
            answers(&plan, node, "agent")
        })?;
    }
    Ok(())
}

fn start_proxies(state: &mut LabState, t: Duration) -> Result<()> {
    let plan = state.plan.clone();
    for node in &plan.nodes {
        say(&format!(
            "{}: cairn-proxy ({})",
            node.name,
            plan.options.proxy_mode.as_str()
        ));
        start(state, Place::Node(node), &components::proxy(&plan, node))?;
    }
    for node in &plan.nodes {
        let proxy = record_of(state, &node.name, "proxy")?;
        wait_for(&proxy, "a first sync (/healthz)", t, || {
            answers(&plan, node, "proxy")
        })?;
    }
    Ok(())
}

/// Ready, and schedulable: the node lifecycle controller has lifted the `not-ready`
/// taint every new node starts with (else the first pods all land on the first node
/// whose taint goes).
fn node_ready(plan: &LabPlan, node: &str) -> bool {
    let jsonpath =
        "jsonpath={.status.conditions[?(@.type==\"Ready\")].status} {.spec.taints[*].key}";
    run(args![
        "kubectl",
        "--kubeconfig",
        plan.kubeconfig().display(),
        "get",
        "node",
        node,
        "-o",
        jsonpath
    ])
    .is_ok_and(|s| s.trim() == "True")
}

/// A join token for the lab's nodes, through the host's admin kubeconfig.
fn join_token(plan: &LabPlan) -> Result<String> {
    let out = run(args![
        plan.bin("cairn-control").display(),
        "token",
        "create",
        "--data-dir",
        plan.control_data_dir().display(),
        "--kubeconfig",
        plan.kubeconfig().display(),
        "--ttl",
        "2h",
        "--description",
        "cairn-lab nodes"
    ])?;
    Ok(out.trim().to_string())
}

/// A secret: readable by root alone.
fn write_private(path: &Path, text: &str) -> Result<()> {
    use std::os::unix::fs::PermissionsExt;
    write(path, text)?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))
        .map_err(|e| LabError::io(path, e))
}

fn write(path: &Path, text: &str) -> Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(|e| LabError::io(dir, e))?;
    }
    std::fs::write(path, text).map_err(|e| LabError::io(path, e))
}

/// Directories, and copies of the binaries (a later build does not swap them under
/// running daemons).
fn prepare_dirs(plan: &LabPlan) -> Result<()> {
    let mut dirs = vec![
        plan.data_dir.join("bin"),
        plan.data_dir.join("cni/bin"),
        plan.data_dir.join("registry"),
        plan.run_dir.clone(),
        plan.log_dir.clone(),
    ];
    for n in &plan.nodes {
        dirs.extend([
            n.data_dir.join("agent"),
            n.data_dir.join("cni/net.d"),
            n.data_dir.join("manifests"),
            n.data_dir.join("containerd/opt"),
            n.run_dir.join("containerd"),
            n.run_dir.join("agent"),
            n.run_dir.join("cni/networks"),
            n.log_dir.join("pods"),
        ]);
    }
    for d in &dirs {
        std::fs::create_dir_all(d).map_err(|e| LabError::io(d, e))?;
    }
    for b in BINARIES {
        let dest = if b == "cairn-cni" {
            plan.data_dir.join("cni/bin").join(b)
        } else {
            plan.bin(b)
        };
        let src = plan.options.bin_dir.join(b);
        std::fs::copy(&src, &dest).map_err(|e| LabError::io(&src, e))?;
    }
    Ok(())
}

/// The daemon a node runs as `component`.
pub fn daemon_for(plan: &LabPlan, node: &NodePlan, component: &str) -> Result<Daemon> {
    match component {
        "containerd" => Ok(components::containerd(node)),
        "control" if plan.runs_control(node) => Ok(components::control(plan, node)),
        "etcd" if plan.runs_etcd(node) => Ok(components::etcd(plan, node)),
        "agent" => Ok(components::agent(plan, node)),
        "proxy" => Ok(components::proxy(plan, node)),
        _ => Err(LabError::Usage(format!(
            "{} runs no {component} (components: containerd, agent, proxy{}{})",
            node.name,
            if plan.runs_control(node) {
                ", control"
            } else {
                ""
            },
            if plan.runs_etcd(node) { ", etcd" } else { "" }
        ))),
    }
}

/// `cairn-lab start NODE COMPONENT...`: starts components that are not running and waits
/// until they answer.
pub fn start_components(
    state: &mut LabState,
    node: &str,
    components: &[String],
    timeout: Duration,
) -> Result<()> {
    let plan = state.plan.clone();
    let node = plan.node(node)?.clone();
    for c in components {
        let daemon = daemon_for(&plan, &node, c)?;
        if state
            .process(&node.name, c)
            .is_some_and(process::is_running)
        {
            continue;
        }
        let record = start(state, Place::Node(&node), &daemon)?;
        wait_for(&record, "an answer", timeout, || answers(&plan, &node, c))?;
    }
    Ok(())
}

/// `cairn-lab stop NODE COMPONENT...`: stops them as a crash would leave the node
/// (SIGKILL with `kill`, else SIGTERM): containers keep running.
pub fn stop_components(
    state: &LabState,
    node: &str,
    components: &[String],
    kill: bool,
) -> Result<()> {
    let node = state.plan.node(node)?;
    for c in components {
        daemon_for(&state.plan, node, c)?;
        if let Some(p) = state
            .process(&node.name, c)
            .filter(|p| process::is_running(p))
        {
            if kill {
                process::kill_now(&[p.pid]);
            } else {
                process::terminate(&[p.pid], Duration::from_secs(10));
            }
        }
    }
    Ok(())
}
