//! Watch streams: newline-delimited `{"type": ..., "object": ...}` events over a chunked
//! response, fed from the watch cache.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use bytes::{BufMut, Bytes, BytesMut};
use cairn_api::registry::ResourceInfo;
use cairn_api::status::Status;
use cairn_store::cache::{CachedObject, WatchEvent, WatchEventType};
use cairn_store::{Revision, StoreError};
use futures::Stream;
use serde_json::{json, Value};
use tokio::sync::mpsc;
use tracing::warn;

use crate::render;
use crate::request::Representation;
use crate::selectors::Selectors;
use crate::state::{store_status, ApiState};

pub struct WatchRequest {
    pub resource: &'static ResourceInfo,
    pub view: render::View,
    pub prefix: String,
    pub selectors: Selectors,
    /// Revision to start after, and whether to first send the current objects as ADDED.
    pub after: Revision,
    pub initial_events: bool,
    /// With `sendInitialEvents=true`: a BOOKMARK marking the end of the initial events.
    pub initial_events_bookmark: bool,
    pub bookmarks: bool,
    pub timeout: Duration,
    pub representation: Representation,
}

const BOOKMARK_INTERVAL: Duration = Duration::from_secs(30);

fn frame(event_type: &str, object: &[u8]) -> Bytes {
    let mut out = BytesMut::with_capacity(object.len() + 32);
    out.put_slice(b"{\"type\":\"");
    out.put_slice(event_type.as_bytes());
    out.put_slice(b"\",\"object\":");
    out.put_slice(object);
    out.put_slice(b"}\n");
    out.freeze()
}

/// An event's frame; `Err` holds the ERROR frame that ends the watch when the object
/// cannot be rendered (a conversion webhook failing): skipping it would leave the
/// client's copy wrong for good.
fn encode(
    view: &render::View,
    event_type: &str,
    o: &CachedObject,
    repr: Representation,
) -> Result<Bytes, Bytes> {
    match render::object(view, &o.bytes, repr) {
        Ok(b) => Ok(frame(event_type, &b)),
        Err(e) => {
            warn!(key = %o.key, error = %e.message, "ending a watch: an object cannot be rendered");
            Err(error_event(&e))
        }
    }
}

fn bookmark(r: &ResourceInfo, rev: Revision, initial_end: bool) -> Bytes {
    let mut meta = json!({"resourceVersion": rev.to_string()});
    if initial_end {
        meta["annotations"] = json!({"k8s.io/initial-events-end": "true"});
    }
    let obj = json!({"kind": r.kind, "apiVersion": r.api_version(), "metadata": meta});
    frame("BOOKMARK", &serde_json::to_vec(&obj).unwrap_or_default())
}

fn error_event(status: &Status) -> Bytes {
    frame(
        "ERROR",
        &serde_json::to_vec(&status.to_json()).unwrap_or_default(),
    )
}

/// Starts the watch; errors that happen before the stream starts (410 for a compacted
/// revision) come back as `Err` so they are answered with a plain Status.
pub async fn start(
    state: Arc<ApiState>,
    req: WatchRequest,
) -> Result<impl Stream<Item = Result<Bytes, Infallible>>, Status> {
    let r = req.resource;
    let mut initial: Vec<Arc<CachedObject>> = Vec::new();
    let mut after = req.after;
    if req.initial_events {
        let (objects, rev) = state.cache.list(&req.prefix);
        initial = objects
            .into_iter()
            .filter(|o| req.selectors.matches(o))
            .collect();
        after = rev;
    }
    let mut watcher = state
        .cache
        .watch(&req.prefix, after)
        .await
        .map_err(|e| store_status(e, r, ""))?;
    let (tx, rx) = mpsc::channel::<Bytes>(256);
    // The served group/version/kind (a converting view's, not the stored one).
    let served = req.view.served;
    let sent = state
        .metrics
        .watch_events(served.group, served.version, served.kind);
    tokio::spawn(async move {
        let repr = req.representation;
        let mut last_rev = after;
        for o in &initial {
            let (frame, last) = match encode(&req.view, "ADDED", o, repr) {
                Ok(b) => (b, false),
                Err(e) => (e, true),
            };
            if tx.send(frame).await.is_err() || last {
                return;
            }
            sent.inc();
        }
        if req.initial_events_bookmark && tx.send(bookmark(r, last_rev, true)).await.is_err() {
            return;
        }
        let deadline = tokio::time::sleep(req.timeout);
        tokio::pin!(deadline);
        let mut ticker = tokio::time::interval(BOOKMARK_INTERVAL);
        ticker.tick().await;
        loop {
            tokio::select! {
                _ = &mut deadline => return,
                _ = tx.closed() => return,
                _ = ticker.tick(), if req.bookmarks => {
                    if tx.send(bookmark(r, last_rev.max(state.cache.revision()), false)).await.is_err() {
                        return;
                    }
                }
                next = watcher.next() => {
                    let ev = match next {
                        None => return,
                        Some(Err(e)) => {
                            let status = match e {
                                StoreError::WatcherLagged => Status::gone("the watch fell behind and was closed; list again"),
                                other => store_status(other, r, ""),
                            };
                            let _ = tx.send(error_event(&status)).await;
                            return;
                        }
                        Some(Ok(ev)) => ev,
                    };
                    last_rev = ev.revision;
                    if !send_event(&tx, &req, &ev, &sent).await {
                        return;
                    }
                }
            }
        }
    });
    Ok(batched(rx))
}

