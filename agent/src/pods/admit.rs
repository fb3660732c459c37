//! Admission: the kubelet's check that a new pod's requests fit what the node has left.

use super::*;
use crate::ledger::Granted;

impl Worker {
    /// Moves a `Pending` worker to `Running` or `Rejected`. A pod that already has
    /// containers here was admitted before (by an earlier agent): it is counted, not checked.
    pub(super) fn admit(&mut self, pod: &Pod, has_containers: bool) {
        if self.state != WorkerState::Pending {
            return;
        }
        if let Some((reason, message)) = rejected_before(pod) {
            self.state = WorkerState::Rejected { reason, message };
            return;
        }
        let (cpu_millis, memory_bytes) = requests(pod);
        if !has_containers {
            if let Some((reason, message)) = self.no_room(cpu_millis, memory_bytes) {
                warn!(reason, "rejecting pod");
                self.h
                    .events
                    .pod(pod, None, EventType::Warning, reason, &message);
                self.state = WorkerState::Rejected {
                    reason: reason.to_string(),
                    message,
                };
                return;
            }
        }
        let granted = Granted {
            cpu_millis,
            memory_bytes,
        };
        self.h.ledger.admit(&self.uid, granted);
        self.state = WorkerState::Running;
    }

    /// The kubelet's rejection reason and message when the node lacks room.
    fn no_room(&self, cpu: u64, mem: i64) -> Option<(&'static str, String)> {
        let alloc = self.h.node.allocatable();
        let alloc_mem = alloc
            .get("memory")
            .and_then(|q| crate::quantity::bytes(q))
            .unwrap_or(i64::MAX);
        let alloc_cpu = alloc
            .get("cpu")
            .and_then(|q| crate::quantity::millicores(q))
            .unwrap_or(u64::MAX);
        let used = self.h.ledger.usage();
        let (used_mem, used_cpu) = (used.memory_bytes, used.cpu_millis);
        let max_pods = self.h.node.config.max_pods;
        if mem > 0 && used_mem + mem > alloc_mem {
            Some(("OutOfmemory", format!("Pod was rejected: Node didn't have enough resource: memory, requested: {mem}, used: {used_mem}, capacity: {alloc_mem}")))
        } else if cpu > 0 && used_cpu + cpu > alloc_cpu {
            Some(("OutOfcpu", format!("Pod was rejected: Node didn't have enough resource: cpu, requested: {cpu}, used: {used_cpu}, capacity: {alloc_cpu}")))
        } else if used.pods >= max_pods {
            Some(("OutOfpods", format!("Pod was rejected: Node didn't have enough resource: pods, requested: 1, used: {}, capacity: {max_pods}", used.pods)))
        } else {
            None
        }
    }
}

/// A pod an earlier agent rejected stays rejected (its status says so).
fn rejected_before(pod: &Pod) -> Option<(String, String)> {
    let status = pod.status.as_ref()?;
    let rejected = status.phase.as_deref() == Some("Failed")
        && status
            .reason
            .as_deref()
            .is_some_and(|r| r.starts_with("OutOf"));
    rejected.then(|| {
        (
            status.reason.clone().unwrap_or_default(),
            status.message.clone().unwrap_or_default(),
        )
    })
}
