//! Counting finished pods exactly once, as upstream's Job controller does with finalizers:
//! every Job pod carries `batch.kubernetes.io/job-tracking`; a finished pod's uid is first
//! written to `status.uncountedTerminatedPods`, then its finalizer is removed, and only
//! then does it move into `succeeded`/`failed`. A crash between the steps loses nothing
//! and counts nothing twice, and a finished pod deleted by anyone is still counted.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use cairn_semantics::pod_state::PodView;
use futures::future::join_all;
use k8s_openapi::api::batch::v1::{Job, JobStatus, UncountedTerminatedPods};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, Patch, PatchParams};
use kube::ResourceExt;

use super::policy::{self, Verdict};
use super::{indexes, status, Ctx, Error};
use crate::cached_pod::CachedPod;

pub const TRACKING_FINALIZER: &str = "batch.kubernetes.io/job-tracking";

/// What accounting found out this sync.
#[derive(Default)]
pub struct Accounted {
    /// Failed pods newly counted (for the back-off).
    pub newly_failed: u32,
    /// A pod failure policy rule said the Job fails.
    pub fail_job: Option<String>,
}

/// Pods whose finalizer this controller removed while the pod cache still shows it
/// (upstream's finalizer-removal expectations), by Job key. They are counted already: a
/// sync that runs before the pod cache catches up must neither count nor release them
/// again, or a Job counts one pod twice.
#[derive(Default)]
pub struct Released(parking_lot::Mutex<HashMap<String, HashSet<String>>>);

impl Released {
    fn note(&self, key: &str, uids: &HashSet<String>) {
        if !uids.is_empty() {
            let mut all = self.0.lock();
            all.entry(key.to_string())
                .or_default()
                .extend(uids.iter().cloned());
        }
    }

    /// The uids of `key` still pending: a pod the cache shows without the finalizer, or
    /// no longer has, is caught up and forgotten.
    pub fn pending(&self, key: &str, pods: &[Arc<CachedPod>]) -> HashSet<String> {
        let mut all = self.0.lock();
        let Some(uids) = all.get_mut(key) else {
            return HashSet::new();
        };
        let holding: HashSet<&str> = pods
            .iter()
            .filter(|p| has_finalizer(p))
            .map(|p| PodView::uid(p.as_ref()))
            .collect();
        uids.retain(|u| holding.contains(u.as_str()));
        let out = uids.clone();
        if uids.is_empty() {
            all.remove(key);
        }
        out
    }
}

pub fn has_finalizer(pod: &CachedPod) -> bool {
    pod.metadata
        .finalizers
        .as_ref()
        .is_some_and(|f| f.iter().any(|x| x == TRACKING_FINALIZER))
}

/// Finished for the Job: succeeded, failed, or being deleted without having succeeded.
pub fn finished(pod: &CachedPod) -> Option<bool> {
    match pod.phase() {
        "Succeeded" => Some(true),
        "Failed" => Some(false),
        _ if pod.deleting() => Some(false),
        _ => None,
    }
}

/// Records newly finished pods, removes their finalizers, and moves the released ones
/// into the counters of `st` (written by the caller).
pub async fn account(
    job: &Job,
    ctx: &Ctx,
    key: &str,
    pods: &[Arc<CachedPod>],
    st: &mut JobStatus,
) -> Result<Accounted, Error> {
    let mut out = Accounted::default();
    let mut uncounted = st.uncounted_terminated_pods.clone().unwrap_or_default();
    let mut release_only: Vec<&CachedPod> = Vec::new();
    let indexed = status::is_indexed(job);
    let completions = job.spec.as_ref().and_then(|s| s.completions).unwrap_or(0);
    let mut completed = indexes::parse(st.completed_indexes.as_deref().unwrap_or(""));
    let known: HashSet<String> = uncounted_uids(&uncounted).cloned().collect();
    let pending = ctx.released.pending(key, pods);
    let mut added = false;
    for pod in pods.iter().filter(|p| has_finalizer(p)) {
        let Some(succeeded) = finished(pod) else {
            continue;
        };
        let uid = PodView::uid(pod.as_ref());
        if known.contains(uid) || pending.contains(uid) {
            continue;
        }
        if succeeded {
            match indexed.then(|| indexes::index_of(pod.as_ref(), completions)) {
                // A second success of an index, or no valid index: not counted.
                Some(None) => release_only.push(pod),
                Some(Some(i)) if !completed.insert(i) => release_only.push(pod),
                _ => push(&mut uncounted.succeeded, PodView::uid(pod.as_ref())),
            }
            added = true;
            continue;
        }
        match policy::verdict(job, pod) {
            Verdict::Ignore => release_only.push(pod),
            Verdict::Count => push(&mut uncounted.failed, PodView::uid(pod.as_ref())),
            Verdict::FailJob(msg) => {
                push(&mut uncounted.failed, PodView::uid(pod.as_ref()));
                out.fail_job.get_or_insert(msg);
            }
        }
        out.newly_failed += 1;
        added = true;
    }
    if indexed {
        st.completed_indexes = Some(indexes::format(&completed));
    }
    if added {
        st.uncounted_terminated_pods = Some(uncounted.clone());
        // Persisted before any finalizer goes: the uids are the only record then.
        status::write(job, ctx, key, st).await?;
    }
    let in_uncounted: HashSet<&String> = uncounted_uids(&uncounted).collect();
    let to_release: Vec<&CachedPod> = pods
        .iter()
        .map(AsRef::as_ref)
        .filter(|p| has_finalizer(p) && in_uncounted.contains(&PodView::uid(*p).to_string()))
        .chain(release_only)
        .collect();
    let released = release(ctx, job, &to_release).await;
    ctx.released.note(key, &released);
    let released: HashSet<String> = released.union(&pending).cloned().collect();
    move_counted(st, &mut uncounted, pods, &released, indexed, &completed);
    Ok(out)
}