/// The type of `ev` as this watch sees it: an object that starts or stops matching the
/// selectors is ADDED or DELETED (as upstream's cacher does); None when it never matches.
fn seen_as(ev: &WatchEvent, selectors: &Selectors) -> Option<&'static str> {
    let now = selectors.matches(&ev.object);
    let before = ev.prev.as_ref().map(|p| selectors.matches(p));
    match ev.kind {
        WatchEventType::Added => now.then_some("ADDED"),
        WatchEventType::Modified => match (before, now) {
            (Some(true), true) | (None, true) => Some("MODIFIED"),
            (Some(false), true) => Some("ADDED"),
            (Some(true), false) => Some("DELETED"),
            _ => None,
        },
        WatchEventType::Deleted => (before.unwrap_or(now) || now).then_some("DELETED"),
    }
}

/// Sends `ev` to one watcher; false when the watch ends (the watcher left, or the object
/// could not be encoded and an ERROR event was sent).
async fn send_event(
    tx: &mpsc::Sender<Bytes>,
    req: &WatchRequest,
    ev: &WatchEvent,
    sent: &prometheus_client::metrics::counter::Counter,
) -> bool {
    let repr = req.representation;
    let natural = match ev.kind {
        WatchEventType::Added => "ADDED",
        WatchEventType::Modified => "MODIFIED",
        WatchEventType::Deleted => "DELETED",
    };
    let Some(event_type) = seen_as(ev, &req.selectors) else {
        return true;
    };
    if event_type == natural && repr == Representation::Object && !req.view.converts() {
        // The common case: every watcher sends the same frame; build it once.
        let b = ev
            .encoded
            .get_or_init(|| frame(natural, &ev.object.bytes))
            .clone();
        sent.inc();
        return tx.send(b).await.is_ok();
    }
    let (frame, last) = match encode(&req.view, event_type, &ev.object, repr) {
        Ok(b) => (b, false),
        Err(e) => (e, true),
    };
    sent.inc();
    tx.send(frame).await.is_ok() && !last
}

/// Frames that are already queued go out as one chunk: under load this turns one write
/// per event per watcher into one write per batch. Each watch joins its batches in one
/// buffer of its own, reused once the previous chunk is written: a fresh allocation per
/// batch (up to 64 frames) cost a page fault and a zeroed page per watcher and batch.
fn batched(rx: mpsc::Receiver<Bytes>) -> impl Stream<Item = Result<Bytes, Infallible>> {
    let state = (rx, BytesMut::new(), Vec::with_capacity(MAX_BATCH));
    futures::stream::unfold(state, |(mut rx, mut buf, mut frames)| async move {
        if rx.recv_many(&mut frames, MAX_BATCH).await == 0 {
            return None;
        }
        let chunk = if frames.len() == 1 {
            frames.pop().unwrap_or_default()
        } else {
            // `reserve` takes the buffer back when the last chunk made from it is gone.
            buf.reserve(frames.iter().map(Bytes::len).sum());
            frames.drain(..).for_each(|f| buf.put_slice(&f));
            buf.split().freeze()
        };
        Some((Ok(chunk), (rx, buf, frames)))
    })
}

/// The most frames joined into one chunk.
const MAX_BATCH: usize = 64;

/// The object of a Status carried in an ERROR event, for tests and logs.
pub fn status_of_error_event(line: &[u8]) -> Option<Value> {
    let v: Value = serde_json::from_slice(line).ok()?;
    (v.get("type")?.as_str()? == "ERROR").then(|| v["object"].clone())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use futures::StreamExt;

    #[tokio::test]
    async fn queued_frames_go_out_joined_in_order_in_a_reused_buffer() {
        let (tx, rx) = mpsc::channel::<Bytes>(256);
        let mut chunks = Box::pin(batched(rx));
        let mut first_chunk_at = Vec::new();
        for round in 0..3 {
            for i in 0..100 {
                tx.send(Bytes::from(format!("{round}-{i}\n")))
                    .await
                    .unwrap();
            }
            let mut got = String::new();
            while got.lines().count() < 100 {
                let chunk = chunks.next().await.unwrap().unwrap();
                if got.is_empty() {
                    first_chunk_at.push(chunk.as_ptr());
                }
                got.push_str(std::str::from_utf8(&chunk).unwrap());
            }
            let want: String = (0..100).map(|i| format!("{round}-{i}\n")).collect();
            assert_eq!(got, want, "round {round}");
        }
        assert!(
            first_chunk_at.windows(2).all(|w| w[0] == w[1]),
            "once written, a chunk's buffer holds the next batch"
        );
        tx.send(Bytes::from_static(b"alone\n")).await.unwrap();
        assert_eq!(&chunks.next().await.unwrap().unwrap()[..], b"alone\n");
        drop(tx);
        assert!(
            chunks.next().await.is_none(),
            "the stream ends with the watch"
        );
    }
}
