//! CronJob (batch): what cairn does that is specific to it.

use crate::kinds::prelude::*;
use crate::validation::batch::validate_job_spec;

pub const STRATEGY: Strategy = Strategy {
    default: Some(default_cron_job),
    validate: Some(validate_cron_job),
    columns: Some(columns),
    row: Some(row),
    normalize: roundtrip::<k8s_openapi::api::batch::v1::CronJob>,
    tracks_generation: true,
    resets_status: true,
    zero_values: Some(zero_values),
    ..Strategy::NONE
};

fn default_cron_job(o: &mut Map<String, Value>) {
    let Some(spec) = child_obj(o, "spec") else {
        return;
    };
    set_default_str(spec, "concurrencyPolicy", "Allow");
    set_default(spec, "suspend", json!(false));
    set_default(spec, "successfulJobsHistoryLimit", json!(3));
    set_default(spec, "failedJobsHistoryLimit", json!(1));
    // Only the nested pod template is defaulted (SetDefaults_Job is for Jobs, not their
    // templates): each Job gets its defaults and selector when it is created.
    if let Some(job_spec) = existing_obj(spec, "jobTemplate").and_then(|t| child_obj(t, "spec")) {
        default_template(job_spec);
    }
}

/// Longest CronJob name: its Jobs are named `<cronjob>-<minutes since epoch>` (11 digits).
const MAX_CRON_JOB_NAME: usize = 52;

fn validate_cron_job(o: &Map<String, Value>, errs: &mut Vec<Cause>) {
    let empty = Map::new();
    let name = obj(o, "metadata").map(|m| s(m, "name")).unwrap_or("");
    if name.len() > MAX_CRON_JOB_NAME {
        errs.push(Cause::invalid(
            "metadata.name",
            name,
            "must be no more than 52 characters",
        ));
    }
    let spec = obj(o, "spec").unwrap_or(&empty);
    validate_schedule(s(spec, "schedule"), errs);
    if let Some(tz) = field(spec, "timeZone").and_then(Value::as_str) {
        if let Err(msg) = check_time_zone(tz) {
            errs.push(Cause::invalid("spec.timeZone", tz, &msg));
        }
    }
    require_one_of(
        errs,
        "spec.concurrencyPolicy".into(),
        s(spec, "concurrencyPolicy"),
        &["Allow", "Forbid", "Replace"],
    );
    for key in [
        "startingDeadlineSeconds",
        "successfulJobsHistoryLimit",
        "failedJobsHistoryLimit",
    ] {
        nonnegative(spec, key, "spec", errs);
    }
    match obj(spec, "jobTemplate").and_then(|t| obj(t, "spec")) {
        Some(job_spec) => validate_job_spec(job_spec, "spec.jobTemplate.spec", false, errs),
        None => errs.push(Cause::required("spec.jobTemplate.spec.template")),
    }
}

fn validate_schedule(schedule: &str, errs: &mut Vec<Cause>) {
    if schedule.is_empty() {
        errs.push(Cause::required("spec.schedule"));
        return;
    }
    if schedule.contains("TZ") {
        errs.push(Cause::invalid(
            "spec.schedule",
            schedule,
            "cannot use TZ or CRON_TZ in schedule, use timeZone field instead",
        ));
        return;
    }
    if let Err(e) = cairn_semantics::cron::parse(schedule) {
        errs.push(Cause::invalid("spec.schedule", schedule, &e));
    }
}

/// Go's `time.LoadLocation` acceptance: an IANA name the node's zone database knows, not
/// `Local`.
fn check_time_zone(tz: &str) -> Result<(), String> {
    if tz.eq_ignore_ascii_case("local") || tz.contains(' ') {
        return Err(
            "timeZone must be an explicit time zone as defined in https://www.iana.org/time-zones"
                .into(),
        );
    }
    cairn_semantics::cron::time_zone(tz).map(|_| ())
}

fn columns() -> Vec<Col> {
    vec![
        NAME,
        col("Schedule", "string", "The schedule in Cron format, see https://en.wikipedia.org/wiki/Cron."),
        col("Timezone", "string", "The time zone name for the given schedule, see https://en.wikipedia.org/wiki/List_of_tz_database_time_zones. If not specified, this will default to the time zone of the kube-controller-manager process. The set of valid time zone names and the time zone offset is loaded from the system-wide time zone database by the API server during CronJob validation and the controller manager during execution. If no system-wide time zone database can be found a bundled version of the database is used instead. If the time zone name becomes invalid during the lifetime of a CronJob or due to a change in host configuration, the controller will stop creating new new Jobs and will create a system event with the reason UnknownTimeZone. More information can be found in https://kubernetes.io/docs/concepts/workloads/controllers/cron-jobs/#time-zones"),
        col("Suspend", "boolean", "This flag tells the controller to suspend subsequent executions, it does not apply to already started executions.  Defaults to false."),
        col("Active", "integer", "A list of pointers to currently running jobs."),
        col("Last Schedule", "string", "Information when was the last time the job was successfully scheduled."),
        AGE,
        wide("Containers", "string", DESC_CONTAINERS),
        wide("Images", "string", DESC_IMAGES),
        wide("Selector", "string", "A label query over pods that should match the pod count. Normally, the system sets this field for you. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/labels/#label-selectors"),
    ]
}

fn row(obj: &Value, name: Value, created: &str, now: DateTime<Utc>) -> Vec<Value> {
    cron_job_row(obj, name, created, now)
}

/// Go's zero values of the kind (see `Strategy::zero_values`).
fn zero_values(o: &mut Map<String, Value>) {
    ensure_obj(o, "spec");
    ensure_obj(o, "status");
    if let Some(job) = o
        .get_mut("spec")
        .and_then(Value::as_object_mut)
        .and_then(|s| s.get_mut("jobTemplate"))
        .and_then(Value::as_object_mut)
    {
        meta_creation_timestamp(job);
        if let Some(spec) = job.get_mut("spec").and_then(Value::as_object_mut) {
            template_zero_values(spec);
        }
    }
}
