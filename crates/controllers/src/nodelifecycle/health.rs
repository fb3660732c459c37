//! A node's health as the node lifecycle controller judges it (upstream
//! `tryUpdateNodeHealth`): the kubelet's last sign of life is the later of its Lease's
//! renewal and its Ready condition's heartbeat; past the grace period every condition the
//! kubelet owns turns `Unknown`. Pure.

use k8s_openapi::api::core::v1::{Node, NodeCondition, Taint};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::{SignedDuration, Timestamp};

pub const NOT_READY_TAINT: &str = "node.kubernetes.io/not-ready";
pub const UNREACHABLE_TAINT: &str = "node.kubernetes.io/unreachable";
/// The conditions a kubelet reports, all set Unknown when it goes silent.
const KUBELET_CONDITIONS: &[&str] = &["Ready", "MemoryPressure", "DiskPressure", "PIDPressure"];

/// What the Ready condition says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Readiness {
    Ready,
    NotReady,
    Unknown,
}

pub fn readiness(node: &Node) -> Readiness {
    let ready = node
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|cs| cs.iter().find(|c| c.type_ == "Ready"));
    match ready.map(|c| c.status.as_str()) {
        Some("True") => Readiness::Ready,
        Some("False") => Readiness::NotReady,
        _ => Readiness::Unknown,
    }
}

/// When the kubelet last showed it is alive: the later of the Lease renewal and the Ready
/// heartbeat; the node's creation when neither exists.
pub fn last_seen(node: &Node, lease_renewed: Option<Timestamp>) -> Option<Timestamp> {
    let heartbeat = node
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|cs| cs.iter().find(|c| c.type_ == "Ready"))
        .and_then(|c| c.last_heartbeat_time.as_ref().map(|t| t.0));
    let created = node.metadata.creation_timestamp.as_ref().map(|t| t.0);
    [lease_renewed, heartbeat]
        .into_iter()
        .flatten()
        .max()
        .or(created)
}

/// The conditions after the kubelet stayed silent past `grace` at `now`; `None` when it
/// did not, or when they already say Unknown.
pub fn silenced_conditions(
    node: &Node,
    lease_renewed: Option<Timestamp>,
    grace: SignedDuration,
    now: Timestamp,
) -> Option<Vec<NodeCondition>> {
    let seen = last_seen(node, lease_renewed)?;
    if now.duration_since(seen) <= grace {
        return None;
    }
    let mut conditions = node
        .status
        .as_ref()
        .and_then(|s| s.conditions.clone())
        .unwrap_or_default();
    let mut changed = false;
    for kind in KUBELET_CONDITIONS {
        let (reason, message) = ("NodeStatusUnknown", "Kubelet stopped posting node status.");
        match conditions.iter_mut().find(|c| c.type_ == *kind) {
            Some(c) if c.status == "Unknown" => {}
            Some(c) => {
                c.status = "Unknown".into();
                c.reason = Some(reason.into());
                c.message = Some(message.into());
                c.last_transition_time = Some(Time(now));
                changed = true;
            }
            None => {
                conditions.push(NodeCondition {
                    type_: kind.to_string(),
                    status: "Unknown".into(),
                    reason: Some("NodeStatusNeverUpdated".into()),
                    message: Some("Kubelet never posted node status.".into()),
                    last_heartbeat_time: Some(Time(seen)),
                    last_transition_time: Some(Time(now)),
                });
                changed = true;
            }
        }
    }
    changed.then_some(conditions)
}

/// Upstream's TaintNodesByCondition: a condition that is True → its `NoSchedule` taint.
const CONDITION_TAINTS: &[(&str, &str)] = &[
    ("MemoryPressure", "node.kubernetes.io/memory-pressure"),
    ("DiskPressure", "node.kubernetes.io/disk-pressure"),
    ("PIDPressure", "node.kubernetes.io/pid-pressure"),
    (
        "NetworkUnavailable",
        "node.kubernetes.io/network-unavailable",
    ),
];

fn condition_is_true(node: &Node, kind: &str) -> bool {
    node.status
        .iter()
        .flat_map(|s| s.conditions.iter().flatten())
        .any(|c| c.type_ == kind && c.status == "True")
}

