//! Tables of the workload kinds (and PodDisruptionBudgets): Deployments, ReplicaSets, DaemonSets, StatefulSets,
//! ReplicationControllers, ControllerRevisions, Jobs and CronJobs
//! (upstream `printDeployment` ... `printCronJob`).

use chrono::{DateTime, Utc};
use serde_json::{json, Value};

use super::*;
use crate::registry::ResourceInfo;

/// The columns of a workload kind; `None` for other kinds.
pub(super) fn columns(resource: &ResourceInfo) -> Option<Vec<Col>> {
    Some(match (resource.group, resource.kind) {
        ("apps", "Deployment") => vec![
            NAME,
            col("Ready", "string", "Number of the pod with ready state"),
            col("Up-to-date", "string", "Total number of non-terminated pods targeted by this deployment that have the desired template spec."),
            col("Available", "string", "Total number of available pods (ready for at least minReadySeconds) targeted by this deployment."),
            AGE,
            wide("Containers", "string", DESC_CONTAINERS),
            wide("Images", "string", DESC_IMAGES),
            wide("Selector", "string", "Label selector for pods. Existing ReplicaSets whose pods are selected by this will be the ones affected by this deployment."),
        ],
        ("apps", "ReplicaSet") => vec![
            NAME,
            col("Desired", "integer", "Replicas is the number of desired replicas. This is a pointer to distinguish between explicit zero and unspecified. Defaults to 1. More info: https://kubernetes.io/docs/concepts/workloads/controllers/replicationcontroller/#what-is-a-replicationcontroller"),
            col("Current", "integer", "Replicas is the most recently observed number of replicas. More info: https://kubernetes.io/docs/concepts/workloads/controllers/replicationcontroller/#what-is-a-replicationcontroller"),
            col("Ready", "integer", "The number of ready replicas for this replica set."),
            AGE,
            wide("Containers", "string", DESC_CONTAINERS),
            wide("Images", "string", DESC_IMAGES),
            wide("Selector", "string", "Selector is a label query over pods that should match the replica count. If the selector is empty, it is defaulted to the labels present on the pod template. Label keys and values that must match in order to be controlled by this replica set. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/labels/#label-selectors"),
        ],
        ("apps", "DaemonSet") => vec![
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
        ],
        ("", "ReplicationController") => vec![
            NAME,
            col("Desired", "integer", "Replicas is the number of desired replicas. This is a pointer to distinguish between explicit zero and unspecified. Defaults to 1. More info: https://kubernetes.io/docs/concepts/workloads/controllers/replicationcontroller#what-is-a-replicationcontroller"),
            col("Current", "integer", "Replicas is the most recently observed number of replicas. More info: https://kubernetes.io/docs/concepts/workloads/controllers/replicationcontroller#what-is-a-replicationcontroller"),
            col("Ready", "integer", "The number of ready replicas for this replication controller."),
            AGE,
            wide("Containers", "string", DESC_CONTAINERS),
            wide("Images", "string", DESC_IMAGES),
            wide("Selector", "string", "Selector is a label query over pods that should match the Replicas count. If Selector is empty, it is defaulted to the labels present on the Pod template. Label keys and values that must match in order to be controlled by this replication controller, if empty defaulted to labels on Pod template. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/labels/#label-selectors"),
        ],
        ("apps", "StatefulSet") => vec![
            NAME,
            col("Ready", "string", "Number of the pod with ready state"),
            AGE,
            wide("Containers", "string", DESC_CONTAINERS),
            wide("Images", "string", DESC_IMAGES),
        ],
        ("apps", "ControllerRevision") => vec![
            NAME,
            col("Controller", "string", "Controller of the object"),
            col("Revision", "integer", "Revision indicates the revision of the state represented by Data."),
            AGE,
        ],
        ("batch", "Job") => vec![
            NAME,
            col("Status", "string", "Status of the job execution"),
            col("Completions", "string", "The completion status of the job"),
            col("Duration", "string", "Time required to complete the job."),
            AGE,
            wide("Containers", "string", DESC_CONTAINERS),
            wide("Images", "string", DESC_IMAGES),
            wide("Selector", "string", "A label query over pods that should match the pod count. Normally, the system sets this field for you. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/labels/#label-selectors"),
        ],
        ("policy", "PodDisruptionBudget") => vec![
            NAME,
            col("Min Available", "string", "The minimum number of pods that must be available simultaneously.  This can be either an integer or a string specifying a percentage, e.g. \"28%\"."),
            col("Max Unavailable", "string", "The maximum number of pods that may be unavailable simultaneously.  This can be either an integer or a string specifying a percentage, e.g. \"28%\"."),
            col("Allowed Disruptions", "integer", "Calculated number of pods that may be disrupted at this time."),
            AGE,
        ],
        ("batch", "CronJob") => vec![
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
        ],
        _ => return None,
    })
}

