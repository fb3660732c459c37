//! `cairn-lab soak`: churn on a running lab while invariants are checked continuously.
//! Random creates, scales and deletes of Deployments, Jobs, a CronJob, StatefulSets and
//! bare pods of every deletion flavour; exec and port-forward sessions opened and dropped;
//! agent SIGKILL + restart and proxy restarts on a timer. Every round checks (see
//! [`checks`]): deleted pods gone within their grace period + 10 s, Jobs completing once,
//! workloads converging; at the end every pod of the soak is gone from the API and from
//! every node ([`nodes::leftovers`]), and the daemons' memory slopes are reported. A
//! broken invariant stops the soak with the pod, its events and the agent's log lines.

pub mod checks;
mod error;
mod kubectl;
pub mod nodes;
mod ops;

use std::collections::BTreeMap;
use std::process::Child;
use std::time::{Duration, Instant};

use chrono::Utc;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::Value;

use crate::driver::Place;
use crate::state::LabState;
use checks::{PodRef, Violation};
pub use error::SoakError;
use kubectl::Kubectl;
use ops::World;

pub struct SoakOptions {
    pub duration: Duration,
    pub seed: u64,
    pub namespace: String,
    pub agent_restart_every: Duration,
    pub proxy_restart_every: Duration,
}

/// What a soak did and checked.
#[derive(Default)]
pub struct Report {
    pub operations: BTreeMap<&'static str, u32>,
    pub agent_restarts: u32,
    pub proxy_restarts: u32,
    /// Invariant evaluations (one per object per round).
    pub checks: u64,
    /// Sessions whose target pod went away under them (not a failure).
    pub targets_gone: u32,
    pub memory: Vec<String>,
    pub elapsed: Duration,
}

impl Report {
    pub fn render(&self) -> String {
        let ops: u32 = self.operations.values().sum();
        let mut out = format!(
            "soak: {ops} operations, {} agent restarts (SIGKILL), {} proxy restarts, {} invariant checks, {} sessions whose pod went away, {:.1} min\n",
            self.agent_restarts,
            self.proxy_restarts,
            self.checks,
            self.targets_gone,
            self.elapsed.as_secs_f64() / 60.0
        );
        for (op, n) in &self.operations {
            out.push_str(&format!("  {op}: {n}\n"));
        }
        for line in &self.memory {
            out.push_str(&format!("  {line}\n"));
        }
        out
    }
}

/// A listener on the switch that accepts connections and never answers: the registry of
/// [`ops::HANGING_IMAGE`].
fn hanging_registry(state: &LabState) -> Result<Child, SoakError> {
    let script = "import socket\ns=socket.socket()\ns.setsockopt(socket.SOL_SOCKET,socket.SO_REUSEADDR,1)\ns.bind(('198.18.0.1',5998))\ns.listen(256)\nheld=[]\nwhile True:\n    held.append(s.accept()[0])\n";
    let plan = &state.plan;
    let argv = vec!["python3".to_string(), "-c".to_string(), script.to_string()];
    let full = crate::drivers::for_plan(plan).command(plan, Place::Switch, argv);
    std::process::Command::new(&full[0])
        .args(&full[1..])
        .spawn()
        .map_err(|e| SoakError::Node(format!("starting the hanging registry: {e}")))
}

pub fn run(state: &mut LabState, opts: &SoakOptions) -> Result<Report, SoakError> {
    let k = Kubectl::new(&state.plan.kubeconfig());
    let ns = opts.namespace.as_str();
    k.apply(
        &serde_json::json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}),
    )?;
    let mut listener = hanging_registry(state)?;
    let result = churn(state, &k, opts).and_then(|mut report| {
        finish(state, &k, ns, &mut report)?;
        Ok(report)
    });
    let _ = listener.kill();
    let _ = listener.wait();
    result
}

