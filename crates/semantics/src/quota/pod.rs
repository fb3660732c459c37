//! What a pod charges (upstream `PodUsageFunc`): `count/pods` always; `pods` and its
//! compute resources while it is alive — not in a terminal phase and not past its
//! deletion grace period (a pod on a lost node stops counting when its grace runs out).

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::{Container, Pod, PodAffinityTerm, PodSpec};
use k8s_openapi::jiff::{SignedDuration, Timestamp};

use super::usage::Usage;
use crate::qos::{qos_class, QosClass};
use crate::resources::{pod_limits, pod_requests, MissingRequests, Resources};

/// Quota resources a pod's containers must state explicitly when a quota limits them
/// (upstream's backward-compatibility rule for cpu and memory).
pub const COMPUTE_CONSTRAINED: [&str; 6] = [
    "cpu",
    "memory",
    "requests.cpu",
    "requests.memory",
    "limits.cpu",
    "limits.memory",
];

/// What quota scopes look at in a pod.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PodScopes {
    pub best_effort: bool,
    /// `activeDeadlineSeconds` set (≥ 0).
    pub terminating: bool,
    /// `spec.priorityClassName` ("" when none).
    pub priority_class: String,
    /// A pod (anti-)affinity term naming other namespaces or a namespace selector.
    pub cross_namespace_affinity: bool,
}

/// A pod's quota facts, computed once (the controller keeps one per cached pod, so
/// they stay small: two resource sums, not a map per resource name).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PodQuota {
    requests: Resources,
    limits: Resources,
    pub scopes: PodScopes,
    terminal: bool,
    deletion_deadline: Option<Timestamp>,
}

impl PodQuota {
    pub fn of(pod: &Pod) -> PodQuota {
        let spec = pod.spec.clone().unwrap_or_default();
        let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
        let meta = &pod.metadata;
        let deletion_deadline = meta.deletion_timestamp.as_ref().and_then(|t| {
            let grace = meta.deletion_grace_period_seconds?;
            t.0.checked_add(SignedDuration::from_secs(grace)).ok()
        });
        PodQuota {
            requests: pod_requests(&spec, MissingRequests::Zero),
            limits: pod_limits(&spec),
            scopes: PodScopes {
                best_effort: qos_class(&spec) == QosClass::BestEffort,
                terminating: spec.active_deadline_seconds.is_some_and(|s| s >= 0),
                priority_class: spec.priority_class_name.clone().unwrap_or_default(),
                cross_namespace_affinity: cross_namespace_affinity(&spec),
            },
            terminal: matches!(phase, Some("Succeeded" | "Failed")),
            deletion_deadline,
        }
    }

    /// Whether the pod's compute and `pods` count at `now` (upstream `QuotaV1Pod`).
    pub fn counts(&self, now: Timestamp) -> bool {
        !self.terminal && self.deletion_deadline.is_none_or(|d| now <= d)
    }

    /// What the pod charges at `now`.
    pub fn usage(&self, now: Timestamp) -> Usage {
        if self.counts(now) {
            self.live_usage()
        } else {
            let mut u = Usage::default();
            u.add_units("count/pods", 1);
            u
        }
    }

    /// Usage of a live pod (upstream `podComputeUsageHelper` over `PodRequests` and
    /// `PodLimits`).
    fn live_usage(&self) -> Usage {
        let mut u = Usage::default();
        u.add_units("pods", 1);
        u.add_units("count/pods", 1);
        add_compute(&mut u, "requests.", &self.requests, true);
        add_compute(&mut u, "limits.", &self.limits, false);
        u
    }

    /// The quota resources the pod's compute usage has (for "does this quota track
    /// pods at all" checks, together with `pods` and `count/pods`).
    pub fn is_pod_resource(name: &str) -> bool {
        matches!(name, "pods" | "count/pods")
            || name.starts_with("requests.")
            || name.starts_with("limits.")
            || matches!(name, "cpu" | "memory" | "ephemeral-storage")
            || name.starts_with("hugepages-")
    }
}

