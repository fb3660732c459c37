//! Watch cache: the API server's read path.
//!
//! Holds every object (decorated once, as clients will see it) plus a window of recent
//! events, kept current by one [`Backend::watch`] feed. Lists and gets never touch the
//! backend; watches replay from the window and then follow a single broadcast that every
//! watcher filters by prefix, so fan-out costs no store reads.
//!
//! Memory: an event in the window shares its `Arc<CachedObject>` with the object map (and
//! with the next event's `prev`), so history costs little beyond the versions it keeps alive.
//!
//! Recovery: if the backend feed breaks (its watcher lagged, the log it needed was compacted,
//! the stream ended), the cache re-lists the backend, rebuilds its state and history, and
//! ends every current watcher with `WatcherLagged` so clients re-list (like a 410 in
//! Kubernetes). If the backend is gone (`Closed`), the cache is dead: watchers end with
//! `Closed` and [`WatchCache::wait_for_revision`] fails.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::ops::Bound;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures::stream::{BoxStream, StreamExt};
use parking_lot::RwLock;
use tokio::sync::{broadcast, watch};

use crate::{Backend, Event, EventType, Revision, StoreError};

/// Turns stored values into what clients get.
pub trait Decorator: Send + Sync + 'static {
    /// Turn a stored value into what clients get (the API server injects
    /// metadata.resourceVersion = mod revision) and extract labels/fields for selector
    /// matching. Called once per event.
    fn decorate(
        &self,
        key: &str,
        value: &[u8],
        mod_revision: Revision,
    ) -> Result<Decorated, String>;
}

/// Output of [`Decorator::decorate`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Decorated {
    pub bytes: Bytes,
    pub labels: BTreeMap<String, String>,
    pub fields: BTreeMap<String, String>,
}

/// Serves stored bytes unchanged, with no labels or fields.
#[derive(Clone, Copy, Debug, Default)]
pub struct RawDecorator;

impl Decorator for RawDecorator {
    fn decorate(&self, _key: &str, value: &[u8], _rev: Revision) -> Result<Decorated, String> {
        Ok(Decorated {
            bytes: Bytes::copy_from_slice(value),
            ..Decorated::default()
        })
    }
}

/// One object as served to clients.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CachedObject {
    pub key: String,
    pub create_revision: Revision,
    /// For the object of a `Deleted` event: the delete's revision (matching its bytes).
    pub mod_revision: Revision,
    /// Decorated bytes (or the raw stored bytes if decoration failed).
    pub bytes: Bytes,
    pub labels: BTreeMap<String, String>,
    pub fields: BTreeMap<String, String>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WatchEventType {
    Added,
    Modified,
    Deleted,
}

#[derive(Clone, Debug)]
pub struct WatchEvent {
    pub kind: WatchEventType,
    pub revision: Revision,
    /// The new state; for `Deleted`, the last state decorated with the delete's revision.
    pub object: Arc<CachedObject>,
    /// The state before this event, for `Modified` and `Deleted`, when known (it may be
    /// unknown for events replayed from the backend log).
    pub prev: Option<Arc<CachedObject>>,
    /// A slot where the consumer caches the event's wire encoding, so it is computed once
    /// per event rather than once per watcher (the API server keeps the watch frame here).
    pub encoded: std::sync::OnceLock<Bytes>,
}

/// Tuning knobs for [`WatchCache::start_with`].
#[derive(Clone, Debug)]
pub struct CacheOptions {
    /// Recent events kept in memory for watches that resume from an older revision.
    pub history: usize,
    /// Events a watcher may fall behind before it is closed with `WatcherLagged`.
    pub watch_buffer: usize,
}

impl Default for CacheOptions {
    fn default() -> Self {
        CacheOptions {
            history: 10_000,
            watch_buffer: 100_000,
        }
    }
}

/// Most backend events applied under one lock acquisition.
const FEED_CHUNK: usize = 512;

#[derive(Clone)]
enum Msg {
    Event(Arc<WatchEvent>),
    /// Ends every watcher subscribed before it with this error.
    Terminate(Termination),
}

#[derive(Clone, Copy, Debug)]
enum Termination {
    /// The cache rebuilt its state; watchers must re-list.
    Rebuilt,
    /// The backend is gone.
    Closed,
}

#[derive(Clone, Copy, Debug)]
struct FeedState {
    revision: Revision,
    dead: bool,
}

