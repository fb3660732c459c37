//! A CronJob's Jobs: finding them, keeping `status.active` true to them, creating the Job
//! of a scheduled time, and deleting running ones for `concurrencyPolicy: Replace`.

use std::sync::Arc;

use cairn_events::EventType;
use cairn_semantics::cron::Schedule;
use k8s_openapi::api::batch::v1::{CronJob, CronJobStatus, Job};
use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::jiff::Zoned;
use kube::api::{Api, DeleteParams, PostParams};
use kube::ResourceExt;

use super::{note, Ctx, Error};
use crate::owner;

pub const SCHEDULED_ANNOTATION: &str = "batch.kubernetes.io/cronjob-scheduled-timestamp";

/// The Jobs this CronJob controls.
pub fn children(ctx: &Ctx, cj: &CronJob) -> Vec<Arc<Job>> {
    let (ns, uid) = (cj.namespace(), cj.uid().unwrap_or_default());
    ctx.jobs
        .state()
        .into_iter()
        .filter(|j| j.metadata.namespace == ns)
        .filter(|j| owner::controller_of(&j.metadata).is_some_and(|r| r.uid == uid))
        .collect()
}

pub fn finished(job: &Job) -> Option<&'static str> {
    let conditions = job.status.as_ref()?.conditions.as_ref()?;
    ["Complete", "Failed"].into_iter().find(|ty| {
        conditions
            .iter()
            .any(|c| c.type_ == *ty && c.status == "True")
    })
}

pub fn reference(job: &Job) -> ObjectReference {
    ObjectReference {
        api_version: Some("batch/v1".into()),
        kind: Some("Job".into()),
        name: job.metadata.name.clone(),
        namespace: job.metadata.namespace.clone(),
        uid: job.metadata.uid.clone(),
        resource_version: job.metadata.resource_version.clone(),
        field_path: None,
    }
}

/// `status.active` as the Jobs are: finished or vanished ones leave it (finished
/// successful ones set `lastSuccessfulTime`), running children missing from it join it.
pub fn reconcile_active(ctx: &Ctx, cj: &CronJob, children: &[Arc<Job>], st: &mut CronJobStatus) {
    let mut active: Vec<ObjectReference> = Vec::new();
    for r in st.active.iter().flatten() {
        let child = children.iter().find(|j| j.metadata.uid == r.uid);
        match child.map(|j| (j, finished(j))) {
            Some((_, None)) => active.push(r.clone()),
            Some((j, Some(how))) => {
                let name = j.name_any();
                let message = format!("Saw completed job: {name}, status: {how}");
                note(ctx, cj, EventType::Normal, "SawCompletedJob", &message);
                if how == "Complete" {
                    let done = j.status.as_ref().and_then(|s| s.completion_time.clone());
                    if done.as_ref().map(|t| t.0) > st.last_successful_time.as_ref().map(|t| t.0) {
                        st.last_successful_time = done;
                    }
                }
            }
            None => {}
        }
    }
    for j in children {
        if finished(j).is_none() && !active.iter().any(|r| r.uid == j.metadata.uid) {
            active.push(reference(j));
        }
    }
    active.sort_by(|a, b| a.name.cmp(&b.name));
    st.active = (!active.is_empty()).then_some(active);
}

/// `<cronjob>-<scheduled time in minutes since the epoch>`, as upstream names them; for a
/// schedule firing more often than once a minute (`@every 10s`) the time is in seconds
/// (ten digits fit the 52 + 11 character budget), where upstream's names would collide
/// and run such schedules at most once a minute.
pub fn name_for(cj: &CronJob, schedule: &Schedule, scheduled: &Zoned) -> String {
    let secs = scheduled.timestamp().as_second();
    match schedule {
        Schedule::Every(d) if d.as_secs() < 60 => format!("{}-{secs}", cj.name_any()),
        _ => format!("{}-{}", cj.name_any(), secs / 60),
    }
}

fn job_from_template(cj: &CronJob, name: &str, scheduled: &Zoned) -> Job {
    let template = cj
        .spec
        .as_ref()
        .map(|s| s.job_template.clone())
        .unwrap_or_default();
    let meta = template.metadata.unwrap_or_default();
    let mut annotations = meta.annotations.unwrap_or_default();
    annotations.insert(
        SCHEDULED_ANNOTATION.into(),
        scheduled.timestamp().to_string(),
    );
    Job {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: cj.namespace(),
            labels: meta.labels,
            annotations: Some(annotations),
            owner_references: Some(vec![owner::controller_ref(cj)]),
            ..Default::default()
        },
        spec: template.spec,
        status: None,
    }
}

pub async fn create(
    ctx: &Ctx,
    cj: &CronJob,
    key: &str,
    name: &str,
    scheduled: &Zoned,
) -> Result<Job, Error> {
    let api: Api<Job> = Api::namespaced(ctx.client.clone(), &cj.namespace().unwrap_or_default());
    let job = job_from_template(cj, name, scheduled);
    match api.create(&PostParams::default(), &job).await {
        Ok(created) => {
            note(
                ctx,
                cj,
                EventType::Normal,
                "SuccessfulCreate",
                &format!("Created job {name}"),
            );
            Ok(created)
        }
        // Created before (a restart between create and status): it is this time's Job.
        Err(kube::Error::Api(s)) if s.code == 409 => {
            api.get(name).await.map_err(|source| Error::Api {
                key: key.into(),
                source,
            })
        }
        Err(source) => {
            note(
                ctx,
                cj,
                EventType::Warning,
                "FailedCreate",
                &format!("Error creating job: {source}"),
            );
            Err(Error::Api {
                key: key.into(),
                source,
            })
        }
    }
}

/// Deletes a Job with its pods (background), reporting it.
pub async fn delete(ctx: &Ctx, cj: &CronJob, job: &Job) -> Result<(), kube::Error> {
    let api: Api<Job> = Api::namespaced(ctx.client.clone(), &cj.namespace().unwrap_or_default());
    let name = job.name_any();
    match api.delete(&name, &DeleteParams::background()).await {
        Ok(_) => {
            note(
                ctx,
                cj,
                EventType::Normal,
                "SuccessfulDelete",
                &format!("Deleted job {name}"),
            );
            Ok(())
        }
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
        Err(e) => Err(e),
    }
}

/// `concurrencyPolicy: Replace`: the running Jobs go before the new one starts.
pub async fn delete_active(
    ctx: &Ctx,
    cj: &CronJob,
    key: &str,
    children: &[Arc<Job>],
    st: &mut CronJobStatus,
) -> Result<(), Error> {
    for r in st.active.take().unwrap_or_default() {
        if let Some(job) = children.iter().find(|j| j.metadata.uid == r.uid) {
            delete(ctx, cj, job).await.map_err(|source| Error::Api {
                key: key.into(),
                source,
            })?;
        }
    }
    Ok(())
}
