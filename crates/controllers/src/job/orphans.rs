//! Pods that still hold `batch.kubernetes.io/job-tracking` when no running Job tracks them
//! lose it, as upstream's orphan-pod worker (`syncOrphanPod`) does: their Job was deleted
//! (or orphaned them), finished, or was replaced by another of the same name. Without
//! this a deleted pod of a deleted Job stays Terminating for good.

use std::sync::Arc;

use futures::{Stream, StreamExt};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, PatchParams};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Client, ResourceExt};
use tracing::{info, warn};

use super::{status, tracking};
use crate::cached_pod::CachedPod;
use crate::owner;

/// Attempts per wake-up before the pod waits for the next event or resync.
const ATTEMPTS: u32 = 3;

pub struct Ctx {
    pub client: Client,
    pub pods: Store<CachedPod>,
    pub jobs: Store<Job>,
}

/// What a touched pod wakes: itself, while it holds the finalizer.
pub fn pod_key(p: &CachedPod) -> Vec<ObjectRef<CachedPod>> {
    if tracking::has_finalizer(p) {
        vec![ObjectRef::from_obj(p)]
    } else {
        Vec::new()
    }
}

/// What a deleted or finished Job wakes: its pods that still hold the finalizer.
pub fn job_pods(
    pods: Store<CachedPod>,
) -> impl Fn(&Job, bool) -> Vec<ObjectRef<CachedPod>> + Send + Sync + 'static {
    move |job, deleted| {
        let finished = job.status.as_ref().is_some_and(status::finished);
        if !deleted && !finished {
            return Vec::new();
        }
        let uid = job.uid().unwrap_or_default();
        pods.state()
            .iter()
            .filter(|p| p.metadata.namespace == job.metadata.namespace)
            .filter(|p| owner::controller_of(&p.metadata).is_some_and(|r| r.uid == uid))
            .flat_map(|p| pod_key(p))
            .collect()
    }
}

/// Whether no running Job tracks `pod` any more (upstream's test: a controller that is a
/// batch/v1 Job which exists with the same uid and has not finished keeps it).
pub fn orphaned(pod: &CachedPod, jobs: &Store<Job>) -> bool {
    let Some(owner) = owner::controller_of(&pod.metadata) else {
        return true;
    };
    if owner.kind != "Job" || owner.api_version != "batch/v1" {
        // Controlled by something else: its finalizer is not ours to take.
        return false;
    }
    let ns = pod.metadata.namespace.clone().unwrap_or_default();
    match jobs.get(&ObjectRef::new(&owner.name).within(&ns)) {
        Some(job) if job.uid().as_deref() == Some(owner.uid.as_str()) => {
            job.status.as_ref().is_some_and(status::finished)
        }
        _ => true,
    }
}

/// Takes the finalizer off every orphaned pod the triggers or the resync bring.
pub async fn run(
    ctx: Arc<Ctx>,
    triggers: impl Stream<Item = ObjectRef<CachedPod>> + Send + 'static,
    resync: impl Stream<Item = ()> + Send + 'static,
) {
    let store = ctx.pods.clone();
    let everyone = resync.flat_map(move |_| {
        let keys: Vec<ObjectRef<CachedPod>> =
            store.state().iter().flat_map(|p| pod_key(p)).collect();
        futures::stream::iter(keys)
    });
    futures::stream::select(triggers, everyone)
        .for_each_concurrent(4, |key| {
            let ctx = ctx.clone();
            async move { release_if_orphaned(&ctx, &key).await }
        })
        .await;
}

async fn release_if_orphaned(ctx: &Ctx, key: &ObjectRef<CachedPod>) {
    let ns = key.namespace.clone().unwrap_or_default();
    let api: Api<Pod> = Api::namespaced(ctx.client.clone(), &ns);
    for attempt in 1..=ATTEMPTS {
        let Some(pod) = ctx.pods.get(key) else {
            return;
        };
        if !tracking::has_finalizer(&pod) || !orphaned(&pod, &ctx.jobs) {
            return;
        }
        match api
            .patch(
                &key.name,
                &PatchParams::default(),
                &tracking::release_patch(),
            )
            .await
        {
            Ok(_) => {
                info!(pod = %format!("{ns}/{}", key.name), "removed the job-tracking finalizer of an orphaned pod");
                return;
            }
            Err(kube::Error::Api(s)) if s.code == 404 => return,
            Err(e) => {
                warn!(pod = %format!("{ns}/{}", key.name), error = %e, attempt, "removing the job-tracking finalizer of an orphaned pod");
                tokio::time::sleep(std::time::Duration::from_secs(u64::from(attempt))).await;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::runtime::reflector::store::Writer;
    use kube::runtime::watcher::Event;
    use serde_json::json;

    fn pod(owner: Option<(&str, &str, &str)>) -> CachedPod {
        let refs = owner.map(|(kind, name, uid)| {
            json!([{"apiVersion": if kind == "Job" {"batch/v1"} else {"apps/v1"},
                    "kind": kind, "name": name, "uid": uid, "controller": true}])
        });
        let p: Pod = serde_json::from_value(json!({
            "metadata": {"name": "p", "namespace": "d", "uid": "pod-uid",
                         "finalizers": [tracking::TRACKING_FINALIZER],
                         "ownerReferences": refs},
        }))
        .unwrap();
        CachedPod::from(p)
    }

    fn jobs(list: &[(&str, &str, bool)]) -> Store<Job> {
        let mut w: Writer<Job> = Default::default();
        for (name, uid, finished) in list {
            let conditions = finished.then(|| json!([{"type": "Complete", "status": "True"}]));
            let job: Job = serde_json::from_value(json!({
                "metadata": {"name": name, "namespace": "d", "uid": uid},
                "status": {"conditions": conditions},
            }))
            .unwrap();
            w.apply_watcher_event(&Event::Apply(job));
        }
        w.as_reader()
    }

    #[test]
    fn a_pod_is_orphaned_unless_a_running_job_of_its_uid_controls_it() {
        let running = jobs(&[("j", "job-uid", false)]);
        assert!(!orphaned(&pod(Some(("Job", "j", "job-uid"))), &running));
        assert!(
            orphaned(&pod(Some(("Job", "j", "job-uid"))), &jobs(&[])),
            "Job deleted"
        );
        assert!(
            orphaned(&pod(Some(("Job", "j", "old-uid"))), &running),
            "a new Job of the same name"
        );
        let finished = jobs(&[("j", "job-uid", true)]);
        assert!(orphaned(&pod(Some(("Job", "j", "job-uid"))), &finished));
        assert!(orphaned(&pod(None), &running), "orphaned by the GC");
        assert!(
            !orphaned(&pod(Some(("ReplicaSet", "r", "rs-uid"))), &jobs(&[])),
            "another controller's pod is left alone"
        );
    }

    #[test]
    fn only_deleted_or_finished_jobs_wake_their_pods() {
        let mut w: Writer<CachedPod> = Default::default();
        w.apply_watcher_event(&Event::Apply(pod(Some(("Job", "j", "job-uid")))));
        let wake = job_pods(w.as_reader());
        let job = |finished: bool| -> Job {
            let conditions = finished.then(|| json!([{"type": "Failed", "status": "True"}]));
            serde_json::from_value(json!({
                "metadata": {"name": "j", "namespace": "d", "uid": "job-uid"},
                "status": {"conditions": conditions},
            }))
            .unwrap()
        };
        assert!(wake(&job(false), false).is_empty());
        assert_eq!(wake(&job(false), true).len(), 1);
        assert_eq!(wake(&job(true), false).len(), 1);
    }
}
