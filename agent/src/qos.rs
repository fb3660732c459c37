//! The QoS-class parent cgroups, kept as the kubelet's QoS container manager keeps them:
//! `kubepods` gets the node's allocatable (cpu shares from allocatable cpu, memory limit =
//! capacity − reservations), `besteffort` the minimum cpu shares (2) so best-effort pods only
//! get what the others leave, and `burstable` shares equal to the cpu requests of its pods.
//! Without this a single best-effort pod would weigh as much as all burstable pods together.

use cairn_runtime::cgroups::{CgroupError, CgroupManager, PodResources};
use k8s_openapi::api::core::v1::Pod;
use parking_lot::Mutex;

/// The kubelet's minimum and maximum cgroup v1 cpu shares.
const MIN_SHARES: u64 = 2;
const MAX_SHARES: u64 = 262_144;

/// Milli-CPU to cgroup v1 cpu shares, as the kubelet's `MilliCPUToShares`.
pub fn millicpu_to_shares(millicpu: u64) -> u64 {
    if millicpu == 0 {
        return MIN_SHARES;
    }
    (millicpu * 1024 / 1000).clamp(MIN_SHARES, MAX_SHARES)
}

/// What the three parents should hold.
#[derive(Debug, Clone, PartialEq)]
pub struct QosLimits {
    pub kubepods: PodResources,
    pub burstable: PodResources,
    pub besteffort: PodResources,
}

/// Limits for the parents given the node's allocatable cpu (millicores), memory for pods
/// (bytes; `None` leaves it unlimited) and the active pods on the node.
pub fn limits<'a>(
    allocatable_millicpu: u64,
    pods_memory: Option<i64>,
    active: impl IntoIterator<Item = &'a Pod>,
) -> QosLimits {
    let burstable_millicpu: u64 = active
        .into_iter()
        .filter(|p| crate::pod_meta::qos_class(p) == "Burstable")
        .map(|p| crate::pod_meta::requests(p).0)
        .sum();
    let shares_only = |shares| PodResources {
        cpu_shares: Some(shares),
        ..Default::default()
    };
    QosLimits {
        kubepods: PodResources {
            cpu_shares: Some(millicpu_to_shares(allocatable_millicpu)),
            memory_limit: pods_memory.filter(|m| *m > 0),
            ..Default::default()
        },
        burstable: shares_only(millicpu_to_shares(burstable_millicpu)),
        besteffort: shares_only(MIN_SHARES),
    }
}

/// Writes the parents under `<cgroup_root>/kubepods`, skipping writes when nothing changed
/// since the last successful update.
pub struct QosCgroups {
    root: String,
    last: Mutex<Option<QosLimits>>,
}

impl QosCgroups {
    pub fn new(cgroup_root: &str) -> Self {
        QosCgroups {
            root: format!("{}/kubepods", cgroup_root.trim_end_matches('/')),
            last: Mutex::new(None),
        }
    }

    pub fn kubepods(&self) -> &str {
        &self.root
    }

    pub fn update(&self, cgroups: &CgroupManager, want: QosLimits) -> Result<(), CgroupError> {
        let mut last = self.last.lock();
        if last.as_ref() == Some(&want) {
            return Ok(());
        }
        cgroups.ensure(&self.root, &want.kubepods)?;
        cgroups.ensure(&format!("{}/burstable", self.root), &want.burstable)?;
        cgroups.ensure(&format!("{}/besteffort", self.root), &want.besteffort)?;
        *last = Some(want);
        Ok(())
    }
}

