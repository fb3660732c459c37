//! Shared list-watch caches: one watcher per resource feeds a kube-runtime reflector
//! `Store` that every controller reads, and fans each touched object (added, changed or
//! deleted) out to the controllers as the keys they must reconcile. Deletions reach the
//! controllers too (kube-runtime's shared streams only carry applied objects), so a
//! deleted pod wakes its ReplicaSet at once. A cache may keep a compact form `S` of the
//! watched kind `K` (see [`crate::cached_pod`]).

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

/// Called with each touched object and whether it was deleted.
type Listener<S> = Box<dyn Fn(&S, bool) + Send + Sync>;

pub struct Informer<K, S = K>
where
    S: Resource + Clone + 'static,
    S::DynamicType: Eq + Hash + Clone,
{
    pub store: Store<S>,
    writer: reflector::store::Writer<S>,
    api: Api<K>,
    listeners: Vec<Listener<S>>,
    convert: fn(K) -> S,
    /// The watch's selectors (all objects by default).
    config: watcher::Config,
    /// Some controller reads the store or subscribed: the watch must run.
    used: bool,
}

impl<K> Informer<K, K>
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    K::DynamicType: Default + Eq + Hash + Clone + Send + Sync,
{
    pub fn new(api: Api<K>) -> Self {
        Informer::converting(api, |k| k)
    }
}

fn map_event<K, S>(ev: Event<K>, convert: fn(K) -> S) -> Event<S> {
    match ev {
        Event::Apply(o) => Event::Apply(convert(o)),
        Event::Delete(o) => Event::Delete(convert(o)),
        Event::Init => Event::Init,
        Event::InitApply(o) => Event::InitApply(convert(o)),
        Event::InitDone => Event::InitDone,
    }
}

impl<K, S> Informer<K, S>
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    S: Resource + Clone + Debug + Send + Sync + 'static,
    S::DynamicType: Default + Eq + Hash + Clone + Send + Sync,
{
    /// A cache of `convert(object)` for every object the watch of `api` brings.
    pub fn converting(api: Api<K>, convert: fn(K) -> S) -> Self {
        let (store, writer) = reflector::store();
        Informer {
            store,
            writer,
            api,
            listeners: Vec::new(),
            convert,
            config: watcher::Config::default(),
            used: false,
        }
    }

    /// Watches only what `config` selects (a field or label selector).
    pub fn with_config(mut self, config: watcher::Config) -> Self {
        self.config = config;
        self
    }

    /// The cache, for a controller that reads it (which makes the watch run).
    pub fn reader(&mut self) -> Store<S> {
        self.used = true;
        self.store.clone()
    }

    /// The keys `map` derives from every touched object, as a stream for a controller.
    /// Subscribe before [`Informer::start`].
    pub fn subscribe<T>(
        &mut self,
        map: impl Fn(&S) -> Vec<ObjectRef<T>> + Send + Sync + 'static,
    ) -> impl Stream<Item = ObjectRef<T>> + Send + 'static
    where
        T: Resource<DynamicType = ()> + 'static,
    {
        self.subscribe_with_deletions(move |obj, _| map(obj))
    }

    /// As [`Informer::subscribe`], `map` also told whether the object was deleted.
    pub fn subscribe_with_deletions<T>(
        &mut self,
        map: impl Fn(&S, bool) -> Vec<ObjectRef<T>> + Send + Sync + 'static,
    ) -> impl Stream<Item = ObjectRef<T>> + Send + 'static
    where
        T: Resource<DynamicType = ()> + 'static,
    {
        // Unbounded: a controller's queue de-duplicates keys as fast as they come, and a
        // bounded channel would stall the watch for every other controller.
        let (tx, rx) = mpsc::unbounded_channel();
        self.used = true;
        self.listeners.push(Box::new(move |obj, deleted| {
            for key in map(obj, deleted) {
                // Err: that controller stopped; the others go on.
                let _ = tx.send(key);
            }
        }));
        tokio_stream::wrappers::UnboundedReceiverStream::new(rx)
    }

    /// Starts the watch if a controller uses this cache, and waits until the cache holds
    /// its first full list. Called for one cache at a time: kube-runtime's readiness signal
    /// wakes only the last task that polled it, so concurrent waiters could sleep forever.
    pub async fn start_if_used(self, what: &'static str) -> Option<tokio::task::JoinHandle<()>> {
        if !self.used {
            return None;
        }
        let store = self.store.clone();
        let task = self.start(what);
        // Err only when the writer is dropped, i.e. the process is stopping.
        let _ = store.wait_until_ready().await;
        Some(task)
    }

    /// Runs the watch (re-listing after errors with kube-runtime's default back-off).
    pub fn start(self, what: &'static str) -> tokio::task::JoinHandle<()> {
        let Informer {
            mut writer,
            api,
            listeners,
            convert,
            config,
            ..
        } = self;
        tokio::spawn(async move {
            let mut stream = watcher::watcher(api, config).default_backoff().boxed();
            while let Some(ev) = stream.next().await {
                match ev {
                    Ok(ev) => {
                        let ev = map_event(ev, convert);
                        writer.apply_watcher_event(&ev);
                        match &ev {
                            Event::Apply(o) | Event::InitApply(o) => {
                                listeners.iter().for_each(|l| l(o, false))
                            }
                            Event::Delete(o) => listeners.iter().for_each(|l| l(o, true)),
                            Event::Init | Event::InitDone => {}
                        }
                    }
                    Err(e) => warn!(resource = what, error = %e, "watch failed, re-listing"),
                }
            }
        })
    }
}
