//! The Job controller (upstream `pkg/controller/job`): runs pods until `completions`
//! succeed (or every index of an Indexed Job has), at most `parallelism` at a time;
//! replaces failed pods after an exponential back-off until `backoffLimit`; fails the Job
//! on `activeDeadlineSeconds` or a pod failure policy's `FailJob`; suspends and resumes.
//! Finished pods are counted exactly once through the tracking finalizer ([`tracking`]).

mod decide;
pub mod indexes;
pub mod orphans;
mod pods;
pub mod policy;
mod status;
mod tracking;
pub mod ttl;

use crate::wiring::{resync_ticks, Informers, Task};
use std::sync::Arc;
use std::time::Duration;

use cairn_events::{EventType, Recorder};
use cairn_semantics::pod_state::{self, PodView};
use futures::Stream;
use k8s_openapi::api::batch::v1::{Job, JobStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::runtime::controller::Action;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Client, ResourceExt};
use thiserror::Error;
use tracing::debug;

use crate::cached_pod::CachedPod;
use crate::expectations::Expectations;
use crate::owner;
use crate::reconcile_loop;
use decide::Decision;

#[derive(Debug, Error)]
pub enum Error {
    #[error("job {key}: {source}")]
    Api {
        key: String,
        #[source]
        source: kube::Error,
    },
}

pub struct Ctx {
    pub client: Client,
    pub pods: Store<CachedPod>,
    pub jobs: Store<Job>,
    pub recorder: Recorder,
    pub expectations: Expectations,
    pub backoff: policy::Backoff,
    /// Finalizers removed that the pod cache has not seen go yet.
    pub released: tracking::Released,
}

/// The Job a pod belongs to (its controller).
pub fn pod_owner(pod: &CachedPod) -> Vec<ObjectRef<Job>> {
    owner::controller_key(&pod.metadata)
}

/// Runs the controller until its triggers end.
pub async fn run(
    ctx: Arc<Ctx>,
    triggers: impl Stream<Item = ObjectRef<Job>> + Send + 'static,
    resync: impl Stream<Item = ()> + Send + 'static,
) {
    let store = ctx.jobs.clone();
    reconcile_loop::run("job", store, triggers, resync, 16, ctx, reconcile).await;
}

async fn reconcile(job: Arc<Job>, ctx: Arc<Ctx>) -> Result<Action, Error> {
    let key = reconcile_loop::key_of(job.as_ref());
    sync(&job, &ctx, &key).await
}

fn api_error(key: &str) -> impl Fn(kube::Error) -> Error + '_ {
    move |source| Error::Api {
        key: key.to_string(),
        source,
    }
}

/// The pods this Job controls, finished ones included.
fn owned_pods(ctx: &Ctx, job: &Job) -> Vec<Arc<CachedPod>> {
    let ns = job.namespace();
    let uid = job.uid().unwrap_or_default();
    ctx.pods
        .state()
        .into_iter()
        .filter(|p| p.metadata.namespace == ns)
        .filter(|p| owner::controller_of(&p.metadata).is_some_and(|r| r.uid == uid))
        .collect()
}

async fn sync(job: &Job, ctx: &Ctx, key: &str) -> Result<Action, Error> {
    let now = Timestamp::now();
    let pods = owned_pods(ctx, job);
    let mut st = job.status.clone().unwrap_or_default();
    let accounted = tracking::account(job, ctx, key, &pods, &mut st).await?;
    ctx.backoff.failed(key, accounted.newly_failed);
    if status::finished(&st) || job.metadata.deletion_timestamp.is_some() {
        status::write(job, ctx, key, &st).await?;
        ctx.backoff.forget(key);
        return Ok(Action::await_change());
    }
    let ns = job.namespace().unwrap_or_default();
    let satisfied = ctx.expectations.satisfied(
        key,
        |name| ctx.pods.get(&ObjectRef::new(name).within(&ns)).is_some(),
        |name| {
            ctx.pods
                .get(&ObjectRef::new(name).within(&ns))
                .is_none_or(|p| p.deleting())
        },
    );
    let active: Vec<Arc<CachedPod>> = pods
        .iter()
        .filter(|p| tracking::finished(p).is_none())
        .cloned()
        .collect();
    let decision = decide::decide(job, &st, &active, accounted.fail_job, now);
    let requeue = act(job, ctx, key, &mut st, &active, satisfied, decision, now).await?;
    st.active = Some(active.len() as i32);
    st.ready = Some(
        active
            .iter()
            .filter(|p| pod_state::is_ready(p.as_ref()))
            .count() as i32,
    );
    st.terminating = Some(
        pods.iter()
            .filter(|p| p.deleting() && !pod_state::is_terminal(p.as_ref()))
            .count() as i32,
    );
    status::write(job, ctx, key, &st).await?;
    if !satisfied {
        return Ok(Action::requeue(Duration::from_secs(1)));
    }
    Ok(requeue.map_or_else(Action::await_change, Action::requeue))
}

