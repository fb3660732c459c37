//! The `endpoints.kubernetes.io/last-change-trigger-time` annotation (upstream's
//! `TriggerTimeTracker`): when the change a written slice reflects was triggered, so
//! service proxies can measure network programming latency from it.
//!
//! Semantics, as upstream's: a Service's *trigger time* is its `creationTimestamp`; a
//! pod's is its Ready condition's `lastTransitionTime`. Per Service we remember the trigger
//! times seen at its last committed sync; a sync's trigger time is the *earliest* of those
//! that moved since (the oldest change not yet reflected, so latency is never understated),
//! or the Service's creation time on the first sync of a Service this controller has not
//! seen (a new Service, or a restarted controller). No moved trigger time: none, and the
//! annotation is dropped from the slices that are written anyway (a pod that left, a
//! Service edit), as upstream does. A pod's `deletionTimestamp` is not used: it is the end
//! of the grace period, in the future, not when the change happened.
//!
//! Only slices a pass creates or updates are stamped; unchanged slices are never rewritten
//! for the annotation alone. The value is UTC RFC 3339 with fractional seconds only when
//! present (Go's `time.RFC3339Nano`, as upstream formats it).

use std::collections::HashMap;

use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::jiff::Timestamp;
use parking_lot::Mutex;

use super::pack::Plan;
use crate::cached_pod::CachedPod;

pub const TRIGGER_TIME: &str = "endpoints.kubernetes.io/last-change-trigger-time";

/// The trigger times of one Service and its pods, as a sync saw them.
#[derive(Clone, Debug, Default, PartialEq)]
struct Seen {
    service: Option<Timestamp>,
    /// Pod name → its Ready transition.
    pods: HashMap<String, Timestamp>,
}

/// What one sync saw: its trigger time, and the state to remember once its writes landed.
#[derive(Debug)]
pub struct Observation {
    pub time: Option<Timestamp>,
    key: String,
    seen: Seen,
}

/// Trigger times per Service key, as of each Service's last committed sync.
#[derive(Default)]
pub struct TriggerTimes {
    seen: Mutex<HashMap<String, Seen>>,
}

fn pod_trigger(pod: &CachedPod) -> Option<Timestamp> {
    pod.ready.and_then(|(_, at)| at)
}

impl TriggerTimes {
    /// The trigger time of a sync of `service` (keyed `key`) over its selected `pods`.
    /// Nothing is remembered until [`TriggerTimes::commit`]: a pass that fails to write
    /// keeps its changes for the retry.
    pub fn observe(&self, key: &str, service: &Service, pods: &[&CachedPod]) -> Observation {
        let created = service.metadata.creation_timestamp.as_ref().map(|t| t.0);
        let seen = Seen {
            service: created,
            pods: pods
                .iter()
                .filter_map(|p| Some((p.metadata.name.clone()?, pod_trigger(p)?)))
                .collect(),
        };
        let time = match self.seen.lock().get(key) {
            None => created,
            Some(last) => {
                let moved = |now: &Timestamp, before: Option<&Timestamp>| before < Some(now);
                let pods = seen
                    .pods
                    .iter()
                    .filter(|(name, at)| moved(at, last.pods.get(*name)))
                    .map(|(_, at)| *at);
                let service = created.filter(|at| moved(at, last.service.as_ref()));
                pods.chain(service).min()
            }
        };
        Observation {
            time,
            key: key.to_string(),
            seen,
        }
    }

    /// Remembers what `observed` saw: the changes it reflected are no longer new.
    pub fn commit(&self, observed: Observation) {
        self.seen.lock().insert(observed.key, observed.seen);
    }

    /// Forgets a deleted Service.
    pub fn forget(&self, key: &str) {
        self.seen.lock().remove(key);
    }
}

/// Sets (or, without a trigger time, removes) the annotation on what `plan` writes.
pub fn stamp(plan: &mut Plan, time: Option<Timestamp>) {
    for slice in plan.create.iter_mut().chain(plan.update.iter_mut()) {
        annotate(slice, time);
    }
}

fn annotate(slice: &mut EndpointSlice, time: Option<Timestamp>) {
    let annotations = slice
        .metadata
        .annotations
        .get_or_insert_with(Default::default);
    match time {
        // jiff prints UTC with the fraction trimmed, omitted when zero: RFC3339Nano's form.
        Some(at) => annotations.insert(TRIGGER_TIME.to_string(), at.to_string()),
        None => annotations.remove(TRIGGER_TIME),
    };
    if annotations.is_empty() {
        slice.metadata.annotations = None;
    }
}
