//! The run loop every controller shares: a kube-runtime `Controller` over a shared
//! store, woken by the informers' key streams and a periodic resync, with client-go's
//! per-key back-off on errors (reset by a success) and a tracing span per reconcile.

use std::fmt::Display;
use std::future::Future;
use std::sync::Arc;

use futures::{Stream, StreamExt};
use kube::runtime::controller::{Action, Config, Controller};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::Resource;
use serde::de::DeserializeOwned;
use tracing::{info_span, warn, Instrument};

use crate::queue_metrics::Queue;
use crate::retry::Retries;

/// What kube-runtime hands the reconciler and the error policy: the controller's own
/// context and the runner's per-key retry state (one for every controller).
struct Running<C> {
    ctx: Arc<C>,
    retries: Retries,
    queue: Queue,
}

fn ref_key(name: &str, namespace: Option<&str>) -> String {
    match namespace {
        Some(ns) => format!("{ns}/{name}"),
        None => name.to_string(),
    }
}

/// `namespace/name`, or `name` for cluster-scoped objects.
pub fn key_of<K: Resource>(obj: &K) -> String {
    let meta = obj.meta();
    let name = meta.name.as_deref().unwrap_or("");
    match meta.namespace.as_deref() {
        Some(ns) => format!("{ns}/{name}"),
        None => name.to_string(),
    }
}

fn error_policy<K, C, E>(obj: Arc<K>, err: &E, running: Arc<Running<C>>) -> Action
where
    K: Resource,
    E: Display,
{
    let wait = running.retries.failed(&key_of(obj.as_ref()));
    running.queue.retried();
    warn!(error = %err, retry_in = ?wait, "sync failed");
    Action::requeue(wait)
}

/// Runs `sync` for every key the triggers and the resync bring, at most `concurrency`
/// objects at a time and never one object twice at once.
pub async fn run<K, C, E, F, Fut>(
    controller: &'static str,
    store: Store<K>,
    triggers: impl Stream<Item = ObjectRef<K>> + Send + 'static,
    resync: impl Stream<Item = ()> + Send + 'static,
    concurrency: u16,
    ctx: Arc<C>,
    sync: F,
) where
    K: Resource<DynamicType = ()>
        + Clone
        + DeserializeOwned
        + std::fmt::Debug
        + Send
        + Sync
        + 'static,
    C: Send + Sync + 'static,
    E: std::error::Error + Send + Sync + 'static,
    F: Fn(Arc<K>, Arc<C>) -> Fut + Clone + Send + Sync + 'static,
    Fut: Future<Output = Result<Action, E>> + Send + 'static,
{
    let reconcile = move |obj: Arc<K>, running: Arc<Running<C>>| {
        let sync = sync.clone();
        async move {
            let key = key_of(obj.as_ref());
            running.queue.taken(&key);
            let span = info_span!("reconcile", controller, object = %key);
            let started = std::time::Instant::now();
            let result = sync(obj, running.ctx.clone()).instrument(span).await;
            running.queue.worked(started.elapsed());
            if result.is_ok() {
                running.retries.succeeded(&key);
            }
            result
        }
    };
    let queue = Queue::new(controller);
    let running = Arc::new(Running {
        ctx,
        retries: Retries::default(),
        queue: queue.clone(),
    });
    let adds = queue.clone();
    let triggers = triggers.inspect(move |r| adds.added(ref_key(&r.name, r.namespace.as_deref())));
    Controller::for_stream(futures::stream::empty(), store)
        .reconcile_on(triggers)
        .reconcile_all_on(resync)
        .with_config(Config::default().concurrency(concurrency))
        .run(reconcile, error_policy::<K, C, E>, running)
        .for_each(|r| {
            if let Err(e) = &r {
                // A key whose object is gone never reconciles: it leaves the queue here.
                if let kube::runtime::controller::Error::ObjectNotFound(gone) = e {
                    queue.taken(&ref_key(&gone.name, gone.namespace.as_deref()));
                }
                tracing::debug!(controller, error = %e, "reconcile");
            }
            async {}
        })
        .await;
}

/// Records an Event about `obj` (action `Delete` for deletion reasons, else `Create`).
pub fn note<K: kube::Resource<DynamicType = ()>>(
    recorder: &cairn_events::Recorder,
    obj: &K,
    kind: cairn_events::EventType,
    reason: &str,
    message: &str,
) {
    let action = if reason.contains("Delete") {
        "Delete"
    } else {
        "Create"
    };
    let note = cairn_events::Note {
        kind,
        reason,
        message,
        action,
    };
    recorder.record(cairn_events::reference(obj), &note);
}
