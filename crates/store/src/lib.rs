//! Storage for cairn-control.
//!
//! Two layers, modelled on the Kubernetes apiserver's storage:
//! - [`Backend`]: the durable key/value store with a global revision counter, prefix
//!   listing, conditional writes, an event log readable from a revision, and compaction.
//!   Shaped after etcd v3 so an etcd backend can sit behind the same trait.
//!   [`sqlite::SqliteBackend`] is the embedded default.
//! - [`cache::WatchCache`]: an in-memory copy of every object plus a window of recent
//!   events, fed by [`Backend::watch`]. It serves lists and gets without touching the
//!   backend and fans events out to any number of watchers.

pub mod cache;
pub mod memory;
pub mod sqlite;

#[cfg(any(test, feature = "conformance"))]
pub mod conformance;
mod watch;

use bytes::Bytes;
use futures::stream::BoxStream;

/// A store revision: strictly increasing, one per committed write (like etcd's).
pub type Revision = i64;

/// One live key with its value and revisions.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyValue {
    pub key: String,
    pub value: Bytes,
    /// Revision of the write that created the key (stays fixed across updates).
    pub create_revision: Revision,
    /// Revision of the last write to the key.
    pub mod_revision: Revision,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventType {
    Put,
    Delete,
}

/// One committed change, as found in the event log and delivered by [`Backend::watch`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Event {
    pub kind: EventType,
    pub key: String,
    /// The revision of this change.
    pub revision: Revision,
    /// For `Put`: the new value. For `Delete`: the value the key had when it was deleted.
    pub value: Bytes,
    /// Create revision of the key (for `Put`, equals `revision` when the key is new).
    pub create_revision: Revision,
}

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("key {key} not found")]
    NotFound { key: String },
    #[error("key {key} already exists")]
    AlreadyExists { key: String },
    #[error("key {key} was modified: expected revision {expected}, found {actual}")]
    Conflict {
        key: String,
        expected: Revision,
        actual: Revision,
    },
    #[error("revision {requested} has been compacted (oldest available is {compacted})")]
    Compacted {
        requested: Revision,
        compacted: Revision,
    },
    #[error("watcher fell too far behind and was closed")]
    WatcherLagged,
    #[error("store backend error: {0}")]
    Backend(String),
    #[error("store is shut down")]
    Closed,
}

/// The durable store. Every method that writes returns only after the write is durable.
#[async_trait::async_trait]
pub trait Backend: Send + Sync + 'static {
    /// The live value of `key`, if any.
    async fn get(&self, key: &str) -> Result<Option<KeyValue>, StoreError>;

    /// Every live key starting with `prefix`, sorted by key, and the revision the listing reflects.
    async fn list(&self, prefix: &str) -> Result<(Vec<KeyValue>, Revision), StoreError>;

    /// Creates `key`; fails with `AlreadyExists` if it is live. Returns the new revision.
    async fn create(&self, key: &str, value: Bytes) -> Result<Revision, StoreError>;

    /// Replaces `key` only if its mod revision is `expected_mod_revision`
    /// (`Conflict` otherwise, `NotFound` if absent). Returns the new revision.
    async fn update(
        &self,
        key: &str,
        value: Bytes,
        expected_mod_revision: Revision,
    ) -> Result<Revision, StoreError>;

    /// Deletes `key`, only if its mod revision matches when one is given.
    /// Returns the revision of the delete and the value that was removed.
    async fn delete(
        &self,
        key: &str,
        expected_mod_revision: Option<Revision>,
    ) -> Result<(Revision, KeyValue), StoreError>;

    /// The events under `prefix` with revision > `after`, oldest first.
    /// `Compacted` when `after` is older than what the log still holds.
    async fn events_since(&self, prefix: &str, after: Revision) -> Result<Vec<Event>, StoreError>;

    /// Every event under `prefix` with revision > `after`: first what the log holds, then
    /// live ones as they commit, in revision order without gaps or duplicates.
    fn watch(&self, prefix: &str, after: Revision)
        -> BoxStream<'static, Result<Event, StoreError>>;

    /// Drops log entries at or below `revision` (live keys are kept).
    async fn compact(&self, revision: Revision) -> Result<(), StoreError>;

    /// The revision of the last committed write (0 for an empty store).
    async fn current_revision(&self) -> Result<Revision, StoreError>;

    /// The newest revision that has been compacted away (0 if none).
    async fn compacted_revision(&self) -> Result<Revision, StoreError>;
}

/// The smallest string greater than every string that starts with `prefix`, or `None`
/// when no such bound exists (empty prefix, or only `char::MAX`).
///
/// Used to turn a prefix into a half-open key range `[prefix, end)`: UTF-8 byte order equals
/// code point order, so bumping the last char gives an exact bound (unlike `LIKE`, which
/// would treat `_` and `%` in keys as wildcards).
pub fn prefix_end(prefix: &str) -> Option<String> {
    let mut chars: Vec<char> = prefix.chars().collect();
    while let Some(last) = chars.pop() {
        let next = match last as u32 {
            // Skip the surrogate gap, which has no `char`s.
            0xD7FF => Some('\u{E000}'),
            n => char::from_u32(n + 1),
        };
        if let Some(next) = next {
            chars.push(next);
            return Some(chars.into_iter().collect());
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::prefix_end;

    #[test]
    fn prefix_end_bounds_exactly_the_prefix() {
        assert_eq!(prefix_end(""), None);
        assert_eq!(prefix_end("/a/b/").as_deref(), Some("/a/b0"));
        assert_eq!(prefix_end("a\u{D7FF}").as_deref(), Some("a\u{E000}"));
        assert_eq!(prefix_end("a\u{10FFFF}").as_deref(), Some("b"));
        assert_eq!(prefix_end("\u{10FFFF}"), None);
        let end = prefix_end("/a/b/").unwrap();
        for key in ["/a/b/", "/a/b/c", "/a/b/\u{10FFFF}"] {
            assert!(key >= "/a/b/" && key < end.as_str(), "{key}");
        }
        for key in ["/a/b", "/a/bc", "/a/b0"] {
            assert!(!(key >= "/a/b/" && key < end.as_str()), "{key}");
        }
    }
}
