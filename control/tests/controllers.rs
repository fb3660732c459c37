//! Acceptance for the workload controllers in cairn-control, driven through stock kubectl
//! against simulated nodes: Node objects plus a small test kubelet (`common::sim`) that
//! marks bound pods Running and Ready, so the real scheduler and controllers carry the
//! seed scenario end to end without containers.

// Test code: a failed setup step should fail the test loudly.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::sim::{add_node, start_kubelet, NOT_READY_LABEL};
use common::{Kubectl, Server};
use serde_json::Value;

fn wait_until(what: &str, secs: u64, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(secs);
    while !f() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn json(k: &Kubectl, args: &[&str]) -> Value {
    let mut a = args.to_vec();
    a.extend(["-o", "json"]);
    serde_json::from_str(&k.ok(&a)).unwrap()
}

fn pods_of(k: &Kubectl, app: &str) -> Vec<Value> {
    json(k, &["get", "pods", "-l", &format!("app={app}")])["items"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

fn ready_replicas(k: &Kubectl, deploy: &str) -> String {
    k.ok(&[
        "get",
        "deployment",
        deploy,
        "-o",
        "jsonpath={.status.readyReplicas}/{.status.replicas}/{.status.updatedReplicas}",
    ])
}

/// Pod state seen through a watch, checked at every event: never more than `max_total`
/// pods, never fewer than `min_ready` ready ones (once the watch has listed them all).
struct RolloutWatch {
    stop: Arc<AtomicBool>,
    violations: Arc<Mutex<Vec<String>>>,
    events: Arc<Mutex<usize>>,
}

impl RolloutWatch {
    fn start(server: &Server, app: &str, max_total: usize, min_ready: usize) -> RolloutWatch {
        let (url, http) = (&server.url, server.http());
        let stop = Arc::new(AtomicBool::new(false));
        let violations = Arc::new(Mutex::new(Vec::new()));
        let events = Arc::new(Mutex::new(0));
        let (s, v, e) = (stop.clone(), violations.clone(), events.clone());
        let watch_url =
            format!("{url}/api/v1/namespaces/default/pods?watch=true&labelSelector=app%3D{app}");
        std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            let body =
                rt.block_on(async { http.get(&watch_url).send().await.unwrap().bytes_stream() });
            let mut body = Box::pin(body);
            let mut state: HashMap<String, (bool, bool)> = HashMap::new();
            let mut buf = Vec::new();
            // The watch opens with one ADDED per existing pod: check once they are all in.
            let mut armed = false;
            while !s.load(Ordering::SeqCst) {
                use futures::StreamExt;
                let Some(Ok(chunk)) = rt.block_on(async {
                    tokio::time::timeout(Duration::from_millis(200), body.next())
                        .await
                        .ok()
                        .flatten()
                }) else {
                    continue;
                };
                buf.extend_from_slice(&chunk);
                for line in BufReader::new(std::mem::take(&mut buf).as_slice()).split(b'\n') {
                    let line = line.unwrap();
                    let Ok(ev) = serde_json::from_slice::<Value>(&line) else {
                        buf = line; // an incomplete line: wait for the rest
                        continue;
                    };
                    let pod = &ev["object"];
                    let name = pod["metadata"]["name"].as_str().unwrap_or("").to_string();
                    let terminating = !pod["metadata"]["deletionTimestamp"].is_null();
                    if ev["type"] == "DELETED" || terminating {
                        state.remove(&name);
                    } else {
                        let ready = pod["status"]["conditions"].as_array().is_some_and(|c| {
                            c.iter()
                                .any(|c| c["type"] == "Ready" && c["status"] == "True")
                        });
                        state.insert(name, (true, ready));
                    }
                    *e.lock().unwrap() += 1;
                    let ready = state.values().filter(|(_, r)| *r).count();
                    armed |= ready >= min_ready;
                    if armed && (state.len() > max_total || ready < min_ready) {
                        v.lock()
                            .unwrap()
                            .push(format!("{} pods, {ready} ready", state.len()));
                    }
                }
            }
        });
        RolloutWatch {
            stop,
            violations,
            events,
        }
    }

    fn finish(self) -> (Vec<String>, usize) {
        self.stop.store(true, Ordering::SeqCst);
        std::thread::sleep(Duration::from_millis(300));
        let v = self.violations.lock().unwrap().clone();
        let e = *self.events.lock().unwrap();
        (v, e)
    }
}

#[test]
fn seed_scenario_scale_rollout_undo_pause() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path());
    let _kubelet = start_kubelet(&server);
    let k = Kubectl::new(33, &server);
    add_node(&k, "node-1", "4");
    add_node(&k, "node-2", "4");

    seed_runs_two_on_two_nodes_then_is_quiet(&k);
    scale_deletes_the_not_ready_pod_first(&k);
    rolling_update_keeps_surge_bounds(&k, &server);
    history_and_undo(&k);
    paused_rollout_waits_for_resume(&k);
    deleted_pod_is_replaced(&k);
    component_metrics(&k);
}

