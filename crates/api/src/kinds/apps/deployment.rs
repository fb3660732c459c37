//! Deployment (apps): what cairn does that is specific to it.

use crate::kinds::prelude::*;

pub const STRATEGY: Strategy = Strategy {
    default: Some(default_deployment),
    validate: Some(validate_deployment),
    validate_update: Some(selector_immutable),
    columns: Some(columns),
    row: Some(row),
    normalize: roundtrip::<k8s_openapi::api::apps::v1::Deployment>,
    tracks_generation: true,
    resets_status: true,
    zero_values: Some(zero_values),
    ..Strategy::NONE
};

fn default_deployment(o: &mut Map<String, Value>) {
    let Some(spec) = child_obj(o, "spec") else {
        return;
    };
    set_default(spec, "replicas", json!(1));
    if let Some(strategy) = child_obj(spec, "strategy") {
        set_default_str(strategy, "type", "RollingUpdate");
        if str_of(strategy, "type") == "RollingUpdate" {
            if let Some(ru) = child_obj(strategy, "rollingUpdate") {
                set_default(ru, "maxUnavailable", json!("25%"));
                set_default(ru, "maxSurge", json!("25%"));
            }
        }
    }
    set_default(spec, "revisionHistoryLimit", json!(10));
    set_default(spec, "progressDeadlineSeconds", json!(600));
    default_template(spec);
}

fn validate_deployment(o: &Map<String, Value>, errs: &mut Vec<Cause>) {
    let empty = Map::new();
    let spec = obj(o, "spec").unwrap_or(&empty);
    nonnegative(spec, "replicas", "spec", errs);
    validate_workload(spec, "deployment", errs);
    if let Some(strategy) = obj(spec, "strategy") {
        let t = s(strategy, "type");
        match t {
            "Recreate" => {
                if field(strategy, "rollingUpdate").is_some() {
                    errs.push(Cause::forbidden(
                        "spec.strategy.rollingUpdate",
                        "may not be specified when strategy `type` is 'Recreate'",
                    ));
                }
            }
            "RollingUpdate" => {
                if let Some(ru) = obj(strategy, "rollingUpdate") {
                    validate_rolling_update(ru, "spec.strategy.rollingUpdate", true, errs);
                }
            }
            "" => errs.push(Cause::required("spec.strategy.type")),
            other => errs.push(Cause::not_supported(
                "spec.strategy.type",
                other,
                &["Recreate", "RollingUpdate"],
            )),
        }
    }
    for key in [
        "minReadySeconds",
        "revisionHistoryLimit",
        "progressDeadlineSeconds",
    ] {
        nonnegative(spec, key, "spec", errs);
    }
    if let Some(pds) = int(spec, "progressDeadlineSeconds") {
        if pds <= int(spec, "minReadySeconds").unwrap_or(0) {
            errs.push(Cause::invalid_value(
                "spec.progressDeadlineSeconds",
                &Value::from(pds),
                "must be greater than minReadySeconds",
            ));
        }
    }
}

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
