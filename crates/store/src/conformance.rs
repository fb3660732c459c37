//! Backend conformance suite: every case takes an `Arc<dyn Backend>` on a fresh, empty
//! store (SQLite, memory, etcd). `backend_conformance_tests!(factory)` expands to one `#[tokio::test]` per case,
//! where `factory` is `|| async { (Arc<dyn Backend>, guard) }` and `guard` is kept alive for
//! the test (e.g. a temp dir). Other crates' backends (and wrappers of one) run it with
//! the `conformance` feature: `cairn_store::backend_conformance_tests!(factory)`.

// Test code: a broken backend should fail loudly.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures::StreamExt;

use crate::{Backend, Event, EventType, Revision, StoreError};

pub const TIMEOUT: Duration = Duration::from_secs(10);

#[macro_export]
macro_rules! backend_conformance_tests {
    ($factory:expr) => {
        $crate::backend_conformance_tests!(@cases $factory;
            create_get_update,
            delete_with_precondition,
            list_by_prefix,
            revisions_strictly_increase,
            events_since_order_and_content,
            compaction,
            watch_filters_prefix_and_sees_deletes,
            watch_replays_then_goes_live_without_gap,
        );
    };
    (@cases $factory:expr; $($case:ident),* $(,)?) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $case() {
                let (backend, _guard) = ($factory)().await;
                $crate::conformance::$case(backend).await;
            }
        )*
    };
}

fn b(s: &str) -> Bytes {
    Bytes::copy_from_slice(s.as_bytes())
}

pub async fn create_get_update(store: Arc<dyn Backend>) {
    // An empty store's revision: 0 for SQLite and memory; etcd's counts every write to
    // the cluster, under any prefix (1 when fresh).
    let empty = store.current_revision().await.unwrap();
    assert!(empty >= 0, "{empty}");
    assert!(store.get("/a").await.unwrap().is_none());

    let r1 = store.create("/a", b("one")).await.unwrap();
    assert!(r1 > empty);
    let kv = store.get("/a").await.unwrap().unwrap();
    assert_eq!(
        (
            kv.key.as_str(),
            &kv.value[..],
            kv.create_revision,
            kv.mod_revision
        ),
        ("/a", &b"one"[..], r1, r1)
    );

    match store.create("/a", b("again")).await {
        Err(StoreError::AlreadyExists { key }) => assert_eq!(key, "/a"),
        other => panic!("expected AlreadyExists, got {other:?}"),
    }
    match store.update("/a", b("two"), r1 + 100).await {
        Err(StoreError::Conflict {
            key,
            expected,
            actual,
        }) => assert_eq!((key.as_str(), expected, actual), ("/a", r1 + 100, r1)),
        other => panic!("expected Conflict, got {other:?}"),
    }
    // Failed writes change nothing.
    assert_eq!(store.get("/a").await.unwrap().unwrap().value, b("one"));
    assert_eq!(store.current_revision().await.unwrap(), r1);

    let r2 = store.update("/a", b("two"), r1).await.unwrap();
    assert!(r2 > r1);
    let kv = store.get("/a").await.unwrap().unwrap();
    assert_eq!(
        (&kv.value[..], kv.create_revision, kv.mod_revision),
        (&b"two"[..], r1, r2)
    );
    // The old revision is stale now.
    assert!(matches!(
        store.update("/a", b("three"), r1).await,
        Err(StoreError::Conflict { .. })
    ));
    match store.update("/missing", b("x"), r2).await {
        Err(StoreError::NotFound { key }) => assert_eq!(key, "/missing"),
        other => panic!("expected NotFound, got {other:?}"),
    }
    assert_eq!(store.current_revision().await.unwrap(), r2);
}

