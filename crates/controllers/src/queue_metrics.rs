//! client-go's workqueue metrics for every controller (`workqueue_depth`,
//! `workqueue_adds_total`, `workqueue_queue_duration_seconds`,
//! `workqueue_work_duration_seconds`, `workqueue_retries_total`, by `name`), kept for
//! the queue kube-runtime's `Controller` holds: a key is queued from the trigger that
//! brings it until its reconcile starts. As in client-go, one provider per process.

use std::collections::HashMap;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct QueueName {
    name: String,
}

fn duration_histogram() -> Histogram {
    // client-go's buckets: 10 ns to 1000 s.
    Histogram::new(exponential_buckets(10e-9, 10.0, 12))
}

type Histograms = Family<QueueName, Histogram, fn() -> Histogram>;

/// The workqueue metric families, registered once into a process's registry.
#[derive(Clone, Debug)]
pub struct QueueMetrics {
    depth: Family<QueueName, Gauge>,
    adds: Family<QueueName, Counter>,
    queue_duration: Histograms,
    work_duration: Histograms,
    retries: Family<QueueName, Counter>,
}

impl Default for QueueMetrics {
    fn default() -> Self {
        QueueMetrics {
            depth: Family::default(),
            adds: Family::default(),
            queue_duration: Family::new_with_constructor(duration_histogram),
            work_duration: Family::new_with_constructor(duration_histogram),
            retries: Family::default(),
        }
    }
}

static PROVIDER: OnceLock<QueueMetrics> = OnceLock::new();

impl QueueMetrics {
    /// Registers the families in `registry` and makes them the process's (the first
    /// call wins, as client-go's `SetProvider`).
    pub fn install(registry: &mut Registry) {
        let m = PROVIDER.get_or_init(QueueMetrics::default);
        registry.register(
            "workqueue_depth",
            "Current depth of workqueue",
            m.depth.clone(),
        );
        registry.register(
            "workqueue_adds",
            "Total number of adds handled by workqueue",
            m.adds.clone(),
        );
        registry.register(
            "workqueue_queue_duration_seconds",
            "How long in seconds an item stays in workqueue before being requested.",
            m.queue_duration.clone(),
        );
        registry.register(
            "workqueue_work_duration_seconds",
            "How long in seconds processing an item from workqueue takes.",
            m.work_duration.clone(),
        );
        registry.register(
            "workqueue_retries",
            "Total number of retries handled by workqueue",
            m.retries.clone(),
        );
    }

    fn get() -> &'static QueueMetrics {
        PROVIDER.get_or_init(QueueMetrics::default)
    }
}

/// One controller's queue as the metrics see it.
#[derive(Clone)]
pub struct Queue {
    name: QueueName,
    queued: Arc<Mutex<HashMap<String, Instant>>>,
}

impl Queue {
    pub fn new(name: &str) -> Queue {
        Queue {
            name: QueueName {
                name: name.to_string(),
            },
            queued: Arc::default(),
        }
    }

    /// A trigger brought `key`; it waits from now unless it already waits.
    pub fn added(&self, key: String) {
        let m = QueueMetrics::get();
        m.adds.get_or_create(&self.name).inc();
        if let std::collections::hash_map::Entry::Vacant(slot) = self.queued.lock().entry(key) {
            slot.insert(Instant::now());
            m.depth.get_or_create(&self.name).inc();
        }
    }

    /// `key` leaves the queue: its reconcile starts, or its object is gone.
    pub fn taken(&self, key: &str) {
        if let Some(since) = self.queued.lock().remove(key) {
            let m = QueueMetrics::get();
            m.depth.get_or_create(&self.name).dec();
            m.queue_duration
                .get_or_create(&self.name)
                .observe(since.elapsed().as_secs_f64());
        }
    }

    pub fn worked(&self, took: Duration) {
        QueueMetrics::get()
            .work_duration
            .get_or_create(&self.name)
            .observe(took.as_secs_f64());
    }

    pub fn retried(&self) {
        QueueMetrics::get().retries.get_or_create(&self.name).inc();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_waits_from_its_first_add_until_taken() {
        let mut registry = Registry::default();
        QueueMetrics::install(&mut registry);
        let q = Queue::new("test-queue");
        q.added("a/x".into());
        q.added("a/x".into());
        q.added("a/y".into());
        q.taken("a/x");
        q.worked(Duration::from_millis(2));
        q.retried();
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).expect("encodes");
        assert!(
            text.contains(r#"workqueue_adds_total{name="test-queue"} 3"#),
            "{text}"
        );
        assert!(
            text.contains(r#"workqueue_depth{name="test-queue"} 1"#),
            "{text}"
        );
        assert!(
            text.contains(r#"workqueue_queue_duration_seconds_count{name="test-queue"} 1"#),
            "{text}"
        );
        assert!(
            text.contains(r#"workqueue_retries_total{name="test-queue"} 1"#),
            "{text}"
        );
    }
}
