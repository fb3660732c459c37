//! Admission, hooks, termination order and the grace deadline.

use serde_json::json;

use super::harness::*;
use cairn_runtime::fake::Script;

#[tokio::test(start_paused = true)]
async fn a_full_node_rejects_the_pod() {
    let mut rig = Rig::with_max_pods(0);
    rig.run(pod(json!({"containers": [container("app", json!({}))]})));
    rig.wait(30).await;
    let s = rig.status();
    assert_eq!(s["phase"], "Failed");
    assert_eq!(s["reason"], "OutOfpods");
    assert_eq!(
        s["message"],
        "Pod was rejected: Node didn't have enough resource: pods, requested: 1, used: 0, capacity: 0"
    );
    assert!(rig.calls("run_pod_sandbox").is_empty());
    assert_eq!(rig.events("OutOfpods").len(), 1);
}

fn hooked() -> serde_json::Value {
    container(
        "app",
        json!({"lifecycle": {
            "postStart": {"exec": {"command": ["post-start"]}},
            "preStop": {"exec": {"command": ["pre-stop"]}},
        }}),
    )
}

#[tokio::test(start_paused = true)]
async fn hooks_run_after_start_and_before_stop() {
    let mut rig = Rig::new();
    rig.run(pod(json!({"containers": [hooked()]})));
    rig.wait(2).await;
    rig.delete(30);
    rig.finished().await;
    let order: Vec<String> = rig
        .runtime
        .calls()
        .into_iter()
        .filter(|c| !c.starts_with("create_container") && !c.starts_with("run_pod_sandbox"))
        .map(|c| {
            let mut words = c.split(' ');
            let verb = words.next().unwrap_or_default().to_string();
            match verb.as_str() {
                "exec_sync" => format!("exec {}", words.nth(1).unwrap_or_default()),
                _ => verb,
            }
        })
        .collect();
    assert_eq!(
        order,
        [
            "start_container",
            "exec post-start",
            "exec pre-stop",
            "stop_container",
            "exit",
            "remove_container",
            "remove_pod_sandbox"
        ]
    );
    assert_eq!(
        rig.api.deleted.lock().as_slice(),
        ["p uid-1"],
        "the final delete"
    );
}

#[tokio::test(start_paused = true)]
async fn a_failed_post_start_hook_kills_the_container() {
    let mut rig = Rig::new();
    rig.script(
        "app",
        Script {
            exec_exit_code: 2,
            ..Default::default()
        },
    );
    rig.run(pod(json!({"containers": [hooked()]})));
    rig.wait(3).await;
    assert_eq!(rig.events("FailedPostStartHook"), ["PostStartHook failed"]);
    assert_eq!(rig.events("Killing"), ["FailedPostStartHook"]);
    // Waiting with the hook's error, then in back-off before its restart, as the kubelet.
    let reasons: Vec<String> = rig.waiting_reasons();
    let hook_error = reasons.iter().position(|r| r == "PostStartHookError");
    let back_off = reasons.iter().position(|r| r == "CrashLoopBackOff");
    assert!(hook_error.is_some() && hook_error < back_off, "{reasons:?}");
}

#[tokio::test(start_paused = true)]
async fn termination_stops_all_in_parallel_and_kills_at_the_grace_deadline() {
    let mut rig = Rig::new();
    rig.script(
        "stubborn",
        Script {
            hangs_on_stop: true,
            ..Default::default()
        },
    );
    rig.run(pod(
        json!({"containers": [container("polite", json!({})), container("stubborn", json!({}))]}),
    ));
    rig.wait(2).await;
    let asked = rig.clock.now();
    rig.delete(20);
    rig.finished().await;
    let exits = rig.calls("exit ");
    assert_eq!(exits.len(), 2);
    let polite = (exits[0].0 - asked).num_seconds();
    let stubborn = (exits[1].0 - asked).num_seconds();
    assert_eq!(polite, 0, "SIGTERM ends a container that listens at once");
    assert!(exits[0].1.ends_with(" 143"), "{:?}", exits[0]);
    assert_eq!(stubborn, 20, "SIGKILL at the grace deadline");
    assert!(exits[1].1.ends_with(" 137"), "{:?}", exits[1]);
    // Cleanup after every container stopped, then the final delete.
    let removes = rig.calls("remove_");
    assert!(removes.iter().all(|(t, _)| *t >= exits[1].0));
    assert_eq!(rig.api.deleted.lock().len(), 1);
    assert_eq!(
        rig.events("Killing"),
        ["Stopping container polite", "Stopping container stubborn"]
    );
}

#[tokio::test(start_paused = true)]
async fn a_pre_stop_hook_spends_the_grace_period_but_leaves_two_seconds() {
    let mut rig = Rig::new();
    rig.script(
        "app",
        Script {
            hangs_on_stop: true,
            ..Default::default()
        },
    );
    rig.run(pod(json!({"containers": [hooked()]})));
    rig.wait(2).await;
    let asked = rig.clock.now();
    rig.delete(5);
    rig.finished().await;
    let exit = rig.calls("exit ")[0].0;
    assert_eq!(
        (exit - asked).num_seconds(),
        5,
        "the hook returns at once: SIGKILL at 5 s"
    );
}

#[tokio::test(start_paused = true)]
async fn a_pod_gone_from_its_source_is_cleaned_up_without_a_final_delete() {
    let mut rig = Rig::new();
    rig.run(pod(json!({"containers": [container("app", json!({}))]})));
    rig.wait(2).await;
    rig.gone();
    rig.finished().await;
    assert_eq!(rig.calls("remove_pod_sandbox").len(), 1);
    assert!(rig.runtime.containers().is_empty());
    assert!(rig.api.deleted.lock().is_empty());
}

#[test]
fn state_moves_only_forward_to_termination() {
    use super::super::{Desired, WorkerState};
    let mut p = pod(json!({"containers": []}));
    let run = Desired::Run(Box::new(p.clone()));
    assert_eq!(WorkerState::Pending.on_desired(&run), WorkerState::Pending);
    assert_eq!(WorkerState::Running.on_desired(&run), WorkerState::Running);
    p.status = Some(k8s_openapi::api::core::v1::PodStatus {
        phase: Some("Succeeded".into()),
        ..Default::default()
    });
    let done = Desired::Run(Box::new(p.clone()));
    assert_eq!(
        WorkerState::Running.on_desired(&done),
        WorkerState::Finished
    );
    p.metadata.deletion_grace_period_seconds = Some(7);
    p.metadata.deletion_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
        k8s_openapi::jiff::Timestamp::now(),
    ));
    let deleted = Desired::Run(Box::new(p.clone()));
    let terminating = WorkerState::Finished.on_desired(&deleted);
    assert_eq!(
        terminating,
        WorkerState::Terminating {
            grace: std::time::Duration::from_secs(7),
            final_delete: true
        }
    );
    assert_eq!(
        terminating.on_desired(&run),
        terminating,
        "no way back from termination"
    );
    let gone = Desired::Gone(Box::new(pod(json!({"containers": []}))));
    assert_eq!(
        WorkerState::Pending.on_desired(&gone),
        WorkerState::Terminating {
            grace: std::time::Duration::from_secs(2),
            final_delete: false
        }
    );
}
