//! A pod's Table row, as upstream's `printPod`: READY, STATUS (kubectl's status reason),
//! RESTARTS and the wide cells, and a `Completed` row condition once it has finished.

use std::collections::BTreeSet;

use crate::kinds::prelude::*;

pub(super) fn row(pod: &Value, _name: Value, _created: &str, now: DateTime<Utc>) -> Vec<Value> {
    let conditions = get_arr(pod, &["status", "conditions"]);
    let progress = progress(pod, conditions);
    let restarts = match progress.last_restart {
        Some(t) if progress.restarts != 0 => {
            format!("{} ({} ago)", progress.restarts, human_duration(now - t))
        }
        _ => progress.restarts.to_string(),
    };
    vec![
        json!(get_str(pod, &["metadata", "name"])),
        json!(format!("{}/{}", progress.ready, progress.total)),
        json!(progress.reason),
        json!(restarts),
        json!(age(get(pod, &["metadata", "creationTimestamp"]), now)),
        json!(or_none(pod_ip(pod))),
        json!(or_none(get_str(pod, &["spec", "nodeName"]))),
        json!(or_none(get_str(pod, &["status", "nominatedNodeName"]))),
        json!(readiness_gates(pod, conditions)),
    ]
}

/// A finished pod's row says so (upstream's `Completed` row condition).
pub(super) fn row_conditions(pod: &Value) -> Vec<Value> {
    match get_str(pod, &["status", "phase"]) {
        "Succeeded" => vec![
            json!({"type": "Completed", "status": "True", "reason": "Succeeded", "message": "The pod has completed successfully."}),
        ],
        "Failed" => vec![
            json!({"type": "Completed", "status": "True", "reason": "Failed", "message": "The pod failed."}),
        ],
        _ => Vec::new(),
    }
}

/// What the READY, STATUS and RESTARTS columns say.
struct Progress {
    ready: usize,
    total: usize,
    reason: String,
    restarts: i64,
    last_restart: Option<DateTime<Utc>>,
}

/// The init containers' part: restarts of all of them and of the restartable ones
/// (sidecars), ready sidecars, and the `Init:` reason while initialization is under way.
#[derive(Default)]
struct InitProgress {
    restarts: i64,
    last_restart: Option<DateTime<Utc>>,
    sidecar_restarts: i64,
    last_sidecar_restart: Option<DateTime<Utc>>,
    ready_sidecars: usize,
    reason: Option<String>,
}

fn progress(pod: &Value, conditions: &[Value]) -> Progress {
    let phase = get_str(pod, &["status", "phase"]);
    let status_reason = get_str(pod, &["status", "reason"]);
    let mut reason = if status_reason.is_empty() {
        phase
    } else {
        status_reason
    };
    let gated = conditions.iter().any(|c| {
        get_str(c, &["type"]) == "PodScheduled" && get_str(c, &["reason"]) == "SchedulingGated"
    });
    if gated {
        reason = "SchedulingGated";
    }
    let init_specs = get_arr(pod, &["spec", "initContainers"]);
    let sidecars: BTreeSet<&str> = init_specs
        .iter()
        .filter(|c| get_str(c, &["restartPolicy"]) == "Always")
        .map(|c| get_str(c, &["name"]))
        .collect();
    let init = init_progress(pod, init_specs.len(), &sidecars);
    let initializing = init.reason.is_some();
    let mut p = Progress {
        ready: init.ready_sidecars,
        total: get_arr(pod, &["spec", "containers"]).len() + sidecars.len(),
        reason: init.reason.unwrap_or_else(|| reason.to_string()),
        restarts: init.restarts,
        last_restart: init.last_restart,
    };
    if !initializing || has_true_condition(conditions, "Initialized") {
        p.restarts = init.sidecar_restarts;
        p.last_restart = init.last_sidecar_restart;
        app_progress(pod, conditions, &mut p);
    }
    let deleting = get(pod, &["metadata", "deletionTimestamp"]).is_some();
    if deleting && status_reason == "NodeLost" {
        p.reason = "Unknown".to_string();
    } else if deleting && phase != "Succeeded" && phase != "Failed" {
        p.reason = "Terminating".to_string();
    }
    p
}

