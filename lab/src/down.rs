//! `cairn-lab down`: stops every recorded process (the forward and proxies first, the
//! agents, then each node's containers through its containerd, containerd, leftover shims,
//! cairn-control, etcd and the registry), unmounts what is left under the lab's directories,
//! deletes its namespaces and cgroups and removes its directories. Best effort: every
//! step runs, and what could not be undone is reported at the end.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::args;
use crate::cmd::{run, succeeds};
use crate::drivers;
use crate::error::{LabError, Result};
use crate::plan::{LabPlan, NodePlan, Roots};
use crate::process;
use crate::state::LabState;

const GRACE: Duration = Duration::from_secs(10);

/// Takes the named lab down; `purge_logs` removes its logs too.
pub fn down(roots: &Roots, lab: &str, purge_logs: bool) -> Result<()> {
    let state = LabState::load(roots, lab)?
        .ok_or_else(|| LabError::NoLab(lab.to_string(), roots.state_file(lab)))?;
    teardown(&state, purge_logs)
}

pub fn teardown(state: &LabState, purge_logs: bool) -> Result<()> {
    let plan = &state.plan;
    let mut problems = Vec::new();
    for component in ["forward", "proxy", "agent"] {
        stop_component(state, component);
    }
    for node in &plan.nodes {
        remove_containers(node, &mut problems);
    }
    stop_component(state, "containerd");
    for node in &plan.nodes {
        stop_leftover_shims(node);
    }
    for component in ["control", "etcd", "registry"] {
        stop_component(state, component);
    }
    for m in mounts_under(&[&plan.run_dir, &plan.data_dir]) {
        if !succeeds(args!["umount", m.display()]) && !succeeds(args!["umount", "-l", m.display()])
        {
            problems.push(format!("could not unmount {}", m.display()));
        }
    }
    problems.extend(drivers::for_plan(plan).destroy(plan));
    remove_cgroups(plan, &mut problems);
    remove_dirs(plan, purge_logs, &mut problems);
    if problems.is_empty() {
        eprintln!(
            "cairn-lab: lab {} is down{}",
            plan.name(),
            if purge_logs {
                String::new()
            } else {
                format!(" (logs kept in {})", plan.log_dir.display())
            }
        );
        Ok(())
    } else {
        Err(LabError::Usage(format!(
            "lab {} is down, but: {}",
            plan.name(),
            problems.join("; ")
        )))
    }
}

fn stop_component(state: &LabState, component: &str) {
    let pids: Vec<u32> = state
        .processes
        .iter()
        .filter(|p| p.component == component && process::is_running(p))
        .map(|p| p.pid)
        .collect();
    // The forward's socat forks a child per connection, in its session.
    let pids = if component == "forward" {
        with_session_members(&pids)
    } else {
        pids
    };
    for pid in process::terminate(&pids, GRACE) {
        eprintln!("cairn-lab: {component} (pid {pid}) ignored SIGTERM for {GRACE:?}; killed");
    }
}

fn with_session_members(leaders: &[u32]) -> Vec<u32> {
    let mut pids = leaders.to_vec();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return pids;
    };
    for pid in entries.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok()) {
        let sid = nix::unistd::getsid(Some(nix::unistd::Pid::from_raw(pid as i32)));
        if sid.is_ok_and(|s| leaders.contains(&(s.as_raw() as u32))) && !pids.contains(&pid) {
            pids.push(pid);
        }
    }
    pids
}