/// Carries out `decision`; when to look again, if a timer matters.
#[allow(clippy::too_many_arguments)]
async fn act(
    job: &Job,
    ctx: &Ctx,
    key: &str,
    st: &mut JobStatus,
    active: &[Arc<CachedPod>],
    satisfied: bool,
    decision: Decision,
    now: Timestamp,
) -> Result<Option<Duration>, Error> {
    match decision {
        Decision::Fail { reason, message } => {
            if !status::has(st, "FailureTarget") {
                pods::note(ctx, job, EventType::Warning, &reason, &message);
            }
            status::set(st, "FailureTarget", true, &reason, &message, now);
            if active.is_empty() {
                status::set(st, "Failed", true, &reason, &message, now);
            } else {
                pods::delete(job, ctx, key, active)
                    .await
                    .map_err(api_error(key))?;
            }
            Ok(None)
        }
        Decision::Complete => {
            let message = "Reached expected number of succeeded pods";
            status::set(
                st,
                "SuccessCriteriaMet",
                true,
                "CompletionsReached",
                message,
                now,
            );
            if active.is_empty() {
                status::set(st, "Complete", true, "CompletionsReached", message, now);
                st.completion_time = Some(Time(now));
                pods::note(ctx, job, EventType::Normal, "Completed", "Job completed");
            } else {
                pods::delete(job, ctx, key, active)
                    .await
                    .map_err(api_error(key))?;
            }
            Ok(None)
        }
        Decision::Suspend => {
            if !status::has(st, "Suspended") {
                status::set(st, "Suspended", true, "JobSuspended", "Job suspended", now);
                pods::note(ctx, job, EventType::Normal, "Suspended", "Job suspended");
            }
            st.start_time = None;
            if !active.is_empty() {
                pods::delete(job, ctx, key, active)
                    .await
                    .map_err(api_error(key))?;
            }
            Ok(None)
        }
        Decision::Run { deadline } => {
            if status::has(st, "Suspended") {
                status::set(st, "Suspended", false, "JobResumed", "Job resumed", now);
                pods::note(ctx, job, EventType::Normal, "Resumed", "Job resumed");
            }
            st.start_time.get_or_insert(Time(now));
            let wait = if satisfied {
                manage(job, ctx, key, st, active).await?
            } else {
                None
            };
            Ok([wait, deadline].into_iter().flatten().min())
        }
    }
}

/// Creates or deletes pods toward the wanted number of active ones; the back-off still
/// to wait before creating, if any.
async fn manage(
    job: &Job,
    ctx: &Ctx,
    key: &str,
    st: &JobStatus,
    active: &[Arc<CachedPod>],
) -> Result<Option<Duration>, Error> {
    let plan = decide::plan(job, st, active);
    if !plan.excess.is_empty() {
        pods::delete(job, ctx, key, &plan.excess)
            .await
            .map_err(api_error(key))?;
    }
    if plan.create.is_empty() {
        return Ok(None);
    }
    let wait = ctx.backoff.remaining(key);
    if !wait.is_zero() {
        debug!(job = key, ?wait, "waiting out the failure back-off");
        return Ok(Some(wait));
    }
    let burst = plan.create.len().min(crate::replicaset::BURST_REPLICAS);
    pods::create(job, ctx, key, &plan.create[..burst])
        .await
        .map_err(api_error(key))?;
    Ok(None)
}

// What the controller watches and how events map to its keys (kube-runtime's
// `.owns()`/`.watches()`), with its context: `lib.rs` only lists it.

pub(crate) fn start(client: &Client, inf: &mut Informers) -> Task {
    let own = inf.jobs.subscribe(|j: &Job| vec![ObjectRef::from_obj(j)]);
    let pods = inf.pods.subscribe_with_deletions(|p, _| pod_owner(p));
    let ctx = Arc::new(Ctx {
        client: client.clone(),
        pods: inf.pods.reader(),
        jobs: inf.jobs.reader(),
        recorder: Recorder::start(client.clone(), "job-controller"),
        expectations: Default::default(),
        backoff: policy::Backoff::new(inf.settings.job_backoff),
        released: Default::default(),
    });
    let orphan_ctx = Arc::new(orphans::Ctx {
        client: client.clone(),
        pods: inf.pods.reader(),
        jobs: inf.jobs.reader(),
    });
    let orphan_pods = inf.pods.subscribe(orphans::pod_key);
    let ended_jobs = inf
        .jobs
        .subscribe_with_deletions(orphans::job_pods(inf.pods.reader()));
    Box::pin(async move {
        futures::join!(
            run(ctx, futures::stream::select(own, pods), resync_ticks()),
            orphans::run(
                orphan_ctx,
                futures::stream::select(orphan_pods, ended_jobs),
                resync_ticks(),
            ),
        );
    })
}
