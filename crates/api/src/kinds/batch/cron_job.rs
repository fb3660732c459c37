//! CronJob (batch): what cairn does that is specific to it.

use crate::kinds::prelude::*;

pub const STRATEGY: Strategy = Strategy {
    default: Some(crate::defaults::default_cron_job),
    validate: Some(crate::validation::batch::validate_cron_job),
    columns: Some(columns),
    row: Some(row),
    normalize: roundtrip::<k8s_openapi::api::batch::v1::CronJob>,
    tracks_generation: true,
    resets_status: true,
    zero_values: Some(zero_values),
    ..Strategy::NONE
};

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
