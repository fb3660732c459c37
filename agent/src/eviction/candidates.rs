//! The pods that may be evicted for a signal, each with its use of what the signal
//! reclaims and its request of it: memory as working set against memory requests, PIDs
//! as processes, disk as upstream's `podDiskUsage` (writable layers, logs and local
//! ephemeral volumes; bytes, or inodes for an inode signal) against the pod's
//! ephemeral-storage request (for inodes too, as upstream compares them).

use cairn_stats::Collector;
use k8s_openapi::api::core::v1::Pod;

use super::rank::{self, Candidate};
use super::thresholds::Signal;
use crate::stats::PodTarget;
use crate::Agent;

/// The pods that may be evicted for `signal`: not finished, not critical, not static,
/// not already evicted, with a stats reading.
pub fn candidates(agent: &Agent, targets: &[PodTarget], signal: Signal) -> Vec<Candidate> {
    let collector = agent.stats.collector();
    let pods = agent.ledger.pods();
    let evicted = agent.eviction.evicted.lock();
    targets
        .iter()
        .filter(|t| !evicted.contains(&t.uid))
        .filter_map(|t| {
            let pod = pods.get(&t.uid)?;
            let priority = pod.spec.as_ref().and_then(|s| s.priority).unwrap_or(0);
            if !evictable(pod, priority) {
                return None;
            }
            let measured = match signal {
                Signal::MemoryAvailable => memory(&collector, t, pod)?,
                Signal::PidAvailable => pids(&collector, t)?,
                Signal::NodefsAvailable | Signal::ImagefsAvailable => disk(t, pod, false),
                Signal::NodefsInodesFree | Signal::ImagefsInodesFree => disk(t, pod, true),
            };
            Some(Candidate {
                uid: t.uid.clone(),
                key: format!("{}/{}", t.namespace, t.name),
                priority,
                usage: measured.usage,
                request: measured.request,
                containers: measured.containers,
            })
        })
        .collect()
}

pub(super) fn evictable(pod: &Pod, priority: i32) -> bool {
    let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
    let finished = matches!(phase, Some("Succeeded" | "Failed"));
    let static_pod = crate::pod_meta::is_static(pod) || crate::pod_meta::is_mirror(pod);
    !(finished || priority >= rank::CRITICAL_PRIORITY || static_pod)
}

/// One pod's use and request of a resource, and each container's for the message.
struct Measured {
    usage: i64,
    request: i64,
    containers: Vec<(String, i64, i64)>,
}

/// A kernel count as the signed amounts eviction compares (saturating).
pub(super) fn signed(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

fn memory(collector: &Collector, t: &PodTarget, pod: &Pod) -> Option<Measured> {
    let latest = |cgroup: &str| collector.history().latest(cgroup).map(|r| &r.sample);
    let sample = latest(&t.cgroup)?;
    let requests = container_requests(pod, "memory");
    let containers = t
        .containers
        .iter()
        .map(|c| {
            let used = latest(&c.cgroup)
                .and_then(|s| s.memory.working_set_bytes)
                .unwrap_or(0);
            (c.name.clone(), signed(used), request_of(&requests, &c.name))
        })
        .collect();
    Some(Measured {
        usage: signed(sample.memory.working_set_bytes.unwrap_or(0)),
        request: requests.iter().map(|(_, r)| r).sum(),
        containers,
    })
}

fn pids(collector: &Collector, t: &PodTarget) -> Option<Measured> {
    let sample = &collector.history().latest(&t.cgroup)?.sample;
    Some(Measured {
        usage: signed(sample.processes.processes.unwrap_or(0)),
        request: 0,
        containers: Vec::new(),
    })
}

/// A pod not read yet counts as using nothing (upstream puts pods without stats first;
/// here the next pass has them).
fn disk(t: &PodTarget, pod: &Pod, inodes: bool) -> Measured {
    let usage = t
        .ephemeral_usage()
        .map_or(0, |u| signed(if inodes { u.inodes } else { u.bytes }));
    let requests = container_requests(pod, "ephemeral-storage");
    // Upstream's message names containers only for ephemeral-storage, by layer and logs.
    let containers = if inodes {
        Vec::new()
    } else {
        t.containers
            .iter()
            .map(|c| {
                let used = c.fs.map_or(0, |fs| fs.storage().0);
                (c.name.clone(), signed(used), request_of(&requests, &c.name))
            })
            .collect()
    };
    Measured {
        usage,
        request: requests.iter().map(|(_, r)| r).sum(),
        containers,
    }
}

fn request_of(requests: &[(String, i64)], container: &str) -> i64 {
    requests
        .iter()
        .find(|(n, _)| n == container)
        .map_or(0, |(_, r)| *r)
}

/// Each container's request of `resource` (0 without one).
fn container_requests(pod: &Pod, resource: &str) -> Vec<(String, i64)> {
    pod.spec
        .iter()
        .flat_map(|s| s.containers.iter())
        .map(|c| {
            let request = c
                .resources
                .as_ref()
                .and_then(|r| r.requests.as_ref())
                .and_then(|r| r.get(resource))
                .and_then(|q| cairn_semantics::quantity::value(q).ok())
                .unwrap_or(0);
            (c.name.clone(), request)
        })
        .collect()
}
