//! Embedded durable SQLite backend.
//!
//! Layout (`<data_dir>/store.db`, WAL mode, `synchronous=FULL`):
//! - `kv(key, value, create_rev, mod_rev)`: live keys.
//! - `log(rev, key, kind, value, create_rev)`: one row per committed write (a delete logs
//!   the removed value); rows at or below the compacted revision are gone.
//! - `meta(name, value)`: `revision` (last assigned revision, so compaction plus restart can
//!   never reuse one) and `compacted`.
//!
//! Writes go to one writer thread that owns the write connection and *group-commits*: it
//! takes every queued op (up to [`SqliteOptions::max_batch`]), applies them in one
//! transaction, each with its own revision, and pays for a single fsync. A failed
//! precondition fails only its op (it is checked by reading before writing, so it leaves
//! nothing behind). Results are sent back only after `COMMIT` returned, so an acknowledged
//! write survives `kill -9`. Committed events are then broadcast to live watchers in
//! revision order.
//!
//! Reads use a small pool of separate connections (WAL readers do not block the writer) on
//! tokio's blocking pool.
//!
//! One process per data directory: two writers would hand out the same revisions.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicI64, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::thread::JoinHandle;
use std::time::Duration;

use bytes::Bytes;
use futures::stream::BoxStream;
use parking_lot::Mutex;
use rusqlite::{params, Connection, OptionalExtension, TransactionBehavior};
use tokio::sync::{broadcast, oneshot};

use crate::{prefix_end, Backend, Event, EventType, KeyValue, Revision, StoreError};

const KIND_PUT: i64 = 0;
const KIND_DELETE: i64 = 1;
/// Batch size from which the writer takes concurrent writers to be present.
pub const LINGER_AFTER: usize = 4;

/// Tuning knobs for [`SqliteBackend::open_with`].
#[derive(Clone, Debug)]
pub struct SqliteOptions {
    /// Most writes committed in one transaction.
    pub max_batch: usize,
    /// How long the writer waits for more writes once the previous batch showed
    /// concurrent writers (≥ [`LINGER_AFTER`] ops): a commit costs ~0.1 ms of CPU plus
    /// an fsync whatever its size, so under load fewer, larger batches leave more CPU
    /// for serving. A lone writer never waits.
    pub linger: Duration,
    /// Read connections (concurrent `get`/`list`/`events_since`).
    pub readers: usize,
    /// Events a live watcher may fall behind before it is closed with `WatcherLagged`.
    pub watch_buffer: usize,
}

impl Default for SqliteOptions {
    fn default() -> Self {
        SqliteOptions {
            max_batch: 512,
            linger: Duration::from_micros(300),
            readers: 4,
            watch_buffer: 32 * 1024,
        }
    }
}

pub struct SqliteBackend {
    path: PathBuf,
    /// `None` only while dropping (closing it stops the writer thread).
    writes: Option<mpsc::Sender<WriteRequest>>,
    writer: Option<JoinHandle<()>>,
    readers: Arc<ReaderPool>,
    events: broadcast::Sender<Event>,
    counters: Arc<Counters>,
}

/// Revisions as of the last commit, published by the writer before it acknowledges.
#[derive(Default)]
struct Counters {
    revision: AtomicI64,
    compacted: AtomicI64,
}

enum Op {
    Create {
        key: String,
        value: Bytes,
    },
    Update {
        key: String,
        value: Bytes,
        expected: Revision,
    },
    Delete {
        key: String,
        expected: Option<Revision>,
    },
    Compact {
        revision: Revision,
    },
}

enum Reply {
    Written(Revision),
    Deleted(Revision, KeyValue),
    Compacted,
}

struct WriteRequest {
    op: Op,
    reply: oneshot::Sender<Result<Reply, StoreError>>,
}

fn db_err(e: rusqlite::Error) -> StoreError {
    StoreError::Backend(format!("sqlite: {e}"))
}

impl SqliteBackend {
    /// Opens (creating if needed) `<data_dir>/store.db` with default options.
    pub fn open(data_dir: &Path) -> Result<Arc<SqliteBackend>, StoreError> {
        Self::open_with(data_dir, SqliteOptions::default())
    }

