//! Network programming latency, kube-proxy's `network_programming_duration_seconds`: for
//! each EndpointSlice change that a sync programmed, the time from what triggered the
//! change — the `endpoints.kubernetes.io/last-change-trigger-time` annotation the
//! EndpointSlice controller sets — to the end of that sync. Each trigger time is measured
//! once: the tracker remembers the one it last programmed for every slice.

use std::collections::{HashMap, HashSet};
use std::time::{Duration, SystemTime};

use cairn_serviceproxy::source::SliceSource;
pub use cairn_serviceproxy::source::TRIGGER_TIME;

/// A slice's identity.
fn key(slice: &SliceSource) -> String {
    format!("{}/{}", slice.namespace, slice.name)
}

/// The trigger times of one snapshot of the slices, before the sync that programs it.
#[derive(Debug, Default)]
pub struct Pending {
    /// Every annotated slice of the snapshot: the tracker forgets the others.
    live: HashSet<String>,
    /// Slices whose trigger time has not been programmed yet: key and annotation.
    changed: Vec<(String, String)>,
}

impl Pending {
    /// How many slices changed since the last programmed snapshot.
    pub fn len(&self) -> usize {
        self.changed.len()
    }

    pub fn is_empty(&self) -> bool {
        self.changed.is_empty()
    }
}

/// The trigger time last programmed per slice.
#[derive(Debug)]
pub struct ProgrammingTracker {
    /// Trigger times before this are not measured (as upstream: a proxy that starts does
    /// not report the age of the whole cluster).
    started: SystemTime,
    programmed: HashMap<String, String>,
}

impl ProgrammingTracker {
    pub fn new(started: SystemTime) -> Self {
        ProgrammingTracker {
            started,
            programmed: HashMap::new(),
        }
    }

    /// The slices of a snapshot whose trigger time is new to the tracker.
    pub fn pending<'a>(&self, slices: impl IntoIterator<Item = &'a SliceSource>) -> Pending {
        let mut pending = Pending::default();
        for slice in slices {
            let Some(trigger) = &slice.trigger_time else {
                continue;
            };
            let key = key(slice);
            if self.programmed.get(&key) != Some(trigger) {
                pending.changed.push((key.clone(), trigger.clone()));
            }
            pending.live.insert(key);
        }
        pending
    }

    /// Records `pending` as programmed at `now` (call it only once the sync succeeded);
    /// returns the latencies to observe.
    pub fn programmed(&mut self, pending: Pending, now: SystemTime) -> Vec<Duration> {
        self.programmed.retain(|k, _| pending.live.contains(k));
        let mut latencies = Vec::with_capacity(pending.changed.len());
        for (key, trigger) in pending.changed {
            let at = trigger
                .parse::<jiff::Timestamp>()
                .ok()
                .map(SystemTime::from)
                .filter(|t| *t >= self.started);
            if let Some(latency) = at.and_then(|t| now.duration_since(t).ok()) {
                latencies.push(latency);
            }
            self.programmed.insert(key, trigger);
        }
        latencies
    }
}