pub async fn delete_with_precondition(store: Arc<dyn Backend>) {
    let r1 = store.create("/d", b("v1")).await.unwrap();
    let r2 = store.update("/d", b("v2"), r1).await.unwrap();

    match store.delete("/d", Some(r1)).await {
        Err(StoreError::Conflict {
            expected, actual, ..
        }) => assert_eq!((expected, actual), (r1, r2)),
        other => panic!("expected Conflict, got {other:?}"),
    }
    assert!(store.get("/d").await.unwrap().is_some());

    let (r3, removed) = store.delete("/d", Some(r2)).await.unwrap();
    assert!(r3 > r2);
    assert_eq!(
        (
            removed.key.as_str(),
            &removed.value[..],
            removed.create_revision,
            removed.mod_revision
        ),
        ("/d", &b"v2"[..], r1, r2)
    );
    assert!(store.get("/d").await.unwrap().is_none());
    assert!(matches!(
        store.delete("/d", None).await,
        Err(StoreError::NotFound { .. })
    ));

    // Re-created keys start a new life; unconditional delete works.
    let r4 = store.create("/d", b("v3")).await.unwrap();
    let kv = store.get("/d").await.unwrap().unwrap();
    assert_eq!((kv.create_revision, kv.mod_revision), (r4, r4));
    let (r5, removed) = store.delete("/d", None).await.unwrap();
    assert!(r5 > r4);
    assert_eq!(removed.value, b("v3"));
    assert_eq!(store.current_revision().await.unwrap(), r5);
}

pub async fn list_by_prefix(store: Arc<dyn Backend>) {
    let keys = [
        "/a/b/2", "/a/bc", "/a/b/1", "/a/b", "/a/b_/x", "/a/bx/y", "/a/b%", "/b", "/a/b/1/z",
    ];
    for k in keys {
        store.create(k, b(k)).await.unwrap();
    }
    let (items, rev) = store.list("/a/b/").await.unwrap();
    let got: Vec<&str> = items.iter().map(|kv| kv.key.as_str()).collect();
    assert_eq!(got, ["/a/b/1", "/a/b/1/z", "/a/b/2"]);
    assert_eq!(items[0].value, b("/a/b/1"));
    assert_eq!(rev, store.current_revision().await.unwrap());

    // `_` and `%` are plain characters, not LIKE wildcards.
    let (items, _) = store.list("/a/b_").await.unwrap();
    let got: Vec<&str> = items.iter().map(|kv| kv.key.as_str()).collect();
    assert_eq!(got, ["/a/b_/x"]);

    let (items, _) = store.list("").await.unwrap();
    let got: Vec<&str> = items.iter().map(|kv| kv.key.as_str()).collect();
    let mut all = keys.to_vec();
    all.sort();
    assert_eq!(got, all);

    assert!(store.list("/zzz").await.unwrap().0.is_empty());

    // Deleted keys leave listings.
    store.delete("/a/b/1", None).await.unwrap();
    let (items, rev2) = store.list("/a/b/").await.unwrap();
    let got: Vec<&str> = items.iter().map(|kv| kv.key.as_str()).collect();
    assert_eq!(got, ["/a/b/1/z", "/a/b/2"]);
    assert!(rev2 > rev);
}

pub async fn revisions_strictly_increase(store: Arc<dyn Backend>) {
    let mut last: Revision = 0;
    let mut check = |rev: Revision| {
        assert!(rev > last, "revision {rev} after {last}");
        last = rev;
    };
    for i in 0..20 {
        let key = format!("/r/{}", i % 5);
        match store.get(&key).await.unwrap() {
            None => check(store.create(&key, b("c")).await.unwrap()),
            Some(_) if i % 3 == 0 => check(store.delete(&key, None).await.unwrap().0),
            Some(kv2) => check(store.update(&key, b("u"), kv2.mod_revision).await.unwrap()),
        }
        // Failed writes in between must not disturb the sequence.
        assert!(store.update("/nope", b("x"), 1).await.is_err());
    }
    assert_eq!(store.current_revision().await.unwrap(), last);
}