fn push(list: &mut Option<Vec<String>>, uid: &str) {
    list.get_or_insert_with(Vec::new).push(uid.to_string());
}

fn uncounted_uids(u: &UncountedTerminatedPods) -> impl Iterator<Item = &String> {
    u.succeeded
        .iter()
        .flatten()
        .chain(u.failed.iter().flatten())
}

/// The patch that takes the tracking finalizer off a pod (and leaves any other).
pub fn release_patch() -> Patch<serde_json::Value> {
    Patch::Strategic(serde_json::json!({
        "metadata": {"$deleteFromPrimitiveList/finalizers": [TRACKING_FINALIZER]}
    }))
}

/// Removes the tracking finalizer from `pods`; the uids whose finalizer is gone.
async fn release(ctx: &Ctx, job: &Job, pods: &[&CachedPod]) -> HashSet<String> {
    let api: Api<Pod> = Api::namespaced(ctx.client.clone(), &job.namespace().unwrap_or_default());
    let patch = release_patch();
    let pp = PatchParams::default();
    let results = join_all(
        pods.iter()
            .map(|p| api.patch(p.metadata.name.as_deref().unwrap_or(""), &pp, &patch)),
    )
    .await;
    pods.iter()
        .zip(results)
        .filter(|(_, r)| match r {
            Ok(_) => true,
            Err(kube::Error::Api(s)) => s.code == 404,
            Err(_) => false,
        })
        .map(|(p, _)| PodView::uid(*p).to_string())
        .collect()
}

/// Moves uids whose pods no longer hold the finalizer (released now, or earlier, or gone)
/// from `uncounted` into the counters.
fn move_counted(
    st: &mut JobStatus,
    uncounted: &mut UncountedTerminatedPods,
    pods: &[Arc<CachedPod>],
    released: &HashSet<String>,
    indexed: bool,
    completed: &std::collections::BTreeSet<i32>,
) {
    let holding: HashSet<&str> = pods
        .iter()
        .filter(|p| has_finalizer(p) && !released.contains(PodView::uid(p.as_ref())))
        .map(|p| PodView::uid(p.as_ref()))
        .collect();
    let take = |list: &mut Option<Vec<String>>| -> i32 {
        let all = list.take().unwrap_or_default();
        let (keep, done): (Vec<String>, Vec<String>) =
            all.into_iter().partition(|u| holding.contains(u.as_str()));
        *list = (!keep.is_empty()).then_some(keep);
        done.len() as i32
    };
    let succeeded = take(&mut uncounted.succeeded);
    let failed = take(&mut uncounted.failed);
    st.succeeded = Some(if indexed {
        completed.len() as i32
    } else {
        st.succeeded.unwrap_or(0) + succeeded
    });
    st.failed = Some(st.failed.unwrap_or(0) + failed);
    st.uncounted_terminated_pods = Some(uncounted.clone());
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(uid: &str, finalizer: bool) -> Arc<CachedPod> {
        let finalizers = if finalizer {
            json!([TRACKING_FINALIZER])
        } else {
            json!([])
        };
        let p: Pod = serde_json::from_value(json!({
            "metadata": {"name": uid, "namespace": "d", "uid": uid, "finalizers": finalizers},
            "status": {"phase": "Succeeded"},
        }))
        .unwrap();
        Arc::new(CachedPod::from(p))
    }

    /// A pod released a moment ago that the cache still shows with its finalizer stays
    /// pending (never counted twice) until the cache catches up.
    #[test]
    fn released_pods_stay_pending_until_the_cache_catches_up() {
        let released = Released::default();
        released.note("d/j", &HashSet::from(["a".to_string(), "b".to_string()]));
        let stale = [pod("a", true), pod("b", true)];
        assert_eq!(released.pending("d/j", &stale).len(), 2);
        let caught_up = [pod("a", false), pod("b", true)];
        assert_eq!(
            released.pending("d/j", &caught_up),
            HashSet::from(["b".to_string()])
        );
        assert!(released.pending("d/j", &[]).is_empty(), "b is gone");
        assert!(released.0.lock().is_empty());
    }
}
