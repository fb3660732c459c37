//! The CronJob controller (upstream `pkg/controller/cronjob`, v2): creates a Job for the
//! most recent scheduled time it has not run, in the CronJob's time zone; honours
//! `suspend`, `startingDeadlineSeconds` and `concurrencyPolicy` (Allow, Forbid, Replace);
//! keeps `status.active`, `lastScheduleTime` and `lastSuccessfulTime`; deletes finished
//! Jobs beyond the history limits.

mod history;
mod jobs;

use crate::wiring::{resync_ticks, Informers, Task};
use std::sync::Arc;
use std::time::Duration;

use cairn_events::{EventType, Recorder};
use cairn_semantics::cron::{self, Schedule};
use futures::Stream;
use k8s_openapi::api::batch::v1::{CronJob, CronJobStatus, Job};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::{tz::TimeZone, Timestamp, Zoned};
use kube::runtime::controller::Action;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Client, ResourceExt};
use thiserror::Error;

use crate::owner;
use crate::reconcile_loop;

#[derive(Debug, Error)]
pub enum Error {
    #[error("cronjob {key}: {source}")]
    Api {
        key: String,
        #[source]
        source: kube::Error,
    },
}

pub struct Ctx {
    pub client: Client,
    pub jobs: Store<Job>,
    pub cronjobs: Store<CronJob>,
    pub recorder: Recorder,
}

/// The CronJob a Job belongs to.
pub fn job_owner(job: &Job) -> Vec<ObjectRef<CronJob>> {
    owner::controller_key(&job.metadata)
}

pub async fn run(
    ctx: Arc<Ctx>,
    triggers: impl Stream<Item = ObjectRef<CronJob>> + Send + 'static,
    resync: impl Stream<Item = ()> + Send + 'static,
) {
    let store = ctx.cronjobs.clone();
    reconcile_loop::run("cronjob", store, triggers, resync, 4, ctx, reconcile).await;
}

async fn reconcile(cj: Arc<CronJob>, ctx: Arc<Ctx>) -> Result<Action, Error> {
    let key = reconcile_loop::key_of(cj.as_ref());
    sync(&cj, &ctx, &key).await
}

pub(crate) fn note(ctx: &Ctx, cj: &CronJob, kind: EventType, reason: &str, message: &str) {
    reconcile_loop::note(&ctx.recorder, cj, kind, reason, message);
}

/// The schedule and zone, or why there is none (an Event says so; nothing is retried
/// until the CronJob changes).
fn schedule_of(cj: &CronJob, ctx: &Ctx) -> Option<(Schedule, TimeZone)> {
    let spec = cj.spec.as_ref()?;
    let tz = match spec.time_zone.as_deref() {
        None => TimeZone::system(),
        Some(name) => match cron::time_zone(name) {
            Ok(tz) => tz,
            Err(e) => {
                note(
                    ctx,
                    cj,
                    EventType::Warning,
                    "UnknownTimeZone",
                    &format!("invalid timeZone: {name:?}: {e}"),
                );
                return None;
            }
        },
    };
    match cron::parse(&spec.schedule) {
        Ok(s) => Some((s, tz)),
        Err(e) => {
            note(
                ctx,
                cj,
                EventType::Warning,
                "UnparseableSchedule",
                &format!("unparseable schedule: {:?} : {e}", spec.schedule),
            );
            None
        }
    }
}

async fn sync(cj: &CronJob, ctx: &Ctx, key: &str) -> Result<Action, Error> {
    let children = jobs::children(ctx, cj);
    let mut st = cj.status.clone().unwrap_or_default();
    jobs::reconcile_active(ctx, cj, &children, &mut st);
    let requeue = if cj.metadata.deletion_timestamp.is_some() {
        None
    } else {
        schedule_and_run(cj, ctx, key, &children, &mut st).await?
    };
    history::clean(ctx, cj, &children).await;
    write_status(cj, ctx, key, &st).await?;
    Ok(requeue.map_or_else(Action::await_change, Action::requeue))
}

