//! ReplicaSet facts the Deployment controller reads (upstream `deployment/util`):
//! revisions, template equality ignoring `pod-template-hash`, the hash itself, and the
//! rolling-update fenceposts.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::core::v1::PodTemplateSpec;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::ResourceExt;

pub const HASH_LABEL: &str = "pod-template-hash";
pub const REVISION: &str = "deployment.kubernetes.io/revision";
pub const REVISION_HISTORY: &str = "deployment.kubernetes.io/revision-history";
pub const DESIRED_REPLICAS: &str = "deployment.kubernetes.io/desired-replicas";
pub const MAX_REPLICAS: &str = "deployment.kubernetes.io/max-replicas";
/// Deployment annotations never copied onto its ReplicaSets.
const NOT_COPIED: &[&str] = &[
    "kubectl.kubernetes.io/last-applied-configuration",
    REVISION,
    REVISION_HISTORY,
    DESIRED_REPLICAS,
    MAX_REPLICAS,
    "deprecated.deployment.rollback.to",
];

pub fn spec_replicas(rs: &ReplicaSet) -> i32 {
    rs.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1)
}

pub fn status_of(rs: &ReplicaSet) -> (i32, i32, i32) {
    let s = rs.status.clone().unwrap_or_default();
    (
        s.replicas,
        s.ready_replicas.unwrap_or(0),
        s.available_replicas.unwrap_or(0),
    )
}

pub fn available(rs: &ReplicaSet) -> i32 {
    status_of(rs).2
}

pub fn desired(d: &Deployment) -> i32 {
    d.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1)
}

fn annotation<'a>(rs: &'a ReplicaSet, key: &str) -> Option<&'a str> {
    rs.metadata
        .annotations
        .as_ref()?
        .get(key)
        .map(String::as_str)
}

