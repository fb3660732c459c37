//! Probes on the fake runtime: exec probes answer with the script's exit code.

use serde_json::{json, Value};

use super::harness::*;
use cairn_runtime::fake::Script;

fn probe(extra: Value) -> Value {
    let mut p = json!({"exec": {"command": ["check"]}, "periodSeconds": 1, "failureThreshold": 2});
    if let (Some(p), Some(extra)) = (p.as_object_mut(), extra.as_object()) {
        p.extend(extra.clone());
    }
    p
}

fn exec_answers(code: i32) -> Script {
    Script {
        exec_exit_code: code,
        ..Default::default()
    }
}

fn ready(rig: &Rig) -> bool {
    rig.status()["containerStatuses"][0]["ready"] == json!(true)
}

#[tokio::test(start_paused = true)]
async fn a_failing_liveness_probe_restarts_the_container() {
    let mut rig = Rig::new();
    rig.script("app", exec_answers(1));
    let c = container(
        "app",
        json!({"livenessProbe": probe(json!({"initialDelaySeconds": 5}))}),
    );
    rig.run(pod(json!({"containers": [c]})));
    rig.wait(4).await;
    assert!(
        rig.calls("exec_sync").is_empty(),
        "probed before initialDelaySeconds"
    );
    rig.wait(5).await;
    assert_eq!(
        rig.events("Killing"),
        ["Container app failed liveness probe, will be restarted"]
    );
    assert!(rig
        .events("Unhealthy")
        .iter()
        .any(|m| m.starts_with("Liveness probe failed")));
    // Killed, then restarted after the back-off.
    rig.wait(15).await;
    assert!(rig.started().len() >= 2, "{:?}", rig.started());
    // A live container is left alone.
    rig.script("app", exec_answers(0));
    let starts = rig.started().len();
    rig.wait(120).await;
    assert_eq!(
        rig.started().len(),
        starts + 1,
        "at most the pending restart, then no more"
    );
}

#[tokio::test(start_paused = true)]
async fn readiness_flips_with_the_probe() {
    let mut rig = Rig::new();
    rig.script("app", exec_answers(0));
    let c = container("app", json!({"readinessProbe": probe(json!({}))}));
    rig.run(pod(json!({"containers": [c]})));
    rig.wait(3).await;
    assert!(ready(&rig));
    rig.script("app", exec_answers(1));
    rig.wait(5).await;
    assert!(!ready(&rig), "two failures make it unready");
    let conditions = rig.status()["conditions"].clone();
    let ready_cond = conditions
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["type"] == "Ready")
        .cloned()
        .unwrap();
    assert_eq!(ready_cond["status"], "False");
    assert_eq!(ready_cond["reason"], "ContainersNotReady");
    rig.script("app", exec_answers(0));
    rig.wait(3).await;
    assert!(ready(&rig));
    assert_eq!(
        rig.started().len(),
        1,
        "readiness never restarts a container"
    );
}

#[tokio::test(start_paused = true)]
async fn the_startup_probe_gates_readiness_and_liveness() {
    let mut rig = Rig::new();
    rig.script("app", exec_answers(1));
    let c = container(
        "app",
        json!({
            "startupProbe": probe(json!({"failureThreshold": 30})),
            "readinessProbe": probe(json!({})),
            "livenessProbe": probe(json!({})),
        }),
    );
    rig.run(pod(json!({"containers": [c]})));
    rig.wait(10).await;
    let s = rig.status();
    assert_eq!(s["containerStatuses"][0]["started"], false);
    assert_eq!(s["containerStatuses"][0]["ready"], false);
    assert!(
        rig.events("Killing").is_empty(),
        "liveness must wait for startup"
    );
    assert!(rig
        .events("Unhealthy")
        .iter()
        .all(|m| m.starts_with("Startup probe failed")));
    rig.script("app", exec_answers(0));
    rig.wait(3).await;
    let s = rig.status();
    assert_eq!(s["containerStatuses"][0]["started"], true);
    assert_eq!(s["containerStatuses"][0]["ready"], true);
}

#[tokio::test(start_paused = true)]
async fn a_startup_probe_that_never_succeeds_restarts_the_container() {
    let mut rig = Rig::new();
    rig.script("app", exec_answers(1));
    let c = container(
        "app",
        json!({"startupProbe": probe(json!({"failureThreshold": 3}))}),
    );
    rig.run(pod(json!({"containers": [c]})));
    rig.wait(6).await;
    assert_eq!(
        rig.events("Killing"),
        ["Container app failed startup probe, will be restarted"]
    );
}

#[tokio::test(start_paused = true)]
async fn an_agent_restart_does_not_reset_the_initial_delay() {
    let mut rig = Rig::new();
    rig.script("app", exec_answers(0));
    let c = container(
        "app",
        json!({"livenessProbe": probe(json!({"initialDelaySeconds": 30}))}),
    );
    rig.run(pod(json!({"containers": [c]})));
    rig.wait(25).await;
    assert!(rig.calls("exec_sync").is_empty());
    rig.restart_worker();
    rig.wait(6).await;
    // 31 s after the container started: probed, although the new worker saw it 6 s ago.
    assert!(
        !rig.calls("exec_sync").is_empty(),
        "the restart reset the initial delay"
    );
    assert_eq!(rig.started(), ["app"], "the running container was kept");
}