pub async fn events_since_order_and_content(store: Arc<dyn Backend>) {
    let r1 = store.create("/e/a", b("a1")).await.unwrap();
    let r2 = store.update("/e/a", b("a2"), r1).await.unwrap();
    let r3 = store.create("/e/b", b("b1")).await.unwrap();
    let r4 = store.create("/x/c", b("c1")).await.unwrap();
    let (r5, _) = store.delete("/e/a", Some(r2)).await.unwrap();

    let ev = |kind, key: &str, revision, value: &str, create_revision| Event {
        kind,
        key: key.to_string(),
        revision,
        value: b(value),
        create_revision,
    };
    let expected = vec![
        ev(EventType::Put, "/e/a", r1, "a1", r1),
        ev(EventType::Put, "/e/a", r2, "a2", r1),
        ev(EventType::Put, "/e/b", r3, "b1", r3),
        ev(EventType::Put, "/x/c", r4, "c1", r4),
        // A delete carries the removed value.
        ev(EventType::Delete, "/e/a", r5, "a2", r1),
    ];
    assert_eq!(store.events_since("", 0).await.unwrap(), expected);
    assert_eq!(
        store.events_since("/e/", 0).await.unwrap(),
        vec![
            expected[0].clone(),
            expected[1].clone(),
            expected[2].clone(),
            expected[4].clone()
        ]
    );
    assert_eq!(
        store.events_since("/e/", r2).await.unwrap(),
        vec![expected[2].clone(), expected[4].clone()]
    );
    assert!(store.events_since("", r5).await.unwrap().is_empty());
    assert!(store.events_since("", r5 + 10).await.unwrap().is_empty());
}

pub async fn compaction(store: Arc<dyn Backend>) {
    let r1 = store.create("/c/a", b("1")).await.unwrap();
    let r2 = store.create("/c/b", b("2")).await.unwrap();
    let r3 = store.update("/c/a", b("3"), r1).await.unwrap();
    assert_eq!(store.compacted_revision().await.unwrap(), 0);

    store.compact(r2).await.unwrap();
    assert_eq!(store.compacted_revision().await.unwrap(), r2);
    match store.events_since("", r1).await {
        Err(StoreError::Compacted {
            requested,
            compacted,
        }) => assert_eq!((requested, compacted), (r1, r2)),
        other => panic!("expected Compacted, got {other:?}"),
    }
    let left = store.events_since("", r2).await.unwrap();
    assert_eq!(
        left.iter().map(|e| e.revision).collect::<Vec<_>>(),
        vec![r3]
    );
    // Live keys survive compaction.
    assert_eq!(store.get("/c/a").await.unwrap().unwrap().value, b("3"));
    assert_eq!(store.get("/c/b").await.unwrap().unwrap().mod_revision, r2);
    assert_eq!(store.list("/c/").await.unwrap().0.len(), 2);

    let mut w = store.watch("/c/", r1);
    match tokio::time::timeout(TIMEOUT, w.next()).await.unwrap() {
        Some(Err(StoreError::Compacted { .. })) => {}
        other => panic!("expected Compacted from watch, got {other:?}"),
    }

    // Never backwards, never past the current revision.
    store.compact(r1).await.unwrap();
    assert_eq!(store.compacted_revision().await.unwrap(), r2);
    store.compact(r3 + 100).await.unwrap();
    assert_eq!(store.compacted_revision().await.unwrap(), r3);
    assert!(store.events_since("", r3).await.unwrap().is_empty());
    // Revisions keep going up after compacting everything.
    let r4 = store.create("/c/c", b("4")).await.unwrap();
    assert!(r4 > r3);
    assert_eq!(store.events_since("", r3).await.unwrap().len(), 1);
}

async fn next_event(
    w: &mut futures::stream::BoxStream<'static, Result<Event, StoreError>>,
) -> Event {
    tokio::time::timeout(TIMEOUT, w.next())
        .await
        .expect("watch timed out")
        .expect("watch ended")
        .expect("watch error")
}