fn churn(state: &mut LabState, k: &Kubectl, opts: &SoakOptions) -> Result<Report, SoakError> {
    let started = Instant::now();
    let mut report = Report::default();
    let mut memory = nodes::Memory::default();
    let mut world = World::new(&opts.namespace);
    let mut rng = StdRng::seed_from_u64(opts.seed);
    let (mut last_agent, mut last_proxy) = (Instant::now(), Instant::now());
    while started.elapsed() < opts.duration {
        let pods = check_round(state, k, &world, &mut report)?;
        memory.sample(state);
        let nodes: Vec<String> = state.plan.nodes.iter().map(|n| n.name.clone()).collect();
        if last_agent.elapsed() >= opts.agent_restart_every {
            let node = nodes[rng.random_range(0..nodes.len())].clone();
            nodes::restart(state, &node, "agent", true)?;
            report.agent_restarts += 1;
            last_agent = Instant::now();
        } else if last_proxy.elapsed() >= opts.proxy_restart_every {
            let node = nodes[rng.random_range(0..nodes.len())].clone();
            nodes::restart(state, &node, "proxy", false)?;
            report.proxy_restarts += 1;
            last_proxy = Instant::now();
        } else {
            let op = step(k, &mut world, &mut rng, &pods)?;
            if op == "target gone" {
                report.targets_gone += 1;
            } else {
                *report.operations.entry(op).or_default() += 1;
            }
        }
    }
    memory.sample(state);
    report.memory = memory.report();
    report.elapsed = started.elapsed();
    Ok(report)
}

/// One random operation; its name for the report.
fn step(
    k: &Kubectl,
    world: &mut World,
    rng: &mut StdRng,
    pods: &Value,
) -> Result<&'static str, SoakError> {
    let roll = rng.random_range(0..100);
    let ns = world.namespace.clone();
    let op = match roll {
        0..=9 if world.deployments.len() < 4 => {
            ("create deployment", world.create_deployment(k, rng))
        }
        0..=17 => ("scale deployment", world.scale(k, rng, false)),
        18..=22 => ("delete workload", world.delete_workload(k, rng)),
        23..=29 if world.statefulsets.len() < 2 => {
            ("create statefulset", world.create_statefulset(k, rng))
        }
        23..=31 => ("scale statefulset", world.scale(k, rng, true)),
        32..=41 if world.jobs.len() < 6 => ("create job", world.create_job(k, rng)),
        32..=44 => ("delete job", world.delete_job(k, rng)),
        45..=47 => ("toggle cronjob", world.toggle_cronjob(k)),
        48..=63 if world.pods.len() < 8 => ("create pod", world.create_pod(k, rng)),
        48..=71 => ("delete pod", world.delete_pod(k, rng)),
        _ => return session(k, world, rng, pods, roll, &ns),
    };
    op.1.map(|()| op.0)
}

/// An exec, a dropped exec or a port-forward on a serving pod; a failure counts only if
/// the pod is still there and not being deleted.
fn session(
    k: &Kubectl,
    world: &World,
    rng: &mut StdRng,
    pods: &Value,
    roll: u32,
    ns: &str,
) -> Result<&'static str, SoakError> {
    let Some(pod) = world.serving_pod(pods, rng) else {
        return Ok("no serving pod yet");
    };
    let (name, result) = match roll % 3 {
        0 => ("exec", ops::exec(k, ns, &pod)),
        1 => ("dropped exec", ops::dropped_exec(k, ns, &pod)),
        _ => ("port-forward", ops::port_forward(k, ns, &pod)),
    };
    match result {
        Ok(()) => Ok(name),
        Err(e) => match k.json(&["get", "pod", "-n", ns, &pod]) {
            Ok(p) if p["metadata"]["deletionTimestamp"].is_null() => Err(e),
            _ => Ok("target gone"),
        },
    }
}

