//! One candidate's view of the lease and client-go's `tryAcquireOrRenew` over it.
//!
//! Expiry is judged by the candidate's own monotonic clock from when it last saw the
//! record change, never by the holder's `renewTime`: clocks of different hosts need not
//! agree, only run at the same rate.

use tokio::time::Instant;
use tracing::{debug, info};

use crate::lock::{LeaseLock, Observed};
use crate::record::LeaseRecord;
use crate::Timing;

pub struct Elector<L> {
    pub(crate) lock: L,
    pub(crate) identity: String,
    pub(crate) timing: Timing,
    observed: Option<Observed>,
    observed_at: Instant,
    /// When the last successful acquire or renewal started: the lease is held until at
    /// least that plus the lease duration in every other candidate's eyes.
    pub(crate) renewed_at: Instant,
}

impl<L: LeaseLock> Elector<L> {
    pub fn new(lock: L, identity: &str, timing: Timing) -> Elector<L> {
        Elector {
            lock,
            identity: identity.to_string(),
            timing,
            observed: None,
            observed_at: Instant::now(),
            renewed_at: Instant::now(),
        }
    }

    pub fn identity(&self) -> &str {
        &self.identity
    }

    /// Whether the last record seen names this candidate.
    pub fn is_leader(&self) -> bool {
        self.observed
            .as_ref()
            .is_some_and(|o| o.record.holder == self.identity)
    }

    /// The last record seen.
    pub fn observed(&self) -> Option<&LeaseRecord> {
        self.observed.as_ref().map(|o| &o.record)
    }

    fn lease_valid(&self, now: Instant) -> bool {
        let Some(observed) = &self.observed else {
            return false;
        };
        let term =
            std::time::Duration::from_secs(observed.record.lease_duration_seconds.max(0) as u64);
        self.observed_at + term > now
    }

    fn observe(&mut self, observed: Observed, at: Instant) {
        self.observed = Some(observed);
        self.observed_at = at;
    }

    fn mine(&self, now: k8s_openapi::jiff::Timestamp) -> LeaseRecord {
        LeaseRecord {
            holder: self.identity.clone(),
            lease_duration_seconds: self.timing.lease_duration.as_secs() as i32,
            acquire_time: Some(now),
            renew_time: Some(now),
            transitions: 0,
        }
    }

    /// One attempt to take or renew the lease; true when this candidate holds it now.
    pub async fn try_acquire_or_renew(&mut self) -> bool {
        let started = Instant::now();
        let mut record = self.mine(k8s_openapi::jiff::Timestamp::now());
        // The holder's fast path: update from the version it wrote last.
        if self.is_leader() && self.lease_valid(started) {
            if let Some(old) = self.observed.clone() {
                record.acquire_time = old.record.acquire_time;
                record.transitions = old.record.transitions;
                match self.lock.update(&record, &old.version).await {
                    Ok(version) => return self.won(record, version, started),
                    Err(e) => debug!(error = %e, "optimistic renewal failed, reading the lease"),
                }
            }
        }
        let current = match self.lock.get().await {
            Ok(current) => current,
            Err(e) => {
                debug!(error = %e, "reading the lease");
                return false;
            }
        };
        let Some(current) = current else {
            return match self.lock.create(&record).await {
                Ok(version) => self.won(record, version, started),
                Err(e) => {
                    debug!(error = %e, "creating the lease");
                    false
                }
            };
        };
        let changed = self.observed.as_ref().map(|o| &o.version) != Some(&current.version);
        if changed {
            self.observe(current.clone(), Instant::now());
        }
        if !current.record.holder.is_empty() && self.lease_valid(started) && !self.is_leader() {
            debug!(holder = %current.record.holder, "the lease is held and has not expired");
            return false;
        }
        if self.is_leader() {
            record.acquire_time = current.record.acquire_time;
            record.transitions = current.record.transitions;
        } else {
            record.transitions = current.record.transitions + 1;
        }
        match self.lock.update(&record, &current.version).await {
            Ok(version) => self.won(record, version, started),
            Err(e) => {
                debug!(error = %e, "taking the lease");
                false
            }
        }
    }

    fn won(&mut self, record: LeaseRecord, version: String, started: Instant) -> bool {
        self.observe(Observed { record, version }, Instant::now());
        self.renewed_at = started;
        true
    }

    /// Gives the lease up (holder empty, a 1 s term) so the next candidate need not wait
    /// out the term, as client-go's `ReleaseOnCancel`. True when released.
    pub async fn release(&mut self) -> bool {
        let Some(old) = self.observed.clone().filter(|_| self.is_leader()) else {
            return false;
        };
        let now = k8s_openapi::jiff::Timestamp::now();
        let record = LeaseRecord {
            holder: String::new(),
            lease_duration_seconds: 1,
            acquire_time: Some(now),
            renew_time: Some(now),
            transitions: old.record.transitions,
        };
        match self.lock.update(&record, &old.version).await {
            Ok(version) => {
                info!(lease = %self.lock.describe(), "released the lease");
                self.observe(Observed { record, version }, Instant::now());
                true
            }
            Err(e) => {
                debug!(error = %e, "releasing the lease");
                false
            }
        }
    }
}
