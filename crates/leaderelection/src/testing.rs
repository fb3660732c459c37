//! An in-memory `LeaseLock` shared by several electors, and a switch that makes one
//! elector's calls fail as a partition from the API would.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use async_trait::async_trait;
use k8s_openapi::api::coordination::v1::Lease;
use parking_lot::Mutex;

use crate::lock::{LeaseLock, LockError, Observed};
use crate::record::LeaseRecord;

/// The stored lease: its record and a counter as resourceVersion.
#[derive(Default)]
pub struct FakeLease {
    state: Mutex<Option<(LeaseRecord, u64)>>,
}

impl FakeLease {
    pub fn new() -> Arc<FakeLease> {
        Arc::new(FakeLease::default())
    }

    pub fn record(&self) -> Option<LeaseRecord> {
        self.state.lock().as_ref().map(|(r, _)| r.clone())
    }

    /// One elector's view of the lease.
    pub fn lock(self: &Arc<Self>) -> FakeLeaseLock {
        FakeLeaseLock {
            lease: Arc::clone(self),
            cut: Arc::new(AtomicBool::new(false)),
        }
    }
}

#[derive(Clone)]
pub struct FakeLeaseLock {
    lease: Arc<FakeLease>,
    cut: Arc<AtomicBool>,
}

impl FakeLeaseLock {
    /// While cut, every call fails as unreachable.
    pub fn set_cut(&self, cut: bool) {
        self.cut.store(cut, Ordering::SeqCst);
    }

    fn reachable(&self) -> Result<(), LockError> {
        if self.cut.load(Ordering::SeqCst) {
            return Err(LockError::Unreachable {
                lease: self.describe(),
            });
        }
        Ok(())
    }
}

#[async_trait]
impl LeaseLock for FakeLeaseLock {
    fn describe(&self) -> String {
        "kube-system/fake".to_string()
    }

    async fn get(&self) -> Result<Option<Observed>, LockError> {
        self.reachable()?;
        Ok(self.lease.state.lock().as_ref().map(|(r, v)| Observed {
            record: r.clone(),
            version: v.to_string(),
        }))
    }

    async fn create(&self, record: &LeaseRecord) -> Result<String, LockError> {
        self.reachable()?;
        let mut state = self.lease.state.lock();
        if state.is_some() {
            return Err(LockError::Conflict {
                lease: self.describe(),
                version: String::new(),
            });
        }
        *state = Some((record.clone(), 1));
        Ok("1".to_string())
    }

    async fn update(&self, record: &LeaseRecord, version: &str) -> Result<String, LockError> {
        self.reachable()?;
        let mut state = self.lease.state.lock();
        match state.as_mut() {
            Some((r, v)) if v.to_string() == version => {
                *r = record.clone();
                *v += 1;
                Ok(v.to_string())
            }
            _ => Err(LockError::Conflict {
                lease: self.describe(),
                version: version.to_string(),
            }),
        }
    }

    fn reference(&self) -> Option<Lease> {
        None
    }
}
