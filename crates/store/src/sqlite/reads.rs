//! Reads on a pool of reader connections beside the writer: gets, lists, events.

use super::*;

/// Read connections; a read takes any idle one (or waits for one).
pub(super) struct ReaderPool {
    pub(super) conns: Vec<Mutex<Connection>>,
    pub(super) next: AtomicUsize,
}

impl ReaderPool {
    fn with<T>(&self, f: impl FnOnce(&mut Connection) -> T) -> T {
        let n = self.conns.len();
        let start = self.next.fetch_add(1, Ordering::Relaxed) % n;
        for i in 0..n {
            if let Some(mut conn) = self.conns[(start + i) % n].try_lock() {
                return f(&mut conn);
            }
        }
        f(&mut self.conns[start].lock())
    }
}

pub(super) async fn read_blocking<T, F>(pool: Arc<ReaderPool>, f: F) -> Result<T, StoreError>
where
    T: Send + 'static,
    F: FnOnce(&mut Connection) -> Result<T, StoreError> + Send + 'static,
{
    tokio::task::spawn_blocking(move || pool.with(f))
        .await
        .map_err(|e| StoreError::Backend(format!("read task failed: {e}")))?
}

pub(super) fn kv_from_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<KeyValue> {
    Ok(KeyValue {
        key: r.get(0)?,
        value: Bytes::from(r.get::<_, Vec<u8>>(1)?),
        create_revision: r.get(2)?,
        mod_revision: r.get(3)?,
    })
}

pub(super) fn list_in(conn: &Connection, prefix: &str) -> rusqlite::Result<Vec<KeyValue>> {
    let mut out = Vec::new();
    match prefix_end(prefix) {
        Some(end) => {
            let mut stmt = conn.prepare_cached(
                "SELECT key, value, create_rev, mod_rev FROM kv
                 WHERE key >= ?1 AND key < ?2 ORDER BY key",
            )?;
            for kv in stmt.query_map(params![prefix, end], kv_from_row)? {
                out.push(kv?);
            }
        }
        None => {
            let mut stmt = conn.prepare_cached(
                "SELECT key, value, create_rev, mod_rev FROM kv WHERE key >= ?1 ORDER BY key",
            )?;
            for kv in stmt.query_map([prefix], kv_from_row)? {
                out.push(kv?);
            }
        }
    }
    Ok(out)
}

pub(super) fn event_from_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<Event> {
    let kind: i64 = r.get(2)?;
    Ok(Event {
        revision: r.get(0)?,
        key: r.get(1)?,
        kind: if kind == KIND_DELETE {
            EventType::Delete
        } else {
            EventType::Put
        },
        value: Bytes::from(r.get::<_, Vec<u8>>(3)?),
        create_revision: r.get(4)?,
    })
}

pub(super) fn events_since_in(
    conn: &mut Connection,
    prefix: &str,
    after: Revision,
) -> Result<Vec<Event>, StoreError> {
    // One read transaction: the compaction check and the log read see the same snapshot.
    let tx = conn.transaction().map_err(db_err)?;
    let compacted = meta(&tx, "compacted").map_err(db_err)?;
    if after < compacted {
        return Err(StoreError::Compacted {
            requested: after,
            compacted,
        });
    }
    let mut out = Vec::new();
    let mut push = |row: rusqlite::Result<Event>| -> Result<(), StoreError> {
        out.push(row.map_err(db_err)?);
        Ok(())
    };
    match prefix_end(prefix) {
        Some(end) => {
            let mut stmt = tx
                .prepare_cached(
                    "SELECT rev, key, kind, value, create_rev FROM log
                     WHERE rev > ?1 AND key >= ?2 AND key < ?3 ORDER BY rev",
                )
                .map_err(db_err)?;
            for row in stmt
                .query_map(params![after, prefix, end], event_from_row)
                .map_err(db_err)?
            {
                push(row)?;
            }
        }
        None => {
            let mut stmt = tx
                .prepare_cached(
                    "SELECT rev, key, kind, value, create_rev FROM log
                     WHERE rev > ?1 AND key >= ?2 ORDER BY rev",
                )
                .map_err(db_err)?;
            for row in stmt
                .query_map(params![after, prefix], event_from_row)
                .map_err(db_err)?
            {
                push(row)?;
            }
        }
    }
    Ok(out)
}
