//! Acceptance for the Job, CronJob, TTL-after-finished and ReplicationController
//! controllers in cairn-control, through stock kubectl against simulated nodes whose test
//! kubelet (`common::sim`) ends pods labelled `sim.cairn.dev/exit` with that exit code.

// Test code: a failed setup step should fail the test loudly.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::time::{Duration, Instant};

use common::sim::{add_node, start_kubelet, EXIT_LABEL};
use common::{Kubectl, Server};
use serde_json::{json, Value};

fn wait_until(what: &str, secs: u64, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(secs);
    while !f() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn get(k: &Kubectl, args: &[&str]) -> Value {
    let mut a = args.to_vec();
    a.extend(["-o", "json"]);
    serde_json::from_str(&k.ok(&a)).unwrap()
}

fn items(k: &Kubectl, args: &[&str]) -> Vec<Value> {
    get(k, args)["items"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

/// A Job whose pods exit with `exit` (`None`: they run until deleted).
fn job(name: &str, exit: Option<&str>, spec: Value) -> String {
    let mut labels = json!({"app": name});
    if let Some(code) = exit {
        labels[EXIT_LABEL] = json!(code);
    }
    let mut spec = spec;
    spec["template"] = json!({
        "metadata": {"labels": labels},
        "spec": {"restartPolicy": "Never", "containers": [{"name": "main", "image": "busybox"}]},
    });
    json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name}, "spec": spec})
        .to_string()
}

fn start(dir: &std::path::Path, kubectl_minor: u32) -> (Server, common::sim::FakeKubelet, Kubectl) {
    let server = Server::start_with(dir, &["--job-backoff-seconds=0.2"]);
    let kubelet = start_kubelet(&server);
    let k = Kubectl::new(kubectl_minor, &server);
    add_node(&k, "node-1", "8");
    add_node(&k, "node-2", "8");
    (server, kubelet, k)
}

#[test]
fn jobs_complete_fail_index_and_expire() {
    let dir = tempfile::tempdir().unwrap();
    let (_server, _kubelet, k) = start(dir.path(), 33);

    completions_and_parallelism(&k);
    backoff_limit(&k);
    indexed(&k);
    pod_failure_policy(&k);
    active_deadline(&k);
    suspend_and_resume(&k);
    ttl_after_finished(&k);
    generated_selector_and_bad_input(&k);
}

/// completions 5, parallelism 2: never more than 2 running, then Complete.
fn completions_and_parallelism(k: &Kubectl) {
    k.ok_stdin(
        &["apply", "-f", "-"],
        &job(
            "five",
            Some("0"),
            json!({"completions": 5, "parallelism": 2}),
        ),
    );
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let running = items(
            k,
            &[
                "get",
                "pods",
                "-l",
                "app=five",
                "--field-selector=status.phase!=Succeeded",
            ],
        );
        assert!(
            running.len() <= 2,
            "parallelism 2 exceeded: {} pods",
            running.len()
        );
        let st = get(k, &["get", "job", "five"])["status"].clone();
        if st["succeeded"] == 5 {
            break;
        }
        assert!(Instant::now() < deadline, "job five did not finish: {st}");
        std::thread::sleep(Duration::from_millis(100));
    }
    k.ok(&[
        "wait",
        "--for=condition=complete",
        "job/five",
        "--timeout=30s",
    ]);
    let five = get(k, &["get", "job", "five"]);
    assert!(five["status"]["completionTime"].is_string(), "{five}");
    assert_eq!(five["status"]["uncountedTerminatedPods"], json!({}));
    let pods = items(k, &["get", "pods", "-l", "app=five"]);
    assert_eq!(pods.len(), 5, "exactly 5 pods ran");
    assert!(
        pods.iter().all(|p| p["metadata"]["finalizers"].is_null()),
        "tracking finalizers removed"
    );
    let table = k.ok(&["get", "job", "five"]);
    assert!(
        table.contains("Complete") && table.contains("5/5"),
        "{table}"
    );
}

