//! PodStatus from the pod spec, what containerd holds and the worker's own observations
//! (waiting reasons, probe results), following the kubelet's `getPhase` and
//! `generateAPIPodStatus`, built from k8s-openapi's types.

use std::collections::HashMap;

use cairn_runtime::{ContainerState, ContainerStatus};
use chrono::{DateTime, Utc};
use k8s_openapi::api::core::v1::{
    Container, ContainerState as ApiState, ContainerStateRunning, ContainerStateTerminated,
    ContainerStateWaiting, ContainerStatus as ApiContainerStatus, HostIP, Pod, PodCondition, PodIP,
    PodStatus,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

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
    /// Pod-level failure (admission rejection).
    pub pod_failure: Option<(String, String)>,
    /// The pod is being deleted and nothing of it runs any more (the kubelet's
    /// `podIsTerminal`): no container waits to restart, and the phase is final.
    pub terminal: bool,
}

/// A timestamp as the API keeps it: whole seconds.
fn time(t: DateTime<Utc>) -> Option<Time> {
    k8s_openapi::jiff::Timestamp::from_second(t.timestamp())
        .ok()
        .map(Time)
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

fn terminated(c: &ContainerStatus) -> ApiState {
    let message = c
        .labels
        .get("io.cairn.message")
        .filter(|m| !m.is_empty())
        .cloned();
    ApiState {
        terminated: Some(ContainerStateTerminated {
            exit_code: c.exit_code.unwrap_or(0),
            reason: Some(c.reason.clone().unwrap_or_else(|| "Error".into())),
            started_at: c.started_at.and_then(time),
            finished_at: c.finished_at.and_then(time),
            container_id: Some(format!("containerd://{}", c.id)),
            message,
            signal: None,
        }),
        ..Default::default()
    }
}

fn waiting_state(reason: &str, message: &str) -> ApiState {
    ApiState {
        waiting: Some(ContainerStateWaiting {
            reason: Some(reason.to_string()),
            message: (!message.is_empty()).then(|| message.to_string()),
        }),
        ..Default::default()
    }
}

/// The previous instance as `lastState`, when it exited.
fn last_terminated(prev: Option<&ContainerStatus>) -> Option<ApiState> {
    prev.filter(|p| p.state == ContainerState::Exited)
        .map(terminated)
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
) -> (ApiContainerStatus, Kind) {
    let (cur, prev) = instances(&obs.containers, &spec.name);
    let mut s = ApiContainerStatus {
        name: spec.name.clone(),
        image: spec.image.clone().unwrap_or_default(),
        image_id: cur.map(|c| c.image_id.clone()).unwrap_or_default(),
        restart_count: cur.map_or(0, |c| i32::try_from(c.attempt).unwrap_or(i32::MAX)),
        ready: false,
        started: Some(false),
        state: Some(ApiState::default()),
        last_state: Some(ApiState::default()),
        container_id: cur.map(|c| format!("containerd://{}", c.id)),
        ..Default::default()
    };
    let kind = match cur {
        Some(c) if c.state == ContainerState::Running => {
            let started = obs.started.get(&spec.name).copied().unwrap_or(true);
            s.state = Some(ApiState {
                running: Some(ContainerStateRunning {
                    started_at: c.started_at.and_then(time),
                }),
                ..Default::default()
            });
            s.started = Some(started);
            s.ready = started && obs.ready.get(&spec.name).copied().unwrap_or(true);
            s.last_state = Some(last_terminated(prev).unwrap_or_default());
            Kind::Running
        }
        Some(c) if c.state == ContainerState::Exited => exited(&mut s, c, prev, obs, policy, init),
        _ => {
            let (reason, message) = match obs.waiting.get(&spec.name) {
                Some(w) => (w.reason.as_str(), w.message.as_str()),
                None => ("ContainerCreating", ""),
            };
            s.state = Some(waiting_state(reason, message));
            match last_terminated(prev) {
                Some(last) => {
                    s.last_state = Some(last);
                    Kind::Stopped
                }
                None => Kind::Waiting,
            }
        }
    };
    (s, kind)
}

/// The status of a container whose latest instance exited: waiting to restart (back-off,
/// with the exit as `lastState`) or terminated for good.
fn exited(
    s: &mut ApiContainerStatus,
    c: &ContainerStatus,
    prev: Option<&ContainerStatus>,
    obs: &Observed<'_>,
    policy: &str,
    init: bool,
) -> Kind {
    let code = c.exit_code.unwrap_or(0);
    let restarting = !obs.terminal
        && (!init && will_restart(policy, code) || init && code != 0 && policy != "Never");
    match obs.waiting.get(&s.name) {
        Some(w) if restarting => {
            s.state = Some(ApiState {
                waiting: Some(ContainerStateWaiting {
                    reason: Some(w.reason.clone()),
                    message: Some(w.message.clone()),
                }),
                ..Default::default()
            });
            s.last_state = Some(terminated(c));
            Kind::Stopped
        }
        _ => {
            s.state = Some(terminated(c));
            s.last_state = Some(last_terminated(prev).unwrap_or_default());
            if code == 0 {
                Kind::Succeeded
            } else {
                Kind::Failed
            }
        }
    }
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

/// A condition, keeping its transition time while its status stays the same.
fn condition(
    kind: &str,
    ok: bool,
    reason: Option<&str>,
    previous: &[PodCondition],
    now: &Option<Time>,
) -> PodCondition {
    let status = if ok { "True" } else { "False" };
    let since = previous
        .iter()
        .find(|c| c.type_ == kind && c.status == status)
        .and_then(|c| c.last_transition_time.clone())
        .or_else(|| now.clone());
    PodCondition {
        type_: kind.to_string(),
        status: status.to_string(),
        reason: reason.map(str::to_string),
        last_transition_time: since,
        ..Default::default()
    }
}

/// The init containers' statuses; whether all succeeded, and whether one failed for good.
fn init_statuses(
    spec: &k8s_openapi::api::core::v1::PodSpec,
    obs: &Observed<'_>,
    policy: &str,
) -> (Vec<ApiContainerStatus>, bool, bool) {
    let mut statuses = Vec::new();
    let (mut initialized, mut failed) = (true, false);
    for ic in spec.init_containers.iter().flatten() {
        let (mut s, kind) = container_status(ic, obs, policy, true);
        match kind {
            Kind::Succeeded => {}
            Kind::Failed if policy == "Never" => {
                failed = true;
                initialized = false;
            }
            _ => initialized = false,
        }
        // Init containers are never "ready" in the sense of app containers, except done.
        s.ready = kind == Kind::Succeeded;
        statuses.push(s);
    }
    (statuses, initialized, failed)
}

/// How many app containers are in each state (the inputs of the kubelet's `getPhase`).
#[derive(Default)]
struct Tally {
    running: usize,
    waiting: usize,
    stopped: usize,
    succeeded: usize,
    all_ready: bool,
}

fn app_statuses(
    spec: &k8s_openapi::api::core::v1::PodSpec,
    obs: &Observed<'_>,
    policy: &str,
    initialized: bool,
) -> (Vec<ApiContainerStatus>, Tally) {
    let mut tally = Tally {
        all_ready: !spec.containers.is_empty(),
        ..Default::default()
    };
    let mut statuses = Vec::new();
    for c in &spec.containers {
        let (mut s, kind) = container_status(c, obs, policy, false);
        if !initialized && kind == Kind::Waiting {
            s.state = Some(waiting_state("PodInitializing", ""));
        }
        match kind {
            Kind::Running => tally.running += 1,
            Kind::Waiting => tally.waiting += 1,
            Kind::Stopped | Kind::Failed => tally.stopped += 1,
            Kind::Succeeded => {
                tally.stopped += 1;
                tally.succeeded += 1;
            }
        }
        tally.all_ready &= s.ready;
        statuses.push(s);
    }
    (statuses, tally)
}

/// Ephemeral containers' statuses: they never restart and are never ready.
fn ephemeral_statuses(
    spec: &k8s_openapi::api::core::v1::PodSpec,
    obs: &Observed<'_>,
) -> Option<Vec<ApiContainerStatus>> {
    let statuses: Vec<ApiContainerStatus> = spec
        .ephemeral_containers
        .iter()
        .flatten()
        .filter_map(crate::pod_meta::ephemeral_as_container)
        .map(|c| container_status(&c, obs, "Never", false).0)
        .collect();
    (!statuses.is_empty()).then_some(statuses)
}

/// The kubelet's `getPhase`.
fn phase(tally: &Tally, policy: &str, initialized: bool, init_failed: bool) -> &'static str {
    if init_failed {
        "Failed"
    } else if !initialized || tally.waiting > 0 {
        "Pending"
    } else if tally.running > 0 {
        "Running"
    } else if tally.stopped > 0 {
        if policy == "Always" {
            "Running"
        } else if tally.stopped == tally.succeeded {
            "Succeeded"
        } else if policy == "Never" {
            "Failed"
        } else {
            "Running"
        }
    } else {
        "Pending"
    }
}

/// The phase of a pod that is terminal (the kubelet's `getPhase` with `podIsTerminal`):
/// Succeeded when every app container exited 0, else Failed.
fn terminal_phase(tally: &Tally) -> &'static str {
    if tally.running == 0 && tally.waiting == 0 && tally.stopped == tally.succeeded {
        "Succeeded"
    } else {
        "Failed"
    }
}