/// After all that, `cairn-control`'s `/metrics` (the API server's, the in-process
/// scheduler's and controllers') parses as the Prometheus text format and carries
/// upstream's series for what just happened; it is not public.
fn component_metrics(k: &Kubectl) {
    let text = k.ok(&["get", "--raw", "/metrics"]);
    let lines = text.lines().map(|l| Ok(l.to_string()));
    let scrape = prometheus_parse::Scrape::parse(lines).expect("the Prometheus text format");
    let value = |metric: &str, labels: &[(&str, &str)]| -> Option<f64> {
        let sample = scrape.samples.iter().find(|s| {
            s.metric == metric && labels.iter().all(|(k, v)| s.labels.get(k) == Some(*v))
        })?;
        match &sample.value {
            prometheus_parse::Value::Counter(v)
            | prometheus_parse::Value::Gauge(v)
            | prometheus_parse::Value::Untyped(v) => Some(*v),
            prometheus_parse::Value::Histogram(buckets) => buckets.last().map(|b| b.count),
            _ => None,
        }
    };
    let has = |metric: &str, labels: &[(&str, &str)]| {
        let v = value(metric, labels);
        assert!(
            v.is_some_and(|v| v > 0.0),
            "{metric} {labels:?}: {v:?}\n{text}"
        );
    };
    let deployments = [("group", "apps"), ("resource", "deployments")];
    has(
        "apiserver_request_total",
        &[&[("verb", "POST"), ("code", "201")][..], &deployments].concat(),
    );
    has(
        "apiserver_request_total",
        &[("verb", "WATCH"), ("resource", "pods")],
    );
    has(
        "apiserver_request_duration_seconds",
        &[("verb", "LIST"), ("resource", "pods")],
    );
    has("apiserver_watch_events_total", &[("kind", "Pod")]);
    has(
        "apiserver_storage_objects",
        &[("resource", "deployments.apps")],
    );
    has("apiserver_storage_objects", &[("resource", "pods")]);
    has(
        "etcd_request_duration_seconds",
        &[("operation", "create"), ("type", "pods")],
    );
    has(
        "scheduler_schedule_attempts_total",
        &[("result", "scheduled"), ("profile", "default-scheduler")],
    );
    has(
        "scheduler_pod_scheduling_duration_seconds",
        &[("attempts", "1")],
    );
    assert!(
        value("scheduler_pending_pods", &[("queue", "active")]).is_some(),
        "{text}"
    );
    has("workqueue_adds_total", &[("name", "deployment")]);
    has(
        "workqueue_queue_duration_seconds",
        &[("name", "replicaset")],
    );
    has("workqueue_work_duration_seconds", &[("name", "replicaset")]);
    assert!(
        value("workqueue_depth", &[("name", "deployment")]).is_some(),
        "{text}"
    );
    // Anonymous callers are not upstream's system:monitoring: no metrics for them.
    let anonymous = k.fails(&[
        "get",
        "--raw",
        "/metrics",
        "--token=",
        "--as=system:anonymous",
    ]);
    assert!(
        anonymous.contains("Forbidden") || anonymous.contains("forbidden"),
        "{anonymous}"
    );
}

