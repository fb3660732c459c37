//! The one writer thread: batches queued writes into one transaction (group commit) and
//! applies creates, updates and deletes with their revisions and log entries.

use super::*;

pub(super) struct Writer {
    pub(super) conn: Connection,
    pub(super) rx: mpsc::Receiver<WriteRequest>,
    pub(super) events: broadcast::Sender<Event>,
    pub(super) counters: Arc<Counters>,
    /// Last committed revision.
    pub(super) revision: Revision,
    pub(super) compacted: Revision,
    pub(super) max_batch: usize,
    pub(super) linger: Duration,
}

/// What a batch wants done after a successful commit.
struct Applied {
    results: Vec<Result<Reply, StoreError>>,
    events: Vec<Event>,
    revision: Revision,
    compacted: Revision,
}

impl Writer {
    pub(super) fn run(mut self) {
        // Blocks for the first op, then takes whatever queued up meanwhile: while one batch
        // is fsyncing, the next one accumulates.
        let mut last_batch = 0;
        while let Ok(first) = self.rx.recv() {
            let mut batch = vec![first];
            self.drain(&mut batch);
            if last_batch >= LINGER_AFTER && batch.len() < self.max_batch {
                self.linger(&mut batch);
            }
            last_batch = batch.len();
            self.run_batch(batch);
        }
        tracing::debug!("sqlite writer stopped");
    }

    fn drain(&self, batch: &mut Vec<WriteRequest>) {
        while batch.len() < self.max_batch {
            match self.rx.try_recv() {
                Ok(req) => batch.push(req),
                Err(_) => break,
            }
        }
    }

    /// Collects more ops until `linger` passed or the batch is full.
    fn linger(&self, batch: &mut Vec<WriteRequest>) {
        let deadline = std::time::Instant::now() + self.linger;
        while batch.len() < self.max_batch {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            match self.rx.recv_timeout(left) {
                Ok(req) => batch.push(req),
                Err(_) => break,
            }
        }
    }

    fn run_batch(&mut self, batch: Vec<WriteRequest>) {
        let (ops, replies): (Vec<Op>, Vec<_>) = batch.into_iter().map(|r| (r.op, r.reply)).unzip();
        match self.apply(&ops) {
            Ok(applied) => {
                if applied.compacted > self.compacted {
                    self.reclaim();
                }
                self.revision = applied.revision;
                self.compacted = applied.compacted;
                self.counters
                    .revision
                    .store(applied.revision, Ordering::SeqCst);
                self.counters
                    .compacted
                    .store(applied.compacted, Ordering::SeqCst);
                for event in applied.events {
                    // Err only means nobody is watching.
                    let _ = self.events.send(event);
                }
                for (reply, result) in replies.into_iter().zip(applied.results) {
                    // The caller may have given up waiting; the write stands regardless.
                    let _ = reply.send(result);
                }
            }
            Err(e) => {
                // The transaction was rolled back: nothing of this batch happened.
                tracing::error!(error = %e, ops = replies.len(), "sqlite write batch failed");
                for reply in replies {
                    let _ = reply.send(Err(StoreError::Backend(format!("sqlite: {e}"))));
                }
            }
        }
    }

    /// Gives the pages compaction freed back to the file system: truncates them off the
    /// database, then checkpoints the WAL so the file shrinks now, not at the next
    /// automatic checkpoint (it waits for running reads, at most the busy timeout, once
    /// per compaction). A failure only leaves the space for later.
    fn reclaim(&self) {
        // Each step of the pragma frees pages: it is stepped to the end, not run once.
        let reclaimed = step_to_end(&self.conn, "PRAGMA incremental_vacuum")
            .and_then(|()| step_to_end(&self.conn, "PRAGMA wal_checkpoint(TRUNCATE)"));
        if let Err(e) = reclaimed {
            tracing::warn!(error = %e, "sqlite: reclaiming compacted space");
        }
    }

    /// Runs `ops` in one transaction and commits. A SQL error anywhere aborts the batch
    /// (an op may have been half applied); precondition failures only fail their op.
    fn apply(&mut self, ops: &[Op]) -> rusqlite::Result<Applied> {
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)?;
        let mut revision = self.revision;
        let mut compacted = self.compacted;
        let mut results = Vec::with_capacity(ops.len());
        let mut events = Vec::with_capacity(ops.len());
        for op in ops {
            let result = match op {
                Op::Create { key, value } => {
                    create(&tx, key, value, revision + 1)?.map(|e| (Reply::Written(e.revision), e))
                }
                Op::Update {
                    key,
                    value,
                    expected,
                } => update(&tx, key, value, *expected, revision + 1)?
                    .map(|e| (Reply::Written(e.revision), e)),
                Op::Delete { key, expected } => delete(&tx, key, *expected, revision + 1)?,
                Op::Compact { revision: target } => {
                    // Never past what exists, so `compacted <= revision` always holds.
                    let target = (*target).min(revision);
                    if target > compacted {
                        tx.prepare_cached("DELETE FROM log WHERE rev <= ?1")?
                            .execute([target])?;
                        set_meta(&tx, "compacted", target)?;
                        compacted = target;
                    }
                    results.push(Ok(Reply::Compacted));
                    continue;
                }
            };
            match result {
                Ok((reply, event)) => {
                    revision = event.revision;
                    events.push(event);
                    results.push(Ok(reply));
                }
                Err(e) => results.push(Err(e)),
            }
        }
        if revision != self.revision {
            set_meta(&tx, "revision", revision)?;
        }
        tx.commit()?;
        Ok(Applied {
            results,
            events,
            revision,
            compacted,
        })
    }
}

