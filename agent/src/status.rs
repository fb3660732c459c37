//! PodStatus from the pod spec, what containerd holds and the worker's own observations
//! (waiting reasons, probe results), following the kubelet's `getPhase` and
//! `generateAPIPodStatus`.

use std::collections::HashMap;

use cairn_runtime::{ContainerState, ContainerStatus};
use chrono::{DateTime, SecondsFormat, Utc};
use k8s_openapi::api::core::v1::{Container, Pod};
use serde_json::{json, Value};

/// A reason the worker holds a container in `waiting` (image errors, back-off, config errors).
#[derive(Debug, Clone, PartialEq)]
pub struct Waiting {
    pub reason: String,
    pub message: String,
}

/// Everything status generation needs besides the pod.
#[derive(Default)]
pub struct Observed<'a> {
    /// All instances of this pod's containers, any order.
    pub containers: Vec<&'a ContainerStatus>,
    pub waiting: HashMap<String, Waiting>,
    /// Readiness probe results (absent = no probe: ready when running).
    pub ready: HashMap<String, bool>,
    pub started: HashMap<String, bool>,
    pub pod_ip: Option<String>,
    pub host_ip: Option<String>,
    /// Pod-level failure (admission rejection, init failure with Never).
    pub pod_failure: Option<(String, String)>,
}

fn ts(t: &Option<DateTime<Utc>>) -> Value {
    t.map(|t| json!(t.to_rfc3339_opts(SecondsFormat::Secs, true)))
        .unwrap_or(Value::Null)
}

/// Latest and previous instance of a container (by attempt).
pub fn instances<'a>(
    all: &[&'a ContainerStatus],
    name: &str,
) -> (Option<&'a ContainerStatus>, Option<&'a ContainerStatus>) {
    let mut mine: Vec<&ContainerStatus> = all.iter().copied().filter(|c| c.name == name).collect();
    mine.sort_by_key(|c| std::cmp::Reverse(c.attempt));
    (mine.first().copied(), mine.get(1).copied())
}

fn terminated(c: &ContainerStatus) -> Value {
    let mut t = json!({
        "exitCode": c.exit_code.unwrap_or(0),
        "reason": c.reason.clone().unwrap_or_else(|| "Error".into()),
        "startedAt": ts(&c.started_at),
        "finishedAt": ts(&c.finished_at),
        "containerID": format!("containerd://{}", c.id),
    });
    if let Some(m) = c.labels.get("io.cairn.message").filter(|m| !m.is_empty()) {
        t["message"] = json!(m);
    }
    t
}

/// Whether a container that exited should run again under the pod's restartPolicy.
pub fn will_restart(policy: &str, exit_code: i32) -> bool {
    match policy {
        "Never" => false,
        "OnFailure" => exit_code != 0,
        _ => true,
    }
}

