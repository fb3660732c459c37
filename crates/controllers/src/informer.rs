//! Shared list-watch caches: one watcher per resource feeds a kube-runtime reflector
//! `Store` that every controller reads, and fans each touched object (added, changed or
//! deleted) out to the controllers as the keys they must reconcile. Deletions reach the
//! controllers too (kube-runtime's shared streams only carry applied objects), so a
//! deleted pod wakes its ReplicaSet at once.

use std::fmt::Debug;
use std::hash::Hash;

use futures::{Stream, StreamExt};
use kube::api::Api;
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::watcher::{self, Event};
use kube::runtime::WatchStreamExt;
use kube::Resource;
use serde::de::DeserializeOwned;
use tokio::sync::mpsc;
use tracing::warn;

type Listener<K> = Box<dyn Fn(&K) + Send + Sync>;

pub struct Informer<K>
where
    K: Resource + Clone + 'static,
    K::DynamicType: Eq + Hash + Clone,
{
    pub store: Store<K>,
    writer: reflector::store::Writer<K>,
    api: Api<K>,
    listeners: Vec<Listener<K>>,
    prune: fn(&mut K),
}

impl<K> Informer<K>
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    K::DynamicType: Default + Eq + Hash + Clone + Send + Sync,
{
    pub fn new(api: Api<K>) -> Self {
        let (store, writer) = reflector::store();
        Informer {
            store,
            writer,
            api,
            listeners: Vec::new(),
            prune: |_| {},
        }
    }

    /// Drops what no controller reads from each object before it is cached: the caches
    /// hold every pod of the cluster, so this is most of the controllers' memory.
    pub fn pruned(mut self, prune: fn(&mut K)) -> Self {
        self.prune = prune;
        self
    }

    /// The keys `map` derives from every touched object, as a stream for a controller.
    /// Subscribe before [`Informer::start`].
    pub fn subscribe<T>(
        &mut self,
        map: impl Fn(&K) -> Vec<ObjectRef<T>> + Send + Sync + 'static,
    ) -> impl Stream<Item = ObjectRef<T>> + Send + 'static
    where
        T: Resource<DynamicType = ()> + 'static,
    {
        // Unbounded: a controller's queue de-duplicates keys as fast as they come, and a
        // bounded channel would stall the watch for every other controller.
        let (tx, rx) = mpsc::unbounded_channel();
        self.listeners.push(Box::new(move |obj| {
            for key in map(obj) {
                // Err: that controller stopped; the others go on.
                let _ = tx.send(key);
            }
        }));
        tokio_stream::wrappers::UnboundedReceiverStream::new(rx)
    }

    /// Runs the watch (re-listing after errors with kube-runtime's default back-off).
    pub fn start(self, what: &'static str) -> tokio::task::JoinHandle<()> {
        let Informer {
            mut writer,
            api,
            listeners,
            prune,
            ..
        } = self;
        tokio::spawn(async move {
            let mut stream = watcher::watcher(api, watcher::Config::default())
                .default_backoff()
                .boxed();
            while let Some(ev) = stream.next().await {
                match ev {
                    Ok(mut ev) => {
                        if let Event::Apply(o) | Event::InitApply(o) | Event::Delete(o) = &mut ev {
                            prune(o);
                        }
                        writer.apply_watcher_event(&ev);
                        if let Event::Apply(o) | Event::InitApply(o) | Event::Delete(o) = &ev {
                            listeners.iter().for_each(|l| l(o));
                        }
                    }
                    Err(e) => warn!(resource = what, error = %e, "watch failed, re-listing"),
                }
            }
        })
    }
}
