use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures::stream::{BoxStream, StreamExt};

use super::*;
use crate::conformance::TIMEOUT;
use crate::memory::MemoryBackend;
use crate::sqlite::SqliteBackend;
use crate::{Backend, Event, KeyValue, Revision, StoreError};

/// Values look like `app=web,tier=db`; each pair becomes a label. The served bytes are
/// `<value>@<mod revision>`, like the API server injecting resourceVersion. Values starting
/// with `bad` fail to decorate. While `slow` is set, every call takes 20 ms.
#[derive(Default)]
struct TestDecorator {
    slow: AtomicBool,
}

impl Decorator for TestDecorator {
    fn decorate(&self, key: &str, value: &[u8], rev: Revision) -> Result<Decorated, String> {
        if self.slow.load(Ordering::SeqCst) {
            std::thread::sleep(Duration::from_millis(20));
        }
        let text = std::str::from_utf8(value).map_err(|e| e.to_string())?;
        if text.starts_with("bad") {
            return Err("not an object".into());
        }
        let labels = text
            .split(',')
            .filter_map(|kv| kv.split_once('='))
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let name = key.rsplit('/').next().unwrap_or_default().to_string();
        Ok(Decorated {
            bytes: Bytes::from(format!("{text}@{rev}")),
            labels,
            fields: BTreeMap::from([("metadata.name".to_string(), name)]),
        })
    }
}

fn b(s: &str) -> Bytes {
    Bytes::copy_from_slice(s.as_bytes())
}

fn text(o: &CachedObject) -> &str {
    std::str::from_utf8(&o.bytes).unwrap()
}

async fn start(backend: Arc<dyn Backend>, history: usize) -> Arc<WatchCache> {
    WatchCache::start(backend, Arc::new(TestDecorator::default()), history)
        .await
        .unwrap()
}

async fn next(w: &mut CacheWatcher) -> Arc<WatchEvent> {
    tokio::time::timeout(TIMEOUT, w.next())
        .await
        .expect("watch timed out")
        .expect("watch ended")
        .expect("watch error")
}

async fn assert_quiet(w: &mut CacheWatcher) {
    if let Ok(item) = tokio::time::timeout(Duration::from_millis(100), w.next()).await {
        panic!(
            "unexpected watch item {:?}",
            item.map(|r| r.map(|e| e.revision))
        );
    }
}