struct Inner {
    objects: BTreeMap<String, Arc<CachedObject>>,
    /// Every event with revision in `(history_start, revision]`, oldest first.
    history: VecDeque<Arc<WatchEvent>>,
    history_start: Revision,
    /// Last revision applied.
    revision: Revision,
    dead: bool,
}

struct Shared {
    backend: Arc<dyn Backend>,
    decorator: Arc<dyn Decorator>,
    history_cap: usize,
    inner: RwLock<Inner>,
    /// Sent to only while holding `inner` for writing, so a watcher that subscribes under
    /// the read lock sees exactly the events after the state it copied.
    events: broadcast::Sender<Msg>,
    state: watch::Sender<FeedState>,
}

pub struct WatchCache {
    shared: Arc<Shared>,
    feed: tokio::task::AbortHandle,
}

impl Drop for WatchCache {
    fn drop(&mut self) {
        self.feed.abort();
    }
}

impl WatchCache {
    /// list("") from the backend at revision R, then follow backend.watch("", R) in a
    /// background task. Also preloads up to `history` recent events from
    /// `backend.events_since` (so watches resumed after a restart work).
    pub async fn start(
        backend: Arc<dyn Backend>,
        decorator: Arc<dyn Decorator>,
        history: usize,
    ) -> Result<Arc<WatchCache>, StoreError> {
        let options = CacheOptions {
            history,
            ..CacheOptions::default()
        };
        Self::start_with(backend, decorator, options).await
    }

    /// [`WatchCache::start`] with all options.
    pub async fn start_with(
        backend: Arc<dyn Backend>,
        decorator: Arc<dyn Decorator>,
        options: CacheOptions,
    ) -> Result<Arc<WatchCache>, StoreError> {
        let snapshot = Snapshot::load(&*backend, &*decorator, options.history).await?;
        let revision = snapshot.revision;
        let (events, _) = broadcast::channel(options.watch_buffer.max(1));
        let (state, _) = watch::channel(FeedState {
            revision,
            dead: false,
        });
        let shared = Arc::new(Shared {
            backend,
            decorator,
            history_cap: options.history,
            inner: RwLock::new(snapshot.into_inner()),
            events,
            state,
        });
        let feed = tokio::spawn(run_feed(shared.clone(), revision)).abort_handle();
        tracing::info!(revision, "watch cache started");
        Ok(Arc::new(WatchCache { shared, feed }))
    }

    pub fn backend(&self) -> &Arc<dyn Backend> {
        &self.shared.backend
    }

    /// Last revision applied to the cache.
    pub fn revision(&self) -> Revision {
        self.shared.inner.read().revision
    }

    /// Resolves once the cache has applied `rev`; `Closed` if the cache's feed died first.
    pub async fn wait_for_revision(&self, rev: Revision) -> Result<(), StoreError> {
        let mut rx = self.shared.state.subscribe();
        let state = *rx
            .wait_for(|s| s.dead || s.revision >= rev)
            .await
            .map_err(|_| StoreError::Closed)?;
        if state.revision >= rev {
            Ok(())
        } else {
            Err(StoreError::Closed)
        }
    }

    pub fn get(&self, key: &str) -> Option<Arc<CachedObject>> {
        self.shared.inner.read().objects.get(key).cloned()
    }

    /// How many objects are under `prefix` (nothing is copied).
    pub fn count(&self, prefix: &str) -> usize {
        let inner = self.shared.inner.read();
        inner
            .objects
            .range::<str, _>((Bound::Included(prefix), Bound::Unbounded))
            .take_while(|(k, _)| k.starts_with(prefix))
            .count()
    }

    /// Every object under `prefix`, sorted by key, and the revision of that snapshot.
    pub fn list(&self, prefix: &str) -> (Vec<Arc<CachedObject>>, Revision) {
        let inner = self.shared.inner.read();
        let items = inner
            .objects
            .range::<str, _>((Bound::Included(prefix), Bound::Unbounded))
            .take_while(|(k, _)| k.starts_with(prefix))
            .map(|(_, o)| o.clone())
            .collect();
        (items, inner.revision)
    }

