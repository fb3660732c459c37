//! What the node's pod workers have in common: the pods this agent runs (for `/pods`, logs
//! and the QoS parents), the requests admission has granted, and which container log files
//! are live (log followers stop when theirs leaves). A leaf: every other module may use it.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

use k8s_openapi::api::core::v1::Pod;
use parking_lot::{Mutex, RwLock};

/// Requests an admitted pod holds: CPU in millicores, memory in bytes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Granted {
    pub cpu_millis: u64,
    pub memory_bytes: i64,
}

/// The sum of what admitted pods hold, and how many they are.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Usage {
    pub cpu_millis: u64,
    pub memory_bytes: i64,
    pub pods: u32,
}

#[derive(Default)]
pub struct PodLedger {
    pods: RwLock<HashMap<String, Pod>>,
    admitted: Mutex<HashMap<String, Granted>>,
    live_logs: RwLock<HashSet<PathBuf>>,
}

impl PodLedger {
    /// Records the latest version of a pod a worker runs.
    pub fn record(&self, uid: &str, pod: &Pod) {
        self.pods.write().insert(uid.to_string(), pod.clone());
    }

    /// Forgets a pod whose worker ended (and what admission granted it).
    pub fn forget(&self, uid: &str) {
        self.pods.write().remove(uid);
        self.admitted.lock().remove(uid);
    }

    pub fn contains(&self, uid: &str) -> bool {
        self.pods.read().contains_key(uid)
    }

    /// A snapshot of every pod this agent runs, by UID.
    pub fn pods(&self) -> HashMap<String, Pod> {
        self.pods.read().clone()
    }

    /// What admitted pods hold together.
    pub fn usage(&self) -> Usage {
        let admitted = self.admitted.lock();
        Usage {
            cpu_millis: admitted.values().map(|g| g.cpu_millis).sum(),
            memory_bytes: admitted.values().map(|g| g.memory_bytes).sum(),
            pods: u32::try_from(admitted.len()).unwrap_or(u32::MAX),
        }
    }

    pub fn admit(&self, uid: &str, granted: Granted) {
        self.admitted.lock().insert(uid.to_string(), granted);
    }

    /// Marks a container log file live (its instance runs) or not.
    pub fn set_log_live(&self, path: &Path, live: bool) {
        let mut logs = self.live_logs.write();
        if live {
            logs.insert(path.to_path_buf());
        } else {
            logs.remove(path);
        }
    }

    pub fn is_log_live(&self, path: &Path) -> bool {
        self.live_logs.read().contains(path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn usage_sums_admitted_pods_until_forgotten() {
        let ledger = PodLedger::default();
        ledger.record("a", &Pod::default());
        ledger.admit(
            "a",
            Granted {
                cpu_millis: 250,
                memory_bytes: 64,
            },
        );
        ledger.admit(
            "b",
            Granted {
                cpu_millis: 500,
                memory_bytes: 0,
            },
        );
        assert_eq!(
            ledger.usage(),
            Usage {
                cpu_millis: 750,
                memory_bytes: 64,
                pods: 2
            }
        );
        ledger.forget("a");
        assert!(!ledger.contains("a"));
        assert_eq!(ledger.usage().pods, 1);
    }
}
