//! What the soak does to and reads from the nodes: agent SIGKILL + restart, proxy
//! restarts, daemons' resident memory over time (and its slope), and the end-of-run audit
//! that nothing of the soak's pods is left on a node: no container, task or sandbox in
//! containerd, no pinned network namespace, veth or IPAM address without a live sandbox.

use std::collections::{BTreeMap, BTreeSet};
use std::process::Command;
use std::time::{Duration, Instant};

use crate::driver::Place;
use crate::plan::{NodePlan, CONTAINERD_NAMESPACE};
use crate::state::LabState;

use super::error::SoakError;

/// SIGKILLs `node`'s agent (its containers keep running) and starts it again.
pub fn restart(
    state: &mut LabState,
    node: &str,
    component: &str,
    kill: bool,
) -> Result<(), SoakError> {
    let components = [component.to_string()];
    crate::up::stop_components(state, node, &components, kill)?;
    crate::up::start_components(state, node, &components, Duration::from_secs(120))?;
    Ok(())
}

/// Resident set size samples of each daemon (`node/component`), kept per process: a
/// restarted daemon starts a new series.
#[derive(Default)]
pub struct Memory {
    started: Option<Instant>,
    series: BTreeMap<String, (u32, Vec<(f64, f64)>)>,
}

fn rss_mib(pid: u32) -> Option<f64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let kib: f64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))?
        .split_whitespace()
        .next()?
        .parse()
        .ok()?;
    Some(kib / 1024.0)
}

impl Memory {
    pub fn sample(&mut self, state: &LabState) {
        let t0 = *self.started.get_or_insert_with(Instant::now);
        let minutes = t0.elapsed().as_secs_f64() / 60.0;
        for p in &state.processes {
            if !matches!(p.component.as_str(), "agent" | "proxy" | "control") {
                continue;
            }
            let Some(mib) = rss_mib(p.pid) else { continue };
            let entry = self
                .series
                .entry(format!("{}/{}", p.node, p.component))
                .or_insert((p.pid, Vec::new()));
            if entry.0 != p.pid {
                *entry = (p.pid, Vec::new());
            }
            entry.1.push((minutes, mib));
        }
    }

    /// One line per daemon: its last RSS and the slope of its current process's series.
    pub fn report(&self) -> Vec<String> {
        self.series
            .iter()
            .map(|(daemon, (pid, s))| {
                let last = s.last().map_or(0.0, |x| x.1);
                let first = s.first().map_or(0.0, |x| x.1);
                let span = s.last().map_or(0.0, |x| x.0) - s.first().map_or(0.0, |x| x.0);
                format!(
                    "{daemon} (pid {pid}): RSS {first:.1} -> {last:.1} MiB over {span:.1} min, slope {:+.2} MiB/min",
                    slope(s)
                )
            })
            .collect()
    }
}

/// Least-squares slope of `(x, y)` points (0 for fewer than two distinct x).
pub fn slope(points: &[(f64, f64)]) -> f64 {
    let n = points.len() as f64;
    if points.len() < 2 {
        return 0.0;
    }
    let mx = points.iter().map(|p| p.0).sum::<f64>() / n;
    let my = points.iter().map(|p| p.1).sum::<f64>() / n;
    let sxx: f64 = points.iter().map(|p| (p.0 - mx).powi(2)).sum();
    if sxx == 0.0 {
        return 0.0;
    }
    points.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum::<f64>() / sxx
}

fn on_node(state: &LabState, node: &NodePlan, argv: &[&str]) -> Result<String, SoakError> {
    let plan = &state.plan;
    let argv: Vec<String> = argv.iter().map(|s| s.to_string()).collect();
    let full = crate::drivers::for_plan(plan).command(plan, Place::Node(node), argv);
    let out = Command::new(&full[0])
        .args(&full[1..])
        .output()
        .map_err(|e| SoakError::Node(format!("{}: {e}", full.join(" "))))?;
    if !out.status.success() {
        return Err(SoakError::Node(format!(
            "{} failed: {}",
            full.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

fn ctr_ids(state: &LabState, node: &NodePlan, filter: &str) -> Result<BTreeSet<String>, SoakError> {
    let socket = node.containerd_socket().display().to_string();
    let out = on_node(
        state,
        node,
        &[
            "ctr",
            "--address",
            &socket,
            "-n",
            CONTAINERD_NAMESPACE,
            "containers",
            "ls",
            "-q",
            filter,
        ],
    )?;
    Ok(out
        .lines()
        .map(str::to_string)
        .filter(|l| !l.is_empty())
        .collect())
}

fn listing(state: &LabState, node: &NodePlan, dir: &str) -> Result<Vec<String>, SoakError> {
    let out = on_node(
        state,
        node,
        &["sh", "-c", &format!("ls -1 {dir} 2>/dev/null || true")],
    )?;
    Ok(out.lines().map(str::to_string).collect())
}

/// What is left on `node` of pods in `namespace`, or without a live sandbox; empty when
/// clean.
pub fn leftovers(
    state: &LabState,
    node: &NodePlan,
    namespace: &str,
) -> Result<Vec<String>, SoakError> {
    let mut found = Vec::new();
    let mine = ctr_ids(
        state,
        node,
        &format!("labels.\"io.kubernetes.pod.namespace\"=={namespace}"),
    )?;
    found.extend(
        mine.iter()
            .map(|id| format!("containerd object {id} of a {namespace} pod")),
    );
    let sandboxes = ctr_ids(state, node, "labels.\"io.cairn.kind\"==sandbox")?;
    let agent_run = node.run_dir.join("agent");
    for kind in ["netns", "ipcns", "utsns"] {
        let dir = agent_run.join(kind).display().to_string();
        for entry in listing(state, node, &dir)? {
            if !sandboxes.contains(&entry) {
                found.push(format!("{kind} {dir}/{entry} without a sandbox"));
            }
        }
    }
    let ipam = node
        .run_dir
        .join("cni/networks/cairn")
        .display()
        .to_string();
    for entry in listing(state, node, &ipam)? {
        if entry.parse::<std::net::IpAddr>().is_err() {
            continue;
        }
        let owner = on_node(state, node, &["head", "-n1", &format!("{ipam}/{entry}")])?;
        if !sandboxes.contains(owner.trim()) {
            found.push(format!(
                "IPAM address {entry} held by {} without a sandbox",
                owner.trim()
            ));
        }
    }
    // Pods' veths hang off the bridge (the node's own eth0 is a veth too).
    let bridged = "ip -o link show master cni0 type veth 2>/dev/null || true";
    let veths = on_node(state, node, &["sh", "-c", bridged])?
        .lines()
        .count();
    let pinned = listing(state, node, &agent_run.join("netns").display().to_string())?.len();
    if veths > pinned {
        found.push(format!(
            "{veths} veth devices for {pinned} pod network namespaces"
        ));
    }
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slope_of_a_line_and_of_too_few_points() {
        assert!((slope(&[(0.0, 10.0), (1.0, 12.0), (2.0, 14.0)]) - 2.0).abs() < 1e-9);
        assert_eq!(slope(&[(0.0, 10.0)]), 0.0);
        assert_eq!(slope(&[(1.0, 10.0), (1.0, 12.0)]), 0.0);
    }
}
