//! The kubelet's eviction manager: every housekeeping interval it observes the node's
//! signals from the last stats pass and the filesystems, raises MemoryPressure,
//! DiskPressure and PIDPressure (which the node status reports and the node lifecycle
//! controller turns into `NoSchedule` taints), and while a threshold is met evicts one
//! pod per pass in upstream's order: its containers are killed at once
//! (hard thresholds have no grace) and its status says Failed, reason `Evicted`, with
//! upstream's message and a `DisruptionTarget` condition.
//!
//! Memory is observed twice, as upstream does: the node's available memory
//! (`MemAvailable`) and the pods' share (`allocatableMemory.available`: the node's
//! memory less `--reserved-memory-mib` less every pod's working set), both against
//! `memory.available`. imagefs is the agent's root filesystem (cairn does not ask
//! containerd where its images live). Disk pressure first reclaims node-level resources
//! as upstream does: every unused image goes (`image_gc::ImageGc::delete_unused`, the
//! collector's minimum age still holding; dead containers are left to each pod worker's
//! pruning, two instances per container); if the filesystem is still short, one pod
//! goes in upstream's disk ranking (over its ephemeral-storage request first, then lower
//! priority, then the larger use above the request; [`candidates`] measures the use).
//! Before any threshold, [`local_storage`] evicts the pods over their own emptyDir
//! `sizeLimit` or ephemeral-storage limits, as upstream's LocalStorageCapacityIsolation.

mod candidates;
pub mod local_storage;
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
use pressure::{Met, NodePressure, Observation, Pressure};
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
        if let Some(disk) = sync(&agent, &pods, &targets) {
            reclaim_disk(&agent, &pods, &targets, &disk).await;
        }
    }
}

/// Upstream's `reclaimNodeLevelResources` for disk (unused images), then, if the
/// filesystem is still short, one pod evicted in the disk ranking.
async fn reclaim_disk(agent: &Agent, pods: &PodManager, targets: &[PodTarget], met: &Met) {
    agent.events.node(
        EventType::Warning,
        "EvictionThresholdMet",
        &format!("Attempting to reclaim {}", met.signal.resource()),
    );
    let freed = agent.image_gc.delete_unused(agent).await;
    tracing::info!(freed, "disk pressure: removed unused images");
    // Upstream observes again and evicts only if reclaiming was not enough.
    let observations = filesystem(&agent.config.root_dir);
    let still = pressure::met(&agent.config.eviction_hard, &observations);
    if let Some(m) = still.iter().find(|m| m.signal.is_disk()) {
        if !still_settling(agent, targets) {
            evict_one(agent, pods, targets, m);
        }
    }
}

/// One pass: observe, record the pressure, evict the pods over their local storage
/// limits or else one pod if memory or PIDs run short.
/// Otherwise the disk threshold met, if any: the caller reclaims for it.
pub fn sync(agent: &Agent, pods: &PodManager, targets: &[PodTarget]) -> Option<Met> {
    let observations = observe(agent, targets);
    let met = pressure::met(&agent.config.eviction_hard, &observations);
    agent.eviction.pressure.lock().observe(&met, Instant::now());
    if local_storage::evict_over_limits(agent, pods, targets) {
        return None;
    }
    let Some(m) = met
        .iter()
        .find(|m| matches!(m.signal, Signal::MemoryAvailable | Signal::PidAvailable))
    else {
        return met.into_iter().find(|m| m.signal.is_disk());
    };
    if !still_settling(agent, targets) {
        agent.events.node(
            EventType::Warning,
            "EvictionThresholdMet",
            &format!("Attempting to reclaim {}", m.signal.resource()),
        );
        evict_one(agent, pods, targets, m);
    }
    None
}

/// Evicts the first pod of the ranking for `m` (the caller has checked that the last
/// eviction settled).
fn evict_one(agent: &Agent, pods: &PodManager, targets: &[PodTarget], m: &Met) {
    let mut candidates = candidates::candidates(agent, targets, m.signal);
    rank::rank(m.signal, &mut candidates);
    let Some(victim) = candidates.first() else {
        let resource = m.signal.resource();
        tracing::warn!(
            resource,
            "eviction threshold met, but no pod may be evicted"
        );
        return;
    };
    let message = rank::message(m.signal, &m.threshold, m.available, victim);
    tracing::info!(pod = %victim.key, %message, "evicting");
    agent.eviction.evicted.lock().insert(victim.uid.clone());
    *agent.eviction.settling.lock() = Some((victim.uid.clone(), None));
    pods.evict(&victim.uid, message);
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
    let Some(fs) = crate::sysinfo::filesystem_usage(root) else {
        return Vec::new();
    };
    let mut out = vec![
        obs(Signal::NodefsAvailable, fs.available, fs.bytes),
        obs(Signal::ImagefsAvailable, fs.available, fs.bytes),
    ];
    if fs.inodes > 0 {
        out.push(obs(Signal::NodefsInodesFree, fs.inodes_free, fs.inodes));
        out.push(obs(Signal::ImagefsInodesFree, fs.inodes_free, fs.inodes));
    }
    out
}
