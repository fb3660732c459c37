//! Usage statistics, cAdvisor's job inside the kubelet: a housekeeping task reads every
//! pod's cgroup, its running containers' cgroups, its network and the node every
//! `--housekeeping-interval` (10 s) with `cairn-stats`; the stats endpoints answer from
//! the last passes, so a scrape costs no cgroup reads.

mod cadvisor;
pub mod fs;
mod resource;
mod summary;
#[cfg(test)]
mod tests;

use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard};

use cairn_stats::{Collector, PassSummary, PodCgroups};

use crate::Agent;

pub use cadvisor::cadvisor_metrics;
pub use resource::resource_metrics;
pub use summary::{summary, ContainerTarget, NodeFacts, PodTarget};

/// The collector and its history, shared by the housekeeping task and the endpoints.
#[derive(Debug)]
pub struct Stats {
    collector: Mutex<Collector>,
    /// Each running container's writable layer and logs, and each pod's volumes, from
    /// the last pass.
    filesystems: Mutex<fs::FsReadings>,
    /// The pods and containers the last pass read, with its filesystem figures: what the
    /// endpoints report (a scrape asks the runtime nothing, and its labels are those of
    /// the readings it serves).
    pass_targets: Mutex<Arc<Vec<PodTarget>>>,
}

impl Stats {
    pub fn new(cgroupfs: &Path, proc_root: &Path, interval: std::time::Duration) -> Stats {
        Stats {
            collector: Mutex::new(Collector::new(cgroupfs, proc_root, interval)),
            filesystems: Mutex::default(),
            pass_targets: Mutex::default(),
        }
    }

    /// One pass over `pods` (blocking file reads: run it off the async workers).
    pub fn housekeep(&self, pods: &[PodTarget]) -> PassSummary {
        let cgroups: Vec<PodCgroups> = pods.iter().map(PodTarget::cgroups).collect();
        self.collector().housekeep(&cgroups)
    }

    fn filesystems(&self) -> MutexGuard<'_, fs::FsReadings> {
        self.filesystems.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The pods the last pass read (none before the first pass).
    pub fn pass_targets(&self) -> Arc<Vec<PodTarget>> {
        let targets = self.pass_targets.lock().unwrap_or_else(|e| e.into_inner());
        Arc::clone(&targets)
    }

    /// The collector, for reading its history. A panic elsewhere while it was held left
    /// readings, not broken invariants: keep serving them.
    pub fn collector(&self) -> MutexGuard<'_, Collector> {
        self.collector.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The pods this agent runs and their running containers, as the runtime reports them,
/// with the last pass's filesystem figures.
pub async fn targets(agent: &Agent) -> Vec<PodTarget> {
    let containers = agent.runtime.list_containers().await.unwrap_or_default();
    let mut targets: Vec<PodTarget> = agent
        .ledger
        .pods()
        .values()
        .map(|pod| {
            let cgroup = crate::pod_meta::cgroup_parent(&agent.config.cgroup_root, pod);
            PodTarget::new(pod, cgroup, &containers)
        })
        .collect();
    with_filesystems(&mut targets, &agent.stats.filesystems());
    targets
}

fn with_filesystems(targets: &mut [PodTarget], readings: &fs::FsReadings) {
    for target in targets {
        for c in &mut target.containers {
            c.fs = readings.containers.get(&c.id).copied();
        }
        target.volumes = readings
            .volumes
            .get(&target.uid)
            .cloned()
            .unwrap_or_default();
    }
}

/// `/metrics/resource` from the last passes.
pub async fn resource_text(agent: Arc<Agent>) -> String {
    resource_metrics(&agent.stats.pass_targets(), &agent.stats.collector())
}

/// `/metrics/cadvisor` from the last passes.
pub async fn cadvisor_text(agent: Arc<Agent>) -> String {
    let sys = Path::new("/sys");
    // Each device is named once per scrape, not once per container and family.
    let names = std::cell::RefCell::new(std::collections::HashMap::new());
    let device = |major, minor| {
        names
            .borrow_mut()
            .entry((major, minor))
            .or_insert_with(|| cairn_stats::block_device_name(sys, major, minor))
            .clone()
    };
    let pods = agent.stats.pass_targets();
    cadvisor_metrics(&pods, &agent.stats.collector(), agent.host.cpus(), &device)
}

/// Runs a pass every interval for as long as the agent runs.
pub async fn run(agent: Arc<Agent>) {
    let mut tick = tokio::time::interval(agent.config.housekeeping_interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let pods = targets(&agent).await;
        let stats = agent.stats.clone();
        let targets = pods.clone();
        match tokio::task::spawn_blocking(move || stats.housekeep(&pods)).await {
            Ok(pass) => tracing::trace!(read = pass.read, gone = pass.gone, "housekeeping"),
            Err(e) => tracing::warn!(error = %e, "housekeeping pass failed"),
        }
        let filesystems = fs::read(&agent, &targets).await;
        let mut pass = targets;
        with_filesystems(&mut pass, &filesystems);
        *agent.stats.filesystems() = filesystems;
        *agent
            .stats
            .pass_targets
            .lock()
            .unwrap_or_else(|e| e.into_inner()) = Arc::new(pass);
    }
}