pub async fn watch_filters_prefix_and_sees_deletes(store: Arc<dyn Backend>) {
    let r0 = store.create("/w/b/0", b("0")).await.unwrap();
    let mut w = store.watch("/w/b/", r0);
    let mut all = store.watch("", 0);
    store.create("/w/bc", b("no")).await.unwrap();
    let r1 = store.create("/w/b/1", b("1")).await.unwrap();
    let (r2, _) = store.delete("/w/b/0", None).await.unwrap();

    let e = next_event(&mut w).await;
    assert_eq!(
        (e.kind, e.key.as_str(), e.revision),
        (EventType::Put, "/w/b/1", r1)
    );
    let e = next_event(&mut w).await;
    assert_eq!(
        (e.kind, e.key.as_str(), e.revision, &e.value[..]),
        (EventType::Delete, "/w/b/0", r2, &b"0"[..])
    );
    // Nothing else under the prefix.
    assert!(tokio::time::timeout(Duration::from_millis(100), w.next())
        .await
        .is_err());

    // A watch from 0 replays everything (log) and then continues live.
    let mut revs = Vec::new();
    for _ in 0..4 {
        revs.push(next_event(&mut all).await.revision);
    }
    let r3 = store.create("/w/z", b("z")).await.unwrap();
    revs.push(next_event(&mut all).await.revision);
    assert_eq!(revs, (r0..=r3).collect::<Vec<_>>());
}

pub async fn watch_replays_then_goes_live_without_gap(store: Arc<dyn Backend>) {
    const WRITES: usize = 400;
    let (done_tx, done_rx) = tokio::sync::watch::channel(None::<Revision>);
    let writer = {
        let store = store.clone();
        tokio::spawn(async move {
            let mut revs = Vec::with_capacity(WRITES);
            for i in 0..WRITES {
                // Interleave keys outside the prefix so filtering is exercised too.
                if i % 4 == 3 {
                    store.create(&format!("/other/{i}"), b("o")).await.unwrap();
                } else {
                    revs.push(store.create(&format!("/g/{i}"), b("g")).await.unwrap());
                }
                if i % 16 == 0 {
                    tokio::task::yield_now().await;
                }
            }
            done_tx.send_replace(revs.last().copied());
            revs
        })
    };
    // Start watches at several points while the writer runs.
    let mut watches = Vec::new();
    for i in 0..6u64 {
        tokio::time::sleep(Duration::from_millis(2)).await;
        let after = store.current_revision().await.unwrap();
        let mut w = store.watch("/g/", after);
        let mut done = done_rx.clone();
        watches.push((
            after,
            tokio::spawn(async move {
                // Some start reading late, so commits land both in their log read and in
                // their live feed; some read at once.
                tokio::time::sleep(Duration::from_millis(i % 3 * 4)).await;
                let mut got = Vec::new();
                loop {
                    let last = *done.borrow_and_update();
                    if let Some(last) = last {
                        if got.last().copied().unwrap_or(after) >= last {
                            break;
                        }
                    }
                    tokio::select! {
                        e = next_event(&mut w) => {
                            assert!(e.key.starts_with("/g/"), "{}", e.key);
                            got.push(e.revision);
                        }
                        _ = done.changed() => {}
                    }
                }
                // Nothing may follow the last write (a duplicate would).
                let extra = tokio::time::timeout(Duration::from_millis(100), w.next()).await;
                assert!(extra.is_err(), "unexpected extra item {extra:?}");
                got
            }),
        ));
    }
    let revs = writer.await.unwrap();
    for (after, task) in watches {
        let expected: Vec<Revision> = revs.iter().copied().filter(|r| *r > after).collect();
        assert_eq!(task.await.unwrap(), expected, "watch from {after}");
    }
}
