//! Keeping the served zone current: watches on Services, EndpointSlices and Namespaces
//! (all namespaces), each object converted on arrival into the little the zone reads
//! ([`crate::input`]). Once all three have listed, the zone is built and swapped in; after
//! that every change rebuilds it after a short pause that gathers the changes made
//! meanwhile (at least [`DEBOUNCE`], and no less than the last build took, so a cluster
//! that never stops changing costs at most about half a core). A re-list is buffered and
//! applied whole, so a build never sees half a cluster.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Debug;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Namespace, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::runtime::watcher::{self, Event};
use kube::runtime::WatchStreamExt;
use kube::{Api, Client, Resource};
use parking_lot::Mutex;
use serde::de::DeserializeOwned;
use tokio::sync::Notify;
use tokio::task::JoinHandle;
use tracing::warn;

use crate::input::{namespace_name, ServiceInfo, SliceInfo};
use crate::records::{ClusterZone, ZoneConfig, ZoneError};
use crate::server::DnsServer;

/// The pause after a change before the zone is rebuilt.
pub const DEBOUNCE: Duration = Duration::from_millis(100);

/// Why keeping the zone current could not start or go on.
#[derive(Debug, thiserror::Error)]
pub enum SourceError {
    #[error(transparent)]
    Zone(#[from] ZoneError),
    #[error("the zone building task failed: {0}")]
    Join(#[from] tokio::task::JoinError),
}

type Key = (String, String);

/// Converted objects of one kind, and whether their first list is in.
struct Cache<T> {
    items: Mutex<BTreeMap<Key, Arc<T>>>,
    ready: AtomicBool,
    ready_changed: Notify,
}

impl<T> Cache<T> {
    fn snapshot(&self) -> Vec<Arc<T>> {
        self.items.lock().values().cloned().collect()
    }

    async fn wait_until_ready(&self) {
        loop {
            let notified = self.ready_changed.notified();
            if self.ready.load(Ordering::Acquire) {
                return;
            }
            notified.await;
        }
    }
}

fn key_of<K: Resource>(o: &K) -> Key {
    let meta = o.meta();
    let namespace = meta.namespace.clone().unwrap_or_default();
    (namespace, meta.name.clone().unwrap_or_default())
}

/// Aborts the watch tasks when `run` ends or is dropped.
struct Tasks(Vec<JoinHandle<()>>);

impl Drop for Tasks {
    fn drop(&mut self) {
        for t in &self.0 {
            t.abort();
        }
    }
}

/// Watches `api`, keeping what `convert` makes of each object; every event wakes
/// `changed`.
fn watch<K, T>(
    api: Api<K>,
    changed: Arc<Notify>,
    convert: fn(&K) -> Option<T>,
) -> (Arc<Cache<T>>, JoinHandle<()>)
where
    K: Resource<DynamicType = ()> + Clone + Debug + DeserializeOwned + Send + Sync + 'static,
    T: Send + Sync + 'static,
{
    let cache = Arc::new(Cache {
        items: Mutex::new(BTreeMap::new()),
        ready: AtomicBool::new(false),
        ready_changed: Notify::new(),
    });
    let writer = cache.clone();
    let events = watcher::watcher(api, watcher::Config::default()).default_backoff();
    let task = tokio::spawn(async move {
        let mut events = std::pin::pin!(events);
        let mut relist: Option<BTreeMap<Key, Arc<T>>> = None;
        while let Some(event) = events.next().await {
            match event {
                Ok(Event::Init) => relist = Some(BTreeMap::new()),
                Ok(Event::InitApply(o)) => {
                    if let (Some(all), Some(v)) = (relist.as_mut(), convert(&o)) {
                        all.insert(key_of(&o), Arc::new(v));
                    }
                    continue;
                }
                Ok(Event::InitDone) => {
                    *writer.items.lock() = relist.take().unwrap_or_default();
                    writer.ready.store(true, Ordering::Release);
                    writer.ready_changed.notify_waiters();
                }
                Ok(Event::Apply(o)) => {
                    let mut items = writer.items.lock();
                    match convert(&o) {
                        Some(v) => items.insert(key_of(&o), Arc::new(v)),
                        None => items.remove(&key_of(&o)),
                    };
                }
                Ok(Event::Delete(o)) => {
                    writer.items.lock().remove(&key_of(&o));
                }
                Err(e) => {
                    warn!(error = %e, kind = %K::kind(&()), "watch failed; re-listing");
                    continue;
                }
            }
            changed.notify_one();
        }
    });
    (cache, task)
}

/// Keeps `server`'s zone for the cluster domain `domain` current, with the other
/// settings at their defaults ([`ZoneConfig::default`]). Runs until dropped.
pub async fn run(
    client: Client,
    server: Arc<DnsServer>,
    domain: String,
) -> Result<(), SourceError> {
    let config = ZoneConfig {
        domain,
        ..ZoneConfig::default()
    };
    run_with(client, server, config).await
}

/// [`run`] with every zone setting given.
pub async fn run_with(
    client: Client,
    server: Arc<DnsServer>,
    config: ZoneConfig,
) -> Result<(), SourceError> {
    // Refuse a bad domain now rather than at the first build.
    ClusterZone::pending(&config)?;
    let changed = Arc::new(Notify::new());
    let (services, t1) = watch(
        Api::<Service>::all(client.clone()),
        changed.clone(),
        ServiceInfo::from_service,
    );
    let (slices, t2) = watch(
        Api::<EndpointSlice>::all(client.clone()),
        changed.clone(),
        SliceInfo::from_slice,
    );
    let (namespaces, t3) = watch(
        Api::<Namespace>::all(client),
        changed.clone(),
        namespace_name,
    );
    let _tasks = Tasks(vec![t1, t2, t3]);
    services.wait_until_ready().await;
    slices.wait_until_ready().await;
    namespaces.wait_until_ready().await;
    let config = Arc::new(config);
    let current = server.zone();
    // A zone of the same settings (a restart of this loop) is rebuilt, not built anew.
    let mut previous = (current.config() == &*config && current.is_synced()).then_some(current);
    let mut reported = BTreeSet::new();
    loop {
        let started = Instant::now();
        let (svcs, slcs, nss) = (
            services.snapshot(),
            slices.snapshot(),
            namespaces.snapshot(),
        );
        let (cfg, prev) = (config.clone(), previous.take());
        let zone = tokio::task::spawn_blocking(move || {
            let serial = SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_secs() as u32);
            let (s, e) = (svcs.iter().map(|s| &**s), slcs.iter().map(|s| &**s));
            let ns = nss.iter().map(|n| n.as_str());
            let zone = match &prev {
                Some(prev) => prev.rebuild(s, e, ns, serial),
                None => ClusterZone::build(&cfg, s, e, ns, serial),
            };
            zone.map(Arc::new)
        })
        .await??;
        report(&zone, &mut reported);
        server.set_zone(zone.clone());
        let took = started.elapsed();
        tracing::debug!(names = zone.len(), ?took, "cluster zone rebuilt");
        previous = Some(zone);
        changed.notified().await;
        tokio::time::sleep(DEBOUNCE.max(took)).await;
    }
}

/// Logs the zone's warnings not logged before.
fn report(zone: &ClusterZone, reported: &mut BTreeSet<String>) {
    let now: BTreeSet<String> = zone.warnings().iter().map(|w| w.to_string()).collect();
    for w in now.difference(reported) {
        warn!("left out of the cluster zone: {w}");
    }
    *reported = now;
}
