//! Snapshots of the embedded store. `save` writes a consistent copy while the server runs
//! (SQLite's `VACUUM INTO`, one read transaction). `restore` puts a copy in place of a
//! stopped server's store with its revision bumped and everything before compacted, as
//! `etcdutl snapshot restore --bump-revision --mark-compacted` does, so resourceVersions
//! never go back for clients and their watches relist (410 Gone).

use std::path::Path;

use rusqlite::{Connection, OpenFlags};

use super::{load_revisions, set_meta, DataDirLock};
use crate::{Revision, StoreError};

fn error(what: &str, path: &Path, e: impl std::fmt::Display) -> StoreError {
    StoreError::Backend(format!("{what} {}: {e}", path.display()))
}

/// Writes a copy of `data_dir`'s store to `dest` (which must not exist); returns the
/// revision it holds.
pub fn save(data_dir: &Path, dest: &Path) -> Result<Revision, StoreError> {
    let db = data_dir.join("store.db");
    if !db.exists() {
        return Err(error("no store at", &db, "missing"));
    }
    if dest.exists() {
        return Err(error("snapshot", dest, "already exists"));
    }
    let conn = Connection::open_with_flags(&db, OpenFlags::SQLITE_OPEN_READ_ONLY)
        .map_err(|e| error("opening", &db, e))?;
    conn.busy_timeout(std::time::Duration::from_secs(5))
        .map_err(|e| error("opening", &db, e))?;
    let dest_text = dest.to_string_lossy();
    conn.execute("VACUUM INTO ?1", [dest_text.as_ref()])
        .map_err(|e| error("writing the snapshot", dest, e))?;
    let copy = open_snapshot(dest)?;
    let (revision, _) = load_revisions(&copy).map_err(|e| error("reading", dest, e))?;
    Ok(revision)
}

fn open_snapshot(path: &Path) -> Result<Connection, StoreError> {
    let conn = Connection::open(path).map_err(|e| error("opening", path, e))?;
    let tables: i64 = conn
        .query_row(
            "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name IN ('kv', 'log', 'meta')",
            [],
            |r| r.get(0),
        )
        .map_err(|_| error("snapshot", path, "is not a SQLite database"))?;
    if tables != 3 {
        return Err(error("snapshot", path, "is not a cairn store snapshot"));
    }
    Ok(conn)
}

/// Replaces `data_dir`'s store with `snapshot`, its revision raised by `bump` and compacted
/// up to there; returns the new revision. Refuses while a server has the store open.
pub fn restore(snapshot: &Path, data_dir: &Path, bump: Revision) -> Result<Revision, StoreError> {
    std::fs::create_dir_all(data_dir).map_err(|e| error("creating", data_dir, e))?;
    let _lock = DataDirLock::take(data_dir)?;
    let staged = data_dir.join("store.db.restoring");
    std::fs::copy(snapshot, &staged).map_err(|e| error("copying", snapshot, e))?;
    let restored = (|| {
        let conn = open_snapshot(&staged)?;
        let (revision, _) = load_revisions(&conn).map_err(|e| error("reading", &staged, e))?;
        let bumped = revision.saturating_add(bump.max(0));
        let mark = || -> rusqlite::Result<()> {
            conn.execute("DELETE FROM log", [])?;
            set_meta(&conn, "revision", bumped)?;
            set_meta(&conn, "compacted", bumped)
        };
        mark().map_err(|e| error("bumping the revision of", &staged, e))?;
        Ok(bumped)
    })();
    let bumped = match restored {
        Ok(bumped) => bumped,
        Err(e) => {
            let _ = std::fs::remove_file(&staged);
            return Err(e);
        }
    };
    for stale in ["store.db-wal", "store.db-shm"] {
        match std::fs::remove_file(data_dir.join(stale)) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                return Err(error("removing", &data_dir.join(stale), e))
            }
            _ => {}
        }
    }
    let db = data_dir.join("store.db");
    std::fs::rename(&staged, &db).map_err(|e| error("replacing", &db, e))?;
    Ok(bumped)
}