/// Starts the Job of the latest due scheduled time, if any; when to look again.
async fn schedule_and_run(
    cj: &CronJob,
    ctx: &Ctx,
    key: &str,
    children: &[Arc<Job>],
    st: &mut CronJobStatus,
) -> Result<Option<Duration>, Error> {
    let spec = cj.spec.clone().unwrap_or_default();
    let Some((schedule, tz)) = schedule_of(cj, ctx) else {
        return Ok(None);
    };
    if spec.suspend == Some(true) {
        return Ok(None);
    }
    let now = Timestamp::now().to_zoned(tz.clone());
    let earliest = earliest_time(cj, &spec).to_zoned(tz);
    let next = next_wait(&schedule, &now);
    let Some((scheduled, missed)) = cron::most_recent(&schedule, &earliest, &now) else {
        return Ok(next);
    };
    if missed > 100 {
        note(ctx, cj, EventType::Warning, "TooManyMissedTimes", "too many missed start times. Set or decrease .spec.startingDeadlineSeconds or check clock skew");
    }
    if let Some(deadline) = spec.starting_deadline_seconds {
        if scheduled.timestamp().as_second() + deadline < now.timestamp().as_second() {
            let message = format!(
                "Missed scheduled time to start a job: {}",
                scheduled.timestamp()
            );
            note(ctx, cj, EventType::Warning, "MissSchedule", &message);
            return Ok(next);
        }
    }
    let name = jobs::name_for(cj, &schedule, &scheduled);
    if st
        .active
        .iter()
        .flatten()
        .any(|r| r.name.as_deref() == Some(name.as_str()))
    {
        return Ok(next);
    }
    let policy = spec.concurrency_policy.as_deref().unwrap_or("Allow");
    let running = st.active.as_ref().is_some_and(|a| !a.is_empty());
    if policy == "Forbid" && running {
        note(
            ctx,
            cj,
            EventType::Normal,
            "JobAlreadyActive",
            "Not starting job because prior execution is running and concurrency policy is Forbid",
        );
        return Ok(next);
    }
    if policy == "Replace" && running {
        jobs::delete_active(ctx, cj, key, children, st).await?;
    }
    let created = jobs::create(ctx, cj, key, &name, &scheduled).await?;
    st.active
        .get_or_insert_with(Vec::new)
        .push(jobs::reference(&created));
    st.last_schedule_time = Some(Time(scheduled.timestamp()));
    Ok(next)
}

/// Scheduled times are looked for after the last one run (or the CronJob's creation),
/// and no earlier than the starting deadline allows.
fn earliest_time(cj: &CronJob, spec: &k8s_openapi::api::batch::v1::CronJobSpec) -> Timestamp {
    let created = cj
        .metadata
        .creation_timestamp
        .as_ref()
        .map_or_else(Timestamp::now, |t| t.0);
    let last = cj
        .status
        .as_ref()
        .and_then(|s| s.last_schedule_time.as_ref())
        .map_or(created, |t| t.0);
    match spec.starting_deadline_seconds {
        Some(d) => {
            let floor = Timestamp::now().as_second() - d;
            Timestamp::from_second(last.as_second().max(floor)).unwrap_or(last)
        }
        None => last,
    }
}

/// How long until the next scheduled time (plus a little, as upstream adds 100 ms).
fn next_wait(schedule: &Schedule, now: &Zoned) -> Option<Duration> {
    let next = schedule.next_after(now)?;
    let wait = next.timestamp().duration_since(now.timestamp());
    Some(Duration::try_from(wait).unwrap_or_default() + Duration::from_millis(100))
}

async fn write_status(cj: &CronJob, ctx: &Ctx, key: &str, st: &CronJobStatus) -> Result<(), Error> {
    if cj.status.as_ref() == Some(st) {
        return Ok(());
    }
    let mut value = serde_json::to_value(st).unwrap_or_default();
    if st.active.as_ref().is_none_or(Vec::is_empty) {
        // A merge patch keeps what it does not mention: an emptied list is removed.
        value["active"] = serde_json::Value::Null;
    }
    let api: kube::Api<CronJob> =
        kube::Api::namespaced(ctx.client.clone(), &cj.namespace().unwrap_or_default());
    let patch = kube::api::Patch::Merge(serde_json::json!({ "status": value }));
    match api
        .patch_status(&cj.name_any(), &Default::default(), &patch)
        .await
    {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
        Err(source) => Err(Error::Api {
            key: key.to_string(),
            source,
        }),
    }
}

// What the controller watches and how events map to its keys (kube-runtime's
// `.owns()`/`.watches()`), with its context: `lib.rs` only lists it.

pub(crate) fn start(client: &Client, inf: &mut Informers) -> Task {
    let own = inf
        .cronjobs
        .subscribe(|c: &CronJob| vec![ObjectRef::from_obj(c)]);
    let jobs = inf.jobs.subscribe_with_deletions(|j, _| job_owner(j));
    let ctx = Arc::new(Ctx {
        client: client.clone(),
        jobs: inf.jobs.reader(),
        cronjobs: inf.cronjobs.reader(),
        recorder: Recorder::start(client.clone(), "cronjob-controller"),
    });
    Box::pin(run(ctx, futures::stream::select(own, jobs), resync_ticks()))
}