pub fn revision(rs: &ReplicaSet) -> i64 {
    annotation(rs, REVISION)
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

pub fn annotated_replicas(rs: &ReplicaSet, key: &str) -> Option<i32> {
    annotation(rs, key)?.parse().ok()
}

/// The Deployment's annotations that its ReplicaSets carry.
pub fn copied_annotations(d: &Deployment) -> BTreeMap<String, String> {
    let mut out = d.metadata.annotations.clone().unwrap_or_default();
    out.retain(|k, _| !NOT_COPIED.contains(&k.as_str()));
    out
}

fn without_hash(t: &PodTemplateSpec) -> PodTemplateSpec {
    let mut t = t.clone();
    if let Some(meta) = t.metadata.as_mut() {
        if let Some(labels) = meta.labels.as_mut() {
            labels.remove(HASH_LABEL);
            if labels.is_empty() {
                meta.labels = None;
            }
        }
    }
    t
}

/// Whether the two templates are the same apart from `pod-template-hash`.
pub fn equal_ignore_hash(a: &PodTemplateSpec, b: &PodTemplateSpec) -> bool {
    without_hash(a) == without_hash(b)
}

/// `pod-template-hash`: FNV-1a over the template (canonical JSON here: upstream hashes a
/// Go struct dump, which cannot be reproduced outside one Go version and which nothing
/// compares) and the collision count, in upstream's alphabet.
pub fn compute_hash(template: &PodTemplateSpec, collision_count: Option<i32>) -> String {
    let mut h: u32 = 0x811c_9dc5;
    let mut feed = |bytes: &[u8]| {
        for b in bytes {
            h ^= u32::from(*b);
            h = h.wrapping_mul(0x0100_0193);
        }
    };
    feed(&serde_json::to_vec(&without_hash(template)).unwrap_or_default());
    if let Some(c) = collision_count {
        let mut buf = [0u8; 8];
        buf[..4].copy_from_slice(&(c as u32).to_le_bytes());
        feed(&buf);
    }
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    h.to_string()
        .bytes()
        .map(|c| ALPHABET[usize::from(c) % ALPHABET.len()] as char)
        .collect()
}

fn scaled(v: Option<&IntOrString>, total: i32, round_up: bool) -> i32 {
    match v {
        None => 0,
        Some(IntOrString::Int(i)) => *i,
        Some(IntOrString::String(s)) => {
            let Some(pct) = s.strip_suffix('%').and_then(|p| p.parse::<i64>().ok()) else {
                return 0;
            };
            let num = pct * i64::from(total);
            let v = if round_up {
                (num + 99).div_euclid(100)
            } else {
                num.div_euclid(100)
            };
            v as i32
        }
    }
}

fn rolling(d: &Deployment) -> Option<&k8s_openapi::api::apps::v1::RollingUpdateDeployment> {
    let strategy = d.spec.as_ref()?.strategy.as_ref()?;
    if strategy.type_.as_deref() == Some("Recreate") {
        return None;
    }
    strategy.rolling_update.as_ref()
}

pub fn is_recreate(d: &Deployment) -> bool {
    d.spec
        .as_ref()
        .and_then(|s| s.strategy.as_ref())
        .and_then(|s| s.type_.as_deref())
        == Some("Recreate")
}

/// (maxSurge, maxUnavailable) resolved against the desired replicas, at least one of
/// them non-zero (upstream `ResolveFenceposts`).
pub fn fenceposts(d: &Deployment) -> (i32, i32) {
    let replicas = desired(d);
    let default = IntOrString::String("25%".into());
    let (surge, unav) = match rolling(d) {
        Some(r) => (
            scaled(
                Some(r.max_surge.as_ref().unwrap_or(&default)),
                replicas,
                true,
            ),
            scaled(
                Some(r.max_unavailable.as_ref().unwrap_or(&default)),
                replicas,
                false,
            ),
        ),
        None if is_recreate(d) => return (0, 0),
        None => (
            scaled(Some(&default), replicas, true),
            scaled(Some(&default), replicas, false),
        ),
    };
    if surge == 0 && unav == 0 {
        return (0, 1);
    }
    (surge, unav)
}

pub fn max_surge(d: &Deployment) -> i32 {
    if is_recreate(d) {
        0
    } else {
        fenceposts(d).0
    }
}

pub fn max_unavailable(d: &Deployment) -> i32 {
    let replicas = desired(d);
    if is_recreate(d) || replicas == 0 {
        0
    } else {
        fenceposts(d).1.min(replicas)
    }
}

/// The Deployment's pod template.
pub fn template(d: &Deployment) -> PodTemplateSpec {
    d.spec
        .as_ref()
        .map(|s| s.template.clone())
        .unwrap_or_default()
}

/// (the ReplicaSet of the current template, the others).
pub fn split(
    d: &Deployment,
    all: &[Arc<ReplicaSet>],
) -> (Option<Arc<ReplicaSet>>, Vec<Arc<ReplicaSet>>) {
    let t = template(d);
    let new = all
        .iter()
        .find(|rs| {
            rs.spec
                .as_ref()
                .and_then(|s| s.template.as_ref())
                .is_some_and(|rt| equal_ignore_hash(rt, &t))
        })
        .cloned();
    let new_uid = new.as_ref().and_then(|n| n.uid());
    let old = all
        .iter()
        .filter(|rs| rs.uid() != new_uid)
        .cloned()
        .collect();
    (new, old)
}

/// The new ReplicaSet's size for this step (upstream `NewRSNewReplicas`).
pub fn new_rs_replicas(d: &Deployment, all: &[Arc<ReplicaSet>], new: Option<&ReplicaSet>) -> i32 {
    let desired = desired(d);
    let new_replicas = new.map(spec_replicas).unwrap_or(0);
    if is_recreate(d) {
        return desired;
    }
    let max_total = desired + max_surge(d);
    let current: i32 = all.iter().map(|rs| spec_replicas(rs)).sum();
    if current >= max_total {
        return new_replicas;
    }
    new_replicas + (max_total - current).min(desired - new_replicas).max(0)
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use k8s_openapi::api::apps::v1::{DeploymentSpec, DeploymentStrategy, RollingUpdateDeployment};

    /// A RollingUpdate Deployment (shared with the rollout tests).
    pub(in crate::deployment) fn deploy(
        replicas: i32,
        surge: IntOrString,
        unav: IntOrString,
    ) -> Deployment {
        Deployment {
            spec: Some(DeploymentSpec {
                replicas: Some(replicas),
                strategy: Some(DeploymentStrategy {
                    type_: Some("RollingUpdate".into()),
                    rolling_update: Some(RollingUpdateDeployment {
                        max_surge: Some(surge),
                        max_unavailable: Some(unav),
                    }),
                }),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn fenceposts_round_like_upstream() {
        let pct = |s: &str| IntOrString::String(s.into());
        assert_eq!(fenceposts(&deploy(10, pct("25%"), pct("25%"))), (3, 2));
        assert_eq!(fenceposts(&deploy(1, pct("25%"), pct("25%"))), (1, 0));
        assert_eq!(
            fenceposts(&deploy(3, IntOrString::Int(0), IntOrString::Int(0))),
            (0, 1)
        );
        assert_eq!(
            max_unavailable(&deploy(2, IntOrString::Int(0), IntOrString::Int(5))),
            2
        );
        assert_eq!(fenceposts(&deploy(1000, pct("25%"), pct("0%"))), (250, 0));
    }

    #[test]
    fn hash_is_stable_ignores_its_label_and_uses_the_alphabet() {
        let mut t = PodTemplateSpec::default();
        let a = compute_hash(&t, None);
        assert_eq!(a, compute_hash(&t, None));
        assert_ne!(a, compute_hash(&t, Some(1)));
        t.metadata = Some(Default::default());
        t.metadata.as_mut().unwrap().labels = Some([(HASH_LABEL.to_string(), a.clone())].into());
        assert!(equal_ignore_hash(
            &t,
            &PodTemplateSpec {
                metadata: Some(Default::default()),
                ..Default::default()
            }
        ));
        assert!(a.chars().all(|c| "456789bcdf".contains(c)), "{a}");
    }
}