/// (kind, key, revision) of the next `n` events.
async fn take(w: &mut CacheWatcher, n: usize) -> Vec<(WatchEventType, String, Revision)> {
    let mut out = Vec::new();
    for _ in 0..n {
        let e = next(w).await;
        out.push((e.kind, e.object.key.clone(), e.revision));
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_and_get_reflect_writes_after_wait_for_revision() {
    let backend = MemoryBackend::new();
    let r1 = backend.create("/p/a/1", b("app=web")).await.unwrap();
    backend.create("/p/ab", b("app=other")).await.unwrap();
    let cache = start(backend.clone(), 100).await;
    assert_eq!(cache.revision(), 2);

    let one = cache.get("/p/a/1").unwrap();
    assert_eq!(text(&one), "app=web@1");
    assert_eq!((one.create_revision, one.mod_revision), (r1, r1));
    assert_eq!(one.labels.get("app").map(String::as_str), Some("web"));
    assert_eq!(
        one.fields.get("metadata.name").map(String::as_str),
        Some("1")
    );

    let r3 = backend.create("/p/a/2", b("app=db")).await.unwrap();
    let r4 = backend.update("/p/a/1", b("app=web2"), r1).await.unwrap();
    let (r5, _) = backend.delete("/p/ab", None).await.unwrap();
    cache.wait_for_revision(r5).await.unwrap();
    assert!(cache.revision() >= r5);

    let (items, rev) = cache.list("/p/a/");
    assert_eq!(rev, r5);
    let got: Vec<(&str, &str)> = items.iter().map(|o| (o.key.as_str(), text(o))).collect();
    assert_eq!(got, [("/p/a/1", "app=web2@4"), ("/p/a/2", "app=db@3")]);
    let one = cache.get("/p/a/1").unwrap();
    assert_eq!((one.create_revision, one.mod_revision), (r1, r4));
    assert_eq!(cache.get("/p/a/2").unwrap().mod_revision, r3);
    assert!(cache.get("/p/ab").is_none());
    assert_eq!(cache.list("").0.len(), 2);
    assert!(cache.list("/q").0.is_empty());

    // Already applied revisions resolve at once.
    tokio::time::timeout(Duration::from_millis(100), cache.wait_for_revision(r1))
        .await
        .unwrap()
        .unwrap();
    // Future ones wait.
    assert!(
        tokio::time::timeout(Duration::from_millis(100), cache.wait_for_revision(r5 + 1))
            .await
            .is_err()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_classifies_events_and_carries_prev() {
    let backend = MemoryBackend::new();
    let cache = start(backend.clone(), 100).await;
    let mut w = cache.watch("/c/", cache.revision()).await.unwrap();

    let r1 = backend.create("/c/x", b("v=1")).await.unwrap();
    let r2 = backend.update("/c/x", b("v=2"), r1).await.unwrap();
    let (r3, _) = backend.delete("/c/x", Some(r2)).await.unwrap();
    let r4 = backend.create("/c/x", b("v=3")).await.unwrap();
    backend.create("/cx", b("outside")).await.unwrap();

    let added = next(&mut w).await;
    assert_eq!((added.kind, added.revision), (WatchEventType::Added, r1));
    assert_eq!(text(&added.object), "v=1@1");
    assert!(added.prev.is_none());

    let modified = next(&mut w).await;
    assert_eq!(
        (modified.kind, modified.revision),
        (WatchEventType::Modified, r2)
    );
    assert_eq!(text(&modified.object), "v=2@2");
    assert_eq!(modified.object.create_revision, r1);
    // prev is the very object of the previous event, not a copy.
    assert!(Arc::ptr_eq(modified.prev.as_ref().unwrap(), &added.object));

    let deleted = next(&mut w).await;
    assert_eq!(
        (deleted.kind, deleted.revision),
        (WatchEventType::Deleted, r3)
    );
    // The deleted object carries the deletion's revision.
    assert_eq!(text(&deleted.object), "v=2@3");
    assert_eq!(
        (deleted.object.create_revision, deleted.object.mod_revision),
        (r1, r3)
    );
    assert!(Arc::ptr_eq(
        deleted.prev.as_ref().unwrap(),
        &modified.object
    ));

    let again = next(&mut w).await;
    assert_eq!((again.kind, again.revision), (WatchEventType::Added, r4));
    assert!(again.prev.is_none());
    assert_quiet(&mut w).await;

    // The object map and the history share objects.
    cache.wait_for_revision(r4).await.unwrap();
    assert!(Arc::ptr_eq(&cache.get("/c/x").unwrap(), &again.object));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_from_history_replays_exactly_the_missed_events() {
    let backend = MemoryBackend::new();
    let cache = start(backend.clone(), 100).await;
    let mut revs = Vec::new();
    for i in 0..10 {
        revs.push(backend.create(&format!("/h/{i}"), b("x")).await.unwrap());
        backend
            .create(&format!("/other/{i}"), b("x"))
            .await
            .unwrap();
    }
    let last = backend.current_revision().await.unwrap();
    cache.wait_for_revision(last).await.unwrap();

    let after = revs[4];
    let mut w = cache.watch("/h/", after).await.unwrap();
    let got = take(&mut w, 5).await;
    let expected: Vec<_> = (5..10)
        .map(|i| (WatchEventType::Added, format!("/h/{i}"), revs[i]))
        .collect();
    assert_eq!(got, expected);
    assert_quiet(&mut w).await;
    // Then live.
    let live = backend.update("/h/0", b("y"), revs[0]).await.unwrap();
    assert_eq!(
        take(&mut w, 1).await,
        [(WatchEventType::Modified, "/h/0".to_string(), live)]
    );

    // Watching from the current revision yields only new events.
    let mut w = cache.watch("/h/", cache.revision()).await.unwrap();
    assert_quiet(&mut w).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_older_than_history_falls_back_to_backend() {
    let backend = MemoryBackend::new();
    let cache = start(backend.clone(), 3).await;
    let r1 = backend.create("/f/a", b("v=1")).await.unwrap();
    let r2 = backend.update("/f/a", b("v=2"), r1).await.unwrap();
    let r3 = backend.update("/f/a", b("v=3"), r2).await.unwrap();
    for i in 0..5 {
        backend.create(&format!("/g/{i}"), b("x")).await.unwrap();
    }
    let (r9, _) = backend.delete("/f/a", None).await.unwrap();
    cache.wait_for_revision(r9).await.unwrap();

    // The window holds the last 3 events (7..=9); one before it is served by the backend.
    let mut edge = cache.watch("", r9 - 4).await.unwrap();
    let revs: Vec<Revision> = take(&mut edge, 4).await.into_iter().map(|e| e.2).collect();
    assert_eq!(revs, (r9 - 3..=r9).collect::<Vec<_>>());
    assert_quiet(&mut edge).await;

    let mut w = cache.watch("/f/", r1).await.unwrap();
    let e2 = next(&mut w).await;
    assert_eq!((e2.kind, e2.revision), (WatchEventType::Modified, r2));
    assert_eq!(text(&e2.object), "v=2@2");
    // Its previous state predates the replay: unknown.
    assert!(e2.prev.is_none());
    let e3 = next(&mut w).await;
    assert_eq!((e3.kind, e3.revision), (WatchEventType::Modified, r3));
    assert_eq!(text(e3.prev.as_ref().unwrap()), "v=2@2");
    let e9 = next(&mut w).await;
    assert_eq!((e9.kind, e9.revision), (WatchEventType::Deleted, r9));
    assert_eq!(text(&e9.object), "v=3@9");
    assert_eq!(text(e9.prev.as_ref().unwrap()), "v=3@3");
    assert_quiet(&mut w).await;

    // Then live, without duplicates.
    let r10 = backend.create("/f/b", b("v=4")).await.unwrap();
    assert_eq!(
        take(&mut w, 1).await,
        [(WatchEventType::Added, "/f/b".to_string(), r10)]
    );
    assert_quiet(&mut w).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_before_compaction_is_gone() {
    let backend = MemoryBackend::new();
    let cache = start(backend.clone(), 2).await;
    let mut revs = Vec::new();
    for i in 0..10 {
        revs.push(backend.create(&format!("/k/{i}"), b("x")).await.unwrap());
    }
    backend.compact(revs[7]).await.unwrap();
    cache.wait_for_revision(revs[9]).await.unwrap();

    match cache.watch("/k/", revs[2]).await {
        Err(StoreError::Compacted { requested, .. }) => assert_eq!(requested, revs[2]),
        Err(e) => panic!("expected Compacted, got {e}"),
        Ok(_) => panic!("expected Compacted, got a watcher"),
    }
    // Still in the backend log (but not in the 2-event window): works.
    let mut w = cache.watch("/k/", revs[7]).await.unwrap();
    assert_eq!(take(&mut w, 2).await.last().unwrap().2, revs[9]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hundred_watchers_receive_every_event() {
    let backend = MemoryBackend::new();
    let cache = start(backend.clone(), 1000).await;
    let from = cache.revision();
    let mut watchers = Vec::new();
    for i in 0..100 {
        let prefix = if i % 2 == 0 { "/m/" } else { "/m/a/" };
        watchers.push((prefix, cache.watch(prefix, from).await.unwrap()));
    }
    let writer = {
        let backend = backend.clone();
        tokio::spawn(async move {
            let mut all = Vec::new();
            for i in 0..300 {
                let key = format!("/m/{}/{i}", if i % 3 == 0 { "a" } else { "b" });
                let rev = backend.create(&key, b("x")).await.unwrap();
                all.push((key, rev));
                if i % 10 == 0 {
                    tokio::task::yield_now().await;
                }
            }
            all
        })
    };
    let all = writer.await.unwrap();
    let readers: Vec<_> = watchers
        .into_iter()
        .map(|(prefix, mut w)| {
            let expected: Vec<Revision> = all
                .iter()
                .filter(|(k, _)| k.starts_with(prefix))
                .map(|(_, r)| *r)
                .collect();
            tokio::spawn(async move {
                let mut got = Vec::new();
                while got.len() < expected.len() {
                    got.push(next(&mut w).await.revision);
                }
                assert_eq!(got, expected, "watcher on {prefix}");
                assert_quiet(&mut w).await;
            })
        })
        .collect();
    for r in readers {
        r.await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_started_during_writes_has_no_gap_or_duplicate() {
    let backend = MemoryBackend::new();
    let cache = start(backend.clone(), 50).await;
    let writer = {
        let backend = backend.clone();
        tokio::spawn(async move {
            for i in 0..500 {
                backend.create(&format!("/s/{i}"), b("x")).await.unwrap();
                if i % 8 == 0 {
                    tokio::task::yield_now().await;
                }
            }
        })
    };
    let mut watchers = Vec::new();
    for _ in 0..10 {
        tokio::time::sleep(Duration::from_millis(1)).await;
        // Some from the window, some from before it (backend path), some from now.
        let now = cache.revision();
        for after in [now, (now - 30).max(0), (now - 120).max(0)] {
            watchers.push((after, cache.watch("/s/", after).await.unwrap()));
        }
    }
    writer.await.unwrap();
    for (after, mut w) in watchers {
        let got: Vec<Revision> = take(&mut w, (500 - after) as usize)
            .await
            .into_iter()
            .map(|e| e.2)
            .collect();
        assert_eq!(got, (after + 1..=500).collect::<Vec<_>>(), "from {after}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn undecoratable_object_keeps_raw_bytes() {
    let backend = MemoryBackend::new();
    let cache = start(backend.clone(), 10).await;
    backend.create("/d/bad", b("bad{")).await.unwrap();
    let r = backend.create("/d/good", b("a=b")).await.unwrap();
    cache.wait_for_revision(r).await.unwrap();
    let bad = cache.get("/d/bad").unwrap();
    assert_eq!(&bad.bytes[..], b"bad{");
    assert!(bad.labels.is_empty());
    assert_eq!(text(&cache.get("/d/good").unwrap()), "a=b@2");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn feed_lag_rebuilds_and_ends_watchers() {
    // A tiny backend buffer and a slow decorator make the cache's own feed lag.
    let backend = MemoryBackend::with_watch_buffer(2);
    let decorator = Arc::new(TestDecorator::default());
    let cache = WatchCache::start(backend.clone(), decorator.clone(), 100)
        .await
        .unwrap();
    let old = backend.create("/l/old", b("x")).await.unwrap();
    cache.wait_for_revision(old).await.unwrap();
    let mut w = cache.watch("/l/", cache.revision()).await.unwrap();

    decorator.slow.store(true, Ordering::SeqCst);
    let mut last = 0;
    for i in 0..10 {
        last = backend.create(&format!("/l/{i}"), b("x")).await.unwrap();
    }
    // Whatever the watcher saw before, it must end with WatcherLagged.
    let mut ended_lagged = false;
    while let Some(item) = tokio::time::timeout(TIMEOUT, w.next()).await.unwrap() {
        match item {
            Ok(_) => {}
            Err(StoreError::WatcherLagged) => ended_lagged = true,
            Err(e) => panic!("unexpected {e}"),
        }
    }
    assert!(ended_lagged);
    decorator.slow.store(false, Ordering::SeqCst);

    // The rebuilt cache has everything and keeps following.
    cache.wait_for_revision(last).await.unwrap();
    assert_eq!(cache.list("/l/").0.len(), 11);
    let mut w = cache.watch("/l/", cache.revision()).await.unwrap();
    let r = backend.create("/l/new", b("x")).await.unwrap();
    assert_eq!(next(&mut w).await.revision, r);
    // History was reloaded, so resuming from before the rebuild still works.
    let mut w = cache.watch("/l/", old).await.unwrap();
    assert_eq!(take(&mut w, 11).await.last().unwrap().2, r);
}

/// Delegates to a memory backend until closed; then the watch ends and reads fail `Closed`.
struct ClosingBackend {
    inner: Arc<MemoryBackend>,
    closed: tokio::sync::watch::Sender<bool>,
}

impl ClosingBackend {
    fn check(&self) -> Result<(), StoreError> {
        if *self.closed.borrow() {
            Err(StoreError::Closed)
        } else {
            Ok(())
        }
    }
}

#[async_trait::async_trait]
impl Backend for ClosingBackend {
    async fn get(&self, key: &str) -> Result<Option<KeyValue>, StoreError> {
        self.check()?;
        self.inner.get(key).await
    }
    async fn list(&self, prefix: &str) -> Result<(Vec<KeyValue>, Revision), StoreError> {
        self.check()?;
        self.inner.list(prefix).await
    }
    async fn create(&self, key: &str, value: Bytes) -> Result<Revision, StoreError> {
        self.check()?;
        self.inner.create(key, value).await
    }
    async fn update(&self, key: &str, value: Bytes, rev: Revision) -> Result<Revision, StoreError> {
        self.check()?;
        self.inner.update(key, value, rev).await
    }
    async fn delete(
        &self,
        key: &str,
        rev: Option<Revision>,
    ) -> Result<(Revision, KeyValue), StoreError> {
        self.check()?;
        self.inner.delete(key, rev).await
    }
    async fn events_since(&self, prefix: &str, after: Revision) -> Result<Vec<Event>, StoreError> {
        self.check()?;
        self.inner.events_since(prefix, after).await
    }
    fn watch(
        &self,
        prefix: &str,
        after: Revision,
    ) -> BoxStream<'static, Result<Event, StoreError>> {
        let mut closed = self.closed.subscribe();
        self.inner
            .watch(prefix, after)
            .take_until(async move {
                let _ = closed.wait_for(|c| *c).await;
            })
            .boxed()
    }
    async fn compact(&self, revision: Revision) -> Result<(), StoreError> {
        self.check()?;
        self.inner.compact(revision).await
    }
    async fn current_revision(&self) -> Result<Revision, StoreError> {
        self.check()?;
        self.inner.current_revision().await
    }
    async fn compacted_revision(&self) -> Result<Revision, StoreError> {
        self.check()?;
        self.inner.compacted_revision().await
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dead_backend_kills_the_cache() {
    let (closed, _) = tokio::sync::watch::channel(false);
    let backend = Arc::new(ClosingBackend {
        inner: MemoryBackend::new(),
        closed,
    });
    let cache = start(backend.clone(), 10).await;
    let r = backend.create("/z/a", b("x")).await.unwrap();
    cache.wait_for_revision(r).await.unwrap();
    let mut w = cache.watch("/z/", r).await.unwrap();

    backend.closed.send_replace(true);
    let err = tokio::time::timeout(TIMEOUT, cache.wait_for_revision(r + 1))
        .await
        .unwrap();
    assert!(matches!(err, Err(StoreError::Closed)), "{err:?}");
    match tokio::time::timeout(TIMEOUT, w.next()).await.unwrap() {
        Some(Err(StoreError::Closed)) => {}
        other => panic!(
            "expected Closed, got {:?}",
            other.map(|r| r.map(|e| e.revision))
        ),
    }
    assert!(w.next().await.is_none());
    assert!(matches!(
        cache.watch("/z/", r).await,
        Err(StoreError::Closed)
    ));
    // What was cached stays readable.
    assert!(cache.get("/z/a").is_some());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restart_resumes_watch_from_old_revision() {
    let dir = tempfile::tempdir().unwrap();
    let (old_rev, mut expected) = {
        let store = SqliteBackend::open(dir.path()).unwrap();
        let cache = start(store.clone(), 100).await;
        let r1 = store.create("/r/a", b("v=1")).await.unwrap();
        store.create("/r/b", b("v=1")).await.unwrap();
        let old_rev = store.current_revision().await.unwrap();
        cache.wait_for_revision(old_rev).await.unwrap();
        let r3 = store.update("/r/a", b("v=2"), r1).await.unwrap();
        store.create("/x/outside", b("v=1")).await.unwrap();
        let (r5, _) = store.delete("/r/b", None).await.unwrap();
        let r6 = store.create("/r/c", b("v=1")).await.unwrap();
        let expected = vec![
            (WatchEventType::Modified, "/r/a".to_string(), r3),
            (WatchEventType::Deleted, "/r/b".to_string(), r5),
            (WatchEventType::Added, "/r/c".to_string(), r6),
        ];
        (old_rev, expected)
    };

    // From the preloaded history, and (history 0) from the backend log.
    for history in [100, 0] {
        let store = SqliteBackend::open(dir.path()).unwrap();
        let cache = start(store.clone(), history).await;
        let mut w = cache.watch("/r/", old_rev).await.unwrap();
        assert_eq!(
            take(&mut w, expected.len()).await,
            expected,
            "history {history}"
        );
        assert_quiet(&mut w).await;
        // Then live; the next round must replay this one too.
        let key = format!("/r/live-{history}");
        let rev = store.create(&key, b("v=1")).await.unwrap();
        assert!(rev > old_rev);
        expected.push((WatchEventType::Added, key, rev));
        assert_eq!(take(&mut w, 1).await[..], expected[expected.len() - 1..]);
    }
}
