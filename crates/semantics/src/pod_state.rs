//! A pod's lifecycle state as the controllers read it (upstream `pkg/api/v1/pod` and
//! `controller_utils`): active, terminating, ready, available after `minReadySeconds`, and
//! the scale-down order of ReplicaSets (`getPodsToDelete`).

use std::cmp::Ordering;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::{SignedDuration, Timestamp};

/// Not finished (`Succeeded`/`Failed`) and not being deleted.
pub fn is_active(pod: &Pod) -> bool {
    !is_terminal(pod) && pod.metadata.deletion_timestamp.is_none()
}

/// Finished: phase `Succeeded` or `Failed`.
pub fn is_terminal(pod: &Pod) -> bool {
    matches!(phase(pod), "Succeeded" | "Failed")
}

/// Being deleted but not finished yet.
pub fn is_terminating(pod: &Pod) -> bool {
    !is_terminal(pod) && pod.metadata.deletion_timestamp.is_some()
}

pub fn phase(pod: &Pod) -> &str {
    pod.status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or("")
}

/// When the pod's Ready condition is True: since when (`None` inside when unknown).
fn ready_since(pod: &Pod) -> Option<Option<Timestamp>> {
    let cond = pod
        .status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == "Ready")?;
    (cond.status == "True").then(|| cond.last_transition_time.as_ref().map(|t| t.0))
}

pub fn is_ready(pod: &Pod) -> bool {
    ready_since(pod).is_some()
}

/// Ready for more than `min_ready_seconds` at `now` (ready is enough when it is 0).
pub fn is_available(pod: &Pod, min_ready_seconds: i32, now: Timestamp) -> bool {
    match ready_since(pod) {
        None => false,
        Some(_) if min_ready_seconds <= 0 => true,
        Some(None) => false,
        Some(Some(since)) => since + SignedDuration::from_secs(i64::from(min_ready_seconds)) < now,
    }
}

/// When a pod becomes available, if it is ready but not yet available: the controller
/// re-checks then.
pub fn available_at(pod: &Pod, min_ready_seconds: i32) -> Option<Timestamp> {
    let since = ready_since(pod)??;
    Some(since + SignedDuration::from_secs(i64::from(min_ready_seconds)))
}

fn max_restarts(pod: &Pod) -> i32 {
    pod.status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref())
        .and_then(|cs| cs.iter().map(|c| c.restart_count).max())
        .unwrap_or(0)
}

fn phase_rank(pod: &Pod) -> u8 {
    match phase(pod) {
        "Unknown" => 1,
        "Running" => 2,
        _ => 0,
    }
}

fn deletion_cost(pod: &Pod) -> i32 {
    pod.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get("controller.kubernetes.io/pod-deletion-cost"))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

fn node_name(pod: &Pod) -> &str {
    pod.spec
        .as_ref()
        .and_then(|s| s.node_name.as_deref())
        .unwrap_or("")
}

/// A pod with the number of related active pods on its node (upstream's "rank").
pub struct Ranked<'a> {
    pub pod: &'a Pod,
    pub colocated: usize,
}

/// Orders pods for deletion, first to go first (upstream's `ActivePodsWithRanks` with
/// pod-deletion-cost and logarithmic scale-down, both on by default).
pub fn deletion_order(a: &Ranked, b: &Ranked, now: Timestamp) -> Ordering {
    let (p, q) = (a.pod, b.pod);
    let (pn, qn) = (node_name(p), node_name(q));
    if pn != qn && (pn.is_empty() || qn.is_empty()) {
        return if pn.is_empty() {
            Ordering::Less
        } else {
            Ordering::Greater
        };
    }
    phase_rank(p)
        .cmp(&phase_rank(q))
        .then_with(|| is_ready(p).cmp(&is_ready(q)))
        .then_with(|| deletion_cost(p).cmp(&deletion_cost(q)))
        .then_with(|| b.colocated.cmp(&a.colocated))
        .then_with(|| ready_time_order(p, q, now))
        .then_with(|| max_restarts(q).cmp(&max_restarts(p)))
        .then_with(|| {
            let created = |x: &Pod| x.metadata.creation_timestamp.as_ref().map(|t| t.0);
            newer_first(created(p), created(q), p, q, now)
        })
}