/// Brings the QoS parents up to date with the node's allocatable and its active pods. Called
/// before a new pod's cgroup is made, when a pod's worker ends and on every heartbeat (for
/// pods that finished), as the kubelet's QoS manager does; writes only on change.
pub fn refresh(agent: &crate::Agent) {
    let cpu = (agent.host.cpus() * 1000).saturating_sub(agent.config.reserved_cpu_millis);
    // kubepods holds capacity minus reservations (eviction thresholds are not subtracted).
    let memory = agent.host.meminfo().map(|m| {
        i64::try_from(
            m.total_bytes
                .saturating_sub(agent.config.reserved_memory_bytes),
        )
        .unwrap_or(i64::MAX)
    });
    let want = {
        let pods = agent.ledger.pods();
        let active = pods.values().filter(|p| {
            !matches!(
                p.status.as_ref().and_then(|s| s.phase.as_deref()),
                Some("Succeeded" | "Failed")
            )
        });
        limits(cpu, memory, active)
    };
    if let Err(e) = agent.qos.update(&agent.cgroups, want) {
        tracing::warn!(cgroup = %agent.qos.kubepods(), error = %e, "updating QoS cgroups");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(resources: serde_json::Value) -> Pod {
        serde_json::from_value(
            json!({"spec": {"containers": [{"name": "c", "resources": resources}]}}),
        )
        .unwrap()
    }

    #[test]
    fn shares_follow_the_kubelet() {
        assert_eq!(millicpu_to_shares(0), 2);
        assert_eq!(millicpu_to_shares(1), 2);
        assert_eq!(millicpu_to_shares(250), 256);
        assert_eq!(millicpu_to_shares(2000), 2048);
        assert_eq!(millicpu_to_shares(10_000_000), MAX_SHARES);
    }

    #[test]
    fn burstable_sums_requests_and_besteffort_is_minimal() {
        let pods = [
            pod(json!({"requests": {"cpu": "250m"}})),
            pod(json!({"requests": {"cpu": "500m", "memory": "64Mi"}})),
            pod(json!({})),
            pod(
                json!({"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"cpu": "1", "memory": "1Gi"}}),
            ),
        ];
        let l = limits(1900, Some(1 << 30), pods.iter());
        assert_eq!(l.kubepods.cpu_shares, Some(1945));
        assert_eq!(l.kubepods.memory_limit, Some(1 << 30));
        // 250m + 500m of burstable requests; the guaranteed pod is not counted.
        assert_eq!(l.burstable.cpu_shares, Some(768));
        assert_eq!(l.burstable.memory_limit, None);
        assert_eq!(l.besteffort.cpu_shares, Some(2));
        let none = limits(1000, None, []);
        assert_eq!(none.burstable.cpu_shares, Some(2));
        assert_eq!(none.kubepods.memory_limit, None);
    }

    #[test]
    fn writes_v1_files_once_per_change() {
        let root = tempfile::tempdir().unwrap();
        for c in ["memory", "cpu"] {
            std::fs::create_dir_all(root.path().join(c)).unwrap();
        }
        let cgroups = CgroupManager::detect(root.path());
        let qos = QosCgroups::new("/cairn/");
        let want = limits(
            2000,
            Some(512 << 20),
            [&pod(json!({"requests": {"cpu": "100m"}}))],
        );
        qos.update(&cgroups, want.clone()).unwrap();
        let read = |p: &str| std::fs::read_to_string(root.path().join(p)).unwrap();
        assert_eq!(read("cpu/cairn/kubepods/cpu.shares"), "2048");
        assert_eq!(
            read("memory/cairn/kubepods/memory.limit_in_bytes"),
            (512u64 << 20).to_string()
        );
        assert_eq!(read("cpu/cairn/kubepods/burstable/cpu.shares"), "102");
        assert_eq!(read("cpu/cairn/kubepods/besteffort/cpu.shares"), "2");
        // Unchanged limits write nothing (a file removed behind our back stays removed).
        std::fs::remove_file(root.path().join("cpu/cairn/kubepods/besteffort/cpu.shares")).unwrap();
        qos.update(&cgroups, want).unwrap();
        assert!(!root
            .path()
            .join("cpu/cairn/kubepods/besteffort/cpu.shares")
            .exists());
    }
}