fn seed_runs_two_on_two_nodes_then_is_quiet(k: &Kubectl) {
    // The seed: create deployment → 2/2 on two nodes.
    k.ok(&[
        "create",
        "deployment",
        "httpd-app",
        "--image=httpd",
        "--replicas=2",
    ]);
    wait_until("httpd-app 2/2", 30, || {
        ready_replicas(k, "httpd-app") == "2/2/2"
    });
    let table = k.ok(&["get", "deployment", "httpd-app"]);
    assert!(table.contains("2/2"), "{table}");
    let nodes: std::collections::BTreeSet<String> = pods_of(k, "httpd-app")
        .iter()
        .map(|p| p["spec"]["nodeName"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(nodes.len(), 2, "pods on two nodes: {nodes:?}");
    let out = k.ok(&["rollout", "status", "deployment/httpd-app", "--timeout=30s"]);
    assert!(out.contains("successfully rolled out"), "{out}");
    // A settled Deployment is quiet: nothing rewrites it over and over (a status write
    // that changes nothing is no write at all, and the controller does not make one). A
    // last condition update may still land; a write loop makes dozens a second.
    let rv = k.ok(&[
        "get",
        "deployment",
        "httpd-app",
        "-o",
        "jsonpath={.metadata.resourceVersion}",
    ]);
    let since = format!(
        "/apis/apps/v1/namespaces/default/deployments?watch=1&resourceVersion={rv}&timeoutSeconds=2"
    );
    let events = k.ok(&["get", "--raw", &since]);
    assert!(
        events.lines().count() <= 2,
        "a settled Deployment keeps being written: {events}"
    );
}

fn scale_deletes_the_not_ready_pod_first(k: &Kubectl) {
    // Scale up and down; the not-ready pod goes first.
    k.ok(&["scale", "deployment/httpd-app", "--replicas=4"]);
    wait_until("4 ready", 30, || ready_replicas(k, "httpd-app") == "4/4/4");
    let victim = pods_of(k, "httpd-app")[0]["metadata"]["name"]
        .as_str()
        .unwrap()
        .to_string();
    k.ok(&["label", "pod", &victim, &format!("{NOT_READY_LABEL}=false")]);
    wait_until("victim not ready", 30, || {
        ready_replicas(k, "httpd-app") == "3/4/4"
    });
    k.ok(&["scale", "deployment/httpd-app", "--replicas=3"]);
    wait_until("3 pods", 30, || pods_of(k, "httpd-app").len() == 3);
    assert!(
        pods_of(k, "httpd-app")
            .iter()
            .all(|p| p["metadata"]["name"] != victim.as_str()),
        "the not-ready pod {victim} is deleted first"
    );
    wait_until("3/3", 30, || ready_replicas(k, "httpd-app") == "3/3/3");
}

fn rolling_update_keeps_surge_bounds(k: &Kubectl, server: &Server) {
    // A rolling update never exceeds maxSurge nor drops below replicas - maxUnavailable.
    k.ok(&[
        "patch",
        "deployment/httpd-app",
        "-p",
        r#"{"spec":{"replicas":4,"strategy":{"rollingUpdate":{"maxSurge":1,"maxUnavailable":1}}}}"#,
    ]);
    wait_until("4/4", 30, || ready_replicas(k, "httpd-app") == "4/4/4");
    let watch = RolloutWatch::start(server, "httpd-app", 5, 3);
    std::thread::sleep(Duration::from_millis(300));
    k.ok(&["set", "image", "deployment/httpd-app", "httpd=httpd:2.4"]);
    let out = k.ok(&["rollout", "status", "deployment/httpd-app", "--timeout=60s"]);
    assert!(out.contains("successfully rolled out"), "{out}");
    let (violations, events) = watch.finish();
    assert!(events > 8, "the watch saw the rollout ({events} events)");
    assert!(
        violations.is_empty(),
        "surge/unavailability bounds broken: {violations:?}"
    );
    let images: Vec<String> = pods_of(k, "httpd-app")
        .iter()
        .map(|p| {
            p["spec"]["containers"][0]["image"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    assert_eq!(images, vec!["httpd:2.4"; 4]);
}

fn history_and_undo(k: &Kubectl) {
    // History and undo.
    let history = k.ok(&["rollout", "history", "deployment/httpd-app"]);
    assert!(history.contains('1') && history.contains('2'), "{history}");
    k.ok(&["rollout", "undo", "deployment/httpd-app"]);
    let out = k.ok(&["rollout", "status", "deployment/httpd-app", "--timeout=60s"]);
    assert!(out.contains("successfully rolled out"), "{out}");
    let image = k.ok(&[
        "get",
        "deployment/httpd-app",
        "-o",
        "jsonpath={.spec.template.spec.containers[0].image}",
    ]);
    assert_eq!(image, "httpd");
    wait_until("pods back on httpd", 30, || {
        pods_of(k, "httpd-app")
            .iter()
            .all(|p| p["spec"]["containers"][0]["image"] == "httpd")
    });
    let revision = k.ok(&[
        "get",
        "deployment/httpd-app",
        "-o",
        "jsonpath={.metadata.annotations.deployment\\.kubernetes\\.io/revision}",
    ]);
    assert_eq!(revision, "3", "undo makes the old template revision 3");
}

fn paused_rollout_waits_for_resume(k: &Kubectl) {
    // Paused: a template change starts nothing until resumed.
    k.ok(&["rollout", "pause", "deployment/httpd-app"]);
    k.ok(&["set", "image", "deployment/httpd-app", "httpd=httpd:2.5"]);
    std::thread::sleep(Duration::from_secs(2));
    let rs_count = || json(k, &["get", "rs"])["items"].as_array().unwrap().len();
    assert_eq!(rs_count(), 2, "no new ReplicaSet while paused");
    let reason = k.ok(&[
        "get",
        "deployment/httpd-app",
        "-o",
        "jsonpath={.status.conditions[?(@.type==\"Progressing\")].reason}",
    ]);
    assert_eq!(reason, "DeploymentPaused");
    k.ok(&["rollout", "resume", "deployment/httpd-app"]);
    let out = k.ok(&["rollout", "status", "deployment/httpd-app", "--timeout=60s"]);
    assert!(out.contains("successfully rolled out"), "{out}");
    assert_eq!(rs_count(), 3);
}

fn deleted_pod_is_replaced(k: &Kubectl) {
    // Deleting a pod gets it replaced.
    // A live one: the rollout's old pods may still be finishing their deletion.
    let gone = pods_of(k, "httpd-app")
        .iter()
        .find(|p| p["metadata"]["deletionTimestamp"].is_null())
        .unwrap()["metadata"]["name"]
        .as_str()
        .unwrap()
        .to_string();
    k.ok(&["delete", "pod", &gone, "--wait=false"]);
    wait_until("replacement", 30, || {
        let pods = pods_of(k, "httpd-app");
        pods.len() == 4 && pods.iter().all(|p| p["metadata"]["name"] != gone.as_str())
    });
    wait_until("4/4 again", 30, || {
        ready_replicas(k, "httpd-app") == "4/4/4"
    });
}

#[test]
fn deadline_adoption_service_accounts_and_bad_input() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path());
    let _kubelet = start_kubelet(&server);
    let k = Kubectl::new(27, &server);
    add_node(&k, "node-1", "4");

    progress_deadline_exceeded(&k);
    replica_set_adopts_orphan(&k);
    namespaces_get_default_service_account(&k);
    namespace_deletion_empties_it(&k);
    bad_input_refused_at_admission(&k);
}

fn progress_deadline_exceeded(k: &Kubectl) {
    // A rollout whose pods never become ready exceeds its progress deadline.
    let stuck = r#"{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"stuck"},
      "spec":{"replicas":1,"progressDeadlineSeconds":2,"selector":{"matchLabels":{"app":"stuck"}},
      "template":{"metadata":{"labels":{"app":"stuck","sim.cairn.dev/ready":"false"}},
      "spec":{"containers":[{"name":"c","image":"busybox"}]}}}}"#;
    k.ok_stdin(&["apply", "-f", "-"], stuck);
    let err = String::from_utf8_lossy(
        &k.output(&["rollout", "status", "deployment/stuck", "--timeout=60s"])
            .stderr,
    )
    .into_owned();
    assert!(
        err.contains("deployment \"stuck\" exceeded its progress deadline"),
        "{err}"
    );
}

fn replica_set_adopts_orphan(k: &Kubectl) {
    // A ReplicaSet adopts a matching orphan and creates only what is missing.
    let orphan = r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"orphan","labels":{"app":"web"}},
      "spec":{"containers":[{"name":"c","image":"busybox"}]}}"#;
    k.ok_stdin(&["apply", "-f", "-"], orphan);
    let rs = r#"{"apiVersion":"apps/v1","kind":"ReplicaSet","metadata":{"name":"web"},
      "spec":{"replicas":2,"selector":{"matchLabels":{"app":"web"}},
      "template":{"metadata":{"labels":{"app":"web"}},"spec":{"containers":[{"name":"c","image":"busybox"}]}}}}"#;
    k.ok_stdin(&["apply", "-f", "-"], rs);
    wait_until("web 2/2", 30, || {
        k.ok(&["get", "rs", "web", "-o", "jsonpath={.status.readyReplicas}"]) == "2"
    });
    let owner = k.ok(&[
        "get",
        "pod",
        "orphan",
        "-o",
        "jsonpath={.metadata.ownerReferences[0].name}",
    ]);
    assert_eq!(owner, "web");
    assert_eq!(pods_of(k, "web").len(), 2);
    let status = json(k, &["get", "rs", "web"])["status"].clone();
    assert_eq!(status["replicas"], 2);
    assert_eq!(status["fullyLabeledReplicas"], 2);
    assert_eq!(status["observedGeneration"], 1);
}

