//! Restart policies, back-off, OOM kills, spec changes and the pod's phase.

use serde_json::json;

use super::harness::*;
use cairn_runtime::fake::Script;

/// Seconds from each exit of `name`'s instances to the next start.
fn restart_gaps(rig: &Rig) -> Vec<i64> {
    let calls = rig.runtime.timed_calls();
    let mut gaps = Vec::new();
    let mut last_exit = None;
    for (t, call) in calls {
        if call.starts_with("exit ") {
            last_exit = Some(t);
        } else if call.starts_with("start_container ") {
            if let Some(exit) = last_exit.take() {
                gaps.push((t - exit).num_seconds());
            }
        }
    }
    gaps
}

#[tokio::test(start_paused = true)]
async fn always_restarts_with_back_off_doubling_from_10s_to_5min() {
    let mut rig = Rig::new();
    rig.script("app", exits(1, 1));
    rig.run(pod(json!({"containers": [container("app", json!({}))]})));
    rig.wait(25 * 60).await;
    let gaps = restart_gaps(&rig);
    assert!(gaps.len() >= 7, "restarts: {gaps:?}");
    assert_eq!(
        &gaps[..7],
        &[10, 20, 40, 80, 160, 300, 300],
        "gaps {gaps:?}"
    );
    let s = rig.status();
    assert_eq!(s["phase"], "Running");
    let c = &s["containerStatuses"][0];
    assert!(c["restartCount"].as_i64().unwrap() >= 7);
    assert_eq!(c["lastState"]["terminated"]["exitCode"], 1);
    // Between restarts the container waits in CrashLoopBackOff, as kubectl shows it.
    let waiting: Vec<_> = rig.waiting_reasons();
    assert!(
        waiting.iter().any(|r| r == "CrashLoopBackOff"),
        "{waiting:?}"
    );
    assert!(rig
        .events("BackOff")
        .iter()
        .any(|m| m == "Back-off restarting failed container"));
}

#[tokio::test(start_paused = true)]
async fn a_container_that_ran_ten_minutes_restarts_after_10s_again() {
    let mut rig = Rig::new();
    rig.script("app", exits(1, 1));
    rig.run(pod(json!({"containers": [container("app", json!({}))]})));
    rig.wait(200).await;
    // Now it runs for 11 minutes before failing: the back-off starts over.
    rig.script("app", exits(660, 1));
    rig.wait(30 * 60).await;
    let gaps = restart_gaps(&rig);
    assert!(gaps.len() >= 5, "{gaps:?}");
    assert!(
        gaps[3..].contains(&10),
        "back-off did not reset after a long run: {gaps:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn on_failure_restarts_failures_and_completes_on_success() {
    let mut rig = Rig::new();
    rig.script("app", exits(1, 3));
    rig.run(pod(
        json!({"restartPolicy": "OnFailure", "containers": [container("app", json!({}))]}),
    ));
    rig.wait(15).await;
    assert_eq!(
        rig.started().len(),
        2,
        "failed container restarted once after 10 s"
    );
    rig.script("app", exits(1, 0));
    rig.wait(60).await;
    let starts = rig.started().len();
    assert_eq!(rig.status()["phase"], "Succeeded");
    rig.wait(600).await;
    assert_eq!(
        rig.started().len(),
        starts,
        "a succeeded container never restarts"
    );
    assert_eq!(rig.phases(), ["Running", "Succeeded"]);
}

#[tokio::test(start_paused = true)]
async fn never_fails_the_pod_without_restarting() {
    let mut rig = Rig::new();
    rig.script("app", exits(2, 7));
    rig.run(pod(
        json!({"restartPolicy": "Never", "containers": [container("app", json!({}))]}),
    ));
    rig.wait(600).await;
    assert_eq!(rig.started(), ["app"]);
    let s = rig.status();
    assert_eq!(s["phase"], "Failed");
    assert_eq!(
        s["containerStatuses"][0]["state"]["terminated"]["exitCode"],
        7
    );
    assert_eq!(
        s["containerStatuses"][0]["state"]["terminated"]["reason"],
        "Error"
    );
    assert_eq!(rig.phases(), ["Running", "Failed"]);
    // A finished pod's sandbox is stopped, and nothing is started again.
    assert_eq!(rig.calls("stop_pod_sandbox").len(), 1);
}

#[tokio::test(start_paused = true)]
async fn an_oom_killed_container_reports_it_and_restarts() {
    let mut rig = Rig::new();
    rig.script(
        "app",
        Script {
            exits_after: Some((std::time::Duration::from_secs(3), 0)),
            oom: true,
            ..Default::default()
        },
    );
    rig.run(pod(json!({"containers": [container("app", json!({}))]})));
    rig.wait(20).await;
    let s = rig.status();
    let last = &s["containerStatuses"][0]["lastState"]["terminated"];
    assert_eq!(last["reason"], "OOMKilled");
    assert_eq!(last["exitCode"], 137);
    assert_eq!(rig.started().len(), 2);
}

#[tokio::test(start_paused = true)]
async fn a_changed_spec_restarts_the_container() {
    let mut rig = Rig::new();
    rig.run(pod(
        json!({"containers": [container("app", json!({})), container("side", json!({}))]}),
    ));
    rig.wait(5).await;
    assert_eq!(rig.started(), ["app", "side"]);
    rig.update(|p| {
        p.spec.as_mut().unwrap().containers[0].image = Some("busybox:1.36".into());
    });
    rig.wait(5).await;
    assert_eq!(
        rig.started(),
        ["app", "side", "app"],
        "only the changed container restarts"
    );
    let killing = rig.events("Killing");
    assert_eq!(
        killing,
        ["Container app definition changed, will be restarted"]
    );
    let s = rig.status();
    assert_eq!(s["containerStatuses"][0]["image"], "busybox:1.36");
    assert_eq!(s["containerStatuses"][0]["restartCount"], 1);
    assert!(s["containerStatuses"][0]["state"]["running"].is_object());
}
