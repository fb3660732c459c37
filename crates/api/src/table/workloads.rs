//! Tables of the workload kinds (and PodDisruptionBudgets): Deployments, ReplicaSets, DaemonSets, StatefulSets,
//! ReplicationControllers, ControllerRevisions, Jobs and CronJobs
//! (upstream `printDeployment` ... `printCronJob`).

use chrono::{DateTime, Utc};
use serde_json::{json, Value};

use super::*;

/// Name, the kind's own cells, age, then the wide cells: containers, images, selector.
pub(crate) fn with_template_cells(
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
pub(crate) fn replicas_row(
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
pub(crate) fn controller_name(obj: &Value) -> String {
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

pub(crate) fn has_true_condition(obj: &Value, ty: &str) -> bool {
    get_arr(obj, &["status", "conditions"])
        .iter()
        .any(|c| get_str(c, &["type"]) == ty && get_str(c, &["status"]) == "True")
}

/// `printJob`: status word, `succeeded/completions`, and how long it ran.
pub(crate) fn job_row(obj: &Value, name: Value, created: &str, now: DateTime<Utc>) -> Vec<Value> {
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
pub(crate) fn cron_job_row(
    obj: &Value,
    name: Value,
    created: &str,
    now: DateTime<Utc>,
) -> Vec<Value> {
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
