//! The soak's invariants, pure over what the API lists (`kubectl get -o json`), so each is
//! unit-tested: a deleted pod is gone within its grace period and [`DELETION_SLACK`]; a
//! Job counts no more completions than it asked for and completes within
//! [`JOB_WITHIN`]; a Deployment or StatefulSet is ready at its size within [`CONVERGE_WITHIN`]
//! of its last change.

use std::collections::HashMap;

use chrono::{DateTime, Duration, Utc};
use serde_json::Value;

/// How long past `deletionTimestamp` (the deletion plus its grace period) a pod may stay.
pub const DELETION_SLACK: Duration = Duration::seconds(10);
/// How long a Job of the soak (a few seconds of work) may take to complete.
pub const JOB_WITHIN: Duration = Duration::seconds(120);
/// How long a workload may take to be ready at its size after a change.
pub const CONVERGE_WITHIN: Duration = Duration::seconds(120);

/// One broken invariant, with the pod it is about when there is one.
#[derive(Debug, Clone, PartialEq)]
pub struct Violation {
    pub what: String,
    pub pod: Option<PodRef>,
}

/// A pod, as a failure report needs it.
#[derive(Debug, Clone, PartialEq)]
pub struct PodRef {
    pub namespace: String,
    pub name: String,
    pub uid: String,
    pub node: String,
}

fn items(list: &Value) -> impl Iterator<Item = &Value> {
    list["items"].as_array().into_iter().flatten()
}

fn time(v: &Value) -> Option<DateTime<Utc>> {
    DateTime::parse_from_rfc3339(v.as_str()?)
        .ok()
        .map(|t| t.with_timezone(&Utc))
}

fn key(o: &Value) -> String {
    format!(
        "{}/{}",
        o["metadata"]["namespace"].as_str().unwrap_or(""),
        o["metadata"]["name"].as_str().unwrap_or("")
    )
}

pub fn pod_ref(p: &Value) -> PodRef {
    let s = |v: &Value| v.as_str().unwrap_or("").to_string();
    PodRef {
        namespace: s(&p["metadata"]["namespace"]),
        name: s(&p["metadata"]["name"]),
        uid: s(&p["metadata"]["uid"]),
        node: s(&p["spec"]["nodeName"]),
    }
}

/// Pods still listed more than [`DELETION_SLACK`] after their `deletionTimestamp`.
pub fn overdue_deletions(pods: &Value, now: DateTime<Utc>) -> Vec<Violation> {
    items(pods)
        .filter_map(|p| {
            let deadline = time(&p["metadata"]["deletionTimestamp"])?;
            (now > deadline + DELETION_SLACK).then(|| Violation {
                what: format!(
                    "pod {} still exists {}s after its deletion deadline {deadline} (phase {}, finalizers {})",
                    key(p),
                    (now - deadline).num_seconds(),
                    p["status"]["phase"].as_str().unwrap_or("?"),
                    p["metadata"]["finalizers"]
                ),
                pod: Some(pod_ref(p)),
            })
        })
        .collect()
}

