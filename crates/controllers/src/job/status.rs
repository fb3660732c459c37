//! Job status: conditions (upstream's types, reasons and messages) and writing it.

use k8s_openapi::api::batch::v1::{Job, JobCondition, JobStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, Patch, PatchParams};
use kube::ResourceExt;

use super::{Ctx, Error};

pub fn is_indexed(job: &Job) -> bool {
    job.spec.as_ref().and_then(|s| s.completion_mode.as_deref()) == Some("Indexed")
}

/// Whether the condition `ty` is True.
pub fn has(st: &JobStatus, ty: &str) -> bool {
    st.conditions
        .iter()
        .flatten()
        .any(|c| c.type_ == ty && c.status == "True")
}

/// The Job has finished: Complete or Failed.
pub fn finished(st: &JobStatus) -> bool {
    has(st, "Complete") || has(st, "Failed")
}

/// Sets condition `ty` to `status` with `reason`/`message`; the transition time changes
/// only when the status does (upstream `updateConditions`).
pub fn set(
    st: &mut JobStatus,
    ty: &str,
    status: bool,
    reason: &str,
    message: &str,
    now: Timestamp,
) {
    let status = if status { "True" } else { "False" };
    let conditions = st.conditions.get_or_insert_with(Vec::new);
    match conditions.iter_mut().find(|c| c.type_ == ty) {
        Some(c) if c.status == status => {
            c.reason = Some(reason.into());
            c.message = Some(message.into());
        }
        Some(c) => {
            c.status = status.into();
            c.reason = Some(reason.into());
            c.message = Some(message.into());
            c.last_probe_time = Some(Time(now));
            c.last_transition_time = Some(Time(now));
        }
        None => conditions.push(JobCondition {
            type_: ty.into(),
            status: status.into(),
            reason: Some(reason.into()),
            message: Some(message.into()),
            last_probe_time: Some(Time(now)),
            last_transition_time: Some(Time(now)),
        }),
    }
}

/// Go's `omitempty` on the plain int32 counters: zero is not written.
fn normalized(st: &JobStatus) -> JobStatus {
    let nonzero = |v: Option<i32>| v.filter(|n| *n != 0);
    JobStatus {
        active: nonzero(st.active),
        succeeded: nonzero(st.succeeded),
        failed: nonzero(st.failed),
        completed_indexes: st.completed_indexes.clone().filter(|s| !s.is_empty()),
        ..st.clone()
    }
}

/// Writes `st` unless the stored status already says the same.
pub async fn write(job: &Job, ctx: &Ctx, key: &str, st: &JobStatus) -> Result<(), Error> {
    let st = normalized(st);
    if job.status.as_ref().map(normalized).as_ref() == Some(&st) {
        return Ok(());
    }
    let mut value = serde_json::to_value(&st).unwrap_or_default();
    // A merge patch keeps what it does not mention: clear dropped fields explicitly.
    for field in [
        "active",
        "succeeded",
        "failed",
        "completedIndexes",
        "startTime",
        "completionTime",
    ] {
        if value.get(field).is_none() {
            value[field] = serde_json::Value::Null;
        }
    }
    if let Some(u) = value
        .get_mut("uncountedTerminatedPods")
        .and_then(|u| u.as_object_mut())
    {
        for list in ["succeeded", "failed"] {
            u.entry(list).or_insert(serde_json::Value::Null);
        }
    }
    let api: Api<Job> = Api::namespaced(ctx.client.clone(), &job.namespace().unwrap_or_default());
    let patch = Patch::Merge(serde_json::json!({ "status": value }));
    match api
        .patch_status(&job.name_any(), &PatchParams::default(), &patch)
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