    /// Events under `prefix` with revision > `after`: replayed from the in-memory window,
    /// then live, without gaps or duplicates. `after == 0` is not special (pass
    /// [`WatchCache::revision`] to watch from now).
    ///
    /// If `after` is older than the window the replay comes from `backend.events_since`
    /// (`prev` of a replayed `Modified`/`Deleted` is `None` when its previous state is also
    /// older than `after`); `Compacted` if the backend no longer has it either.
    pub async fn watch(&self, prefix: &str, after: Revision) -> Result<CacheWatcher, StoreError> {
        let (rx, backlog) = {
            let inner = self.shared.inner.read();
            if inner.dead {
                return Err(StoreError::Closed);
            }
            // Subscribing under the lock the apply path writes under: the window copied
            // below and the broadcast meet exactly.
            let rx = self.shared.events.subscribe();
            let backlog = (after >= inner.history_start).then(|| {
                let start = inner.history.partition_point(|e| e.revision <= after);
                inner
                    .history
                    .range(start..)
                    .filter(|e| e.object.key.starts_with(prefix))
                    .cloned()
                    .collect::<VecDeque<_>>()
            });
            (rx, backlog)
        };
        let backlog = match backlog {
            Some(backlog) => backlog,
            None => {
                // The backend's log reaches at least as far as the cache (the cache only sees
                // committed events), so it overlaps the subscription: no gap, and the
                // watcher drops the overlap by revision.
                let events = self.shared.backend.events_since(prefix, after).await?;
                decorate_events(&*self.shared.decorator, events, None).into()
            }
        };
        Ok(CacheWatcher {
            prefix: prefix.to_string(),
            backlog,
            rx,
            last: after,
            done: false,
        })
    }
}

/// A watch on a [`WatchCache`]; see [`WatchCache::watch`].
pub struct CacheWatcher {
    prefix: String,
    backlog: VecDeque<Arc<WatchEvent>>,
    rx: broadcast::Receiver<Msg>,
    /// Revision of the last event yielded (or `after`).
    last: Revision,
    done: bool,
}

impl CacheWatcher {
    /// The next event; `Err(WatcherLagged)` if this watcher fell behind or the cache had to
    /// rebuild, `Err(Closed)` if the cache died; `None` after an error or when the cache is
    /// dropped. Cancel-safe.
    pub async fn next(&mut self) -> Option<Result<Arc<WatchEvent>, StoreError>> {
        if self.done {
            return None;
        }
        while let Some(ev) = self.backlog.pop_front() {
            if ev.revision > self.last {
                self.last = ev.revision;
                return Some(Ok(ev));
            }
        }
        loop {
            match self.rx.recv().await {
                Ok(Msg::Event(ev)) => {
                    if ev.revision > self.last && ev.object.key.starts_with(&self.prefix) {
                        self.last = ev.revision;
                        return Some(Ok(ev));
                    }
                }
                Ok(Msg::Terminate(why)) => {
                    self.done = true;
                    return Some(Err(match why {
                        Termination::Rebuilt => StoreError::WatcherLagged,
                        Termination::Closed => StoreError::Closed,
                    }));
                }
                Err(broadcast::error::RecvError::Lagged(missed)) => {
                    tracing::warn!(missed, prefix = %self.prefix, "cache watcher lagged");
                    self.done = true;
                    return Some(Err(StoreError::WatcherLagged));
                }
                Err(broadcast::error::RecvError::Closed) => {
                    self.done = true;
                    return None;
                }
            }
        }
    }

    /// The same events as a stream.
    pub fn into_stream(self) -> BoxStream<'static, Result<Arc<WatchEvent>, StoreError>> {
        futures::stream::unfold(self, |mut w| async move {
            let item = w.next().await?;
            Some((item, w))
        })
        .boxed()
    }
}

/// Decorates one value; on failure keeps the raw bytes so one bad object cannot stall the
/// feed.
fn decorate_object(
    decorator: &dyn Decorator,
    key: &str,
    value: &Bytes,
    create_revision: Revision,
    mod_revision: Revision,
) -> CachedObject {
    let decorated = decorator
        .decorate(key, value, mod_revision)
        .unwrap_or_else(|error| {
            tracing::warn!(key, error, "cannot decorate object; serving stored bytes");
            Decorated {
                bytes: value.clone(),
                ..Decorated::default()
            }
        });
    CachedObject {
        key: key.to_string(),
        create_revision,
        mod_revision,
        bytes: decorated.bytes,
        labels: decorated.labels,
        fields: decorated.fields,
    }
}