fn namespaces_get_default_service_account(k: &Kubectl) {
    // Every namespace gets its default ServiceAccount.
    k.ok(&["create", "namespace", "team-a"]);
    wait_until("default sa", 30, || {
        k.output(&["get", "sa", "default", "-n", "team-a"])
            .status
            .success()
    });
    k.ok(&["delete", "sa", "default", "-n", "team-a"]);
    wait_until("default sa back", 30, || {
        k.output(&["get", "sa", "default", "-n", "team-a"])
            .status
            .success()
    });
}

fn namespace_deletion_empties_it(k: &Kubectl) {
    // Deleting a namespace empties it through the API, then removes it.
    k.ok(&[
        "create",
        "deployment",
        "app",
        "--image=busybox",
        "--replicas=2",
        "-n",
        "team-a",
    ]);
    wait_until("app 2/2 in team-a", 30, || {
        k.ok(&[
            "get",
            "deploy",
            "app",
            "-n",
            "team-a",
            "-o",
            "jsonpath={.status.readyReplicas}",
        ]) == "2"
    });
    let finalizers = k.ok(&["get", "ns", "team-a", "-o", "jsonpath={.spec.finalizers}"]);
    assert!(finalizers.contains("kubernetes"), "{finalizers}");
    k.ok(&["delete", "namespace", "team-a", "--wait=false"]);
    wait_until("team-a gone", 60, || {
        !k.output(&["get", "ns", "team-a"]).status.success()
    });
    let left = k.ok(&[
        "get",
        "pods,rs,deploy,sa",
        "-A",
        "-o",
        "name",
        "--field-selector",
        "metadata.namespace=team-a",
    ]);
    assert!(left.trim().is_empty(), "left in team-a: {left}");
}