/// One containerStatuses entry.
fn container_status(
    spec: &Container,
    obs: &Observed<'_>,
    policy: &str,
    init: bool,
) -> (Value, Kind) {
    let (cur, prev) = instances(&obs.containers, &spec.name);
    let image = spec.image.clone().unwrap_or_default();
    let mut s = json!({
        "name": spec.name,
        "image": image,
        "imageID": cur.map(|c| c.image_id.clone()).unwrap_or_default(),
        "restartCount": cur.map(|c| c.attempt).unwrap_or(0),
        "ready": false,
        "started": false,
        "state": {},
        "lastState": {},
    });
    if let Some(c) = cur {
        s["containerID"] = json!(format!("containerd://{}", c.id));
    }
    let waiting = obs.waiting.get(&spec.name);
    let kind;
    match cur {
        Some(c) if c.state == ContainerState::Running => {
            s["state"] = json!({"running": {"startedAt": ts(&c.started_at)}});
            let started = obs.started.get(&spec.name).copied().unwrap_or(true);
            s["started"] = json!(started);
            s["ready"] = json!(started && obs.ready.get(&spec.name).copied().unwrap_or(true));
            if let Some(p) = prev.filter(|p| p.state == ContainerState::Exited) {
                s["lastState"] = json!({"terminated": terminated(p)});
            }
            kind = Kind::Running;
        }
        Some(c) if c.state == ContainerState::Exited => {
            let code = c.exit_code.unwrap_or(0);
            let restarting =
                !init && will_restart(policy, code) || init && code != 0 && policy != "Never";
            match waiting {
                Some(w) if restarting => {
                    s["state"] = json!({"waiting": {"reason": w.reason, "message": w.message}});
                    s["lastState"] = json!({"terminated": terminated(c)});
                    kind = Kind::Stopped;
                }
                _ => {
                    s["state"] = json!({"terminated": terminated(c)});
                    if let Some(p) = prev.filter(|p| p.state == ContainerState::Exited) {
                        s["lastState"] = json!({"terminated": terminated(p)});
                    }
                    kind = if code == 0 {
                        Kind::Succeeded
                    } else {
                        Kind::Failed
                    };
                }
            }
        }
        _ => {
            let (reason, message) = match waiting {
                Some(w) => (w.reason.clone(), w.message.clone()),
                None => ("ContainerCreating".to_string(), String::new()),
            };
            let mut w = json!({"reason": reason});
            if !message.is_empty() {
                w["message"] = json!(message);
            }
            s["state"] = json!({"waiting": w});
            if let Some(p) = prev.filter(|p| p.state == ContainerState::Exited) {
                s["lastState"] = json!({"terminated": terminated(p)});
                kind = Kind::Stopped;
            } else {
                kind = Kind::Waiting;
            }
        }
    }
    (s, kind)
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Kind {
    Running,
    Waiting,
    /// Exited and will restart (or waits to): counts as "stopped" in getPhase.
    Stopped,
    Succeeded,
    Failed,
}

/// QoS class, as Kubernetes computes it (`cairn-semantics`).
pub use crate::pod_meta::qos_class;

fn condition(kind: &str, ok: bool, reason: Option<&str>, previous: &[Value], now: &str) -> Value {
    let status = if ok { "True" } else { "False" };
    let since = previous
        .iter()
        .find(|c| c["type"] == kind && c["status"] == status)
        .and_then(|c| c.get("lastTransitionTime").cloned())
        .unwrap_or_else(|| json!(now));
    let mut c =
        json!({"type": kind, "status": status, "lastProbeTime": null, "lastTransitionTime": since});
    if let Some(r) = reason {
        c["reason"] = json!(r);
    }
    c
}

/// The whole `status` of a pod.
pub fn pod_status(pod: &Pod, obs: &Observed<'_>, now: DateTime<Utc>) -> Value {
    let spec = pod.spec.clone().unwrap_or_default();
    let policy = spec
        .restart_policy
        .clone()
        .unwrap_or_else(|| "Always".into());
    let nows = now.to_rfc3339_opts(SecondsFormat::Secs, true);
    let old = pod.status.clone().unwrap_or_default();
    let previous: Vec<Value> = old
        .conditions
        .iter()
        .flatten()
        .filter_map(|c| serde_json::to_value(c).ok())
        .collect();

    let mut init_statuses = Vec::new();
    let mut initialized = true;
    let mut init_failed = false;
    for ic in spec.init_containers.iter().flatten() {
        let (s, kind) = container_status(ic, obs, &policy, true);
        match kind {
            Kind::Succeeded => {}
            Kind::Failed if policy == "Never" => {
                init_failed = true;
                initialized = false;
            }
            _ => initialized = false,
        }
        // Init containers are never "ready" in the sense of app containers, except done.
        let mut s = s;
        s["ready"] = json!(kind == Kind::Succeeded);
        init_statuses.push(s);
    }
    let mut statuses = Vec::new();
    let (mut running, mut waiting, mut stopped, mut succeeded, mut failed) = (0, 0, 0, 0, 0);
    let mut all_ready = !spec.containers.is_empty();
    for c in &spec.containers {
        let (mut s, kind) = container_status(c, obs, &policy, false);
        if !initialized && kind == Kind::Waiting {
            s["state"] = json!({"waiting": {"reason": "PodInitializing"}});
        }
        match kind {
            Kind::Running => running += 1,
            Kind::Waiting => waiting += 1,
            Kind::Stopped => stopped += 1,
            Kind::Succeeded => {
                stopped += 1;
                succeeded += 1
            }
            Kind::Failed => {
                stopped += 1;
                failed += 1
            }
        }
        if s["ready"] != json!(true) {
            all_ready = false;
        }
        statuses.push(s);
    }
    let _ = failed;
    let (phase, pod_reason, pod_message) = if let Some((reason, message)) = &obs.pod_failure {
        ("Failed", Some(reason.clone()), Some(message.clone()))
    } else if init_failed {
        ("Failed", None, None)
    } else if !initialized || waiting > 0 {
        ("Pending", None, None)
    } else if running > 0 {
        ("Running", None, None)
    } else if stopped > 0 {
        if policy == "Always" {
            ("Running", None, None)
        } else if stopped == succeeded {
            ("Succeeded", None, None)
        } else if policy == "Never" {
            ("Failed", None, None)
        } else {
            ("Running", None, None)
        }
    } else {
        ("Pending", None, None)
    };
    let terminal = matches!(phase, "Succeeded" | "Failed");
    let containers_ready = all_ready && !terminal;
    let mut conditions = vec![];
    conditions.push(condition(
        "PodReadyToStartContainers",
        obs.pod_ip.is_some() || spec.host_network == Some(true),
        None,
        &previous,
        &nows,
    ));
    conditions.push(condition(
        "Initialized",
        initialized,
        (!initialized).then_some("ContainersNotInitialized"),
        &previous,
        &nows,
    ));
    let not_ready_reason = if terminal {
        "PodCompleted"
    } else {
        "ContainersNotReady"
    };
    conditions.push(condition(
        "Ready",
        containers_ready,
        (!containers_ready).then_some(not_ready_reason),
        &previous,
        &nows,
    ));
    conditions.push(condition(
        "ContainersReady",
        containers_ready,
        (!containers_ready).then_some(not_ready_reason),
        &previous,
        &nows,
    ));
    conditions.push(condition("PodScheduled", true, None, &previous, &nows));

    let start_time = old
        .start_time
        .as_ref()
        .and_then(|t| serde_json::to_value(t).ok())
        .unwrap_or_else(|| json!(nows));
    let mut status = json!({
        "phase": phase,
        "conditions": conditions,
        "startTime": start_time,
        "qosClass": qos_class(pod),
        "containerStatuses": statuses,
    });
    if !init_statuses.is_empty() {
        status["initContainerStatuses"] = json!(init_statuses);
    }
    if let Some(ip) = &obs.host_ip {
        status["hostIP"] = json!(ip);
        status["hostIPs"] = json!([{"ip": ip}]);
    }
    let pod_ip = if spec.host_network == Some(true) {
        obs.host_ip.clone()
    } else {
        obs.pod_ip.clone()
    };
    if let Some(ip) = pod_ip {
        status["podIP"] = json!(ip);
        status["podIPs"] = json!([{"ip": ip}]);
    }
    if let Some(r) = pod_reason {
        status["reason"] = json!(r);
    }
    if let Some(m) = pod_message {
        status["message"] = json!(m);
    }
    status
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn pod(policy: &str) -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": "p", "namespace": "d", "uid": "u"},
            "spec": {"restartPolicy": policy, "containers": [{"name": "a", "image": "busybox"}, {"name": "b", "image": "busybox"}]}
        }))
        .unwrap()
    }

    fn inst(name: &str, attempt: u32, state: ContainerState, code: Option<i32>) -> ContainerStatus {
        ContainerStatus {
            id: format!("{name}{attempt}"),
            sandbox_id: "s".into(),
            pod_uid: "u".into(),
            pod_namespace: "d".into(),
            pod_name: "p".into(),
            name: name.into(),
            attempt,
            spec_hash: String::new(),
            init: false,
            state,
            image_ref: String::new(),
            image_id: "sha256:x".into(),
            pid: None,
            created_at: None,
            started_at: Some(Utc::now()),
            finished_at: code.map(|_| Utc::now()),
            exit_code: code,
            reason: code.map(|c| {
                if c == 0 {
                    "Completed".to_string()
                } else {
                    "Error".to_string()
                }
            }),
            log_path: String::new(),
            cgroup: String::new(),
            termination_message_path: None,
            labels: BTreeMap::new(),
        }
    }

    #[test]
    fn running_and_ready() {
        let p = pod("Always");
        let a = inst("a", 0, ContainerState::Running, None);
        let b = inst("b", 0, ContainerState::Running, None);
        let obs = Observed {
            containers: vec![&a, &b],
            pod_ip: Some("10.244.0.2".into()),
            ..Default::default()
        };
        let s = pod_status(&p, &obs, Utc::now());
        assert_eq!(s["phase"], "Running");
        assert_eq!(s["podIP"], "10.244.0.2");
        assert!(s["conditions"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c["type"] == "Ready" && c["status"] == "True"));
        assert_eq!(s["containerStatuses"][0]["containerID"], "containerd://a0");
    }

    #[test]
    fn crash_loop_counts_as_running_with_last_state() {
        let p = pod("Always");
        let a = inst("a", 3, ContainerState::Exited, Some(1));
        let b = inst("b", 0, ContainerState::Running, None);
        let mut obs = Observed {
            containers: vec![&a, &b],
            ..Default::default()
        };
        obs.waiting.insert(
            "a".into(),
            Waiting {
                reason: "CrashLoopBackOff".into(),
                message: "back-off 40s".into(),
            },
        );
        let s = pod_status(&p, &obs, Utc::now());
        assert_eq!(s["phase"], "Running");
        let a = &s["containerStatuses"][0];
        assert_eq!(a["state"]["waiting"]["reason"], "CrashLoopBackOff");
        assert_eq!(a["lastState"]["terminated"]["exitCode"], 1);
        assert_eq!(a["restartCount"], 3);
    }

    #[test]
    fn never_policy_ends_succeeded_or_failed() {
        let p = pod("Never");
        let a = inst("a", 0, ContainerState::Exited, Some(0));
        let b = inst("b", 0, ContainerState::Exited, Some(0));
        let obs = Observed {
            containers: vec![&a, &b],
            ..Default::default()
        };
        assert_eq!(pod_status(&p, &obs, Utc::now())["phase"], "Succeeded");
        let b = inst("b", 0, ContainerState::Exited, Some(2));
        let obs = Observed {
            containers: vec![&a, &b],
            ..Default::default()
        };
        let s = pod_status(&p, &obs, Utc::now());
        assert_eq!(s["phase"], "Failed");
        assert_eq!(
            s["containerStatuses"][1]["state"]["terminated"]["exitCode"],
            2
        );
    }

    #[test]
    fn waiting_is_pending() {
        let p = pod("Always");
        let mut obs = Observed::default();
        obs.waiting.insert(
            "a".into(),
            Waiting {
                reason: "ErrImagePull".into(),
                message: "not found".into(),
            },
        );
        let s = pod_status(&p, &obs, Utc::now());
        assert_eq!(s["phase"], "Pending");
        assert_eq!(
            s["containerStatuses"][0]["state"]["waiting"]["reason"],
            "ErrImagePull"
        );
        assert_eq!(
            s["containerStatuses"][1]["state"]["waiting"]["reason"],
            "ContainerCreating"
        );
    }

    #[test]
    fn qos_classes() {
        let mk = |res: Value| -> Pod {
            serde_json::from_value(
                json!({"spec": {"containers": [{"name": "a", "resources": res}]}}),
            )
            .unwrap()
        };
        assert_eq!(qos_class(&mk(json!({}))), "BestEffort");
        assert_eq!(
            qos_class(&mk(json!({"limits": {"cpu": "1", "memory": "1Gi"}}))),
            "Guaranteed"
        );
        assert_eq!(
            qos_class(&mk(json!({"requests": {"memory": "1Gi"}}))),
            "Burstable"
        );
    }
}
