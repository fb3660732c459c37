//! What a StatefulSet does next, decided without IO (upstream `updateStatefulSet`):
//! create missing ordinals and replace failed pods in order, remove ordinals past
//! `replicas` from the highest, then roll pods at ordinals ≥ `partition` to the update
//! revision from the highest, one at a time. `OrderedReady` stops at the first step and
//! at any pod that is not yet Running and Ready; `Parallel` does not wait.

use std::collections::BTreeMap;
use std::sync::Arc;

use cairn_semantics::pod_state::{self, PodView};
use k8s_openapi::jiff::Timestamp;

use crate::cached_pod::CachedPod;
use crate::revisions::REVISION_LABEL;

/// The facts of the set the plan reads.
pub struct View<'a> {
    pub start: i32,
    pub replicas: i32,
    pub parallel: bool,
    /// `Some(partition)` for RollingUpdate, `None` for OnDelete.
    pub partition: Option<i32>,
    pub update_revision: &'a str,
    pub min_ready_seconds: i32,
    pub now: Timestamp,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Step {
    /// Create the pod of `ordinal`, at the update revision or the current one.
    Create {
        ordinal: i32,
        update: bool,
    },
    Delete(Arc<CachedPod>),
}

pub fn revision_of(pod: &CachedPod) -> &str {
    pod.metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(REVISION_LABEL))
        .map_or("", String::as_str)
}

/// Running, Ready and available for `minReadySeconds`.
pub fn healthy(v: &View, pod: &CachedPod) -> bool {
    pod.phase() == "Running"
        && !pod.deleting()
        && pod_state::is_available(pod, v.min_ready_seconds, v.now)
}

/// Whether a new pod at `ordinal` gets the update revision.
pub fn uses_update(v: &View, ordinal: i32) -> bool {
    v.partition.is_none_or(|p| ordinal >= p)
}

pub fn plan(
    v: &View,
    pods: &BTreeMap<i32, Arc<CachedPod>>,
    condemned: &[Arc<CachedPod>],
) -> Vec<Step> {
    let monotonic = !v.parallel;
    let mut steps = Vec::new();
    for ordinal in v.start..v.start + v.replicas {
        let step = match pods.get(&ordinal) {
            None => Some(Step::Create {
                ordinal,
                update: uses_update(v, ordinal),
            }),
            Some(p) if pod_state::is_terminal(p.as_ref()) && !p.deleting() => {
                Some(Step::Delete(p.clone()))
            }
            Some(p) if healthy(v, p) => continue,
            // Terminating, pending or not ready: OrderedReady waits for it.
            Some(_) => None,
        };
        let waits = step.is_none();
        steps.extend(step);
        if monotonic && (waits || !steps.is_empty()) {
            return steps;
        }
    }
    let mut condemned: Vec<&Arc<CachedPod>> = condemned.iter().collect();
    condemned.sort_by_key(|p| std::cmp::Reverse(ordinal_of_pod(p)));
    for p in condemned {
        if !p.deleting() {
            steps.push(Step::Delete(p.clone()));
        }
        if monotonic {
            return steps;
        }
    }
    if steps.is_empty() {
        steps.extend(rolling_step(v, pods));
    }
    steps
}

/// The next pod to replace with the update revision, highest ordinal first, once every
/// pod at or above the partition before it is healthy.
fn rolling_step(v: &View, pods: &BTreeMap<i32, Arc<CachedPod>>) -> Option<Step> {
    let partition = v.partition?;
    for ordinal in (partition.max(v.start)..v.start + v.replicas).rev() {
        let p = pods.get(&ordinal)?;
        if revision_of(p) != v.update_revision && !p.deleting() {
            return Some(Step::Delete(p.clone()));
        }
        if !healthy(v, p) {
            return None;
        }
    }
    None
}

/// The ordinal in a pod's name `<set>-<ordinal>`.
pub fn ordinal_of_pod(pod: &CachedPod) -> Option<i32> {
    pod.metadata
        .name
        .as_deref()?
        .rsplit_once('-')?
        .1
        .parse()
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(name: &str, rev: &str, phase: &str, ready: bool) -> Arc<CachedPod> {
        let mut p = CachedPod::default();
        p.metadata.name = Some(name.into());
        p.metadata.labels = Some([(REVISION_LABEL.to_string(), rev.to_string())].into());
        p.phase = Some(phase.into());
        p.ready = Some((ready, None));
        Arc::new(p)
    }

    fn view(replicas: i32, parallel: bool, partition: Option<i32>) -> View<'static> {
        View {
            start: 0,
            replicas,
            parallel,
            partition,
            update_revision: "new",
            min_ready_seconds: 0,
            now: Timestamp::now(),
        }
    }

    fn set(pods: &[Arc<CachedPod>]) -> BTreeMap<i32, Arc<CachedPod>> {
        pods.iter()
            .map(|p| (ordinal_of_pod(p).unwrap(), p.clone()))
            .collect()
    }

    #[test]
    fn ordered_ready_creates_one_at_a_time() {
        let v = view(3, false, Some(0));
        assert_eq!(
            plan(&v, &set(&[]), &[]),
            vec![Step::Create {
                ordinal: 0,
                update: true
            }]
        );
        let pending = set(&[pod("web-0", "new", "Pending", false)]);
        assert!(plan(&v, &pending, &[]).is_empty(), "web-1 waits for web-0");
        let ready = set(&[pod("web-0", "new", "Running", true)]);
        assert_eq!(
            plan(&v, &ready, &[]),
            vec![Step::Create {
                ordinal: 1,
                update: true
            }]
        );
        let parallel = view(3, true, Some(0));
        assert_eq!(plan(&parallel, &set(&[]), &[]).len(), 3);
    }

    #[test]
    fn scale_down_from_the_highest_and_roll_descending() {
        let v = view(1, false, Some(0));
        let pods = [
            pod("web-0", "new", "Running", true),
            pod("web-1", "new", "Running", true),
            pod("web-2", "new", "Running", true),
        ];
        let steps = plan(&v, &set(&pods[..1]), &pods[1..]);
        assert_eq!(steps, vec![Step::Delete(pods[2].clone())]);
        let v = view(3, false, Some(1));
        let old = [
            pod("web-0", "old", "Running", true),
            pod("web-1", "old", "Running", true),
            pod("web-2", "old", "Running", true),
        ];
        assert_eq!(
            plan(&v, &set(&old), &[]),
            vec![Step::Delete(old[2].clone())]
        );
        let mixed = [
            old[0].clone(),
            old[1].clone(),
            pod("web-2", "new", "Running", true),
        ];
        assert_eq!(
            plan(&v, &set(&mixed), &[]),
            vec![Step::Delete(old[1].clone())]
        );
        let done = [
            old[0].clone(),
            pod("web-1", "new", "Running", true),
            pod("web-2", "new", "Running", true),
        ];
        assert!(
            plan(&v, &set(&done), &[]).is_empty(),
            "web-0 is below the partition"
        );
        assert!(!uses_update(&v, 0) && uses_update(&v, 1));
    }
}