/// Kills and removes every task and container of the node's containerd while it runs
/// (runc then removes the containers' cgroups and mounts).
fn remove_containers(node: &NodePlan, problems: &mut Vec<String>) {
    let socket = node.containerd_socket().display().to_string();
    if !succeeds(args!["ctr", "--address", socket, "version"]) {
        return;
    }
    let namespaces =
        run(args!["ctr", "--address", socket, "namespaces", "ls", "-q"]).unwrap_or_default();
    for ns in namespaces.split_whitespace() {
        let ctr = |rest: &[&str]| {
            let mut a = args!["ctr", "--address", socket, "-n", ns];
            a.extend(rest.iter().map(|s| s.to_string()));
            a
        };
        for task in run(ctr(&["tasks", "ls", "-q"]))
            .unwrap_or_default()
            .split_whitespace()
        {
            if !succeeds(ctr(&["tasks", "rm", "-f", task])) {
                problems.push(format!(
                    "{}: could not remove task {task} (containerd namespace {ns})",
                    node.name
                ));
            }
        }
        for id in run(ctr(&["containers", "ls", "-q"]))
            .unwrap_or_default()
            .split_whitespace()
        {
            if !succeeds(ctr(&["containers", "rm", id])) {
                problems.push(format!("{}: could not remove container {id}", node.name));
            }
        }
    }
}

/// Shims outlive their containerd by design; theirs name the node's socket. Loggers write
/// under the node's pod log dir.
fn stop_leftover_shims(node: &NodePlan) {
    let mut pids =
        process::pids_matching(&format!("-address {}", node.containerd_socket().display()));
    pids.extend(process::pids_matching(&format!(
        "path={}/",
        node.log_dir.join("pods").display()
    )));
    if !pids.is_empty() {
        eprintln!(
            "cairn-lab: {}: stopping {} leftover shim/logger process(es)",
            node.name,
            pids.len()
        );
        process::terminate(&pids, GRACE);
    }
}

/// Mount points under any of `dirs`, deepest first.
pub fn mounts_under(dirs: &[&Path]) -> Vec<PathBuf> {
    let text = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    let mut found: Vec<PathBuf> = text
        .lines()
        .filter_map(|l| l.split(' ').nth(4))
        .map(|m| PathBuf::from(m.replace("\\040", " ")))
        .filter(|m| dirs.iter().any(|d| m.starts_with(d)))
        .collect();
    found.sort();
    found.dedup();
    found.reverse();
    found
}

/// The pods' cgroups under `/cairn-lab/<lab>` in every hierarchy, deepest first.
fn remove_cgroups(plan: &LabPlan, problems: &mut Vec<String>) {
    let mut hierarchies = vec![PathBuf::from("/sys/fs/cgroup")];
    if let Ok(entries) = std::fs::read_dir("/sys/fs/cgroup") {
        hierarchies.extend(
            entries
                .filter_map(|e| e.ok())
                .map(|e| e.path())
                .filter(|p| p.is_dir()),
        );
    }
    for h in hierarchies {
        let root = h.join("cairn-lab");
        let lab = root.join(plan.name());
        if lab.is_dir() {
            rmdir_tree(&lab);
            if lab.exists() {
                problems.push(format!("cgroup {} is still in use", lab.display()));
            }
        }
        // Other labs may still be using the parent; removing a non-empty one fails harmlessly.
        let _ = std::fs::remove_dir(&root);
    }
}

fn rmdir_tree(dir: &Path) {
    if let Ok(entries) = std::fs::read_dir(dir) {
        for e in entries.filter_map(|e| e.ok()) {
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                rmdir_tree(&e.path());
            }
        }
    }
    // A cgroup with processes in it stays; the caller reports it.
    let _ = std::fs::remove_dir(dir);
}

fn remove_dirs(plan: &LabPlan, purge_logs: bool, problems: &mut Vec<String>) {
    let mut dirs = vec![&plan.run_dir, &plan.data_dir];
    if purge_logs {
        dirs.push(&plan.log_dir);
    }
    for dir in dirs {
        if !mounts_under(&[dir]).is_empty() {
            problems.push(format!(
                "mounts remain under {}; not removing it",
                dir.display()
            ));
            continue;
        }
        match std::fs::remove_dir_all(dir) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => problems.push(format!("could not remove {}: {e}", dir.display())),
        }
        if let Some(parent) = dir.parent() {
            // The roots (/run/cairn-lab, ...) go with their last lab; non-empty ones stay.
            let _ = std::fs::remove_dir(parent);
        }
    }
}