/// The node's taints with the NoExecute and NoSchedule taints its readiness calls for
/// (`not-ready` for False, `unreachable` for Unknown, neither for True) and the
/// `NoSchedule` taint of each True pressure condition; `None`
/// when they are already so. New taints are stamped `now` (NoExecute ones), kept ones
/// keep their time and place.
pub fn desired_taints(node: &Node, readiness: Readiness, now: Timestamp) -> Option<Vec<Taint>> {
    let current = node
        .spec
        .as_ref()
        .and_then(|s| s.taints.clone())
        .unwrap_or_default();
    let stale = |t: &Taint| {
        CONDITION_TAINTS
            .iter()
            .any(|(cond, key)| *key == t.key && !condition_is_true(node, cond))
    };
    let by_condition: Vec<Taint> = CONDITION_TAINTS
        .iter()
        .filter(|(cond, key)| {
            condition_is_true(node, cond)
                && !current
                    .iter()
                    .any(|t| t.key == *key && t.effect == "NoSchedule")
        })
        .map(|(_, key)| Taint {
            key: key.to_string(),
            effect: "NoSchedule".into(),
            time_added: None,
            value: None,
        })
        .collect();
    let wanted_key = match readiness {
        Readiness::Ready => None,
        Readiness::NotReady => Some(NOT_READY_TAINT),
        Readiness::Unknown => Some(UNREACHABLE_TAINT),
    };
    let ours = |t: &Taint| t.key == NOT_READY_TAINT || t.key == UNREACHABLE_TAINT;
    let mut out: Vec<Taint> = current
        .iter()
        .filter(|t| !ours(t) || Some(t.key.as_str()) == wanted_key)
        .filter(|t| !stale(t))
        .cloned()
        .collect();
    out.extend(by_condition);
    if let Some(key) = wanted_key {
        for effect in ["NoSchedule", "NoExecute"] {
            if !out.iter().any(|t| t.key == key && t.effect == effect) {
                out.push(Taint {
                    key: key.to_string(),
                    effect: effect.to_string(),
                    time_added: (effect == "NoExecute").then_some(Time(now)),
                    value: None,
                });
            }
        }
    }
    (out != current).then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn node(ready: &str, heartbeat: &str) -> Node {
        serde_json::from_value(json!({
            "metadata": {"name": "n", "creationTimestamp": "2026-01-01T00:00:00Z"},
            "status": {"conditions": [
                {"type": "Ready", "status": ready, "lastHeartbeatTime": heartbeat},
                {"type": "MemoryPressure", "status": "False", "lastHeartbeatTime": heartbeat},
            ]},
        }))
        .unwrap()
    }

    fn at(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    #[test]
    fn silent_past_the_grace_period_turns_unknown() {
        let n = node("True", "2026-01-01T00:00:00Z");
        let grace = SignedDuration::from_secs(40);
        let lease = Some(at("2026-01-01T00:01:00Z"));
        // The lease renewed a minute after the last status: still alive at +1m30s.
        assert!(silenced_conditions(&n, lease, grace, at("2026-01-01T00:01:30Z")).is_none());
        let c = silenced_conditions(&n, lease, grace, at("2026-01-01T00:01:41Z")).unwrap();
        let ready = c.iter().find(|c| c.type_ == "Ready").unwrap();
        assert_eq!(
            (ready.status.as_str(), ready.reason.as_deref()),
            ("Unknown", Some("NodeStatusUnknown"))
        );
        assert_eq!(
            ready.message.as_deref(),
            Some("Kubelet stopped posting node status.")
        );
        assert!(
            c.iter().all(|c| c.status == "Unknown"),
            "every kubelet condition"
        );
        assert_eq!(c.len(), 4, "missing ones added as never updated");
    }

    #[test]
    fn taints_follow_readiness() {
        let now = at("2026-01-01T00:00:00Z");
        let n = node("True", "2026-01-01T00:00:00Z");
        assert!(desired_taints(&n, Readiness::Ready, now).is_none());
        let t = desired_taints(&n, Readiness::Unknown, now).unwrap();
        let keys: Vec<(&str, &str)> = t
            .iter()
            .map(|t| (t.key.as_str(), t.effect.as_str()))
            .collect();
        assert_eq!(
            keys,
            [
                (UNREACHABLE_TAINT, "NoSchedule"),
                (UNREACHABLE_TAINT, "NoExecute")
            ]
        );
        let mut tainted = n.clone();
        tainted.spec.get_or_insert_with(Default::default).taints = Some(t);
        assert!(desired_taints(&tainted, Readiness::Unknown, now).is_none());
        let swapped = desired_taints(&tainted, Readiness::NotReady, now).unwrap();
        assert!(swapped.iter().all(|t| t.key == NOT_READY_TAINT));
        assert_eq!(
            desired_taints(&tainted, Readiness::Ready, now).unwrap(),
            vec![]
        );
    }

    #[test]
    fn pressure_conditions_taint_no_schedule_until_they_clear() {
        let now = at("2026-01-01T00:00:00Z");
        let mut n = node("True", "2026-01-01T00:00:00Z");
        let set_memory = |n: &mut Node, status: &str| {
            for c in n.status.as_mut().unwrap().conditions.as_mut().unwrap() {
                if c.type_ == "MemoryPressure" {
                    c.status = status.into();
                }
            }
        };
        set_memory(&mut n, "True");
        let t = desired_taints(&n, Readiness::Ready, now).unwrap();
        assert_eq!(t.len(), 1);
        assert_eq!(
            (t[0].key.as_str(), t[0].effect.as_str()),
            ("node.kubernetes.io/memory-pressure", "NoSchedule")
        );
        n.spec.get_or_insert_with(Default::default).taints = Some(t);
        assert!(
            desired_taints(&n, Readiness::Ready, now).is_none(),
            "already tainted"
        );
        set_memory(&mut n, "False");
        assert_eq!(desired_taints(&n, Readiness::Ready, now).unwrap(), vec![]);
    }
}
