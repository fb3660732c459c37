use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures::StreamExt;

use super::{SqliteBackend, SqliteOptions};
use crate::conformance::TIMEOUT;
use crate::{Backend, EventType, StoreError};

crate::backend_conformance_tests!(|| async {
    let dir = tempfile::tempdir().unwrap();
    let b: Arc<dyn Backend> = SqliteBackend::open(dir.path()).unwrap();
    (b, dir)
});

fn b(s: &str) -> Bytes {
    Bytes::copy_from_slice(s.as_bytes())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reopen_keeps_data_revisions_and_log() {
    let dir = tempfile::tempdir().unwrap();
    let (events, r3) = {
        let store = SqliteBackend::open(dir.path()).unwrap();
        assert!(dir.path().join("store.db").exists());
        let r1 = store.create("/k/a", b("a")).await.unwrap();
        let r2 = store.create("/k/b", b("b")).await.unwrap();
        store.update("/k/a", b("a2"), r1).await.unwrap();
        let (r3, _) = store.delete("/k/b", Some(r2)).await.unwrap();
        (store.events_since("", 0).await.unwrap(), r3)
    };
    assert_eq!(events.len(), 4);

    let store = SqliteBackend::open(dir.path()).unwrap();
    assert_eq!(store.current_revision().await.unwrap(), r3);
    assert_eq!(store.events_since("", 0).await.unwrap(), events);
    let kv = store.get("/k/a").await.unwrap().unwrap();
    assert_eq!((&kv.value[..], kv.create_revision), (&b"a2"[..], 1));
    assert!(store.get("/k/b").await.unwrap().is_none());
    let (items, rev) = store.list("/k/").await.unwrap();
    assert_eq!((items.len(), rev), (1, r3));
    let r4 = store.create("/k/c", b("c")).await.unwrap();
    assert_eq!(r4, r3 + 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn revisions_never_reused_after_compaction_and_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let last = {
        let store = SqliteBackend::open(dir.path()).unwrap();
        let r1 = store.create("/k/a", b("a")).await.unwrap();
        store.create("/k/b", b("b")).await.unwrap();
        // End on deletes so neither kv nor (after compaction) the log holds the last revision.
        store.delete("/k/b", None).await.unwrap();
        let (last, _) = store.delete("/k/a", Some(r1)).await.unwrap();
        store.compact(last).await.unwrap();
        assert!(store.events_since("", last).await.unwrap().is_empty());
        last
    };
    let store = SqliteBackend::open(dir.path()).unwrap();
    assert_eq!(store.current_revision().await.unwrap(), last);
    assert_eq!(store.compacted_revision().await.unwrap(), last);
    assert!(matches!(
        store.events_since("", last - 1).await,
        Err(StoreError::Compacted { .. })
    ));
    let next = store.create("/k/a", b("again")).await.unwrap();
    assert_eq!(next, last + 1);
    drop(store);

    let store = SqliteBackend::open(dir.path()).unwrap();
    assert_eq!(store.current_revision().await.unwrap(), next);
    assert_eq!(store.create("/k/z", b("z")).await.unwrap(), next + 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_creates_are_group_committed() {
    const TASKS: usize = 50;
    const PER_TASK: usize = 200;
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteBackend::open(dir.path()).unwrap();
    let value = Bytes::from(vec![b'x'; 2048]);

    let start = Instant::now();
    let mut tasks = Vec::new();
    for t in 0..TASKS {
        let store = store.clone();
        let value = value.clone();
        tasks.push(tokio::spawn(async move {
            let mut out = Vec::with_capacity(PER_TASK);
            for i in 0..PER_TASK {
                let began = Instant::now();
                let rev = store
                    .create(&format!("/registry/pods/ns{t}/pod-{i}"), value.clone())
                    .await
                    .unwrap();
                out.push((rev, began.elapsed()));
            }
            out
        }));
    }
    let mut revs = Vec::new();
    let mut latencies = Vec::new();
    for task in tasks {
        for (rev, latency) in task.await.unwrap() {
            revs.push(rev);
            latencies.push(latency);
        }
    }
    let elapsed = start.elapsed();
    latencies.sort();
    let p50 = latencies[latencies.len() / 2];
    let p99 = latencies[latencies.len() * 99 / 100];
    println!(
        "sqlite: {} concurrent creates ({TASKS}x{PER_TASK}) in {elapsed:?} = {:.0}/s, p50 {p50:?}, p99 {p99:?}",
        revs.len(),
        revs.len() as f64 / elapsed.as_secs_f64()
    );

    revs.sort();
    revs.dedup();
    assert_eq!(revs.len(), TASKS * PER_TASK, "revisions must be distinct");
    assert_eq!(revs, (1..=(TASKS * PER_TASK) as i64).collect::<Vec<_>>());
    let (items, rev) = store.list("/registry/pods/").await.unwrap();
    assert_eq!(
        (items.len(), rev),
        (TASKS * PER_TASK, (TASKS * PER_TASK) as i64)
    );
}

/// Racing conditional writes on one key land in the same batches; exactly one of each round
/// may win and the losers must not disturb the winners sharing their transaction.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conflicting_writes_in_one_batch_fail_individually() {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteBackend::open(dir.path()).unwrap();
    let base = store.create("/hot", b("0")).await.unwrap();
    let mut tasks = Vec::new();
    for t in 0..40 {
        let store = store.clone();
        tasks.push(tokio::spawn(async move {
            let own = store.create(&format!("/own/{t}"), b("x")).await;
            let dup = store.create("/dup", b("x")).await;
            let upd = store.update("/hot", b("1"), base).await;
            (own.is_ok(), dup.is_ok(), upd.is_ok())
        }));
    }
    let mut wins = (0, 0, 0);
    for task in tasks {
        let (own, dup, upd) = task.await.unwrap();
        wins.0 += usize::from(own);
        wins.1 += usize::from(dup);
        wins.2 += usize::from(upd);
    }
    assert_eq!(wins, (40, 1, 1));
    // 1 base + 40 own + 1 dup + 1 update, numbered without holes.
    assert_eq!(store.current_revision().await.unwrap(), base + 42);
    let revs: Vec<_> = store
        .events_since("", 0)
        .await
        .unwrap()
        .iter()
        .map(|e| e.revision)
        .collect();
    assert_eq!(revs, (1..=base + 42).collect::<Vec<_>>());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lagging_watcher_is_closed() {
    let dir = tempfile::tempdir().unwrap();
    let options = SqliteOptions {
        watch_buffer: 4,
        ..SqliteOptions::default()
    };
    let store = SqliteBackend::open_with(dir.path(), options).unwrap();
    let mut w = store.watch("", 0);
    let mut keep_up = store.watch("", 0);
    let first = store.create("/l/0", b("0")).await.unwrap();
    // Read one event so the backlog phase is over and the watcher lives on the broadcast.
    let e = tokio::time::timeout(TIMEOUT, w.next()).await.unwrap();
    assert_eq!(e.unwrap().unwrap().revision, first);
    let e = tokio::time::timeout(TIMEOUT, keep_up.next()).await.unwrap();
    assert_eq!(e.unwrap().unwrap().revision, first);
    for i in 1..20 {
        store.create(&format!("/l/{i}"), b("x")).await.unwrap();
    }
    let mut saw_lagged = false;
    while let Some(item) = tokio::time::timeout(TIMEOUT, w.next()).await.unwrap() {
        match item {
            Ok(e) => assert_eq!(e.kind, EventType::Put),
            Err(StoreError::WatcherLagged) => saw_lagged = true,
            Err(e) => panic!("unexpected {e}"),
        }
    }
    assert!(saw_lagged, "stream must report the lag before ending");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_ends_when_store_is_dropped() {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteBackend::open(dir.path()).unwrap();
    let mut w = store.watch("", 0);
    store.create("/x", b("x")).await.unwrap();
    let e = tokio::time::timeout(TIMEOUT, w.next()).await.unwrap();
    assert_eq!(e.unwrap().unwrap().key, "/x");
    let started = Instant::now();
    drop(store);
    assert!(tokio::time::timeout(TIMEOUT, w.next())
        .await
        .unwrap()
        .is_none());
    assert!(started.elapsed() < Duration::from_secs(5));
}

#[test]
fn writer_connection_is_wal_with_full_sync() {
    let dir = tempfile::tempdir().unwrap();
    let conn = super::open_writer(&dir.path().join("store.db")).unwrap();
    let mode: String = conn
        .query_row("PRAGMA journal_mode", [], |r| r.get(0))
        .unwrap();
    assert_eq!(mode, "wal");
    // 2 = FULL: every commit fsyncs the WAL before returning.
    let sync: i64 = conn
        .query_row("PRAGMA synchronous", [], |r| r.get(0))
        .unwrap();
    assert_eq!(sync, 2);
}

/// Compaction gives the space of the dropped revisions back: the file shrinks (kine's
/// SQLite never does, kine#607), and a store made before incremental vacuum takes it on
/// reopen.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compaction_shrinks_the_file() {
    let dir = tempfile::tempdir().unwrap();
    // The database and its write-ahead log.
    let size = || {
        ["store.db", "store.db-wal"]
            .iter()
            .filter_map(|f| std::fs::metadata(dir.path().join(f)).ok())
            .map(|m| m.len())
            .sum::<u64>()
    };
    {
        // An old store: no auto-vacuum.
        let conn = rusqlite::Connection::open(dir.path().join("store.db")).unwrap();
        conn.execute_batch("CREATE TABLE old (x INTEGER)").unwrap();
    }
    let store = SqliteBackend::open(dir.path()).unwrap();
    let big = Bytes::from(vec![b'x'; 16 * 1024]);
    let mut rev = store.create("/k/big", big.clone()).await.unwrap();
    for _ in 0..300 {
        rev = store.update("/k/big", big.clone(), rev).await.unwrap();
    }
    store.compact(rev).await.unwrap();
    drop(store);
    let grown = size();
    let store = SqliteBackend::open(dir.path()).unwrap();
    let kv = store.get("/k/big").await.unwrap().unwrap();
    assert_eq!(kv.mod_revision, rev);
    // 301 revisions of 16 KiB were ~5 MiB; one is left.
    assert!(
        grown < 1024 * 1024,
        "store.db is {grown} bytes after compaction"
    );
    let mut rev = kv.mod_revision;
    for _ in 0..300 {
        rev = store.update("/k/big", big.clone(), rev).await.unwrap();
    }
    let before = size();
    store.compact(rev).await.unwrap();
    let after = size();
    assert!(
        after * 4 < before,
        "store.db went from {before} to {after} bytes"
    );
}

/// A snapshot saved while the store is open restores every key and value; the restored
/// store's revision is bumped and compacted, so a watch from before is 410 and new writes
/// carry higher revisions. A second opener, and a restore under a running store, are
/// refused; a file that is not a snapshot is refused and changes nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn snapshots_restore_with_a_bumped_compacted_revision() {
    use super::snapshot;
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let file = dir.path().join("snap.db");
    let store = SqliteBackend::open(&data).unwrap();
    let r1 = store.create("/k/a", b("a")).await.unwrap();
    store.create("/k/b", b("b")).await.unwrap();
    let saved = snapshot::save(&data, &file).unwrap();
    assert_eq!(saved, store.current_revision().await.unwrap());
    store.update("/k/a", b("a2"), r1).await.unwrap();
    // As a running server holds it.
    let server = super::DataDirLock::take(&data).unwrap();
    let message = super::DataDirLock::take(&data).err().unwrap().to_string();
    assert!(message.contains("in use by another process"), "{message}");
    let refused = snapshot::restore(&file, &data, 1000)
        .unwrap_err()
        .to_string();
    assert!(refused.contains("in use by another process"), "{refused}");
    drop(server);
    let not_a_snapshot = dir.path().join("junk");
    std::fs::write(&not_a_snapshot, "junk").unwrap();
    drop(store);
    let refused = snapshot::restore(&not_a_snapshot, &data, 1000)
        .unwrap_err()
        .to_string();
    assert!(refused.contains("not a"), "{refused}");

    let bumped = snapshot::restore(&file, &data, 1000).unwrap();
    assert_eq!(bumped, saved + 1000);
    let store = SqliteBackend::open(&data).unwrap();
    let a = store.get("/k/a").await.unwrap().unwrap();
    assert_eq!(&a.value[..], b"a", "the value as of the snapshot");
    assert!(store.get("/k/b").await.unwrap().is_some());
    assert_eq!(store.current_revision().await.unwrap(), bumped);
    assert!(matches!(
        store.events_since("", saved).await,
        Err(StoreError::Compacted { .. })
    ));
    let next = store.update("/k/a", b("a3"), a.mod_revision).await.unwrap();
    assert_eq!(next, bumped + 1);
}