fn init_progress(pod: &Value, init_count: usize, sidecars: &BTreeSet<&str>) -> InitProgress {
    let mut p = InitProgress::default();
    for (i, cs) in get_arr(pod, &["status", "initContainerStatuses"])
        .iter()
        .enumerate()
    {
        let count = get_int(cs, &["restartCount"]);
        p.restarts += count;
        later(&mut p.last_restart, last_finished(cs));
        let is_sidecar = sidecars.contains(get_str(cs, &["name"]));
        if is_sidecar {
            p.sidecar_restarts += count;
            later(&mut p.last_sidecar_restart, last_finished(cs));
        }
        if get(cs, &["state", "terminated"]).is_some_and(|t| get_int(t, &["exitCode"]) == 0) {
            continue;
        }
        if is_sidecar && get(cs, &["started"]) == Some(&Value::Bool(true)) {
            if get(cs, &["ready"]) == Some(&Value::Bool(true)) {
                p.ready_sidecars += 1;
            }
            continue;
        }
        p.reason = Some(init_reason(cs, i, init_count));
        break;
    }
    p
}

/// The STATUS of a pod whose `i`th init container is not done.
fn init_reason(cs: &Value, i: usize, init_count: usize) -> String {
    let waiting_reason = get_str(cs, &["state", "waiting", "reason"]);
    if let Some(t) = get(cs, &["state", "terminated"]) {
        let t_reason = get_str(t, &["reason"]);
        if !t_reason.is_empty() {
            return format!("Init:{t_reason}");
        }
        let signal = get_int(t, &["signal"]);
        if signal != 0 {
            format!("Init:Signal:{signal}")
        } else {
            format!("Init:ExitCode:{}", get_int(t, &["exitCode"]))
        }
    } else if !waiting_reason.is_empty() && waiting_reason != "PodInitializing" {
        format!("Init:{waiting_reason}")
    } else {
        format!("Init:{i}/{init_count}")
    }
}

/// The app containers' restarts, ready count and reason (the first in the list wins, as
/// upstream walks them backwards).
fn app_progress(pod: &Value, conditions: &[Value], p: &mut Progress) {
    let mut has_running = false;
    for cs in get_arr(pod, &["status", "containerStatuses"]).iter().rev() {
        p.restarts += get_int(cs, &["restartCount"]);
        later(&mut p.last_restart, last_finished(cs));
        let waiting_reason = get_str(cs, &["state", "waiting", "reason"]);
        if !waiting_reason.is_empty() {
            p.reason = waiting_reason.to_string();
        } else if let Some(t) = get(cs, &["state", "terminated"]) {
            let t_reason = get_str(t, &["reason"]);
            p.reason = if !t_reason.is_empty() {
                t_reason.to_string()
            } else if get_int(t, &["signal"]) != 0 {
                format!("Signal:{}", get_int(t, &["signal"]))
            } else {
                format!("ExitCode:{}", get_int(t, &["exitCode"]))
            };
        } else if get(cs, &["ready"]) == Some(&Value::Bool(true))
            && get(cs, &["state", "running"]).is_some()
        {
            has_running = true;
            p.ready += 1;
        }
    }
    if p.reason == "Completed" && has_running {
        let ready = has_true_condition(conditions, "Ready");
        p.reason = if ready { "Running" } else { "NotReady" }.to_string();
    }
}

/// When a container last finished, if it has been restarted.
fn last_finished(cs: &Value) -> Option<DateTime<Utc>> {
    get(cs, &["lastState", "terminated"])?;
    parse_time(get(cs, &["lastState", "terminated", "finishedAt"]))
}

fn later(acc: &mut Option<DateTime<Utc>>, t: Option<DateTime<Utc>>) {
    if let Some(t) = t {
        if acc.is_none_or(|a| a < t) {
            *acc = Some(t);
        }
    }
}

fn has_true_condition(conditions: &[Value], ty: &str) -> bool {
    conditions
        .iter()
        .any(|c| get_str(c, &["type"]) == ty && get_str(c, &["status"]) == "True")
}

/// `status.podIPs[0]`, else `status.podIP`.
fn pod_ip(pod: &Value) -> &str {
    get_arr(pod, &["status", "podIPs"])
        .first()
        .map(|p| get_str(p, &["ip"]))
        .filter(|ip| !ip.is_empty())
        .unwrap_or_else(|| get_str(pod, &["status", "podIP"]))
}

/// `true/all` of the readiness gates, or `<none>`.
fn readiness_gates(pod: &Value, conditions: &[Value]) -> String {
    let gates = get_arr(pod, &["spec", "readinessGates"]);
    if gates.is_empty() {
        return "<none>".to_string();
    }
    let met = gates
        .iter()
        .filter(|g| {
            let ty = get_str(g, &["conditionType"]);
            conditions
                .iter()
                .find(|c| get_str(c, &["type"]) == ty)
                .is_some_and(|c| get_str(c, &["status"]) == "True")
        })
        .count();
    format!("{met}/{}", gates.len())
}
