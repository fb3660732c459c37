//! The kubelet's eviction manager: every housekeeping interval it observes the node's
//! signals from the last stats pass and the filesystems, raises MemoryPressure,
//! DiskPressure and PIDPressure (which the node status reports and the node lifecycle
//! controller turns into `NoSchedule` taints), and while a memory or PID threshold is
//! met evicts one pod per pass in upstream's order: its containers are killed at once
//! (hard thresholds have no grace) and its status says Failed, reason `Evicted`, with
//! upstream's message and a `DisruptionTarget` condition.
//!
//! Memory is observed twice, as upstream does: the node's available memory
//! (`MemAvailable`) and the pods' share (`allocatableMemory.available`: the node's
//! memory less `--reserved-memory-mib` less every pod's working set), both against
//! `memory.available`. imagefs is the agent's root filesystem (cairn does not ask
//! containerd where its images live). Disk pressure first reclaims node-level resources
//! as upstream does: every unused image goes (`image_gc::ImageGc::delete_unused`, the
//! collector's minimum age still holding); it evicts no pod yet (ranking by
//! ephemeral-storage use is still to come), and dead containers are left to each pod
//! worker's pruning (two instances per container).

pub mod pressure;
pub mod rank;
pub mod thresholds;

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Instant;

use parking_lot::Mutex;

use crate::events::EventType;
use crate::pods::PodManager;
use crate::stats::PodTarget;
use crate::Agent;
use pressure::{NodePressure, Observation, Pressure};
use rank::Candidate;
use thresholds::Signal;

/// What the eviction manager shares with the node status.
#[derive(Debug, Default)]
pub struct Eviction {
    pressure: Mutex<Pressure>,
    /// Pods already told to go (each is evicted once).
    evicted: Mutex<HashSet<String>>,
    /// The last pod evicted, and when its containers were seen gone: the next eviction
    /// waits for a stats pass after that (upstream waits for the pod's cleanup), so a
    /// pass that still counts the evicted pod's memory evicts nobody else.
    settling: Mutex<Option<(String, Option<Instant>)>>,
}

impl Eviction {
    pub fn node_pressure(&self, transition: std::time::Duration) -> NodePressure {
        self.pressure.lock().conditions(Instant::now(), transition)
    }
}

/// Runs a pass every housekeeping interval for as long as the agent runs.
pub async fn run(agent: Arc<Agent>, pods: Arc<PodManager>) {
    let mut tick = tokio::time::interval(agent.config.housekeeping_interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let targets = crate::stats::targets(&agent).await;
        if sync(&agent, &pods, &targets) {
            reclaim_disk(&agent).await;
        }
    }
}

/// Upstream's `reclaimNodeLevelResources` for disk: unused images first.
async fn reclaim_disk(agent: &Agent) {
    agent.events.node(
        EventType::Warning,
        "EvictionThresholdMet",
        "Attempting to reclaim ephemeral-storage",
    );
    let freed = agent.image_gc.delete_unused(agent).await;
    tracing::info!(freed, "disk pressure: removed unused images");
}

/// One pass: observe, record the pressure, evict one pod if memory or PIDs run short.
/// True when a disk threshold is met (the caller reclaims images).
pub fn sync(agent: &Agent, pods: &PodManager, targets: &[PodTarget]) -> bool {
    let observations = observe(agent, targets);
    let met = pressure::met(&agent.config.eviction_hard, &observations);
    agent.eviction.pressure.lock().observe(&met, Instant::now());
    let disk = met.iter().any(|m| m.signal.is_disk());
    let Some(m) = met
        .iter()
        .find(|m| matches!(m.signal, Signal::MemoryAvailable | Signal::PidAvailable))
    else {
        return disk;
    };
    if still_settling(agent, targets) {
        return disk;
    }
    let resource = m.signal.resource();
    agent.events.node(
        EventType::Warning,
        "EvictionThresholdMet",
        &format!("Attempting to reclaim {resource}"),
    );
    let mut candidates = candidates(agent, targets, m.signal);
    rank::rank(m.signal, &mut candidates);
    let Some(victim) = candidates.first() else {
        tracing::warn!(
            resource,
            "eviction threshold met, but no pod may be evicted"
        );
        return disk;
    };
    let message = rank::message(m.signal, &m.threshold, m.available, victim);
    tracing::info!(pod = %victim.key, %message, "evicting");
    agent.eviction.evicted.lock().insert(victim.uid.clone());
    *agent.eviction.settling.lock() = Some((victim.uid.clone(), None));
    pods.evict(&victim.uid, message);
    disk
}

/// Whether the last evicted pod still runs, or no stats pass has read the node since it
/// stopped.
fn still_settling(agent: &Agent, targets: &[PodTarget]) -> bool {
    let mut settling = agent.eviction.settling.lock();
    let Some((uid, gone_at)) = settling.as_mut() else {
        return false;
    };
    if targets
        .iter()
        .any(|t| &t.uid == uid && !t.containers.is_empty())
    {
        return true;
    }
    let gone = *gone_at.get_or_insert_with(Instant::now);
    let last_pass = agent.stats.collector().node().map(|n| n.at);
    if last_pass.is_some_and(|at| at > gone) {
        *settling = None;
        return false;
    }
    true
}

