//! A container's and a pod's cgroup resources and security settings from the spec.

use super::*;

pub(super) fn limit_or_request(c: &Container, name: &str, limit: bool) -> Option<String> {
    let r = c.resources.as_ref()?;
    let m = if limit {
        r.limits.as_ref()
    } else {
        r.requests.as_ref().or(r.limits.as_ref())
    };
    m?.get(name).map(|q| q.0.clone()).or_else(|| {
        if limit {
            None
        } else {
            r.limits.as_ref()?.get(name).map(|q| q.0.clone())
        }
    })
}

pub(super) fn container_resources(pod: &Pod, c: &Container, node_memory_bytes: i64) -> Resources {
    let cpu_request =
        limit_or_request(c, "cpu", false).and_then(|q| crate::quantity::millicores(&q));
    let cpu_limit = limit_or_request(c, "cpu", true).and_then(|q| crate::quantity::millicores(&q));
    let memory = limit_or_request(c, "memory", true).and_then(|q| crate::quantity::bytes(&q));
    // Shares as the kubelet computes them: requests * 1024 / 1000, at least 2.
    let shares = cpu_request.map(|m| (m * 1024 / 1000).max(2)).unwrap_or(2);
    let oom = match status::qos_class(pod) {
        "Guaranteed" => -997,
        "BestEffort" => 1000,
        _ => {
            let mem_req = limit_or_request(c, "memory", false)
                .and_then(|q| crate::quantity::bytes(&q))
                .unwrap_or(0);
            let total = node_memory_bytes.max(1);
            (1000 - (1000 * mem_req) / total).clamp(2, 999) as i32
        }
    };
    Resources {
        cpu_shares: Some(shares),
        cpu_quota: cpu_limit.map(|m| (m as i64) * 100),
        cpu_period: cpu_limit.map(|_| 100_000),
        memory_limit: memory,
        oom_score_adj: Some(clamp_oom_score(oom)),
    }
}

/// Lowering oom_score_adj below our own needs CAP_SYS_RESOURCE, which some hosts withhold:
/// clamp to what we may set and say so once.
pub(super) fn clamp_oom_score(wanted: i32) -> i32 {
    // Our own score does not change while we run: read it once.
    static OWN: std::sync::OnceLock<i32> = std::sync::OnceLock::new();
    let own = *OWN.get_or_init(|| {
        std::fs::read_to_string("/proc/self/oom_score_adj")
            .ok()
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(0)
    });
    if wanted < own {
        static ONCE: std::sync::Once = std::sync::Once::new();
        ONCE.call_once(|| {
            warn!(
                wanted,
                own, "cannot lower oom_score_adj below the agent's own; clamping"
            )
        });
        own
    } else {
        wanted
    }
}

pub(super) fn pod_resources(pod: &Pod) -> PodResources {
    let containers = pod
        .spec
        .as_ref()
        .map(|s| s.containers.clone())
        .unwrap_or_default();
    let mut mem: Option<i64> = Some(0);
    let mut cpu_quota: Option<i64> = Some(0);
    let mut shares = 0u64;
    for c in &containers {
        let m = limit_or_request(c, "memory", true).and_then(|q| crate::quantity::bytes(&q));
        mem = mem.and_then(|t| m.map(|m| t + m));
        let l = limit_or_request(c, "cpu", true).and_then(|q| crate::quantity::millicores(&q));
        cpu_quota = cpu_quota.and_then(|t| l.map(|l| t + l as i64 * 100));
        shares += limit_or_request(c, "cpu", false)
            .and_then(|q| crate::quantity::millicores(&q))
            .map(|m| m * 1024 / 1000)
            .unwrap_or(0);
    }
    PodResources {
        cpu_shares: Some(shares.max(2)),
        cpu_quota: cpu_quota.filter(|q| *q > 0),
        cpu_period: Some(100_000),
        memory_limit: mem.filter(|m| *m > 0),
    }
}

pub(super) fn security(pod: &Pod, c: &Container) -> SecurityConfig {
    let psc = pod
        .spec
        .as_ref()
        .and_then(|s| s.security_context.clone())
        .unwrap_or_default();
    let sc = c.security_context.clone().unwrap_or_default();
    let caps = sc.capabilities.clone().unwrap_or_default();
    SecurityConfig {
        privileged: sc.privileged == Some(true),
        run_as_user: sc.run_as_user.or(psc.run_as_user),
        run_as_group: sc.run_as_group.or(psc.run_as_group),
        supplemental_groups: psc
            .supplemental_groups
            .clone()
            .unwrap_or_default()
            .into_iter()
            .chain(psc.fs_group)
            .collect(),
        capabilities_add: caps.add.unwrap_or_default(),
        capabilities_drop: caps.drop.unwrap_or_default(),
        readonly_rootfs: sc.read_only_root_filesystem == Some(true),
        allow_privilege_escalation: sc.allow_privilege_escalation,
    }
}
