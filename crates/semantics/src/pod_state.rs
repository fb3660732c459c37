//! A pod's lifecycle state as the controllers read it (upstream `pkg/api/v1/pod` and
//! `controller_utils`): active, terminating, ready, available after `minReadySeconds`, and
//! the scale-down order of ReplicaSets (`getPodsToDelete`). Written over [`PodView`], so
//! a full `Pod` and a cache's compact copy of one answer alike.

use std::cmp::Ordering;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::jiff::{SignedDuration, Timestamp};

/// The facts of a pod these rules read. The metadata-based ones have defaults.
pub trait PodView {
    fn metadata(&self) -> &ObjectMeta;
    fn phase(&self) -> &str;
    /// The Ready condition: whether it is True, and since when (if known).
    fn ready_condition(&self) -> Option<(bool, Option<Timestamp>)>;
    fn node_name(&self) -> &str;
    /// The highest restart count among its containers.
    fn max_restarts(&self) -> i32;
    fn deleting(&self) -> bool {
        self.metadata().deletion_timestamp.is_some()
    }
    fn uid(&self) -> &str {
        self.metadata().uid.as_deref().unwrap_or("")
    }
    fn created(&self) -> Option<Timestamp> {
        self.metadata().creation_timestamp.as_ref().map(|t| t.0)
    }
    fn annotation(&self, key: &str) -> Option<&str> {
        self.metadata()
            .annotations
            .as_ref()?
            .get(key)
            .map(String::as_str)
    }
}

impl PodView for Pod {
    fn phase(&self) -> &str {
        self.status
            .as_ref()
            .and_then(|s| s.phase.as_deref())
            .unwrap_or("")
    }
    fn metadata(&self) -> &ObjectMeta {
        &self.metadata
    }
    fn ready_condition(&self) -> Option<(bool, Option<Timestamp>)> {
        let c = self
            .status
            .as_ref()?
            .conditions
            .as_ref()?
            .iter()
            .find(|c| c.type_ == "Ready")?;
        Some((
            c.status == "True",
            c.last_transition_time.as_ref().map(|t| t.0),
        ))
    }
    fn node_name(&self) -> &str {
        self.spec
            .as_ref()
            .and_then(|s| s.node_name.as_deref())
            .unwrap_or("")
    }
    fn max_restarts(&self) -> i32 {
        self.status
            .as_ref()
            .and_then(|s| s.container_statuses.as_ref())
            .and_then(|cs| cs.iter().map(|c| c.restart_count).max())
            .unwrap_or(0)
    }
}

/// Not finished (`Succeeded`/`Failed`) and not being deleted.
pub fn is_active<P: PodView + ?Sized>(pod: &P) -> bool {
    !is_terminal(pod) && !pod.deleting()
}

/// Finished: phase `Succeeded` or `Failed`.
pub fn is_terminal<P: PodView + ?Sized>(pod: &P) -> bool {
    matches!(pod.phase(), "Succeeded" | "Failed")
}

/// Being deleted but not finished yet.
pub fn is_terminating<P: PodView + ?Sized>(pod: &P) -> bool {
    !is_terminal(pod) && pod.deleting()
}

/// When the pod's Ready condition is True: since when (`None` inside when unknown).
fn ready_since<P: PodView + ?Sized>(pod: &P) -> Option<Option<Timestamp>> {
    match pod.ready_condition()? {
        (true, since) => Some(since),
        (false, _) => None,
    }
}

pub fn is_ready<P: PodView + ?Sized>(pod: &P) -> bool {
    ready_since(pod).is_some()
}

/// Ready for more than `min_ready_seconds` at `now` (ready is enough when it is 0).
pub fn is_available<P: PodView + ?Sized>(pod: &P, min_ready_seconds: i32, now: Timestamp) -> bool {
    match ready_since(pod) {
        None => false,
        Some(_) if min_ready_seconds <= 0 => true,
        Some(None) => false,
        Some(Some(since)) => since + SignedDuration::from_secs(i64::from(min_ready_seconds)) < now,
    }
}

/// When a pod becomes available, if it is ready but not yet available: the controller
/// re-checks then.
pub fn available_at<P: PodView + ?Sized>(pod: &P, min_ready_seconds: i32) -> Option<Timestamp> {
    let since = ready_since(pod)??;
    Some(since + SignedDuration::from_secs(i64::from(min_ready_seconds)))
}

fn phase_rank<P: PodView + ?Sized>(pod: &P) -> u8 {
    match pod.phase() {
        "Unknown" => 1,
        "Running" => 2,
        _ => 0,
    }
}

fn deletion_cost<P: PodView + ?Sized>(pod: &P) -> i32 {
    pod.annotation("controller.kubernetes.io/pod-deletion-cost")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// A pod with the number of related active pods on its node (upstream's "rank").
pub struct Ranked<'a, P: PodView + ?Sized> {
    pub pod: &'a P,
    pub colocated: usize,
}

/// Orders pods for deletion, first to go first (upstream's `ActivePodsWithRanks` with
/// pod-deletion-cost and logarithmic scale-down, both on by default).
pub fn deletion_order<P: PodView + ?Sized>(
    a: &Ranked<P>,
    b: &Ranked<P>,
    now: Timestamp,
) -> Ordering {
    let (p, q) = (a.pod, b.pod);
    let (pn, qn) = (p.node_name(), q.node_name());
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
        .then_with(|| q.max_restarts().cmp(&p.max_restarts()))
        .then_with(|| newer_first(p.created(), q.created(), p, q, now))
}

fn ready_time_order<P: PodView + ?Sized>(p: &P, q: &P, now: Timestamp) -> Ordering {
    match (ready_since(p), ready_since(q)) {
        (Some(a), Some(b)) if a != b => newer_first(a, b, p, q, now),
        _ => Ordering::Equal,
    }
}

/// The more recent time first (no time counts as most recent); times compared in
/// log2 buckets of their age, equal buckets by UID.
fn newer_first<P: PodView + ?Sized>(
    a: Option<Timestamp>,
    b: Option<Timestamp>,
    p: &P,
    q: &P,
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
            bucket(a).cmp(&bucket(b)).then_with(|| p.uid().cmp(q.uid()))
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
        let mut ranked: Vec<Ranked<Pod>> = pods
            .iter()
            .map(|p| Ranked {
                pod: *p,
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
