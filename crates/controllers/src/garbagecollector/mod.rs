//! The garbage collector (upstream `pkg/controller/garbagecollector`): a graph of every
//! object's ownerReferences over metadata-only watches of every served resource, and
//! workers that delete dependents whose owners are all gone (Background), release the
//! dependents of an owner deleted with the `orphan` finalizer (Orphan), and delete the
//! dependents of an owner deleted with `foregroundDeletion` before letting it go
//! (Foreground). The API server only records the policy as a finalizer.

mod actions;
pub mod graph;

use crate::wiring::{Informers, Task};
use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use kube::api::{Api, DynamicObject};
use kube::core::PartialObjectMeta;
use kube::discovery::{verbs, ApiResource, Discovery, Scope};
use kube::runtime::watcher::{self, Event};
use kube::runtime::WatchStreamExt;
use kube::Client;
use parking_lot::Mutex;
use tokio::sync::mpsc;
use tracing::{info, warn};

use graph::{Graph, Node, Work};

/// A resource the collector watches.
pub struct Watched {
    pub api: ApiResource,
    pub namespaced: bool,
}

pub struct Ctx {
    pub client: Client,
    pub resources: Vec<Watched>,
    pub graph: Mutex<Graph>,
    queue: mpsc::UnboundedSender<Work>,
    pending: Mutex<HashSet<Work>>,
    synced: AtomicBool,
}

impl Ctx {
    /// Queues `work` unless it is already waiting.
    pub fn enqueue(&self, work: Work) {
        if self.pending.lock().insert(work.clone()) {
            // Err: the workers stopped, i.e. the process is stopping.
            let _ = self.queue.send(work);
        }
    }

    /// Queues `work` again after `delay` (a failed or not-yet-possible step).
    pub fn retry_later(self: &Arc<Self>, work: Work, delay: Duration) {
        let ctx = Arc::clone(self);
        tokio::spawn(async move {
            tokio::time::sleep(delay).await;
            ctx.enqueue(work);
        });
    }

    /// The resource of `api_version`/`kind`, if served.
    pub fn resource_of(&self, api_version: &str, kind: &str) -> Option<&Watched> {
        self.resources
            .iter()
            .find(|w| w.api.api_version == api_version && w.api.kind == kind)
    }
}

/// Every resource that can be listed, watched and deleted (Events excepted: they are
/// never owners and churn the most).
async fn discover(client: &Client) -> Vec<Watched> {
    loop {
        match Discovery::new(client.clone()).run().await {
            Ok(d) => {
                return d
                    .groups()
                    .flat_map(|g| g.recommended_resources())
                    .filter(|(ar, caps)| {
                        [verbs::LIST, verbs::WATCH, verbs::DELETE]
                            .iter()
                            .all(|v| caps.supports_operation(v))
                            && ar.plural != "events"
                    })
                    .map(|(ar, caps)| Watched {
                        namespaced: caps.scope == Scope::Namespaced,
                        api: ar,
                    })
                    .collect();
            }
            Err(e) => {
                warn!(error = %e, "garbage collector: discovery failed, retrying");
                tokio::time::sleep(Duration::from_secs(2)).await;
            }
        }
    }
}

/// Runs the collector until the process stops.
pub async fn run(client: Client) {
    let resources = discover(&client).await;
    let (tx, rx) = mpsc::unbounded_channel();
    let ctx = Arc::new(Ctx {
        client,
        resources,
        graph: Mutex::default(),
        queue: tx,
        pending: Mutex::default(),
        synced: AtomicBool::new(false),
    });
    let (listed_tx, mut listed_rx) = mpsc::unbounded_channel();
    for index in 0..ctx.resources.len() {
        tokio::spawn(watch(Arc::clone(&ctx), index, listed_tx.clone()));
    }
    for _ in 0..ctx.resources.len() {
        listed_rx.recv().await;
    }
    // Only once every resource listed: before that, any owner may look missing.
    ctx.synced.store(true, Ordering::SeqCst);
    let initial = ctx.graph.lock().initial_work();
    info!(
        objects = ctx.graph.lock().len(),
        work = initial.len(),
        "garbage collector synced"
    );
    initial.into_iter().for_each(|w| ctx.enqueue(w));
    tokio_stream::wrappers::UnboundedReceiverStream::new(rx)
        .for_each_concurrent(8, |work| {
            let ctx = Arc::clone(&ctx);
            async move {
                ctx.pending.lock().remove(&work);
                actions::process(&ctx, work).await;
            }
        })
        .await;
}

/// Feeds one resource's metadata into the graph; `listed` hears of its first full list.
async fn watch(ctx: Arc<Ctx>, index: usize, listed: mpsc::UnboundedSender<()>) {
    let api: Api<PartialObjectMeta<DynamicObject>> =
        Api::all_with(ctx.client.clone(), &ctx.resources[index].api);
    let mut stream = watcher::watcher(api, watcher::Config::default())
        .default_backoff()
        .boxed();
    let mut relisting: Option<HashSet<graph::Key>> = None;
    let mut first_list = true;
    while let Some(ev) = stream.next().await {
        let ev = match ev {
            Ok(ev) => ev,
            Err(e) => {
                warn!(resource = %ctx.resources[index].api.plural, error = %e, "garbage collector watch failed, re-listing");
                continue;
            }
        };
        let mut work = Vec::new();
        match ev {
            Event::Init => relisting = Some(HashSet::new()),
            Event::InitApply(o) | Event::Apply(o) => {
                let uid = o.metadata.uid.clone().unwrap_or_default();
                if let Some(seen) = relisting.as_mut() {
                    seen.insert(graph::key_of(&uid).0);
                }
                work = ctx
                    .graph
                    .lock()
                    .apply(&uid, Some(Node::from_meta(index, &o.metadata)));
            }
            Event::Delete(o) => {
                let uid = o.metadata.uid.clone().unwrap_or_default();
                work = ctx.graph.lock().apply(&uid, None);
            }
            Event::InitDone => {
                // Objects that vanished while the watch was down.
                let seen = relisting.take().unwrap_or_default();
                work = ctx.graph.lock().remove_unseen(index, &seen);
                if std::mem::take(&mut first_list) {
                    // Err: `run` stopped waiting, i.e. the process is stopping.
                    let _ = listed.send(());
                }
            }
        }
        if ctx.synced.load(Ordering::SeqCst) {
            work.into_iter().for_each(|w| ctx.enqueue(w));
        }
    }
}

// What the controller watches and how events map to its keys (kube-runtime's
// `.owns()`/`.watches()`), with its context: `lib.rs` only lists it.

pub(crate) fn start(client: &Client, _inf: &mut Informers) -> Task {
    // Its own metadata-only watches of every resource, not the shared typed caches.
    Box::pin(run(client.clone()))
}
