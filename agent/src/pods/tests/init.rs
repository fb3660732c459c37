//! Init containers: in order, one at a time, before any app container; their failure.

use serde_json::json;

use super::harness::*;

fn spec(policy: &str) -> serde_json::Value {
    json!({
        "restartPolicy": policy,
        "initContainers": [container("init-1", json!({})), container("init-2", json!({}))],
        "containers": [container("app", json!({}))],
    })
}

#[tokio::test(start_paused = true)]
async fn init_containers_run_in_order_before_the_app() {
    let mut rig = Rig::new();
    rig.script("init-1", exits(2, 0));
    rig.script("init-2", exits(3, 0));
    rig.run(pod(spec("Always")));
    rig.wait(1).await;
    assert_eq!(rig.started(), ["init-1"]);
    let s = rig.status();
    assert_eq!(s["phase"], "Pending");
    assert_eq!(
        s["containerStatuses"][0]["state"]["waiting"]["reason"],
        "PodInitializing"
    );
    rig.wait(3).await;
    assert_eq!(
        rig.started(),
        ["init-1", "init-2"],
        "init-2 only after init-1 succeeded"
    );
    rig.wait(5).await;
    assert_eq!(rig.started(), ["init-1", "init-2", "app"]);
    let s = rig.status();
    assert_eq!(s["phase"], "Running");
    assert_eq!(
        s["initContainerStatuses"][1]["state"]["terminated"]["reason"],
        "Completed"
    );
    assert_eq!(s["initContainerStatuses"][1]["ready"], true);
    let initialized = s["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["type"] == "Initialized")
        .cloned()
        .unwrap();
    assert_eq!(initialized["status"], "True");
}

#[tokio::test(start_paused = true)]
async fn a_failed_init_container_fails_a_never_pod() {
    let mut rig = Rig::new();
    rig.script("init-1", exits(2, 1));
    rig.run(pod(spec("Never")));
    rig.wait(120).await;
    assert_eq!(
        rig.started(),
        ["init-1"],
        "neither init-2 nor the app may start"
    );
    let s = rig.status();
    assert_eq!(s["phase"], "Failed");
    assert_eq!(
        s["initContainerStatuses"][0]["state"]["terminated"]["exitCode"],
        1
    );
}

#[tokio::test(start_paused = true)]
async fn a_failed_init_container_is_retried_with_back_off_under_always() {
    let mut rig = Rig::new();
    rig.script("init-1", exits(2, 1));
    rig.run(pod(spec("Always")));
    rig.wait(60).await;
    let started = rig.started();
    assert!(
        started.len() >= 3 && started.iter().all(|c| c == "init-1"),
        "{started:?}"
    );
    let s = rig.status();
    assert_eq!(s["phase"], "Pending");
    assert_eq!(
        s["initContainerStatuses"][0]["lastState"]["terminated"]["exitCode"],
        1
    );
    // Once it succeeds, the rest follows.
    rig.script("init-1", exits(1, 0));
    rig.script("init-2", exits(1, 0));
    rig.wait(120).await;
    assert_eq!(rig.started().last().map(String::as_str), Some("app"));
}
