//! ReplicationController (core): what cairn does that is specific to it.

use crate::kinds::prelude::*;

pub const STRATEGY: Strategy = Strategy {
    default: Some(crate::defaults::default_replication_controller),
    validate: Some(crate::validation::apps::validate_replication_controller),
    columns: Some(columns),
    row: Some(row),
    normalize: roundtrip::<k8s_openapi::api::core::v1::ReplicationController>,
    tracks_generation: true,
    resets_status: true,
    status_counters: STATUS_COUNTERS,
    zero_values: Some(zero_values),
    ..Strategy::NONE
};

fn columns() -> Vec<Col> {
    vec![
        NAME,
        col("Desired", "integer", "Replicas is the number of desired replicas. This is a pointer to distinguish between explicit zero and unspecified. Defaults to 1. More info: https://kubernetes.io/docs/concepts/workloads/controllers/replicationcontroller#what-is-a-replicationcontroller"),
        col("Current", "integer", "Replicas is the most recently observed number of replicas. More info: https://kubernetes.io/docs/concepts/workloads/controllers/replicationcontroller#what-is-a-replicationcontroller"),
        col("Ready", "integer", "The number of ready replicas for this replication controller."),
        AGE,
        wide("Containers", "string", DESC_CONTAINERS),
        wide("Images", "string", DESC_IMAGES),
        wide("Selector", "string", "Selector is a label query over pods that should match the Replicas count. If Selector is empty, it is defaulted to the labels present on the Pod template. Label keys and values that must match in order to be controlled by this replication controller, if empty defaulted to labels on Pod template. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/labels/#label-selectors"),
    ]
}

fn row(obj: &Value, name: Value, created: &str, _now: DateTime<Utc>) -> Vec<Value> {
    let (names, images) = container_cells(obj);
    let selector = format_labels(get(obj, &["spec", "selector"]));
    replicas_row(obj, name, created, (names, images), selector)
}

/// Status counters Go prints even when zero.
const STATUS_COUNTERS: &[&str] = &["replicas"];

/// Go's zero values of the kind (see `Strategy::zero_values`).
fn zero_values(o: &mut Map<String, Value>) {
    workload_zero_values(o, &["lastTransitionTime"], STATUS_COUNTERS);
}
