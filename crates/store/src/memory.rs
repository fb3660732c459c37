//! In-memory [`Backend`] with the same semantics as the SQLite one. Nothing is durable;
//! meant as the fake in unit tests of other crates.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;

use bytes::Bytes;
use futures::stream::BoxStream;
use parking_lot::Mutex;
use tokio::sync::broadcast;

use crate::{Backend, Event, EventType, KeyValue, Revision, StoreError};

/// Default number of events a live watcher may fall behind before it is closed.
pub const DEFAULT_WATCH_BUFFER: usize = 16 * 1024;

pub struct MemoryBackend {
    state: Mutex<State>,
    events: broadcast::Sender<Event>,
}

#[derive(Default)]
struct State {
    kv: BTreeMap<String, KeyValue>,
    /// Every event with revision > `compacted`, oldest first.
    log: VecDeque<Event>,
    revision: Revision,
    compacted: Revision,
}

impl State {
    fn events_since(&self, prefix: &str, after: Revision) -> Result<Vec<Event>, StoreError> {
        if after < self.compacted {
            return Err(StoreError::Compacted {
                requested: after,
                compacted: self.compacted,
            });
        }
        // The log is sorted by revision, so skip straight to the first one after `after`.
        let start = self.log.partition_point(|e| e.revision <= after);
        Ok(self
            .log
            .range(start..)
            .filter(|e| e.key.starts_with(prefix))
            .cloned()
            .collect())
    }
}

impl MemoryBackend {
    pub fn new() -> Arc<MemoryBackend> {
        Self::with_watch_buffer(DEFAULT_WATCH_BUFFER)
    }

    /// Like [`MemoryBackend::new`], with `watch_buffer` events of slack per live watcher.
    pub fn with_watch_buffer(watch_buffer: usize) -> Arc<MemoryBackend> {
        let (events, _) = broadcast::channel(watch_buffer.max(1));
        Arc::new(MemoryBackend {
            state: Mutex::new(State::default()),
            events,
        })
    }

    /// Appends `event` (whose revision is `state.revision + 1`) and publishes it.
    /// Called with the state lock held so the broadcast sees events in revision order.
    fn commit(&self, state: &mut State, event: Event) {
        state.revision = event.revision;
        state.log.push_back(event.clone());
        // No receivers is fine: nobody is watching.
        let _ = self.events.send(event);
    }
}

#[async_trait::async_trait]
impl Backend for MemoryBackend {
    async fn get(&self, key: &str) -> Result<Option<KeyValue>, StoreError> {
        Ok(self.state.lock().kv.get(key).cloned())
    }

    async fn list(&self, prefix: &str) -> Result<(Vec<KeyValue>, Revision), StoreError> {
        let state = self.state.lock();
        let items = state
            .kv
            .range::<str, _>((
                std::ops::Bound::Included(prefix),
                std::ops::Bound::Unbounded,
            ))
            .take_while(|(k, _)| k.starts_with(prefix))
            .map(|(_, v)| v.clone())
            .collect();
        Ok((items, state.revision))
    }

    async fn create(&self, key: &str, value: Bytes) -> Result<Revision, StoreError> {
        let mut state = self.state.lock();
        if state.kv.contains_key(key) {
            return Err(StoreError::AlreadyExists {
                key: key.to_string(),
            });
        }
        let rev = state.revision + 1;
        state.kv.insert(
            key.to_string(),
            KeyValue {
                key: key.to_string(),
                value: value.clone(),
                create_revision: rev,
                mod_revision: rev,
            },
        );
        let event = Event {
            kind: EventType::Put,
            key: key.to_string(),
            revision: rev,
            value,
            create_revision: rev,
        };
        self.commit(&mut state, event);
        Ok(rev)
    }

    async fn update(
        &self,
        key: &str,
        value: Bytes,
        expected_mod_revision: Revision,
    ) -> Result<Revision, StoreError> {
        let mut state = self.state.lock();
        let rev = state.revision + 1;
        let Some(kv) = state.kv.get_mut(key) else {
            return Err(StoreError::NotFound {
                key: key.to_string(),
            });
        };
        if kv.mod_revision != expected_mod_revision {
            return Err(StoreError::Conflict {
                key: key.to_string(),
                expected: expected_mod_revision,
                actual: kv.mod_revision,
            });
        }
        kv.value = value.clone();
        kv.mod_revision = rev;
        let event = Event {
            kind: EventType::Put,
            key: key.to_string(),
            revision: rev,
            value,
            create_revision: kv.create_revision,
        };
        self.commit(&mut state, event);
        Ok(rev)
    }

    async fn delete(
        &self,
        key: &str,
        expected_mod_revision: Option<Revision>,
    ) -> Result<(Revision, KeyValue), StoreError> {
        let mut state = self.state.lock();
        let Some(kv) = state.kv.get(key) else {
            return Err(StoreError::NotFound {
                key: key.to_string(),
            });
        };
        if let Some(expected) = expected_mod_revision {
            if kv.mod_revision != expected {
                return Err(StoreError::Conflict {
                    key: key.to_string(),
                    expected,
                    actual: kv.mod_revision,
                });
            }
        }
        let rev = state.revision + 1;
        let Some(removed) = state.kv.remove(key) else {
            return Err(StoreError::Backend(format!(
                "key {key} vanished under lock"
            )));
        };
        let event = Event {
            kind: EventType::Delete,
            key: key.to_string(),
            revision: rev,
            value: removed.value.clone(),
            create_revision: removed.create_revision,
        };
        self.commit(&mut state, event);
        Ok((rev, removed))
    }

    async fn events_since(&self, prefix: &str, after: Revision) -> Result<Vec<Event>, StoreError> {
        self.state.lock().events_since(prefix, after)
    }

    fn watch(
        &self,
        prefix: &str,
        after: Revision,
    ) -> BoxStream<'static, Result<Event, StoreError>> {
        // Subscribe and read the log under one lock: the backlog and the live feed then meet
        // exactly (the shared stream still dedupes, which is harmless here).
        let state = self.state.lock();
        let rx = self.events.subscribe();
        let backlog = state.events_since(prefix, after);
        drop(state);
        crate::watch::log_then_live(rx, prefix.to_string(), after, async move { backlog })
    }

    async fn compact(&self, revision: Revision) -> Result<(), StoreError> {
        let mut state = self.state.lock();
        let revision = revision.min(state.revision);
        if revision <= state.compacted {
            return Ok(());
        }
        let cut = state.log.partition_point(|e| e.revision <= revision);
        state.log.drain(..cut);
        state.compacted = revision;
        Ok(())
    }

    async fn current_revision(&self) -> Result<Revision, StoreError> {
        Ok(self.state.lock().revision)
    }

    async fn compacted_revision(&self) -> Result<Revision, StoreError> {
        Ok(self.state.lock().compacted)
    }
}

#[cfg(test)]
mod tests {
    use super::MemoryBackend;

    crate::backend_conformance_tests!(|| async {
        let b: std::sync::Arc<dyn crate::Backend> = MemoryBackend::new();
        (b, ())
    });
}