/// Failing pods: retried with back-off until backoffLimit, then Failed.
fn backoff_limit(k: &Kubectl) {
    k.ok_stdin(
        &["apply", "-f", "-"],
        &job("fails", Some("1"), json!({"backoffLimit": 2})),
    );
    k.ok(&[
        "wait",
        "--for=condition=failed",
        "job/fails",
        "--timeout=60s",
    ]);
    let fails = get(k, &["get", "job", "fails"]);
    assert_eq!(fails["status"]["failed"], 3, "{fails}");
    let reason = k.ok(&[
        "get",
        "job",
        "fails",
        "-o",
        "jsonpath={.status.conditions[?(@.type==\"Failed\")].reason}",
    ]);
    assert_eq!(reason, "BackoffLimitExceeded");
    assert_eq!(items(k, &["get", "pods", "-l", "app=fails"]).len(), 3);
}

/// Indexed: one pod per index with its index and hostname, completedIndexes 0-2.
fn indexed(k: &Kubectl) {
    k.ok_stdin(
        &["apply", "-f", "-"],
        &job(
            "idx",
            Some("0"),
            json!({"completions": 3, "parallelism": 3, "completionMode": "Indexed"}),
        ),
    );
    k.ok(&[
        "wait",
        "--for=condition=complete",
        "job/idx",
        "--timeout=60s",
    ]);
    assert_eq!(
        k.ok(&[
            "get",
            "job",
            "idx",
            "-o",
            "jsonpath={.status.completedIndexes}"
        ]),
        "0-2"
    );
    let mut seen: Vec<(String, String)> = items(k, &["get", "pods", "-l", "app=idx"])
        .iter()
        .map(|p| {
            let index = p["metadata"]["annotations"]["batch.kubernetes.io/job-completion-index"]
                .as_str()
                .unwrap()
                .to_string();
            assert_eq!(
                p["spec"]["containers"][0]["env"][0]["name"],
                "JOB_COMPLETION_INDEX"
            );
            (index, p["spec"]["hostname"].as_str().unwrap().to_string())
        })
        .collect();
    seen.sort();
    assert_eq!(
        seen,
        [("0", "idx-0"), ("1", "idx-1"), ("2", "idx-2")]
            .map(|(a, b)| (a.to_string(), b.to_string()))
    );
}

/// A pod failure policy rule fails the Job at the first matching exit code.
fn pod_failure_policy(k: &Kubectl) {
    let mut policy: Value =
        serde_json::from_str(&job("policy", Some("42"), json!({"backoffLimit": 6}))).unwrap();
    policy["spec"]["podFailurePolicy"] = json!({"rules": [{"action": "FailJob", "onExitCodes": {"operator": "In", "values": [42]}}]});
    k.ok_stdin(&["apply", "-f", "-"], &policy.to_string());
    k.ok(&[
        "wait",
        "--for=condition=failed",
        "job/policy",
        "--timeout=60s",
    ]);
    let message = k.ok(&[
        "get",
        "job",
        "policy",
        "-o",
        "jsonpath={.status.conditions[?(@.type==\"Failed\")].message}",
    ]);
    assert!(
        message.contains("Container main failed with exit code 42"),
        "{message}"
    );
}

/// activeDeadlineSeconds ends a Job that runs too long.
fn active_deadline(k: &Kubectl) {
    k.ok_stdin(
        &["apply", "-f", "-"],
        &job("slow", None, json!({"activeDeadlineSeconds": 2})),
    );
    k.ok(&[
        "wait",
        "--for=condition=failed",
        "job/slow",
        "--timeout=60s",
    ]);
    let reason = k.ok(&[
        "get",
        "job",
        "slow",
        "-o",
        "jsonpath={.status.conditions[?(@.type==\"Failed\")].reason}",
    ]);
    assert_eq!(reason, "DeadlineExceeded");
    wait_until("slow's pod gone", 30, || {
        items(k, &["get", "pods", "-l", "app=slow"]).is_empty()
    });
}

/// Suspended: no pods; resumed: runs.
fn suspend_and_resume(k: &Kubectl) {
    k.ok_stdin(
        &["apply", "-f", "-"],
        &job("later", Some("0"), json!({"suspend": true})),
    );
    std::thread::sleep(Duration::from_secs(1));
    assert!(items(k, &["get", "pods", "-l", "app=later"]).is_empty());
    k.ok(&[
        "patch",
        "job",
        "later",
        "-p",
        r#"{"spec":{"suspend":false}}"#,
    ]);
    k.ok(&[
        "wait",
        "--for=condition=complete",
        "job/later",
        "--timeout=60s",
    ]);
}

