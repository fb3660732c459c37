//! kube-scheduler's metrics, by upstream's names: `scheduler_schedule_attempts_total`
//! (`result`: scheduled, unschedulable, error; `profile`),
//! `scheduler_pod_scheduling_duration_seconds` (first queued to placed, by `attempts`),
//! `scheduler_pending_pods` (`queue`: active, backoff, unschedulable, gated). One
//! provider per process, registered into the process's registry.

use std::sync::OnceLock;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Attempt {
    result: &'static str,
    profile: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Attempts {
    attempts: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct QueueLabel {
    queue: &'static str,
}

fn latency_histogram() -> Histogram {
    // upstream: 10 ms doubling, 20 buckets.
    Histogram::new(exponential_buckets(0.01, 2.0, 20))
}

#[derive(Clone, Debug)]
pub struct SchedulerMetrics {
    attempts: Family<Attempt, Counter>,
    latency: Family<Attempts, Histogram, fn() -> Histogram>,
    pending: Family<QueueLabel, Gauge>,
}

impl Default for SchedulerMetrics {
    fn default() -> Self {
        SchedulerMetrics {
            attempts: Family::default(),
            latency: Family::new_with_constructor(latency_histogram),
            pending: Family::default(),
        }
    }
}

static PROVIDER: OnceLock<SchedulerMetrics> = OnceLock::new();

/// How an attempt ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Scheduled,
    Unschedulable,
    Error,
}

impl SchedulerMetrics {
    /// Registers the families in `registry` (the process's scheduler metrics).
    pub fn install(registry: &mut Registry) {
        let m = Self::get();
        registry.register(
            "scheduler_schedule_attempts",
            "Number of attempts to schedule pods, by the result. 'unschedulable' means a pod could not be scheduled, while 'error' means an internal scheduler problem.",
            m.attempts.clone(),
        );
        registry.register(
            "scheduler_pod_scheduling_duration_seconds",
            "E2e latency for a pod being scheduled which may include multiple scheduling attempts.",
            m.latency.clone(),
        );
        registry.register(
            "scheduler_pending_pods",
            "Number of pending pods, by the queue type. 'active' means number of pods in activeQ; 'backoff' means number of pods in backoffQ; 'unschedulable' means number of pods in unschedulablePods that the scheduler attempted to schedule and failed; 'gated' is the number of unschedulable pods that the scheduler never attempted to schedule because they are gated.",
            m.pending.clone(),
        );
    }

    pub(crate) fn get() -> &'static SchedulerMetrics {
        PROVIDER.get_or_init(SchedulerMetrics::default)
    }

    pub(crate) fn attempt(
        &self,
        outcome: Outcome,
        profile: &str,
        attempts: u32,
        waited: std::time::Duration,
    ) {
        let result = match outcome {
            Outcome::Scheduled => "scheduled",
            Outcome::Unschedulable => "unschedulable",
            Outcome::Error => "error",
        };
        let labels = Attempt {
            result,
            profile: profile.to_string(),
        };
        self.attempts.get_or_create(&labels).inc();
        if outcome == Outcome::Scheduled {
            let labels = Attempts {
                attempts: attempts.to_string(),
            };
            self.latency
                .get_or_create(&labels)
                .observe(waited.as_secs_f64());
        }
    }

    /// The queue's counts (active, backoff, unschedulable, gated; pods in flight are in
    /// none of upstream's queues).
    pub(crate) fn pending(&self, stats: [usize; 5]) {
        let [active, backoff, unschedulable, gated, _in_flight] = stats;
        for (queue, n) in [
            ("active", active),
            ("backoff", backoff),
            ("unschedulable", unschedulable),
            ("gated", gated),
        ] {
            self.pending
                .get_or_create(&QueueLabel { queue })
                .set(i64::try_from(n).unwrap_or(i64::MAX));
        }
    }
}
