//! The backend watch stream shared by the SQLite and memory backends: replay from the log,
//! then follow the live broadcast.

use std::collections::VecDeque;
use std::future::Future;

use futures::stream::{self, BoxStream, StreamExt};
use tokio::sync::broadcast;

use crate::{Event, Revision, StoreError};

enum State<F> {
    /// Backlog not read yet.
    Start {
        backlog: F,
        rx: broadcast::Receiver<Event>,
        prefix: String,
        after: Revision,
    },
    Running {
        backlog: VecDeque<Event>,
        rx: broadcast::Receiver<Event>,
        prefix: String,
        /// Revision of the last event yielded (or `after`): later events at or below it are
        /// the overlap between the log read and the live feed.
        last: Revision,
    },
    Done,
}

/// Builds a watch stream. `rx` must have been subscribed *before* `backlog` reads the log,
/// so every commit is either in the backlog or still queued in `rx` (overlap is deduped by
/// revision). A lagging receiver ends the stream with `WatcherLagged`.
pub(crate) fn log_then_live<F>(
    rx: broadcast::Receiver<Event>,
    prefix: String,
    after: Revision,
    backlog: F,
) -> BoxStream<'static, Result<Event, StoreError>>
where
    F: Future<Output = Result<Vec<Event>, StoreError>> + Send + 'static,
{
    let init = State::Start {
        backlog,
        rx,
        prefix,
        after,
    };
    stream::unfold(init, |mut state| async move {
        loop {
            match state {
                State::Done => return None,
                State::Start {
                    backlog,
                    rx,
                    prefix,
                    after,
                } => match backlog.await {
                    Err(e) => return Some((Err(e), State::Done)),
                    Ok(events) => {
                        state = State::Running {
                            backlog: events.into(),
                            rx,
                            prefix,
                            last: after,
                        }
                    }
                },
                State::Running {
                    mut backlog,
                    mut rx,
                    prefix,
                    mut last,
                } => {
                    while let Some(ev) = backlog.pop_front() {
                        if ev.revision > last && ev.key.starts_with(&prefix) {
                            last = ev.revision;
                            let next = State::Running {
                                backlog,
                                rx,
                                prefix,
                                last,
                            };
                            return Some((Ok(ev), next));
                        }
                    }
                    loop {
                        match rx.recv().await {
                            Ok(ev) => {
                                if ev.revision > last && ev.key.starts_with(&prefix) {
                                    last = ev.revision;
                                    let next = State::Running {
                                        backlog,
                                        rx,
                                        prefix,
                                        last,
                                    };
                                    return Some((Ok(ev), next));
                                }
                            }
                            Err(broadcast::error::RecvError::Lagged(missed)) => {
                                tracing::warn!(missed, prefix = %prefix, "store watcher lagged");
                                return Some((Err(StoreError::WatcherLagged), State::Done));
                            }
                            Err(broadcast::error::RecvError::Closed) => return None,
                        }
                    }
                }
            }
        }
    })
    .boxed()
}
