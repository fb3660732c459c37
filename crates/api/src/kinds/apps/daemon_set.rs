//! DaemonSet (apps): what cairn does that is specific to it.

use crate::kinds::prelude::*;

pub const STRATEGY: Strategy = Strategy {
    default: Some(default_daemon_set),
    validate: Some(validate_daemon_set),
    validate_update: Some(selector_immutable),
    columns: Some(columns),
    row: Some(row),
    normalize: roundtrip::<k8s_openapi::api::apps::v1::DaemonSet>,
    tracks_generation: true,
    resets_status: true,
    status_counters: STATUS_COUNTERS,
    zero_values: Some(zero_values),
    ..Strategy::NONE
};

fn default_daemon_set(o: &mut Map<String, Value>) {
    let Some(spec) = child_obj(o, "spec") else {
        return;
    };
    if let Some(strategy) = child_obj(spec, "updateStrategy") {
        set_default_str(strategy, "type", "RollingUpdate");
        if str_of(strategy, "type") == "RollingUpdate" {
            if let Some(ru) = child_obj(strategy, "rollingUpdate") {
                set_default(ru, "maxUnavailable", json!(1));
                set_default(ru, "maxSurge", json!(0));
            }
        }
    }
    set_default(spec, "revisionHistoryLimit", json!(10));
    default_template(spec);
}

fn validate_daemon_set(o: &Map<String, Value>, errs: &mut Vec<Cause>) {
    let empty = Map::new();
    let spec = obj(o, "spec").unwrap_or(&empty);
    validate_workload(spec, "daemonset", errs);
    nonnegative(spec, "minReadySeconds", "spec", errs);
    nonnegative(spec, "revisionHistoryLimit", "spec", errs);
    if let Some(strategy) = obj(spec, "updateStrategy") {
        match s(strategy, "type") {
            "OnDelete" => {}
            "RollingUpdate" => {
                if let Some(ru) = obj(strategy, "rollingUpdate") {
                    validate_rolling_update(ru, "spec.updateStrategy.rollingUpdate", true, errs);
                }
            }
            "" => errs.push(Cause::required("spec.updateStrategy.type")),
            other => errs.push(Cause::not_supported(
                "spec.updateStrategy.type",
                other,
                &["OnDelete", "RollingUpdate"],
            )),
        }
    }
}

fn columns() -> Vec<Col> {
    vec![
        NAME,
        col("Desired", "integer", "The total number of nodes that should be running the daemon pod (including nodes correctly running the daemon pod). More info: https://kubernetes.io/docs/concepts/workloads/controllers/daemonset/"),
        col("Current", "integer", "The number of nodes that are running at least 1 daemon pod and are supposed to run the daemon pod. More info: https://kubernetes.io/docs/concepts/workloads/controllers/daemonset/"),
        col("Ready", "integer", "The number of nodes that should be running the daemon pod and have one or more of the daemon pod running and ready."),
        col("Up-to-date", "integer", "The total number of nodes that are running updated daemon pod"),
        col("Available", "integer", "The number of nodes that should be running the daemon pod and have one or more of the daemon pod running and available (ready for at least spec.minReadySeconds)"),
        col("Node Selector", "string", "NodeSelector is a selector which must be true for the pod to fit on a node. Selector which must match a node's labels for the pod to be scheduled on that node. More info: https://kubernetes.io/docs/concepts/configuration/assign-pod-node/"),
        AGE,
        wide("Containers", "string", DESC_CONTAINERS),
        wide("Images", "string", DESC_IMAGES),
        wide("Selector", "string", "A label query over pods that are managed by the daemon set. Must match in order to be controlled. If empty, defaulted to labels on Pod template. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/labels/#label-selectors"),
    ]
}

fn row(obj: &Value, name: Value, created: &str, _now: DateTime<Utc>) -> Vec<Value> {
    let selector = format_label_selector(get(obj, &["spec", "selector"]));
    let (names, images) = container_cells(obj);
    let counts = [
        "desiredNumberScheduled",
        "currentNumberScheduled",
        "numberReady",
        "updatedNumberScheduled",
        "numberAvailable",
    ]
    .map(|f| json!(get_int(obj, &["status", f])));
    let node_selector = get(obj, &["spec", "template", "spec", "nodeSelector"]);
    let mut cells = counts.to_vec();
    cells.push(json!(format_labels(node_selector)));
    with_template_cells(name, &cells, created, names, images, Some(selector))
}

/// Status counters Go prints even when zero.
const STATUS_COUNTERS: &[&str] = &[
    "currentNumberScheduled",
    "numberMisscheduled",
    "desiredNumberScheduled",
    "numberReady",
];

/// Go's zero values of the kind (see `Strategy::zero_values`).
fn zero_values(o: &mut Map<String, Value>) {
    workload_zero_values(o, &["lastTransitionTime"], STATUS_COUNTERS);
}