    /// Opens (creating if needed) `<data_dir>/store.db`. Needs no tokio runtime itself, but
    /// the `Backend` methods must be called from one (reads use `spawn_blocking`).
    pub fn open_with(
        data_dir: &Path,
        options: SqliteOptions,
    ) -> Result<Arc<SqliteBackend>, StoreError> {
        std::fs::create_dir_all(data_dir)
            .map_err(|e| StoreError::Backend(format!("creating {}: {e}", data_dir.display())))?;
        let path = data_dir.join("store.db");
        let conn = open_writer(&path).map_err(db_err)?;
        let (revision, compacted) = load_revisions(&conn).map_err(db_err)?;
        let counters = Arc::new(Counters {
            revision: AtomicI64::new(revision),
            compacted: AtomicI64::new(compacted),
        });

        let mut readers = Vec::new();
        for _ in 0..options.readers.max(1) {
            readers.push(Mutex::new(open_reader(&path).map_err(db_err)?));
        }
        let readers = Arc::new(ReaderPool {
            conns: readers,
            next: AtomicUsize::new(0),
        });

        let (events, _) = broadcast::channel(options.watch_buffer.max(1));
        let (writes, rx) = mpsc::channel();
        let writer = Writer {
            conn,
            rx,
            events: events.clone(),
            counters: counters.clone(),
            revision,
            compacted,
            max_batch: options.max_batch.max(1),
            linger: options.linger,
        };
        let writer = std::thread::Builder::new()
            .name("cairn-store-writer".into())
            .spawn(move || writer.run())
            .map_err(|e| StoreError::Backend(format!("spawning writer thread: {e}")))?;
        tracing::info!(path = %path.display(), revision, compacted, "opened sqlite store");
        Ok(Arc::new(SqliteBackend {
            path,
            writes: Some(writes),
            writer: Some(writer),
            readers,
            events,
            counters,
        }))
    }

    /// Path of the database file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    async fn write(&self, op: Op) -> Result<Reply, StoreError> {
        let (reply, rx) = oneshot::channel();
        self.writes
            .as_ref()
            .ok_or(StoreError::Closed)?
            .send(WriteRequest { op, reply })
            .map_err(|_| StoreError::Closed)?;
        rx.await.map_err(|_| StoreError::Closed)?
    }

    async fn read<T, F>(&self, f: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: FnOnce(&mut Connection) -> Result<T, StoreError> + Send + 'static,
    {
        read_blocking(self.readers.clone(), f).await
    }
}

impl Drop for SqliteBackend {
    fn drop(&mut self) {
        // Closing the channel lets the writer finish what is queued and exit; joining makes
        // "drop then reopen" see every write and the connection closed.
        self.writes.take();
        if let Some(writer) = self.writer.take() {
            if writer.join().is_err() {
                tracing::error!("sqlite writer thread panicked");
            }
        }
    }
}

/// An exclusive lock on a data directory's store, held by the server using it: a second
/// server, or a restore, on the same directory is refused instead of corrupting it.
pub struct DataDirLock(#[allow(dead_code)] std::fs::File);

impl DataDirLock {
    pub fn take(data_dir: &Path) -> Result<DataDirLock, StoreError> {
        let path = data_dir.join("store.lock");
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .map_err(|e| StoreError::Backend(format!("opening {}: {e}", path.display())))?;
        match file.try_lock() {
            Ok(()) => Ok(DataDirLock(file)),
            Err(std::fs::TryLockError::WouldBlock) => Err(StoreError::Backend(format!(
                "the store in {} is in use by another process (is cairn-control running?)",
                data_dir.display()
            ))),
            Err(std::fs::TryLockError::Error(e)) => Err(StoreError::Backend(format!(
                "locking {}: {e}",
                path.display()
            ))),
        }
    }
}

/// `PRAGMA auto_vacuum` = INCREMENTAL.
const INCREMENTAL_VACUUM: i64 = 2;

fn open_writer(path: &Path) -> rusqlite::Result<Connection> {
    let conn = Connection::open(path)?;
    conn.busy_timeout(Duration::from_secs(5))?;
    // Incremental auto-vacuum, so that space freed by compaction goes back to the file
    // system (kine's SQLite grows for ever: kine#607). Set before the first table on a
    // new file; an older file is rebuilt once with VACUUM to take it.
    let auto_vacuum: i64 = conn.query_row("PRAGMA auto_vacuum", [], |r| r.get(0))?;
    if auto_vacuum != INCREMENTAL_VACUUM {
        conn.pragma_update(None, "auto_vacuum", INCREMENTAL_VACUUM)?;
        conn.execute_batch("VACUUM")?;
    }
    let mode: String = conn.query_row("PRAGMA journal_mode=WAL", [], |r| r.get(0))?;
    if !mode.eq_ignore_ascii_case("wal") {
        tracing::warn!(mode, "sqlite refused WAL journal mode");
    }
    // FULL: a commit returns only after the WAL is fsynced, which is what "acknowledged"
    // promises. NORMAL would lose the last commits on power loss.
    conn.pragma_update(None, "synchronous", "FULL")?;
    conn.execute_batch(
        "CREATE TABLE IF NOT EXISTS kv (
             key TEXT PRIMARY KEY,
             value BLOB NOT NULL,
             create_rev INTEGER NOT NULL,
             mod_rev INTEGER NOT NULL
         );
         CREATE TABLE IF NOT EXISTS log (
             rev INTEGER PRIMARY KEY,
             key TEXT NOT NULL,
             kind INTEGER NOT NULL,
             value BLOB NOT NULL,
             create_rev INTEGER NOT NULL
         );
         CREATE TABLE IF NOT EXISTS meta (
             name TEXT PRIMARY KEY,
             value INTEGER NOT NULL
         );",
    )?;
    Ok(conn)
}

fn open_reader(path: &Path) -> rusqlite::Result<Connection> {
    let conn = Connection::open(path)?;
    conn.busy_timeout(Duration::from_secs(5))?;
    conn.pragma_update(None, "query_only", true)?;
    Ok(conn)
}

