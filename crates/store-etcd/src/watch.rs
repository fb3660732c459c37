//! Events from etcd watches: a live stream from a revision, and the events of a past
//! window (`events_since`), both with the previous value so deletes carry what was
//! removed.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use cairn_store::{Backend, Event, EventType, Revision, StoreError};
use etcd_client::{WatchClient, WatchOptions, WatchResponse, WatchStream};
use futures::stream::BoxStream;
use futures::StreamExt;

use crate::keys::Keys;
use crate::retry::unsent_retried;
use crate::{backend_error, EtcdBackend};

/// How long `events_since` waits for etcd to deliver a window before giving up.
const WINDOW_TIMEOUT: Duration = Duration::from_secs(30);

async fn open(
    client: &WatchClient,
    keys: &Keys,
    prefix: &str,
    after: Revision,
) -> Result<WatchStream, StoreError> {
    let options = WatchOptions::new()
        .with_prefix()
        .with_prev_key()
        .with_start_revision(keys.etcd_rev(after) + 1);
    let etcd_prefix = keys.prefix_to_etcd(prefix);
    unsent_retried(&format!("watch {prefix} from {after}"), || {
        let (mut client, etcd_prefix, options) =
            (client.clone(), etcd_prefix.clone(), options.clone());
        async move { client.watch(etcd_prefix, Some(options)).await }
    })
    .await
}

/// Why the watch ended, if this response ends it: a compacted start, or a cancel.
fn ended(keys: &Keys, response: &WatchResponse, after: Revision) -> Result<(), StoreError> {
    if response.compact_revision() > 0 {
        return Err(StoreError::Compacted {
            requested: after,
            compacted: keys.store_rev(response.compact_revision()),
        });
    }
    if response.canceled() {
        return Err(StoreError::Backend(format!(
            "etcd canceled the watch: {}",
            response.cancel_reason()
        )));
    }
    Ok(())
}

/// The response's events, or why the watch ended.
fn events_of(
    keys: &Keys,
    response: &WatchResponse,
    after: Revision,
) -> Result<Vec<Event>, StoreError> {
    ended(keys, response, after)?;
    Ok(response.events().iter().map(|e| event(keys, e)).collect())
}

fn event(keys: &Keys, e: &etcd_client::Event) -> Event {
    let kv = e.kv();
    let prev = e.prev_kv();
    let key = kv.map(|kv| keys.store_key(kv.key())).unwrap_or_default();
    let revision = kv.map(|kv| keys.store_rev(kv.mod_revision())).unwrap_or(0);
    match e.event_type() {
        etcd_client::EventType::Put => Event {
            kind: EventType::Put,
            key,
            revision,
            value: kv
                .map(|kv| Bytes::copy_from_slice(kv.value()))
                .unwrap_or_default(),
            create_revision: kv
                .map(|kv| keys.store_rev(kv.create_revision()))
                .unwrap_or(0),
        },
        etcd_client::EventType::Delete => Event {
            kind: EventType::Delete,
            key,
            revision,
            value: prev
                .map(|p| Bytes::copy_from_slice(p.value()))
                .unwrap_or_default(),
            create_revision: prev
                .map(|p| keys.store_rev(p.create_revision()))
                .unwrap_or(0),
        },
    }
}

/// The events under `prefix` after `after` up to `current`. A watch replays history but
/// never says where it ends, and etcd 3.4 answers a progress request at once, caught up or
/// not; so this watches every key: each revision has an event, and the one at `current`
/// marks the end. Events of other prefixes are dropped here.
pub(crate) async fn events_until(
    client: WatchClient,
    keys: Arc<Keys>,
    prefix: &str,
    after: Revision,
    current: Revision,
) -> Result<Vec<Event>, StoreError> {
    let options = WatchOptions::new()
        .with_all_keys()
        .with_prev_key()
        .with_start_revision(keys.etcd_rev(after) + 1);
    let mut stream = client
        .clone()
        .watch("", Some(options))
        .await
        .map_err(|e| backend_error(&format!("events since {after}"), e))?;
    let wanted = keys.prefix_to_etcd(prefix);
    let mut events = Vec::new();
    let read = async {
        loop {
            let response = stream
                .message()
                .await
                .map_err(|e| backend_error(&format!("events of {prefix} since {after}"), e))?
                .ok_or_else(|| StoreError::Backend("etcd closed the watch".into()))?;
            ended(&keys, &response, after)?;
            let seen = response
                .events()
                .iter()
                .filter_map(|e| e.kv())
                .map(|kv| keys.store_rev(kv.mod_revision()))
                .max();
            let ours = response.events().iter().filter(|e| {
                e.kv()
                    .is_some_and(|kv| kv.key().starts_with(wanted.as_bytes()))
            });
            for e in ours {
                let event = event(&keys, e);
                if event.revision <= current {
                    events.push(event);
                }
            }
            if seen.is_some_and(|rev| rev >= current) {
                return Ok::<(), StoreError>(());
            }
        }
    };
    tokio::time::timeout(WINDOW_TIMEOUT, read)
        .await
        .map_err(|_| {
            StoreError::Backend(format!(
                "etcd delivered no events of {prefix} since {after} up to {current} within {}s",
                WINDOW_TIMEOUT.as_secs()
            ))
        })??;
    Ok(events)
}

/// What the live watch stream keeps between items.
struct Live {
    backend: EtcdBackend,
    prefix: String,
    after: Revision,
    stream: Option<WatchStream>,
    pending: VecDeque<Result<Event, StoreError>>,
    ended: bool,
}

/// Every event under `prefix` after `after`, as etcd commits them. A revision compacted
/// away (by the store's measure: at or below the compacted revision) ends it with
/// `Compacted`; so does an etcd error, after which the caller starts again from the last
/// revision it saw.
pub(crate) fn watch(
    backend: EtcdBackend,
    prefix: String,
    after: Revision,
) -> BoxStream<'static, Result<Event, StoreError>> {
    let live = Live {
        backend,
        prefix,
        after,
        stream: None,
        pending: VecDeque::new(),
        ended: false,
    };
    futures::stream::unfold(live, |mut live| async move {
        loop {
            if let Some(item) = live.pending.pop_front() {
                return Some((item, live));
            }
            if live.ended {
                return None;
            }
            if let Err(e) = live.next_batch().await {
                live.ended = true;
                live.pending.push_back(Err(e));
            }
        }
    })
    .boxed()
}

impl Live {
    async fn next_batch(&mut self) -> Result<(), StoreError> {
        if self.stream.is_none() {
            let compacted = self.backend.compacted_revision().await?;
            if self.after < compacted {
                return Err(StoreError::Compacted {
                    requested: self.after,
                    compacted,
                });
            }
            let client = self.backend.watcher();
            self.stream = Some(open(&client, &self.backend.keys, &self.prefix, self.after).await?);
        }
        let Some(stream) = self.stream.as_mut() else {
            return Err(StoreError::Closed);
        };
        let response = stream
            .message()
            .await
            .map_err(|e| backend_error(&format!("watch {}", self.prefix), e))?
            .ok_or_else(|| StoreError::Backend("etcd closed the watch".into()))?;
        for event in events_of(&self.backend.keys, &response, self.after)? {
            self.after = event.revision;
            self.pending.push_back(Ok(event));
        }
        Ok(())
    }
}