/// A terminal pod's containers all show a terminated state: one that never ran (or whose
/// record is gone) gets the status manager's `ContainerStatusUnknown`, exit code 137.
fn all_terminated(mut statuses: Vec<ApiContainerStatus>) -> Vec<ApiContainerStatus> {
    for s in &mut statuses {
        if s.state.as_ref().is_some_and(|st| st.terminated.is_some()) {
            continue;
        }
        s.ready = false;
        s.started = Some(false);
        s.state = Some(ApiState {
            terminated: Some(ContainerStateTerminated {
                exit_code: 137,
                reason: Some("ContainerStatusUnknown".into()),
                message: Some(
                    "The container could not be located when the pod was terminated".into(),
                ),
                ..Default::default()
            }),
            ..Default::default()
        });
    }
    statuses
}

/// The five pod conditions, and DisruptionTarget for an evicted pod.
fn conditions(
    pod: &Pod,
    obs: &Observed<'_>,
    initialized: bool,
    containers_ready: bool,
    terminal: bool,
    now: &Option<Time>,
) -> Vec<PodCondition> {
    let previous: Vec<PodCondition> = pod
        .status
        .as_ref()
        .and_then(|s| s.conditions.clone())
        .unwrap_or_default();
    let host_network = pod.spec.as_ref().and_then(|s| s.host_network) == Some(true);
    let not_ready = (!containers_ready).then_some(if terminal {
        "PodCompleted"
    } else {
        "ContainersNotReady"
    });
    let sandbox_ready = obs.pod_ip.is_some() || host_network;
    let not_initialized = (!initialized).then_some("ContainersNotInitialized");
    let mut list = vec![
        condition(
            "PodReadyToStartContainers",
            sandbox_ready,
            None,
            &previous,
            now,
        ),
        condition("Initialized", initialized, not_initialized, &previous, now),
        condition("Ready", containers_ready, not_ready, &previous, now),
        condition(
            "ContainersReady",
            containers_ready,
            not_ready,
            &previous,
            now,
        ),
        condition("PodScheduled", true, None, &previous, now),
    ];
    // An evicted pod says who disrupted it, as the kubelet's eviction manager does.
    if let Some((_, message)) = obs.pod_failure.as_ref().filter(|(r, _)| r == "Evicted") {
        let mut target = condition(
            "DisruptionTarget",
            true,
            Some("TerminationByKubelet"),
            &previous,
            now,
        );
        target.message = Some(message.clone());
        list.push(target);
    }
    list
}