fn classify_put(event: &Event) -> WatchEventType {
    if event.create_revision == event.revision {
        WatchEventType::Added
    } else {
        WatchEventType::Modified
    }
}

/// Decorates a run of backend events (oldest first), tracking each key's state within the
/// run for `prev`. Puts that are still the current state in `current` reuse its object.
fn decorate_events(
    decorator: &dyn Decorator,
    events: Vec<Event>,
    current: Option<&BTreeMap<String, Arc<CachedObject>>>,
) -> Vec<Arc<WatchEvent>> {
    let mut last: HashMap<String, Arc<CachedObject>> = HashMap::new();
    let mut out = Vec::with_capacity(events.len());
    for ev in events {
        let watch_event = match ev.kind {
            EventType::Put => {
                let kind = classify_put(&ev);
                let object = match current
                    .and_then(|m| m.get(&ev.key))
                    .filter(|o| o.mod_revision == ev.revision)
                {
                    Some(o) => o.clone(),
                    None => Arc::new(decorate_object(
                        decorator,
                        &ev.key,
                        &ev.value,
                        ev.create_revision,
                        ev.revision,
                    )),
                };
                let prev = last.insert(ev.key, object.clone());
                WatchEvent {
                    kind,
                    revision: ev.revision,
                    object,
                    prev: prev.filter(|_| kind == WatchEventType::Modified),
                    encoded: std::sync::OnceLock::new(),
                }
            }
            EventType::Delete => WatchEvent {
                kind: WatchEventType::Deleted,
                revision: ev.revision,
                object: Arc::new(decorate_object(
                    decorator,
                    &ev.key,
                    &ev.value,
                    ev.create_revision,
                    ev.revision,
                )),
                prev: last.remove(&ev.key),
                encoded: std::sync::OnceLock::new(),
            },
        };
        out.push(Arc::new(watch_event));
    }
    out
}

/// State loaded from the backend: a listing plus the history window before it.
struct Snapshot {
    objects: BTreeMap<String, Arc<CachedObject>>,
    history: VecDeque<Arc<WatchEvent>>,
    history_start: Revision,
    revision: Revision,
}

impl Snapshot {
    async fn load(
        backend: &dyn Backend,
        decorator: &dyn Decorator,
        history_cap: usize,
    ) -> Result<Snapshot, StoreError> {
        let (kvs, revision) = backend.list("").await?;
        let mut objects = BTreeMap::new();
        for kv in kvs {
            let object = decorate_object(
                decorator,
                &kv.key,
                &kv.value,
                kv.create_revision,
                kv.mod_revision,
            );
            objects.insert(kv.key, Arc::new(object));
        }
        let (history, history_start) =
            Self::load_history(backend, decorator, &objects, revision, history_cap).await;
        Ok(Snapshot {
            objects,
            history,
            history_start,
            revision,
        })
    }

    /// Events in `(history_start, revision]` (at most `cap`). Best effort: without them,
    /// older watches go to the backend instead.
    async fn load_history(
        backend: &dyn Backend,
        decorator: &dyn Decorator,
        objects: &BTreeMap<String, Arc<CachedObject>>,
        revision: Revision,
        cap: usize,
    ) -> (VecDeque<Arc<WatchEvent>>, Revision) {
        if cap == 0 {
            return (VecDeque::new(), revision);
        }
        let compacted = match backend.compacted_revision().await {
            Ok(c) => c,
            Err(error) => {
                tracing::warn!(%error, "watch cache: no history preload");
                return (VecDeque::new(), revision);
            }
        };
        let cap = Revision::try_from(cap).unwrap_or(Revision::MAX);
        let from = revision.saturating_sub(cap).max(compacted).max(0);
        match backend.events_since("", from).await {
            Ok(mut events) => {
                // The backend may have moved past the listing; the feed delivers the rest.
                events.retain(|e| e.revision <= revision);
                let history = decorate_events(decorator, events, Some(objects));
                (history.into(), from)
            }
            Err(error) => {
                tracing::warn!(%error, "watch cache: no history preload");
                (VecDeque::new(), revision)
            }
        }
    }

    fn into_inner(self) -> Inner {
        Inner {
            objects: self.objects,
            history: self.history,
            history_start: self.history_start,
            revision: self.revision,
            dead: false,
        }
    }
}

