//! The proxy's caches of Services and EndpointSlices. Each object is converted as it
//! arrives into the little the desired state reads (`cairn_serviceproxy::source`): the
//! Kubernetes types stay large even with their optional fields emptied, and at 10,000
//! services whole objects were most of the proxy's memory. A re-list (the watcher's
//! `Init` … `InitDone`) is buffered and swapped in whole, so a sync never sees half a
//! cluster.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use futures::StreamExt;
use kube::runtime::watcher::{self, Event};
use kube::runtime::WatchStreamExt;
use kube::Api;
use parking_lot::{RwLock, RwLockReadGuard};
use tokio::sync::Notify;
use tracing::warn;

/// `namespace/name` of a cached object.
pub type Key = (String, String);

/// Converted objects by key, and whether the first list has been seen.
pub struct Cache<T> {
    items: RwLock<BTreeMap<Key, T>>,
    ready: AtomicBool,
    ready_changed: Notify,
}

impl<T> Cache<T> {
    fn new() -> Cache<T> {
        Cache {
            items: RwLock::new(BTreeMap::new()),
            ready: AtomicBool::new(false),
            ready_changed: Notify::new(),
        }
    }

    pub fn read(&self) -> RwLockReadGuard<'_, BTreeMap<Key, T>> {
        self.items.read()
    }

    /// Returns once the first complete list is in.
    pub async fn wait_until_ready(&self) {
        loop {
            let notified = self.ready_changed.notified();
            if self.ready.load(Ordering::Acquire) {
                return;
            }
            notified.await;
        }
    }

    fn apply(&self, key: Key, value: Option<T>) {
        match value {
            Some(v) => self.items.write().insert(key, v),
            None => self.items.write().remove(&key),
        };
    }

    fn replace(&self, all: BTreeMap<Key, T>) {
        *self.items.write() = all;
        self.ready.store(true, Ordering::Release);
        self.ready_changed.notify_waiters();
    }
}

fn key_of<K: kube::Resource>(o: &K) -> Key {
    let meta = o.meta();
    (
        meta.namespace.clone().unwrap_or_default(),
        meta.name.clone().unwrap_or_default(),
    )
}

/// A cache of `api`'s objects, each converted by `convert` (None: not cached); every
/// object the watch touches is reported to `seen` and wakes `changed`.
pub fn watch<K, T>(
    api: Api<K>,
    changed: Arc<Notify>,
    seen: impl Fn() + Send + 'static,
    convert: fn(&K) -> Option<T>,
) -> Arc<Cache<T>>
where
    K: kube::Resource<DynamicType = ()>
        + Clone
        + std::fmt::Debug
        + serde::de::DeserializeOwned
        + Send
        + Sync
        + 'static,
    T: Send + Sync + 'static,
{
    let cache = Arc::new(Cache::new());
    let writer = cache.clone();
    let events = watcher::watcher(api, watcher::Config::default()).default_backoff();
    tokio::spawn(async move {
        let mut events = std::pin::pin!(events);
        let mut relist: Option<BTreeMap<Key, T>> = None;
        while let Some(ev) = events.next().await {
            match ev {
                Ok(Event::Init) => relist = Some(BTreeMap::new()),
                Ok(Event::InitApply(o)) => {
                    seen();
                    if let (Some(all), Some(v)) = (relist.as_mut(), convert(&o)) {
                        all.insert(key_of(&o), v);
                    }
                }
                Ok(Event::InitDone) => writer.replace(relist.take().unwrap_or_default()),
                Ok(Event::Apply(o)) => {
                    seen();
                    writer.apply(key_of(&o), convert(&o));
                }
                Ok(Event::Delete(o)) => {
                    seen();
                    writer.apply(key_of(&o), None);
                }
                Err(e) => warn!(error = %e, "watch failed; re-listing"),
            }
            changed.notify_one();
        }
    });
    cache
}
