//! The leader's work on a runtime of its own: stopping it shuts that runtime down, which
//! drops every task the work spawned, so nothing of it acts after leadership is lost
//! (dropping the work's future alone would leave its spawned tasks running).

use std::future::Future;

use tokio::sync::oneshot;

use crate::campaign::Leading;

pub struct LeaderRuntime {
    done: oneshot::Receiver<Result<(), String>>,
    stop: Option<oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl LeaderRuntime {
    /// Runs what `work` makes on a new single-threaded runtime in thread `name`: a
    /// controller group is mostly waiting, and workers of their own for each of the
    /// three leased groups took CPU from the API server on small hosts (their idle
    /// workers parking and waking on every watch event).
    pub fn spawn<F, Fut>(name: &str, work: F) -> Result<LeaderRuntime, String>
    where
        F: FnOnce() -> Fut + Send + 'static,
        Fut: Future<Output = Result<(), String>> + 'static,
    {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .thread_name(name)
            .enable_all()
            .build()
            .map_err(|e| format!("building the runtime of {name}: {e}"))?;
        let (done_tx, done) = oneshot::channel();
        let (stop, stop_rx) = oneshot::channel::<()>();
        let thread = std::thread::Builder::new()
            .name(name.to_string())
            .spawn(move || {
                let result = runtime.block_on(async move {
                    tokio::select! {
                        r = work() => Some(r),
                        _ = stop_rx => None,
                    }
                });
                runtime.shutdown_background();
                if let Some(result) = result {
                    let _ = done_tx.send(result);
                }
            })
            .map_err(|e| format!("starting the thread of {name}: {e}"))?;
        Ok(LeaderRuntime {
            done,
            stop: Some(stop),
            thread: Some(thread),
        })
    }
}

impl Leading for LeaderRuntime {
    async fn finished(&mut self) -> Result<(), String> {
        match (&mut self.done).await {
            Ok(result) => result,
            // Stopped, or the thread panicked: either way the work is over.
            Err(_) => Err("the leader's work ended without a result".to_string()),
        }
    }

    async fn stop(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = tokio::task::spawn_blocking(move || thread.join()).await;
        }
    }
}
