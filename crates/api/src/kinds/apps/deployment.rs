//! Deployment (apps): what cairn does that is specific to it.

use crate::kinds::prelude::*;

pub const STRATEGY: Strategy = Strategy {
    default: Some(crate::defaults::default_deployment),
    validate: Some(crate::validation::apps::validate_deployment),
    validate_update: Some(selector_immutable),
    columns: Some(columns),
    row: Some(row),
    normalize: roundtrip::<k8s_openapi::api::apps::v1::Deployment>,
    tracks_generation: true,
    resets_status: true,
    zero_values: Some(zero_values),
    ..Strategy::NONE
};

fn columns() -> Vec<Col> {
    vec![
        NAME,
        col("Ready", "string", "Number of the pod with ready state"),
        col("Up-to-date", "string", "Total number of non-terminated pods targeted by this deployment that have the desired template spec."),
        col("Available", "string", "Total number of available pods (ready for at least minReadySeconds) targeted by this deployment."),
        AGE,
        wide("Containers", "string", DESC_CONTAINERS),
        wide("Images", "string", DESC_IMAGES),
        wide("Selector", "string", "Label selector for pods. Existing ReplicaSets whose pods are selected by this will be the ones affected by this deployment."),
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
    let selector =
        selector_string(get(obj, &["spec", "selector"])).unwrap_or_else(|| "<invalid>".to_string());
    let counts = [
        json!(ready_of()),
        json!(get_int(obj, &["status", "updatedReplicas"])),
        json!(get_int(obj, &["status", "availableReplicas"])),
    ];
    with_template_cells(name, &counts, created, names, images, Some(selector))
}

/// Go's zero values of the kind (see `Strategy::zero_values`).
fn zero_values(o: &mut Map<String, Value>) {
    workload_zero_values(o, &["lastUpdateTime", "lastTransitionTime"], &[]);
}