fn condition(o: &Value, kind: &str) -> bool {
    o["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|c| c["type"] == kind && c["status"] == "True")
}

/// Jobs that counted more successes than completions, failed, or are not complete
/// [`JOB_WITHIN`] after their creation.
pub fn job_violations(jobs: &Value, now: DateTime<Utc>) -> Vec<Violation> {
    let mut out = Vec::new();
    for j in items(jobs) {
        let completions = j["spec"]["completions"].as_i64().unwrap_or(1);
        let succeeded = j["status"]["succeeded"].as_i64().unwrap_or(0);
        let problem = if succeeded > completions {
            Some(format!("counted {succeeded} successes of {completions}"))
        } else if condition(j, "Failed") {
            Some(format!("failed: {}", j["status"]["conditions"]))
        } else if !condition(j, "Complete")
            && j["metadata"]["deletionTimestamp"].is_null()
            && time(&j["metadata"]["creationTimestamp"]).is_some_and(|c| now > c + JOB_WITHIN)
        {
            Some(format!(
                "not complete {}s after its creation (succeeded {succeeded} of {completions}, active {})",
                JOB_WITHIN.num_seconds(),
                j["status"]["active"].as_i64().unwrap_or(0)
            ))
        } else {
            None
        };
        if let Some(p) = problem {
            out.push(Violation {
                what: format!("job {}: {p}", key(j)),
                pod: None,
            });
        }
    }
    out
}

/// Deployments and StatefulSets not ready at their size [`CONVERGE_WITHIN`] after their
/// last change (`changed`, by `namespace/name`; the creation time when absent).
pub fn unconverged(
    kind: &str,
    list: &Value,
    changed: &HashMap<String, DateTime<Utc>>,
    now: DateTime<Utc>,
) -> Vec<Violation> {
    let mut out = Vec::new();
    for o in items(list) {
        if !o["metadata"]["deletionTimestamp"].is_null() {
            continue;
        }
        let k = key(o);
        let since = changed
            .get(&k)
            .copied()
            .or_else(|| time(&o["metadata"]["creationTimestamp"]));
        if since.is_none_or(|t| now <= t + CONVERGE_WITHIN) {
            continue;
        }
        let want = o["spec"]["replicas"].as_i64().unwrap_or(1);
        let ready = o["status"]["readyReplicas"].as_i64().unwrap_or(0);
        if ready != want {
            out.push(Violation {
                what: format!(
                    "{kind} {k}: {ready} of {want} ready {}s after its last change",
                    CONVERGE_WITHIN.num_seconds()
                ),
                pod: None,
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn at(s: &str) -> DateTime<Utc> {
        time(&json!(s)).unwrap()
    }

    #[test]
    fn a_pod_may_outlive_its_deletion_deadline_by_the_slack_only() {
        let pods = json!({"items": [
            {"metadata": {"namespace": "s", "name": "late", "uid": "u1",
                          "deletionTimestamp": "2026-01-01T00:00:00Z"},
             "spec": {"nodeName": "node-2"}, "status": {"phase": "Running"}},
            {"metadata": {"namespace": "s", "name": "fine", "uid": "u2"}},
        ]});
        assert!(overdue_deletions(&pods, at("2026-01-01T00:00:10Z")).is_empty());
        let v = overdue_deletions(&pods, at("2026-01-01T00:00:11Z"));
        assert_eq!(v.len(), 1);
        assert_eq!(v[0].pod.as_ref().unwrap().node, "node-2");
        assert!(v[0].what.contains("s/late"), "{}", v[0].what);
    }

    #[test]
    fn jobs_complete_once_and_in_time() {
        let created = "2026-01-01T00:00:00Z";
        let jobs = json!({"items": [
            {"metadata": {"namespace": "s", "name": "done", "creationTimestamp": created},
             "spec": {"completions": 2},
             "status": {"succeeded": 2, "conditions": [{"type": "Complete", "status": "True"}]}},
            {"metadata": {"namespace": "s", "name": "twice", "creationTimestamp": created},
             "spec": {"completions": 1}, "status": {"succeeded": 2}},
            {"metadata": {"namespace": "s", "name": "slow", "creationTimestamp": created},
             "spec": {}, "status": {"active": 1}},
        ]});
        let early = job_violations(&jobs, at("2026-01-01T00:01:00Z"));
        assert_eq!(early.len(), 1, "{early:?}");
        assert!(early[0].what.contains("s/twice"));
        let late = job_violations(&jobs, at("2026-01-01T00:02:01Z"));
        assert_eq!(late.len(), 2, "{late:?}");
        assert!(late[1].what.contains("s/slow") && late[1].what.contains("not complete"));
    }

    #[test]
    fn workloads_converge_after_their_last_change() {
        let list = json!({"items": [
            {"metadata": {"namespace": "s", "name": "web", "creationTimestamp": "2026-01-01T00:00:00Z"},
             "spec": {"replicas": 3}, "status": {"readyReplicas": 2}},
        ]});
        let now = at("2026-01-01T00:05:00Z");
        assert_eq!(
            unconverged("deployment", &list, &HashMap::new(), now).len(),
            1
        );
        let changed = HashMap::from([("s/web".to_string(), at("2026-01-01T00:04:00Z"))]);
        assert!(unconverged("deployment", &list, &changed, now).is_empty());
    }
}