/// The cells of one workload's row; `None` for other kinds.
pub(super) fn row(
    resource: &ResourceInfo,
    obj: &Value,
    name: Value,
    created: &str,
    now: DateTime<Utc>,
) -> Option<Vec<Value>> {
    let selector = || format_label_selector(get(obj, &["spec", "selector"]));
    let ready_of = || {
        format!(
            "{}/{}",
            get_int(obj, &["status", "readyReplicas"]),
            get_int(obj, &["spec", "replicas"])
        )
    };
    let (names, images) = container_cells(obj);
    Some(match (resource.group, resource.kind) {
        ("apps", "Deployment") => {
            let selector = selector_string(get(obj, &["spec", "selector"]))
                .unwrap_or_else(|| "<invalid>".to_string());
            let counts = [
                json!(ready_of()),
                json!(get_int(obj, &["status", "updatedReplicas"])),
                json!(get_int(obj, &["status", "availableReplicas"])),
            ];
            with_template_cells(name, &counts, created, names, images, Some(selector))
        }
        ("apps", "ReplicaSet") => replicas_row(obj, name, created, (names, images), selector()),
        // An equality selector: a plain map of labels.
        ("", "ReplicationController") => {
            let selector = format_labels(get(obj, &["spec", "selector"]));
            replicas_row(obj, name, created, (names, images), selector)
        }
        ("apps", "DaemonSet") => {
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
            with_template_cells(name, &cells, created, names, images, Some(selector()))
        }
        ("apps", "StatefulSet") => {
            with_template_cells(name, &[json!(ready_of())], created, names, images, None)
        }
        ("apps", "ControllerRevision") => vec![
            name,
            json!(controller_name(obj)),
            json!(get_int(obj, &["revision"])),
            json!(created),
        ],
        ("batch", "Job") => job_row(obj, name, created, now),
        ("policy", "PodDisruptionBudget") => {
            let int_or_str = |key: &str| match get(obj, &["spec", key]) {
                Some(Value::String(s)) => json!(s),
                Some(v @ Value::Number(_)) => json!(v.to_string()),
                _ => json!("N/A"),
            };
            vec![
                name,
                int_or_str("minAvailable"),
                int_or_str("maxUnavailable"),
                json!(get_int(obj, &["status", "disruptionsAllowed"])),
                json!(created),
            ]
        }
        ("batch", "CronJob") => cron_job_row(obj, name, created, now),
        _ => return None,
    })
}

/// Name, the kind's own cells, age, then the wide cells: containers, images, selector.
fn with_template_cells(
    name: Value,
    cells: &[Value],
    created: &str,
    names: String,
    images: String,
    selector: Option<String>,
) -> Vec<Value> {
    let mut row = vec![name];
    row.extend_from_slice(cells);
    row.extend([json!(created), json!(names), json!(images)]);
    row.extend(selector.map(|s| json!(s)));
    row
}

/// ReplicaSets and ReplicationControllers: desired, current, ready.
fn replicas_row(
    obj: &Value,
    name: Value,
    created: &str,
    (names, images): (String, String),
    selector: String,
) -> Vec<Value> {
    let counts = [
        json!(get_int(obj, &["spec", "replicas"])),
        json!(get_int(obj, &["status", "replicas"])),
        json!(get_int(obj, &["status", "readyReplicas"])),
    ];
    with_template_cells(name, &counts, created, names, images, Some(selector))
}