/// The whole `status` of a pod.
pub fn pod_status(pod: &Pod, obs: &Observed<'_>, now: DateTime<Utc>) -> PodStatus {
    let spec = pod.spec.clone().unwrap_or_default();
    let policy = spec.restart_policy.as_deref().unwrap_or("Always");
    let now = time(now);
    let (init, initialized, init_failed) = init_statuses(&spec, obs, policy);
    let (apps, tally) = app_statuses(&spec, obs, policy, initialized);
    let (phase, reason, message) = match &obs.pod_failure {
        Some((reason, message)) => ("Failed", Some(reason.clone()), Some(message.clone())),
        None if obs.terminal && !crate::pod_meta::is_static(pod) => {
            (terminal_phase(&tally), None, None)
        }
        None => (phase(&tally, policy, initialized, init_failed), None, None),
    };
    let (init, apps) = if obs.terminal {
        (all_terminated(init), all_terminated(apps))
    } else {
        (init, apps)
    };
    let terminal = matches!(phase, "Succeeded" | "Failed");
    let containers_ready = tally.all_ready && !terminal;
    let pod_ip = if spec.host_network == Some(true) {
        obs.host_ip.clone()
    } else {
        obs.pod_ip.clone()
    };
    let start_time = pod.status.as_ref().and_then(|s| s.start_time.clone());
    PodStatus {
        phase: Some(phase.to_string()),
        conditions: Some(conditions(
            pod,
            obs,
            initialized,
            containers_ready,
            terminal,
            &now,
        )),
        start_time: start_time.or(now),
        qos_class: Some(qos_class(pod).to_string()),
        container_statuses: Some(apps),
        init_container_statuses: (!init.is_empty()).then_some(init),
        ephemeral_container_statuses: ephemeral_statuses(&spec, obs),
        host_ip: obs.host_ip.clone(),
        host_ips: obs.host_ip.clone().map(|ip| vec![HostIP { ip }]),
        pod_ip: pod_ip.clone(),
        pod_ips: pod_ip.map(|ip| vec![PodIP { ip }]),
        reason,
        message,
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Value};
    use std::collections::BTreeMap;

    /// The status as the API would see it on the wire.
    fn wire(pod: &Pod, obs: &Observed<'_>) -> Value {
        serde_json::to_value(pod_status(pod, obs, Utc::now())).unwrap()
    }

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
        let s = wire(&p, &obs);
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
        let s = wire(&p, &obs);
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
        assert_eq!(wire(&p, &obs)["phase"], "Succeeded");
        let b = inst("b", 0, ContainerState::Exited, Some(2));
        let obs = Observed {
            containers: vec![&a, &b],
            ..Default::default()
        };
        let s = wire(&p, &obs);
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
        let s = wire(&p, &obs);
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