fn bad_input_refused_at_admission(k: &Kubectl) {
    // Bad input is refused at admission, in upstream's words.
    let bad_selector = r#"{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"bad"},
      "spec":{"selector":{"matchLabels":{"app":"x"}},
      "template":{"metadata":{"labels":{"app":"y"}},"spec":{"containers":[{"name":"c","image":"busybox"}]}}}}"#;
    let err = apply_fails(k, bad_selector);
    assert!(
        err.contains("`selector` does not match template `labels`"),
        "{err}"
    );
    let zero = bad_selector.replace("\"y\"", "\"x\"").replace(
        "\"selector\"",
        "\"strategy\":{\"rollingUpdate\":{\"maxSurge\":0,\"maxUnavailable\":0}},\"selector\"",
    );
    let err = apply_fails(k, &zero);
    assert!(err.contains("may not be 0 when `maxSurge` is 0"), "{err}");
    let negative = bad_selector
        .replace("\"y\"", "\"x\"")
        .replace("\"selector\"", "\"replicas\":-1,\"selector\"");
    let err = apply_fails(k, &negative);
    assert!(err.contains("spec.replicas"), "{err}");
}

fn apply_fails(k: &Kubectl, body: &str) -> String {
    let out = k.output_stdin(&["apply", "-f", "-"], body);
    assert!(!out.status.success(), "apply unexpectedly succeeded");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn daemonset_follows_nodes_taints_and_rolls() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path());
    let _kubelet = start_kubelet(&server);
    let k = Kubectl::new(33, &server);
    for n in ["node-1", "node-2", "node-3"] {
        add_node(&k, n, "4");
    }
    let ds = r#"{"apiVersion":"apps/v1","kind":"DaemonSet","metadata":{"name":"agent"},
      "spec":{"selector":{"matchLabels":{"app":"agent"}},
      "updateStrategy":{"type":"RollingUpdate","rollingUpdate":{"maxUnavailable":1}},
      "template":{"metadata":{"labels":{"app":"agent"}},"spec":{"containers":[{"name":"c","image":"busybox"}]}}}}"#;
    k.ok_stdin(&["apply", "-f", "-"], ds);
    let nodes_with_pods = || {
        let mut n: Vec<String> = pods_of(&k, "agent")
            .iter()
            .filter(|p| p["metadata"]["deletionTimestamp"].is_null())
            .filter_map(|p| p["spec"]["nodeName"].as_str().map(str::to_string))
            .collect();
        n.sort();
        n
    };
    let ready = || {
        k.ok(&["get", "ds", "agent", "-o", "jsonpath={.status.desiredNumberScheduled}/{.status.numberReady}/{.status.updatedNumberScheduled}"])
    };
    wait_until("3 daemon pods ready", 30, || ready() == "3/3/3");
    assert_eq!(nodes_with_pods(), ["node-1", "node-2", "node-3"]);

    // A joining node gets one; a tainted node loses its pod; a removed node's pod goes.
    add_node(&k, "node-4", "4");
    wait_until("4 daemon pods", 30, || ready() == "4/4/4");
    k.ok(&["taint", "node", "node-3", "dedicated=infra:NoSchedule"]);
    wait_until("node-3 skipped", 30, || {
        nodes_with_pods() == ["node-1", "node-2", "node-4"]
    });
    k.ok(&["delete", "node", "node-2"]);
    wait_until("node-2 gone", 30, || {
        nodes_with_pods() == ["node-1", "node-4"]
    });
    wait_until("2/2", 30, || ready() == "2/2/2");
    // Tolerating the taint brings node-3 back, through a rolling update.
    let watch = RolloutWatch::start(&server, "agent", 4, 2);
    std::thread::sleep(Duration::from_millis(300));
    k.ok(&["patch", "ds", "agent", "-p", r#"{"spec":{"template":{"spec":{"tolerations":[{"key":"dedicated","operator":"Exists"}]}}}}"#]);
    let out = k.ok(&["rollout", "status", "daemonset/agent", "--timeout=60s"]);
    assert!(out.contains("successfully rolled out"), "{out}");
    wait_until("3/3 updated", 30, || ready() == "3/3/3");
    assert_eq!(nodes_with_pods(), ["node-1", "node-3", "node-4"]);
    let (violations, events) = watch.finish();
    assert!(events > 4, "the watch saw the rollout ({events} events)");
    assert!(
        violations.is_empty(),
        "maxUnavailable broken: {violations:?}"
    );
    let status = json(&k, &["get", "ds", "agent"])["status"].clone();
    assert_eq!(status["numberMisscheduled"], 0);
    assert_eq!(status["numberAvailable"], 3);

    // maxSurge: each node gets its new pod before the old one goes, one node at a time.
    let watch = RolloutWatch::start(&server, "agent", 4, 3);
    std::thread::sleep(Duration::from_millis(300));
    k.ok(&["patch", "ds", "agent", "-p", r#"{"spec":{"updateStrategy":{"rollingUpdate":{"maxSurge":1,"maxUnavailable":0}},"template":{"spec":{"containers":[{"name":"c","image":"busybox:1.36"}]}}}}"#]);
    let out = k.ok(&["rollout", "status", "daemonset/agent", "--timeout=60s"]);
    assert!(out.contains("successfully rolled out"), "{out}");
    wait_until("3 pods on busybox:1.36", 30, || {
        let pods = pods_of(&k, "agent");
        pods.len() == 3
            && pods
                .iter()
                .all(|p| p["spec"]["containers"][0]["image"] == "busybox:1.36")
    });
    let (violations, events) = watch.finish();
    assert!(
        events > 6,
        "the watch saw the surge rollout ({events} events)"
    );
    assert!(
        violations.is_empty(),
        "maxSurge/maxUnavailable broken: {violations:?}"
    );

    // History and undo through the DaemonSet's ControllerRevisions.
    let history = k.ok(&["rollout", "history", "daemonset/agent"]);
    assert!(history.contains('3'), "three templates so far: {history}");
    k.ok(&["rollout", "undo", "daemonset/agent"]);
    k.ok(&["rollout", "status", "daemonset/agent", "--timeout=60s"]);
    wait_until("pods back on busybox", 30, || {
        let pods = pods_of(&k, "agent");
        pods.len() == 3
            && pods
                .iter()
                .all(|p| p["spec"]["containers"][0]["image"] == "busybox")
    });
}