fn meta(conn: &Connection, name: &str) -> rusqlite::Result<Revision> {
    Ok(conn
        .prepare_cached("SELECT value FROM meta WHERE name = ?1")?
        .query_row([name], |r| r.get(0))
        .optional()?
        .unwrap_or(0))
}

fn set_meta(conn: &Connection, name: &str, value: Revision) -> rusqlite::Result<()> {
    conn.prepare_cached(
        "INSERT INTO meta (name, value) VALUES (?1, ?2)
         ON CONFLICT (name) DO UPDATE SET value = excluded.value",
    )?
    .execute(params![name, value])?;
    Ok(())
}

/// The last assigned and the compacted revision. `revision` is also derived from the
/// tables in case `meta` lags them (it never should: all are written in one transaction).
fn load_revisions(conn: &Connection) -> rusqlite::Result<(Revision, Revision)> {
    let stored = meta(conn, "revision")?;
    let log: Revision =
        conn.query_row("SELECT COALESCE(MAX(rev), 0) FROM log", [], |r| r.get(0))?;
    let kv: Revision =
        conn.query_row("SELECT COALESCE(MAX(mod_rev), 0) FROM kv", [], |r| r.get(0))?;
    let compacted = meta(conn, "compacted")?;
    Ok((stored.max(log).max(kv).max(compacted), compacted))
}

#[async_trait::async_trait]
impl Backend for SqliteBackend {
    async fn get(&self, key: &str) -> Result<Option<KeyValue>, StoreError> {
        let key = key.to_string();
        self.read(move |conn| {
            conn.prepare_cached("SELECT key, value, create_rev, mod_rev FROM kv WHERE key = ?1")
                .and_then(|mut s| s.query_row([&key], kv_from_row).optional())
                .map_err(db_err)
        })
        .await
    }

    async fn list(&self, prefix: &str) -> Result<(Vec<KeyValue>, Revision), StoreError> {
        let prefix = prefix.to_string();
        self.read(move |conn| {
            // The revision is read in the same snapshot as the rows it describes.
            let tx = conn.transaction().map_err(db_err)?;
            let items = list_in(&tx, &prefix).map_err(db_err)?;
            let revision = meta(&tx, "revision").map_err(db_err)?;
            Ok((items, revision))
        })
        .await
    }

    async fn create(&self, key: &str, value: Bytes) -> Result<Revision, StoreError> {
        match self
            .write(Op::Create {
                key: key.to_string(),
                value,
            })
            .await?
        {
            Reply::Written(rev) => Ok(rev),
            _ => Err(StoreError::Backend("unexpected reply to create".into())),
        }
    }

    async fn update(
        &self,
        key: &str,
        value: Bytes,
        expected_mod_revision: Revision,
    ) -> Result<Revision, StoreError> {
        match self
            .write(Op::Update {
                key: key.to_string(),
                value,
                expected: expected_mod_revision,
            })
            .await?
        {
            Reply::Written(rev) => Ok(rev),
            _ => Err(StoreError::Backend("unexpected reply to update".into())),
        }
    }

    async fn delete(
        &self,
        key: &str,
        expected_mod_revision: Option<Revision>,
    ) -> Result<(Revision, KeyValue), StoreError> {
        match self
            .write(Op::Delete {
                key: key.to_string(),
                expected: expected_mod_revision,
            })
            .await?
        {
            Reply::Deleted(rev, kv) => Ok((rev, kv)),
            _ => Err(StoreError::Backend("unexpected reply to delete".into())),
        }
    }

    async fn events_since(&self, prefix: &str, after: Revision) -> Result<Vec<Event>, StoreError> {
        let prefix = prefix.to_string();
        self.read(move |conn| events_since_in(conn, &prefix, after))
            .await
    }

    fn watch(
        &self,
        prefix: &str,
        after: Revision,
    ) -> BoxStream<'static, Result<Event, StoreError>> {
        // Subscribe now, read the log later: anything committed after the log snapshot is
        // published after this subscription, so there is no gap.
        let rx = self.events.subscribe();
        let readers = self.readers.clone();
        let owned = prefix.to_string();
        let backlog = async move {
            read_blocking(readers, move |conn| events_since_in(conn, &owned, after)).await
        };
        crate::watch::log_then_live(rx, prefix.to_string(), after, backlog)
    }

    async fn compact(&self, revision: Revision) -> Result<(), StoreError> {
        match self.write(Op::Compact { revision }).await? {
            Reply::Compacted => Ok(()),
            _ => Err(StoreError::Backend("unexpected reply to compact".into())),
        }
    }

    async fn current_revision(&self) -> Result<Revision, StoreError> {
        Ok(self.counters.revision.load(Ordering::SeqCst))
    }

    async fn compacted_revision(&self) -> Result<Revision, StoreError> {
        Ok(self.counters.compacted.load(Ordering::SeqCst))
    }
}

mod reads;
pub mod snapshot;
mod writer;

use reads::*;
use writer::*;

#[cfg(test)]
mod tests;
