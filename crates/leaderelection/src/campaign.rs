//! Acquiring, holding and losing the lease (client-go's `acquire` and `renew` loops), and
//! the campaign that runs the leader's work only while the lease is held.

use std::future::Future;
use std::time::Duration;

use rand::Rng;
use tokio::time::Instant;
use tracing::{info, warn};

use crate::elector::Elector;
use crate::lock::LeaseLock;
use crate::metrics::LeaderMetrics;

/// Leadership ended: a renewal did not succeed by the renew deadline, or another
/// candidate holds the lease.
#[derive(Debug, PartialEq, Eq)]
pub struct Lost;

impl<L: LeaseLock> Elector<L> {
    /// Tries every retry period (jittered up to 1.2×, as client-go's) until this candidate
    /// holds the lease.
    pub async fn acquire(&mut self) {
        loop {
            let attempt =
                tokio::time::timeout(self.timing.renew_deadline, self.try_acquire_or_renew());
            if attempt.await == Ok(true) {
                info!(lease = %self.lock.describe(), identity = %self.identity, "acquired the lease");
                return;
            }
            let jitter = rand::rng().random_range(0.0..0.2);
            tokio::time::sleep(self.timing.retry_period.mul_f64(1.0 + jitter)).await;
        }
    }

    /// Renews every retry period while leading. Returns at the latest when the renew
    /// deadline has passed since the start of the last successful renewal, which is before
    /// any other candidate can see the lease expire (the deadline is shorter than the
    /// lease duration, and they count from when they saw that renewal, later).
    pub async fn hold(&mut self) -> Lost {
        loop {
            let deadline = self.renewed_at + self.timing.renew_deadline;
            let retry = self.timing.retry_period;
            let renewal = async {
                loop {
                    tokio::time::sleep(retry).await;
                    if self.try_acquire_or_renew().await {
                        return true;
                    }
                    if !self.is_leader() {
                        return false;
                    }
                }
            };
            match tokio::time::timeout_at(deadline, renewal).await {
                Ok(true) => continue,
                Ok(false) => {
                    warn!(lease = %self.lock.describe(), holder = ?self.observed().map(|r| &r.holder), "another candidate holds the lease")
                }
                Err(_) => {
                    warn!(lease = %self.lock.describe(), deadline = ?self.timing.renew_deadline, "failed to renew the lease before the renew deadline")
                }
            }
            return Lost;
        }
    }
}

/// Work that runs only while leading, and can be stopped at once.
pub trait Leading {
    /// Resolves when the work ends by itself (an error, or it finished).
    fn finished(&mut self) -> impl Future<Output = Result<(), String>> + Send;
    /// Stops the work; once this returns, nothing of it runs.
    fn stop(self) -> impl Future<Output = ()> + Send;
}

/// Campaigns until the work ends by itself: acquires the lease, starts the work, holds the
/// lease while the work runs, stops the work when leadership is lost and campaigns again.
/// Ends with the work's result, or `Ok` on `shutdown`, releasing the lease.
pub async fn campaign<L, W>(
    mut elector: Elector<L>,
    name: &str,
    events: Option<crate::events::LeaderEvents>,
    mut start: impl FnMut() -> Result<W, String>,
    shutdown: impl Future<Output = ()>,
) -> Result<(), String>
where
    L: LeaseLock,
    W: Leading,
{
    let metrics = LeaderMetrics::get();
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            () = elector.acquire() => {}
            () = &mut shutdown => return Ok(()),
        }
        let mut work = start()?;
        metrics.set(name, true);
        if let Some(events) = &events {
            events.became_leader(&elector);
        }
        let outcome = tokio::select! {
            Lost = elector.hold() => None,
            r = work.finished() => Some(r),
            () = &mut shutdown => Some(Ok(())),
        };
        work.stop().await;
        metrics.set(name, false);
        if let Some(events) = &events {
            events.stopped_leading(&elector);
        }
        if let Some(result) = outcome {
            let _ = tokio::time::timeout(Duration::from_secs(2), elector.release()).await;
            return result;
        }
        info!(lease = %name, at = ?Instant::now(), "stopped leading; campaigning again");
    }
}