/// ttlSecondsAfterFinished: the finished Job and its pods go.
fn ttl_after_finished(k: &Kubectl) {
    k.ok_stdin(
        &["apply", "-f", "-"],
        &job("brief", Some("0"), json!({"ttlSecondsAfterFinished": 1})),
    );
    wait_until("brief deleted", 60, || {
        !k.output(&["get", "job", "brief"]).status.success()
    });
    wait_until("brief's pods deleted", 30, || {
        items(k, &["get", "pods", "-l", "app=brief"]).is_empty()
    });
}

/// kubectl create job: the server generates the selector; a bad Job is a 422.
fn generated_selector_and_bad_input(k: &Kubectl) {
    k.ok(&["create", "job", "made", "--image=busybox", "--", "true"]);
    let selector = k.ok(&[
        "get",
        "job",
        "made",
        "-o",
        "jsonpath={.spec.selector.matchLabels}",
    ]);
    assert!(
        selector.contains("batch.kubernetes.io/controller-uid"),
        "{selector}"
    );
    let bad = r#"{"apiVersion":"batch/v1","kind":"Job","metadata":{"name":"bad"},
      "spec":{"completionMode":"Indexed","parallelism":-1,"template":{"spec":{"restartPolicy":"Always","containers":[{"name":"c","image":"busybox"}]}}}}"#;
    let err =
        String::from_utf8_lossy(&k.output_stdin(&["apply", "-f", "-"], bad).stderr).into_owned();
    assert!(
        err.contains("spec.completions: Required value: when completion mode is Indexed"),
        "{err}"
    );
    assert!(
        err.contains("spec.parallelism: Invalid value: -1: must be greater than or equal to 0"),
        "{err}"
    );
    assert!(err.contains(r#"spec.template.spec.restartPolicy: Unsupported value: "Always": supported values: "OnFailure", "Never""#), "{err}");
}

fn cronjob(name: &str, schedule: &str, policy: &str, exit: Option<&str>) -> String {
    let mut labels = json!({"app": name});
    if let Some(code) = exit {
        labels[EXIT_LABEL] = json!(code);
    }
    json!({"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": name},
        "spec": {"schedule": schedule, "concurrencyPolicy": policy,
            "successfulJobsHistoryLimit": 2,
            "jobTemplate": {"spec": {"template": {"metadata": {"labels": labels},
                "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]}}}}}})
    .to_string()
}

#[test]
fn cronjobs_and_replication_controllers() {
    let dir = tempfile::tempdir().unwrap();
    let (_server, _kubelet, k) = start(dir.path(), 27);

    cron_schedule_and_history(&k);
    cron_forbid(&k);
    cron_replace(&k);
    job_from_cronjob(&k);
    replication_controller(&k);
}

/// Fires on schedule; finished Jobs beyond the history limit are deleted.
fn cron_schedule_and_history(k: &Kubectl) {
    k.ok_stdin(
        &["apply", "-f", "-"],
        &cronjob("tick", "@every 2s", "Allow", Some("0")),
    );
    wait_until("tick's history trimmed", 60, || {
        !k.ok(&[
            "get",
            "cronjob",
            "tick",
            "-o",
            "jsonpath={.status.lastSuccessfulTime}",
        ])
        .is_empty()
            && events_with(k, "SuccessfulDelete", "tick") >= 1
    });
    let kept = items(k, &["get", "jobs"])
        .into_iter()
        .filter(|j| j["metadata"]["ownerReferences"][0]["name"] == "tick")
        .filter(|j| j["status"]["succeeded"] == 1)
        .count();
    assert!(kept <= 3, "history limit 2 (+1 just finishing): {kept}");
    k.ok(&[
        "patch",
        "cronjob",
        "tick",
        "-p",
        r#"{"spec":{"suspend":true}}"#,
    ]);
}

/// Forbid: while a Job runs, later times are skipped.
fn cron_forbid(k: &Kubectl) {
    k.ok_stdin(
        &["apply", "-f", "-"],
        &cronjob("single", "@every 2s", "Forbid", None),
    );
    wait_until("single started", 30, || {
        k.ok(&[
            "get",
            "cronjob",
            "single",
            "-o",
            "jsonpath={.status.active[*].name}",
        ])
        .starts_with("single-")
    });
    std::thread::sleep(Duration::from_secs(5));
    let owned = |name: &str| {
        items(k, &["get", "jobs"])
            .into_iter()
            .filter(|j| j["metadata"]["ownerReferences"][0]["name"] == name)
            .count()
    };
    assert_eq!(owned("single"), 1, "Forbid keeps one Job");
    assert!(events_with(k, "JobAlreadyActive", "single") >= 1);
}

/// Replace: the running Job is replaced by the next one.
fn cron_replace(k: &Kubectl) {
    k.ok(&[
        "patch",
        "cronjob",
        "single",
        "-p",
        r#"{"spec":{"concurrencyPolicy":"Replace"}}"#,
    ]);
    let first = k.ok(&[
        "get",
        "cronjob",
        "single",
        "-o",
        "jsonpath={.status.active[0].name}",
    ]);
    wait_until("replaced", 30, || {
        let now = k.ok(&[
            "get",
            "cronjob",
            "single",
            "-o",
            "jsonpath={.status.active[0].name}",
        ]);
        !now.is_empty() && now != first
    });
    k.ok(&[
        "patch",
        "cronjob",
        "single",
        "-p",
        r#"{"spec":{"suspend":true}}"#,
    ]);
}

/// kubectl create job --from=cronjob.
fn job_from_cronjob(k: &Kubectl) {
    k.ok(&["create", "job", "by-hand", "--from=cronjob/tick"]);
    k.ok(&[
        "wait",
        "--for=condition=complete",
        "job/by-hand",
        "--timeout=60s",
    ]);
    let bad = cronjob("bad", "61 * * * *", "Sometimes", None);
    let err =
        String::from_utf8_lossy(&k.output_stdin(&["apply", "-f", "-"], &bad).stderr).into_owned();
    assert!(
        err.contains("spec.schedule: Invalid value: \"61 * * * *\""),
        "{err}"
    );
    assert!(
        err.contains(r#"spec.concurrencyPolicy: Unsupported value: "Sometimes""#),
        "{err}"
    );
}

/// ReplicationController: replicas, scale, orphaning delete.
fn replication_controller(k: &Kubectl) {
    let rc = r#"{"apiVersion":"v1","kind":"ReplicationController","metadata":{"name":"web"},
      "spec":{"replicas":3,"template":{"metadata":{"labels":{"app":"web"}},
      "spec":{"containers":[{"name":"c","image":"busybox"}]}}}}"#;
    k.ok_stdin(&["apply", "-f", "-"], rc);
    let ready = || {
        k.ok(&[
            "get",
            "rc",
            "web",
            "-o",
            "jsonpath={.status.readyReplicas}/{.status.replicas}",
        ])
    };
    wait_until("rc 3/3", 30, || ready() == "3/3");
    let pods = items(k, &["get", "pods", "-l", "app=web"]);
    assert!(pods
        .iter()
        .all(|p| p["metadata"]["ownerReferences"][0]["kind"] == "ReplicationController"));
    k.ok(&["scale", "rc", "web", "--replicas=1"]);
    wait_until("rc 1/1", 30, || {
        ready() == "1/1" && items(k, &["get", "pods", "-l", "app=web"]).len() == 1
    });
    let table = k.ok(&["get", "rc", "web"]);
    assert!(
        table.contains("DESIRED") && table.contains("web"),
        "{table}"
    );
    k.ok(&["delete", "rc", "web", "--cascade=orphan"]);
    std::thread::sleep(Duration::from_secs(2));
    let left = items(k, &["get", "pods", "-l", "app=web"]);
    assert_eq!(left.len(), 1, "orphaned pods stay");
    assert!(
        left[0]["metadata"]["ownerReferences"].is_null(),
        "{}",
        left[0]
    );
}

fn events_with(k: &Kubectl, reason: &str, object: &str) -> usize {
    items(
        k,
        &[
            "get",
            "events",
            &format!("--field-selector=reason={reason},involvedObject.name={object}"),
        ],
    )
    .len()
}
