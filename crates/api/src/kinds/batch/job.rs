//! Job (batch): what cairn does that is specific to it.

use crate::kinds::prelude::*;

pub const STRATEGY: Strategy = Strategy {
    default: Some(crate::defaults::default_job),
    validate: Some(crate::validation::batch::validate_job),
    validate_update: Some(crate::validation::batch::validate_job_update),
    columns: Some(columns),
    row: Some(row),
    normalize: roundtrip::<k8s_openapi::api::batch::v1::Job>,
    tracks_generation: true,
    resets_status: true,
    // The selector a Job gets from its uid (upstream's generateSelector).
    prepare_for_create: Some(crate::defaults::generate_job_selector),
    admission: &[Admission::OrphanByDefault],
    zero_values: Some(zero_values),
    ..Strategy::NONE
};

fn columns() -> Vec<Col> {
    vec![
        NAME,
        col("Status", "string", "Status of the job execution"),
        col("Completions", "string", "The completion status of the job"),
        col("Duration", "string", "Time required to complete the job."),
        AGE,
        wide("Containers", "string", DESC_CONTAINERS),
        wide("Images", "string", DESC_IMAGES),
        wide("Selector", "string", "A label query over pods that should match the pod count. Normally, the system sets this field for you. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/labels/#label-selectors"),
    ]
}

fn row(obj: &Value, name: Value, created: &str, now: DateTime<Utc>) -> Vec<Value> {
    job_row(obj, name, created, now)
}

/// Go's zero values of the kind (see `Strategy::zero_values`).
fn zero_values(o: &mut Map<String, Value>) {
    workload_zero_values(o, &["lastProbeTime", "lastTransitionTime"], &[]);
}
