//! Leader election on `coordination.k8s.io/v1` Leases, as client-go's `leaderelection`
//! (kube-rs has none; the third-party crates lack client-go's renew deadline): one Lease
//! per controller group, candidates take it when its holder has not renewed it within the
//! lease duration, and a leader that cannot renew it within the renew deadline stops its
//! work before any other candidate can take the lease.

pub mod campaign;
pub mod elector;
pub mod events;
pub mod leading;
pub mod lock;
pub mod metrics;
pub mod record;
#[cfg(any(test, feature = "testing"))]
pub mod testing;
#[cfg(test)]
mod tests;

use std::time::Duration;

pub use campaign::{campaign, Leading, Lost};
pub use elector::Elector;
pub use leading::LeaderRuntime;
pub use lock::{KubeLeaseLock, LeaseLock, LockError};
pub use metrics::LeaderMetrics;
pub use record::LeaseRecord;

/// Upstream's `--leader-elect-lease-duration`, `--leader-elect-renew-deadline` and
/// `--leader-elect-retry-period`.
#[derive(Clone, Copy, Debug)]
pub struct Timing {
    pub lease_duration: Duration,
    pub renew_deadline: Duration,
    pub retry_period: Duration,
}

impl Default for Timing {
    fn default() -> Timing {
        Timing {
            lease_duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
            retry_period: Duration::from_secs(2),
        }
    }
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum TimingError {
    #[error("leaseDuration must be greater than renewDeadline")]
    LeaseNotLongerThanDeadline,
    #[error("renewDeadline must be greater than retryPeriod*JitterFactor")]
    DeadlineNotLongerThanRetry,
    #[error("leaseDuration must be a whole number of seconds, at least 1")]
    LeaseNotWholeSeconds,
    #[error("retryPeriod must be greater than zero")]
    RetryZero,
}

impl Timing {
    /// client-go's `NewLeaderElector` checks, and a whole-second lease duration (the
    /// Lease holds seconds).
    pub fn validate(&self) -> Result<(), TimingError> {
        if self.lease_duration <= self.renew_deadline {
            return Err(TimingError::LeaseNotLongerThanDeadline);
        }
        if self.renew_deadline <= self.retry_period.mul_f64(1.2) {
            return Err(TimingError::DeadlineNotLongerThanRetry);
        }
        if self.lease_duration.subsec_nanos() != 0 || self.lease_duration.as_secs() == 0 {
            return Err(TimingError::LeaseNotWholeSeconds);
        }
        if self.retry_period.is_zero() {
            return Err(TimingError::RetryZero);
        }
        Ok(())
    }
}

/// This host's name (`localhost` if it has none).
pub fn host_name() -> String {
    nix::unistd::gethostname()
        .ok()
        .and_then(|h| h.into_string().ok())
        .unwrap_or_else(|| "localhost".to_string())
}

/// Upstream's candidate identity: the host's name, `_`, a fresh UUID.
pub fn identity() -> String {
    format!("{}_{}", host_name(), uuid::Uuid::new_v4())
}
