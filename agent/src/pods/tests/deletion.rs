//! Deletion racing the worker: an exit nobody saw, a start in flight, a pull that never
//! ends, a runtime that restarts while it stops the pod. Each ends with the pod's
//! containers stopped, its final status written, and the final delete.

use std::time::Duration;

use serde_json::json;

use super::harness::*;
use cairn_runtime::fake::Script;
use cairn_runtime::ContainerState;

fn job_pod(image: &str) -> k8s_openapi::api::core::v1::Pod {
    pod(json!({
        "restartPolicy": "Never",
        "containers": [container("app", json!({"image": image}))],
    }))
}

fn first_container_state(rig: &Rig) -> serde_json::Value {
    rig.status()["containerStatuses"][0]["state"].clone()
}

/// The case: a Job's pod deleted with grace 0 a moment after its container
/// started. The final status says the container ended; the pod object is deleted.
#[tokio::test(start_paused = true)]
async fn a_pod_deleted_right_after_its_start_reports_its_end() {
    let mut rig = Rig::new();
    rig.run(job_pod("busybox"));
    tokio::time::sleep(Duration::from_millis(5)).await;
    assert_eq!(rig.started(), ["app"]);
    rig.delete(0);
    rig.finished().await;
    let s = rig.status();
    assert_eq!(s["phase"], "Failed", "{s}");
    let terminated = &first_container_state(&rig)["terminated"];
    assert_eq!(terminated["exitCode"], 143, "{s}");
    assert_eq!(terminated["reason"], "Error");
    assert_eq!(s["conditions"][2]["reason"], "PodCompleted", "{s}");
    assert_eq!(rig.api.deleted.lock().as_slice(), ["p uid-1"]);
    assert!(rig.runtime.containers().is_empty());
}

/// An exit that happened while nobody watched: the stop takes it from the runtime's
/// state instead of waiting out the grace period for an event.
#[tokio::test(start_paused = true)]
async fn an_exit_before_anyone_watched_is_taken_from_the_runtime() {
    let mut rig = Rig::new();
    rig.run(job_pod("busybox"));
    rig.wait(1).await;
    let id = rig.runtime.containers()[0].id.clone();
    rig.runtime.exit_unseen(&id, 0);
    let deleted_at = tokio::time::Instant::now();
    rig.delete(30);
    rig.finished().await;
    assert!(deleted_at.elapsed() < Duration::from_secs(1));
    assert!(
        rig.calls("stop_container").is_empty(),
        "nothing ran to stop"
    );
    let s = rig.status();
    assert_eq!(s["phase"], "Succeeded", "{s}");
    assert_eq!(
        first_container_state(&rig)["terminated"]["reason"],
        "Completed"
    );
}

/// A deletion that arrives while the container is being started: the start completes,
/// then the container is stopped; it never outlives the pod.
#[tokio::test(start_paused = true)]
async fn a_stop_during_the_start_ends_stopped() {
    let mut rig = Rig::new();
    rig.script(
        "app",
        Script {
            start_takes: Some(Duration::from_secs(3)),
            ..Default::default()
        },
    );
    rig.run(job_pod("busybox"));
    rig.wait(1).await;
    rig.delete(0);
    rig.finished().await;
    let calls: Vec<String> = rig
        .runtime
        .calls()
        .into_iter()
        .map(|c| c.split(' ').next().unwrap_or_default().to_string())
        .filter(|c| c.contains("container") || c == "exit")
        .collect();
    assert_eq!(
        calls,
        [
            "create_container",
            "start_container",
            "stop_container",
            "exit",
            "remove_container"
        ]
    );
    assert_eq!(first_container_state(&rig)["terminated"]["exitCode"], 143);
    assert_eq!(rig.api.deleted.lock().len(), 1);
}

/// A pull that never ends (a registry that does not answer) is abandoned when the pod is
/// deleted: the pod has no container to stop and is finished at once.
#[tokio::test(start_paused = true)]
async fn a_deletion_during_a_pull_finishes_the_pod_at_once() {
    let mut rig = Rig::new();
    rig.run(job_pod("registry.unreachable/app:1"));
    rig.wait(60).await;
    assert!(rig.working());
    let deleted_at = tokio::time::Instant::now();
    rig.delete(30);
    rig.finished().await;
    assert!(deleted_at.elapsed() < Duration::from_secs(1));
    assert!(rig.calls("create_container").is_empty());
    let s = rig.status();
    assert_eq!(s["phase"], "Failed", "{s}");
    let terminated = &first_container_state(&rig)["terminated"];
    assert_eq!(terminated["reason"], "ContainerStatusUnknown", "{s}");
    assert_eq!(terminated["exitCode"], 137);
    assert_eq!(rig.api.deleted.lock().as_slice(), ["p uid-1"]);
}

/// The runtime restarts while the pod is being stopped: the worker keeps asking until
/// the runtime confirms the container's end, and deletes the pod object only then.
#[tokio::test(start_paused = true)]
async fn a_runtime_restart_during_the_stop_is_waited_out() {
    let mut rig = Rig::new();
    rig.run(job_pod("busybox"));
    rig.wait(1).await;
    rig.runtime.set_down(true);
    rig.delete(30);
    rig.wait(20).await;
    assert!(
        rig.working(),
        "the worker must not give up on a running container"
    );
    assert!(rig.api.deleted.lock().is_empty());
    assert_eq!(
        rig.runtime.containers()[0].state,
        ContainerState::Running,
        "the runtime was down: nothing stopped it yet"
    );
    rig.runtime.set_down(false);
    rig.finished().await;
    assert!(!rig.calls("stop_container").is_empty());
    assert_eq!(first_container_state(&rig)["terminated"]["exitCode"], 143);
    assert_eq!(rig.api.deleted.lock().as_slice(), ["p uid-1"]);
    assert!(rig.runtime.containers().is_empty());
}
