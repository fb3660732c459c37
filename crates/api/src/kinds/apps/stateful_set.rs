//! StatefulSet (apps): what cairn does that is specific to it.

use crate::kinds::prelude::*;

pub const STRATEGY: Strategy = Strategy {
    default: Some(crate::defaults::default_stateful_set),
    validate: Some(crate::validation::apps::validate_stateful_set),
    validate_update: Some(validate_update),
    columns: Some(columns),
    row: Some(row),
    normalize: roundtrip::<k8s_openapi::api::apps::v1::StatefulSet>,
    tracks_generation: true,
    resets_status: true,
    status_counters: STATUS_COUNTERS,
    zero_values: Some(zero_values),
    ..Strategy::NONE
};

fn validate_update(o: &Map<String, Value>, n: &Map<String, Value>, errs: &mut Vec<Cause>) {
    selector_immutable(o, n, errs);
    validate_stateful_set_update(o, n, errs);
}

fn columns() -> Vec<Col> {
    vec![
        NAME,
        col("Ready", "string", "Number of the pod with ready state"),
        AGE,
        wide("Containers", "string", DESC_CONTAINERS),
        wide("Images", "string", DESC_IMAGES),
    ]
}

fn row(obj: &Value, name: Value, created: &str, _now: DateTime<Utc>) -> Vec<Value> {
    let ready_of = || {
        format!(
            "{}/{}",
            get_int(obj, &["status", "readyReplicas"]),
            get_int(obj, &["spec", "replicas"])
        )
    };
    let (names, images) = container_cells(obj);
    with_template_cells(name, &[json!(ready_of())], created, names, images, None)
}

/// Status counters Go prints even when zero.
const STATUS_COUNTERS: &[&str] = &["replicas", "availableReplicas"];

/// Go's zero values of the kind (see `Strategy::zero_values`).
fn zero_values(o: &mut Map<String, Value>) {
    workload_zero_values(o, &["lastTransitionTime"], STATUS_COUNTERS);
}