/// The signals now, from the last housekeeping pass and the filesystems.
fn observe(agent: &Agent, targets: &[PodTarget]) -> Vec<Observation> {
    let collector = agent.stats.collector();
    let mut out = Vec::new();
    let node = collector.node().map(|n| &n.sample);
    let total = node.as_ref().and_then(|n| n.memory_total_bytes);
    if let (Some(total), Some(available)) =
        (total, node.as_ref().and_then(|n| n.memory_available_bytes))
    {
        out.push(obs(Signal::MemoryAvailable, available, total));
    }
    if let Some(total) = total {
        let pods_capacity = total.saturating_sub(agent.config.reserved_memory_bytes);
        let working_set: u64 = targets
            .iter()
            .filter_map(|t| collector.history().latest(&t.cgroup))
            .filter_map(|r| r.sample.memory.working_set_bytes)
            .sum();
        let available = i64::try_from(pods_capacity).unwrap_or(i64::MAX)
            - i64::try_from(working_set).unwrap_or(i64::MAX);
        out.push(Observation {
            signal: Signal::MemoryAvailable,
            available,
            capacity: i64::try_from(pods_capacity).unwrap_or(i64::MAX),
        });
    }
    if let Some(n) = node {
        if let (Some(processes), Some(max)) = (n.processes, n.pid_max) {
            out.push(obs(
                Signal::PidAvailable,
                max.saturating_sub(processes),
                max,
            ));
        }
    }
    out.extend(filesystem(&agent.config.root_dir));
    out
}

fn obs(signal: Signal, available: u64, capacity: u64) -> Observation {
    Observation {
        signal,
        available: i64::try_from(available).unwrap_or(i64::MAX),
        capacity: i64::try_from(capacity).unwrap_or(i64::MAX),
    }
}

/// nodefs and imagefs (one filesystem here): bytes and inodes.
fn filesystem(root: &std::path::Path) -> Vec<Observation> {
    let Ok(st) = nix::sys::statvfs::statvfs(root) else {
        return Vec::new();
    };
    let frag = st.fragment_size();
    let (bytes, free) = (st.blocks() * frag, st.blocks_available() * frag);
    let (inodes, inodes_free) = (st.files(), st.files_available());
    let mut out = vec![
        obs(Signal::NodefsAvailable, free, bytes),
        obs(Signal::ImagefsAvailable, free, bytes),
    ];
    // Filesystems without inode accounting (btrfs, some overlays) report zero.
    if inodes > 0 {
        out.push(obs(Signal::NodefsInodesFree, inodes_free, inodes));
        out.push(obs(Signal::ImagefsInodesFree, inodes_free, inodes));
    }
    out
}

/// The pods that may be evicted for `signal`, with their usage and requests.
fn candidates(agent: &Agent, targets: &[PodTarget], signal: Signal) -> Vec<Candidate> {
    let collector = agent.stats.collector();
    let pods = agent.ledger.pods();
    let evicted = agent.eviction.evicted.lock();
    let latest = |cgroup: &str| collector.history().latest(cgroup).map(|r| &r.sample);
    targets
        .iter()
        .filter(|t| !evicted.contains(&t.uid))
        .filter_map(|t| {
            let pod = pods.get(&t.uid)?;
            let priority = pod.spec.as_ref().and_then(|s| s.priority).unwrap_or(0);
            let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
            let finished = matches!(phase, Some("Succeeded" | "Failed"));
            let static_pod = crate::pod_meta::is_static(pod) || crate::pod_meta::is_mirror(pod);
            if finished || priority >= rank::CRITICAL_PRIORITY || static_pod {
                return None;
            }
            let sample = latest(&t.cgroup)?;
            let (usage, request, containers) = match signal {
                Signal::MemoryAvailable => {
                    let requests = container_memory_requests(pod);
                    let containers = t
                        .containers
                        .iter()
                        .map(|c| {
                            let used = latest(&c.cgroup)
                                .and_then(|s| s.memory.working_set_bytes)
                                .unwrap_or(0);
                            let req = requests
                                .iter()
                                .find(|(n, _)| *n == c.name)
                                .map_or(0, |(_, r)| *r);
                            (c.name.clone(), i64::try_from(used).unwrap_or(i64::MAX), req)
                        })
                        .collect();
                    let used = sample.memory.working_set_bytes.unwrap_or(0);
                    (
                        i64::try_from(used).unwrap_or(i64::MAX),
                        requests.iter().map(|(_, r)| r).sum(),
                        containers,
                    )
                }
                _ => (
                    i64::try_from(sample.processes.processes.unwrap_or(0)).unwrap_or(i64::MAX),
                    0,
                    Vec::new(),
                ),
            };
            Some(Candidate {
                uid: t.uid.clone(),
                key: format!("{}/{}", t.namespace, t.name),
                priority,
                usage,
                request,
                containers,
            })
        })
        .collect()
}

/// Each container's memory request in bytes (0 without one).
fn container_memory_requests(pod: &k8s_openapi::api::core::v1::Pod) -> Vec<(String, i64)> {
    pod.spec
        .iter()
        .flat_map(|s| s.containers.iter())
        .map(|c| {
            let request = c
                .resources
                .as_ref()
                .and_then(|r| r.requests.as_ref())
                .and_then(|r| r.get("memory"))
                .and_then(|q| cairn_semantics::quantity::value(q).ok())
                .unwrap_or(0);
            (c.name.clone(), request)
        })
        .collect()
}