fn ready_time_order(p: &Pod, q: &Pod, now: Timestamp) -> Ordering {
    match (ready_since(p), ready_since(q)) {
        (Some(a), Some(b)) if a != b => newer_first(a, b, p, q, now),
        _ => Ordering::Equal,
    }
}

/// The more recent time first (no time counts as most recent); times compared in
/// log2 buckets of their age, equal buckets by UID.
fn newer_first(
    a: Option<Timestamp>,
    b: Option<Timestamp>,
    p: &Pod,
    q: &Pod,
    now: Timestamp,
) -> Ordering {
    match (a, b) {
        (None, None) => Ordering::Equal,
        (None, Some(_)) => Ordering::Less,
        (Some(_), None) => Ordering::Greater,
        (Some(a), Some(b)) if a == b => Ordering::Equal,
        (Some(a), Some(b)) => {
            let bucket = |t: Timestamp| {
                let age = now.duration_since(t).as_nanos().max(1) as u128;
                127 - age.leading_zeros()
            };
            match bucket(a).cmp(&bucket(b)) {
                Ordering::Equal => {
                    let uid = |x: &Pod| x.metadata.uid.clone().unwrap_or_default();
                    uid(p).cmp(&uid(q))
                }
                other => other,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{ContainerStatus, PodCondition, PodSpec, PodStatus};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    fn ts(secs: i64) -> Timestamp {
        Timestamp::from_second(secs).unwrap()
    }

    fn pod(uid: &str, node: &str, phase: &str, ready_at: Option<i64>) -> Pod {
        let mut p = Pod::default();
        p.metadata.uid = Some(uid.into());
        p.metadata.creation_timestamp = Some(Time(ts(1000)));
        p.spec = Some(PodSpec {
            node_name: (!node.is_empty()).then(|| node.into()),
            ..Default::default()
        });
        p.status = Some(PodStatus {
            phase: Some(phase.into()),
            conditions: ready_at.map(|t| {
                vec![PodCondition {
                    type_: "Ready".into(),
                    status: "True".into(),
                    last_transition_time: Some(Time(ts(t))),
                    ..Default::default()
                }]
            }),
            ..Default::default()
        });
        p
    }

    #[test]
    fn active_ready_available() {
        let now = ts(2000);
        let p = pod("a", "n", "Running", Some(1990));
        assert!(is_active(&p) && is_ready(&p));
        assert!(is_available(&p, 0, now));
        assert!(is_available(&p, 5, now));
        assert!(
            !is_available(&p, 10, now),
            "exactly minReadySeconds is not yet available"
        );
        assert_eq!(available_at(&p, 30), Some(ts(2020)));
        let mut done = pod("b", "n", "Succeeded", None);
        assert!(!is_active(&done) && is_terminal(&done));
        done.status.as_mut().unwrap().phase = Some("Running".into());
        done.metadata.deletion_timestamp = Some(Time(now));
        assert!(is_terminating(&done) && !is_active(&done));
    }

    #[test]
    fn scale_down_order() {
        let now = ts(100_000);
        let unassigned = pod("u", "", "Pending", None);
        let pending = pod("p", "n1", "Pending", None);
        let not_ready = pod("r0", "n1", "Running", None);
        let ready_new = pod("r1", "n1", "Running", Some(99_990));
        let ready_old = pod("r2", "n1", "Running", Some(1_000));
        let mut restarted = pod("r3", "n1", "Running", Some(1_000));
        restarted.status.as_mut().unwrap().container_statuses = Some(vec![ContainerStatus {
            restart_count: 4,
            ..Default::default()
        }]);
        let pods = [
            &ready_old,
            &restarted,
            &ready_new,
            &not_ready,
            &pending,
            &unassigned,
        ];
        let mut ranked: Vec<Ranked> = pods
            .iter()
            .map(|p| Ranked {
                pod: p,
                colocated: 1,
            })
            .collect();
        ranked.sort_by(|a, b| deletion_order(a, b, now));
        let uids: Vec<&str> = ranked
            .iter()
            .map(|r| r.pod.metadata.uid.as_deref().unwrap())
            .collect();
        assert_eq!(uids, ["u", "p", "r0", "r1", "r3", "r2"]);
        // More co-located pods go first when all else is equal.
        let a = Ranked {
            pod: &ready_old,
            colocated: 1,
        };
        let b = Ranked {
            pod: &ready_old,
            colocated: 3,
        };
        assert_eq!(deletion_order(&b, &a, now), Ordering::Less);
    }
}