/// Runs `sql` through every row it yields.
fn step_to_end(conn: &Connection, sql: &str) -> rusqlite::Result<()> {
    let mut statement = conn.prepare(sql)?;
    let mut rows = statement.query([])?;
    while rows.next()?.is_some() {}
    Ok(())
}

pub(super) struct Current {
    value: Vec<u8>,
    create_rev: Revision,
    mod_rev: Revision,
}

pub(super) fn current(conn: &Connection, key: &str) -> rusqlite::Result<Option<Current>> {
    conn.prepare_cached("SELECT value, create_rev, mod_rev FROM kv WHERE key = ?1")?
        .query_row([key], |r| {
            Ok(Current {
                value: r.get(0)?,
                create_rev: r.get(1)?,
                mod_rev: r.get(2)?,
            })
        })
        .optional()
}

fn append_log(
    conn: &Connection,
    rev: Revision,
    key: &str,
    kind: i64,
    value: &[u8],
    create_rev: Revision,
) -> rusqlite::Result<()> {
    conn.prepare_cached(
        "INSERT INTO log (rev, key, kind, value, create_rev) VALUES (?1, ?2, ?3, ?4, ?5)",
    )?
    .execute(params![rev, key, kind, value, create_rev])?;
    Ok(())
}

type OpResult<T> = rusqlite::Result<Result<T, StoreError>>;

fn create(conn: &Connection, key: &str, value: &Bytes, rev: Revision) -> OpResult<Event> {
    let exists = conn
        .prepare_cached("SELECT 1 FROM kv WHERE key = ?1")?
        .exists([key])?;
    if exists {
        return Ok(Err(StoreError::AlreadyExists {
            key: key.to_string(),
        }));
    }
    conn.prepare_cached(
        "INSERT INTO kv (key, value, create_rev, mod_rev) VALUES (?1, ?2, ?3, ?3)",
    )?
    .execute(params![key, value.as_ref(), rev])?;
    append_log(conn, rev, key, KIND_PUT, value, rev)?;
    Ok(Ok(Event {
        kind: EventType::Put,
        key: key.to_string(),
        revision: rev,
        value: value.clone(),
        create_revision: rev,
    }))
}

fn update(
    conn: &Connection,
    key: &str,
    value: &Bytes,
    expected: Revision,
    rev: Revision,
) -> OpResult<Event> {
    let revs = conn
        .prepare_cached("SELECT create_rev, mod_rev FROM kv WHERE key = ?1")?
        .query_row([key], |r| {
            Ok((r.get::<_, Revision>(0)?, r.get::<_, Revision>(1)?))
        })
        .optional()?;
    let Some((create_rev, mod_rev)) = revs else {
        return Ok(Err(StoreError::NotFound {
            key: key.to_string(),
        }));
    };
    if mod_rev != expected {
        return Ok(Err(StoreError::Conflict {
            key: key.to_string(),
            expected,
            actual: mod_rev,
        }));
    }
    conn.prepare_cached("UPDATE kv SET value = ?2, mod_rev = ?3 WHERE key = ?1")?
        .execute(params![key, value.as_ref(), rev])?;
    append_log(conn, rev, key, KIND_PUT, value, create_rev)?;
    Ok(Ok(Event {
        kind: EventType::Put,
        key: key.to_string(),
        revision: rev,
        value: value.clone(),
        create_revision: create_rev,
    }))
}

fn delete(
    conn: &Connection,
    key: &str,
    expected: Option<Revision>,
    rev: Revision,
) -> OpResult<(Reply, Event)> {
    let Some(cur) = current(conn, key)? else {
        return Ok(Err(StoreError::NotFound {
            key: key.to_string(),
        }));
    };
    if let Some(expected) = expected {
        if cur.mod_rev != expected {
            return Ok(Err(StoreError::Conflict {
                key: key.to_string(),
                expected,
                actual: cur.mod_rev,
            }));
        }
    }
    conn.prepare_cached("DELETE FROM kv WHERE key = ?1")?
        .execute([key])?;
    append_log(conn, rev, key, KIND_DELETE, &cur.value, cur.create_rev)?;
    let value = Bytes::from(cur.value);
    let removed = KeyValue {
        key: key.to_string(),
        value: value.clone(),
        create_revision: cur.create_rev,
        mod_revision: cur.mod_rev,
    };
    let event = Event {
        kind: EventType::Delete,
        key: key.to_string(),
        revision: rev,
        value,
        create_revision: cur.create_rev,
    };
    Ok(Ok((Reply::Deleted(rev, removed), event)))
}