impl Shared {
    /// Applies a run of backend events; returns the revision reached.
    fn apply(&self, events: Vec<Event>) -> Revision {
        // Decorate outside the lock: it is the expensive part and needs no cache state.
        let prepared: Vec<(Event, CachedObject)> = events
            .into_iter()
            .map(|ev| {
                let object = decorate_object(
                    &*self.decorator,
                    &ev.key,
                    &ev.value,
                    ev.create_revision,
                    ev.revision,
                );
                (ev, object)
            })
            .collect();
        let mut inner = self.inner.write();
        for (ev, object) in prepared {
            if ev.revision <= inner.revision {
                continue;
            }
            let object = Arc::new(object);
            let watch_event = match ev.kind {
                EventType::Put => {
                    let kind = classify_put(&ev);
                    let prev = inner.objects.insert(ev.key, object.clone());
                    WatchEvent {
                        kind,
                        revision: ev.revision,
                        object,
                        prev: prev.filter(|_| kind == WatchEventType::Modified),
                        encoded: std::sync::OnceLock::new(),
                    }
                }
                EventType::Delete => WatchEvent {
                    kind: WatchEventType::Deleted,
                    revision: ev.revision,
                    prev: inner.objects.remove(&ev.key),
                    object,
                    encoded: std::sync::OnceLock::new(),
                },
            };
            let watch_event = Arc::new(watch_event);
            inner.revision = ev.revision;
            inner.history.push_back(watch_event.clone());
            while inner.history.len() > self.history_cap {
                if let Some(old) = inner.history.pop_front() {
                    inner.history_start = old.revision;
                }
            }
            // Err only means nobody is watching.
            let _ = self.events.send(Msg::Event(watch_event));
        }
        let revision = inner.revision;
        drop(inner);
        self.state
            .send_modify(|s| s.revision = s.revision.max(revision));
        revision
    }

    /// Replaces the whole state and ends every current watcher.
    fn install(&self, snapshot: Snapshot) -> Revision {
        let mut inner = self.inner.write();
        *inner = snapshot.into_inner();
        let revision = inner.revision;
        let _ = self.events.send(Msg::Terminate(Termination::Rebuilt));
        drop(inner);
        self.state
            .send_modify(|s| s.revision = s.revision.max(revision));
        revision
    }

    fn die(&self) {
        let mut inner = self.inner.write();
        inner.dead = true;
        let _ = self.events.send(Msg::Terminate(Termination::Closed));
        drop(inner);
        self.state.send_modify(|s| s.dead = true);
    }
}

fn backoff(failures: u32) -> Duration {
    Duration::from_millis(100u64.saturating_mul(1 << failures.min(6))).min(Duration::from_secs(5))
}

/// Follows the backend from `revision`, rebuilding from a fresh listing whenever the feed
/// breaks, until the backend reports `Closed`.
async fn run_feed(shared: Arc<Shared>, mut revision: Revision) {
    // Consecutive breaks without progress, for backoff.
    let mut failures: u32 = 0;
    loop {
        let mut stream = shared.backend.watch("", revision).ready_chunks(FEED_CHUNK);
        let error = loop {
            let Some(items) = stream.next().await else {
                break StoreError::Backend("backend watch stream ended".into());
            };
            let mut events = Vec::with_capacity(items.len());
            let mut failed = None;
            for item in items {
                match item {
                    Ok(ev) => events.push(ev),
                    Err(e) => {
                        failed = Some(e);
                        break;
                    }
                }
            }
            if !events.is_empty() {
                revision = shared.apply(events);
                failures = 0;
            }
            if let Some(e) = failed {
                break e;
            }
        };
        drop(stream);
        if matches!(error, StoreError::Closed) {
            shared.die();
            return;
        }
        tracing::warn!(%error, revision, "watch cache feed broke; re-listing");
        loop {
            if failures > 0 {
                tokio::time::sleep(backoff(failures)).await;
            }
            failures = failures.saturating_add(1);
            match Snapshot::load(&*shared.backend, &*shared.decorator, shared.history_cap).await {
                Ok(snapshot) => {
                    revision = shared.install(snapshot);
                    tracing::info!(revision, "watch cache rebuilt");
                    break;
                }
                Err(StoreError::Closed) => {
                    tracing::warn!("backend closed; watch cache stops");
                    shared.die();
                    return;
                }
                Err(error) => tracing::warn!(%error, "watch cache re-list failed; retrying"),
            }
        }
    }
}

#[cfg(test)]
mod tests;
