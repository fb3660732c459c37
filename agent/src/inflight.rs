//! Work shared by everyone who needs it (image pulls): the first caller of a key starts
//! the work in a task of its own, later callers of the same key wait on the same result,
//! a caller that goes away stops waiting without stopping the work for the others, and
//! the work is aborted once nobody waits for it any more.

use std::collections::HashMap;
use std::future::Future;

use futures::future::{BoxFuture, Shared};
use futures::FutureExt;

struct Entry<T: Clone> {
    result: Shared<BoxFuture<'static, Option<T>>>,
    waiters: usize,
    abort: tokio::task::AbortHandle,
}

pub struct Inflight<T: Clone> {
    entries: parking_lot::Mutex<HashMap<String, Entry<T>>>,
}

impl<T: Clone> Default for Inflight<T> {
    fn default() -> Self {
        Inflight {
            entries: Default::default(),
        }
    }
}

/// One caller's wait: the last one to stop waiting ends the work.
struct Waiter<'a, T: Clone> {
    inflight: &'a Inflight<T>,
    key: String,
}

impl<T: Clone> Drop for Waiter<'_, T> {
    fn drop(&mut self) {
        let mut entries = self.inflight.entries.lock();
        if let Some(entry) = entries.get_mut(&self.key) {
            entry.waiters -= 1;
            if entry.waiters == 0 {
                // A finished task ignores the abort.
                entry.abort.abort();
                entries.remove(&self.key);
            }
        }
    }
}

impl<T: Clone + Send + Sync + 'static> Inflight<T> {
    /// The result of the work under `key`, started with `start` unless it runs already;
    /// `None` if the work's task died (a panic).
    pub async fn join<F>(&self, key: &str, start: impl FnOnce() -> F) -> Option<T>
    where
        F: Future<Output = T> + Send + 'static,
    {
        let result = {
            let mut entries = self.entries.lock();
            let entry = entries.entry(key.to_string()).or_insert_with(|| {
                let task = tokio::spawn(start());
                let abort = task.abort_handle();
                Entry {
                    result: async move { task.await.ok() }.boxed().shared(),
                    waiters: 0,
                    abort,
                }
            });
            entry.waiters += 1;
            entry.result.clone()
        };
        let _waiting = Waiter {
            inflight: self,
            key: key.to_string(),
        };
        result.await
    }

    /// Keys with work in flight.
    pub fn running(&self) -> usize {
        self.entries.lock().len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    use std::time::Duration;

    /// Work that finishes when told and counts how often it started and was dropped.
    fn work(
        started: &Arc<AtomicUsize>,
        dropped: &Arc<AtomicUsize>,
        done: tokio::sync::watch::Receiver<bool>,
    ) -> impl Future<Output = &'static str> + Send + 'static {
        struct OnDrop(Arc<AtomicUsize>);
        impl Drop for OnDrop {
            fn drop(&mut self) {
                self.0.fetch_add(1, Ordering::SeqCst);
            }
        }
        started.fetch_add(1, Ordering::SeqCst);
        let guard = OnDrop(dropped.clone());
        let mut done = done;
        async move {
            let _guard = guard;
            while !*done.borrow_and_update() {
                if done.changed().await.is_err() {
                    break;
                }
            }
            "image"
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_caller_that_leaves_does_not_stop_the_work_for_the_others() {
        let inflight: Arc<Inflight<&'static str>> = Arc::default();
        let (started, dropped): (Arc<AtomicUsize>, Arc<AtomicUsize>) = Default::default();
        let (finish, done) = tokio::sync::watch::channel(false);
        let (s, d, rx) = (started.clone(), dropped.clone(), done.clone());
        let first = {
            let inflight = inflight.clone();
            tokio::spawn(async move { inflight.join("busybox", || work(&s, &d, rx)).await })
        };
        let (s, d, rx) = (started.clone(), dropped.clone(), done.clone());
        let second = {
            let inflight = inflight.clone();
            tokio::spawn(async move { inflight.join("busybox", || work(&s, &d, rx)).await })
        };
        tokio::time::sleep(Duration::from_millis(10)).await;
        assert_eq!(started.load(Ordering::SeqCst), 1, "one pull for both");
        first.abort(); // its pod was deleted
        tokio::time::sleep(Duration::from_millis(10)).await;
        assert_eq!(
            dropped.load(Ordering::SeqCst),
            0,
            "the pull goes on for the other"
        );
        finish.send(true).unwrap();
        assert_eq!(second.await.unwrap(), Some("image"));
        assert_eq!(inflight.running(), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn work_nobody_waits_for_is_aborted() {
        let inflight: Arc<Inflight<&'static str>> = Arc::default();
        let (started, dropped): (Arc<AtomicUsize>, Arc<AtomicUsize>) = Default::default();
        let (_finish, done) = tokio::sync::watch::channel(false);
        let (s, d) = (started.clone(), dropped.clone());
        let only = {
            let inflight = inflight.clone();
            tokio::spawn(async move { inflight.join("hang", || work(&s, &d, done)).await })
        };
        tokio::time::sleep(Duration::from_millis(10)).await;
        only.abort();
        tokio::time::sleep(Duration::from_millis(10)).await;
        assert_eq!(dropped.load(Ordering::SeqCst), 1, "the pull is cancelled");
        assert_eq!(inflight.running(), 0);
    }
}