fn add_compute(u: &mut Usage, prefix: &str, r: &Resources, plain: bool) {
    let mut put = |name: &str, milli: i128| {
        if milli != 0 {
            u.add_to(&format!("{prefix}{name}"), milli);
            if plain && matches!(name, "cpu" | "memory" | "ephemeral-storage") {
                u.add_to(name, milli);
            }
        }
    };
    put("cpu", i128::from(r.milli_cpu));
    put("memory", i128::from(r.memory) * 1000);
    put("ephemeral-storage", i128::from(r.ephemeral_storage) * 1000);
    for (name, v) in &r.scalar {
        // Extended resources are quota'd by request only, as upstream does.
        if prefix == "requests." || name.starts_with("hugepages-") {
            put(name, i128::from(*v) * 1000);
        }
    }
}

fn crosses_namespaces(t: &PodAffinityTerm) -> bool {
    t.namespaces.as_ref().is_some_and(|n| !n.is_empty()) || t.namespace_selector.is_some()
}

fn cross_namespace_affinity(spec: &PodSpec) -> bool {
    let Some(a) = &spec.affinity else {
        return false;
    };
    let required = |r: &Option<Vec<PodAffinityTerm>>| r.iter().flatten().any(crosses_namespaces);
    let aff = a.pod_affinity.as_ref();
    let anti = a.pod_anti_affinity.as_ref();
    aff.is_some_and(|p| {
        required(&p.required_during_scheduling_ignored_during_execution)
            || p.preferred_during_scheduling_ignored_during_execution
                .iter()
                .flatten()
                .any(|w| crosses_namespaces(&w.pod_affinity_term))
    }) || anti.is_some_and(|p| {
        required(&p.required_during_scheduling_ignored_during_execution)
            || p.preferred_during_scheduling_ignored_during_execution
                .iter()
                .flatten()
                .any(|w| crosses_namespaces(&w.pod_affinity_term))
    })
}

/// The constrained resources one container states (requests count their limits, as
/// API defaulting sets a missing request to the limit).
fn stated(c: &Container) -> BTreeSet<&'static str> {
    let mut out = BTreeSet::new();
    let Some(res) = &c.resources else {
        return out;
    };
    let has =
        |l: &Option<BTreeMap<String, _>>, k: &str| l.as_ref().is_some_and(|m| m.contains_key(k));
    for (k, req, lim) in [
        ("cpu", "requests.cpu", "limits.cpu"),
        ("memory", "requests.memory", "limits.memory"),
    ] {
        if has(&res.requests, k) || has(&res.limits, k) {
            out.insert(if k == "cpu" { "cpu" } else { "memory" });
            out.insert(req);
        }
        if has(&res.limits, k) {
            out.insert(lim);
        }
    }
    out
}

/// Containers that leave out a request or limit the quota's `hard` constrains:
/// `must specify limits.cpu for: a,b; must specify requests.memory for: a` (upstream
/// `podEvaluator.Constraints`), or `None`.
pub fn missing_constraints<'a>(
    spec: &PodSpec,
    hard: impl Iterator<Item = &'a str>,
) -> Option<String> {
    let required: BTreeSet<&str> = hard.filter(|n| COMPUTE_CONSTRAINED.contains(n)).collect();
    if required.is_empty() {
        return None;
    }
    let mut missing: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    let all = spec
        .containers
        .iter()
        .chain(spec.init_containers.iter().flatten());
    for c in all {
        let have = stated(c);
        for r in required.iter().filter(|r| !have.contains(*r)) {
            missing.entry(r).or_default().insert(c.name.as_str());
        }
    }
    if missing.is_empty() {
        return None;
    }
    let parts: Vec<String> = missing
        .iter()
        .map(|(r, names)| {
            let names: Vec<&str> = names.iter().copied().collect();
            format!("must specify {r} for: {}", names.join(","))
        })
        .collect();
    Some(parts.join("; "))
}