/// Lists the soak's objects and checks every invariant; the pods, for the next step.
fn check_round(
    state: &LabState,
    k: &Kubectl,
    world: &World,
    report: &mut Report,
) -> Result<Value, SoakError> {
    let ns = world.namespace.as_str();
    let now = Utc::now();
    let pods = k.json(&["get", "pods", "-n", ns])?;
    let jobs = k.json(&["get", "jobs", "-n", ns])?;
    let deployments = k.json(&["get", "deployments", "-n", ns])?;
    let statefulsets = k.json(&["get", "statefulsets", "-n", ns])?;
    let mut broken = checks::overdue_deletions(&pods, now);
    broken.extend(checks::job_violations(&jobs, now));
    broken.extend(checks::unconverged(
        "deployment",
        &deployments,
        &world.changed,
        now,
    ));
    broken.extend(checks::unconverged(
        "statefulset",
        &statefulsets,
        &world.changed,
        now,
    ));
    for list in [&pods, &jobs, &deployments, &statefulsets] {
        report.checks += list["items"].as_array().map_or(0, |a| a.len() as u64);
    }
    match broken.first() {
        None => Ok(pods),
        Some(v) => Err(SoakError::Violation(explain(state, k, v))),
    }
}

/// A violation with what a reader needs: the pod, its events, the agent's lines about it.
fn explain(state: &LabState, k: &Kubectl, v: &Violation) -> String {
    let mut out = v.what.clone();
    let Some(PodRef {
        namespace,
        name,
        uid,
        node,
    }) = &v.pod
    else {
        return out;
    };
    if let Ok(yaml) = k.run(&["get", "pod", "-n", namespace, name, "-o", "yaml"]) {
        out.push_str(&format!("\n--- pod\n{yaml}"));
    }
    let selector = format!("involvedObject.name={name}");
    if let Ok(events) = k.run(&[
        "get",
        "events",
        "-n",
        namespace,
        "--field-selector",
        &selector,
    ]) {
        out.push_str(&format!("--- events\n{events}"));
    }
    if let Some(agent) = state.process(node, "agent") {
        let log = std::fs::read_to_string(&agent.log).unwrap_or_default();
        let lines: Vec<&str> = log
            .lines()
            .filter(|l| l.contains(uid.as_str()) || l.contains(&format!("{namespace}/{name}")))
            .collect();
        let tail = &lines[lines.len().saturating_sub(60)..];
        out.push_str(&format!(
            "--- {node} agent log ({})\n{}\n",
            agent.log.display(),
            tail.join("\n")
        ));
    }
    out
}

/// Deletes the soak's namespace, checking deletions until it is gone, then audits every
/// node for leftovers.
fn finish(state: &LabState, k: &Kubectl, ns: &str, report: &mut Report) -> Result<(), SoakError> {
    k.run(&["delete", "namespace", ns, "--wait=false"])?;
    let deadline = Instant::now() + Duration::from_secs(240);
    loop {
        let pods = k.json(&["get", "pods", "-n", ns])?;
        if let Some(v) = checks::overdue_deletions(&pods, Utc::now()).first() {
            return Err(SoakError::Violation(explain(state, k, v)));
        }
        if k.run(&["get", "namespace", ns, "--ignore-not-found", "-o", "name"])?
            .trim()
            .is_empty()
        {
            break;
        }
        if Instant::now() > deadline {
            return Err(SoakError::Violation(format!(
                "namespace {ns} not gone after 240 s"
            )));
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    // Force-deleted pods are cleaned up after the API lets them go: give the agents time.
    let deadline = Instant::now() + Duration::from_secs(60);
    for node in &state.plan.nodes {
        loop {
            let left = nodes::leftovers(state, node, ns)?;
            report.checks += 1;
            if left.is_empty() {
                break;
            }
            if Instant::now() > deadline {
                return Err(SoakError::Violation(format!(
                    "{} kept: {}",
                    node.name,
                    left.join("; ")
                )));
            }
            std::thread::sleep(Duration::from_millis(500));
        }
    }
    Ok(())
}