/// `kind.group/name` of the object's controller, `<none>` without one.
fn controller_name(obj: &Value) -> String {
    let owner = get_arr(obj, &["metadata", "ownerReferences"])
        .iter()
        .find(|r| r.get("controller") == Some(&Value::Bool(true)));
    let Some(owner) = owner else {
        return "<none>".to_string();
    };
    let group = get_str(owner, &["apiVersion"])
        .rsplit_once('/')
        .map_or("", |(g, _)| g);
    let kind = get_str(owner, &["kind"]).to_lowercase();
    let kind = if group.is_empty() {
        kind
    } else {
        format!("{kind}.{group}")
    };
    format!("{kind}/{}", get_str(owner, &["name"]))
}

fn has_true_condition(obj: &Value, ty: &str) -> bool {
    get_arr(obj, &["status", "conditions"])
        .iter()
        .any(|c| get_str(c, &["type"]) == ty && get_str(c, &["status"]) == "True")
}

/// `printJob`: status word, `succeeded/completions`, and how long it ran.
fn job_row(obj: &Value, name: Value, created: &str, now: DateTime<Utc>) -> Vec<Value> {
    let succeeded = get_int(obj, &["status", "succeeded"]);
    let completions = match get(obj, &["spec", "completions"]).and_then(Value::as_i64) {
        Some(c) => format!("{succeeded}/{c}"),
        None => match get_int(obj, &["spec", "parallelism"]) {
            p if p > 1 => format!("{succeeded}/1 of {p}"),
            _ => format!("{succeeded}/1"),
        },
    };
    let start = parse_time(get(obj, &["status", "startTime"]));
    let end = parse_time(get(obj, &["status", "completionTime"]));
    let duration = match (start, end) {
        (None, _) => String::new(),
        (Some(s), None) => human_duration(now - s),
        (Some(s), Some(e)) => human_duration(e - s),
    };
    let deleting = get(obj, &["metadata", "deletionTimestamp"]).is_some();
    let status = [
        ("Complete", "Complete"),
        ("Failed", "Failed"),
        ("", "Terminating"),
        ("Suspended", "Suspended"),
        ("FailureTarget", "FailureTarget"),
        ("SuccessCriteriaMet", "SuccessCriteriaMet"),
    ]
    .iter()
    .find(|(cond, _)| {
        if cond.is_empty() {
            deleting
        } else {
            has_true_condition(obj, cond)
        }
    })
    .map_or("Running", |(_, word)| word);
    let (names, images) = container_cells(obj);
    vec![
        name,
        json!(status),
        json!(completions),
        json!(duration),
        json!(created),
        json!(names),
        json!(images),
        json!(format_label_selector(get(obj, &["spec", "selector"]))),
    ]
}

/// `printCronJob`: schedule, zone, suspend, active Jobs, last schedule.
fn cron_job_row(obj: &Value, name: Value, created: &str, now: DateTime<Utc>) -> Vec<Value> {
    let suspend = match get(obj, &["spec", "suspend"]).and_then(Value::as_bool) {
        Some(true) => "True",
        Some(false) => "False",
        None => "<unset>",
    };
    let last = match parse_time(get(obj, &["status", "lastScheduleTime"])) {
        Some(t) => human_duration(now - t),
        None => "<none>".to_string(),
    };
    let template = get(obj, &["spec", "jobTemplate"])
        .cloned()
        .unwrap_or_default();
    let (names, images) = container_cells(&template);
    vec![
        name,
        json!(get_str(obj, &["spec", "schedule"])),
        json!(or_none(get_str(obj, &["spec", "timeZone"]))),
        json!(suspend),
        json!(get_arr(obj, &["status", "active"]).len()),
        json!(last),
        json!(created),
        json!(names),
        json!(images),
        json!(format_label_selector(get(&template, &["spec", "selector"]))),
    ]
}
