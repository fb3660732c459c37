//! What a Job needs now, decided from its spec, status and active pods without IO:
//! fail, complete, suspend, or run (and then which pods to create or delete).

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use cairn_semantics::pod_state::{self, PodView, Ranked};
use k8s_openapi::api::batch::v1::{Job, JobStatus};
use k8s_openapi::jiff::Timestamp;

use super::{indexes, status};
use crate::cached_pod::CachedPod;

#[derive(Debug, PartialEq)]
pub enum Decision {
    Fail {
        reason: String,
        message: String,
    },
    Complete,
    Suspend,
    /// Keep pods running; `deadline` is how long until `activeDeadlineSeconds` ends.
    Run {
        deadline: Option<Duration>,
    },
}

fn uncounted(st: &JobStatus, failed: bool) -> i32 {
    let u = st.uncounted_terminated_pods.as_ref();
    let list = u.and_then(|u| {
        if failed {
            u.failed.as_ref()
        } else {
            u.succeeded.as_ref()
        }
    });
    list.map_or(0, |l| l.len() as i32)
}

pub fn succeeded(st: &JobStatus) -> i32 {
    st.succeeded.unwrap_or(0) + uncounted(st, false)
}

fn failed(st: &JobStatus) -> i32 {
    st.failed.unwrap_or(0) + uncounted(st, true)
}

fn condition(st: &JobStatus, ty: &str) -> Option<(String, String)> {
    st.conditions
        .iter()
        .flatten()
        .find(|c| c.type_ == ty && c.status == "True")
        .map(|c| {
            (
                c.reason.clone().unwrap_or_default(),
                c.message.clone().unwrap_or_default(),
            )
        })
}

fn fail(reason: &str, message: &str) -> Decision {
    Decision::Fail {
        reason: reason.into(),
        message: message.into(),
    }
}

pub fn decide(
    job: &Job,
    st: &JobStatus,
    active: &[Arc<CachedPod>],
    fail_job: Option<String>,
    now: Timestamp,
) -> Decision {
    let spec = job.spec.clone().unwrap_or_default();
    if let Some((reason, message)) = condition(st, "FailureTarget") {
        return Decision::Fail { reason, message };
    }
    if status::has(st, "SuccessCriteriaMet") {
        return Decision::Complete;
    }
    if let Some(message) = fail_job {
        return fail("PodFailurePolicy", &message);
    }
    let backoff_limit = spec.backoff_limit.unwrap_or(6);
    let restarts: i32 = active.iter().map(|p| p.total_restarts).sum();
    let on_failure = spec
        .template
        .spec
        .as_ref()
        .and_then(|s| s.restart_policy.as_deref())
        == Some("OnFailure");
    let restarts_exceed = on_failure
        && if backoff_limit == 0 {
            restarts > 0
        } else {
            restarts >= backoff_limit
        };
    if failed(st) > backoff_limit || restarts_exceed {
        return fail(
            "BackoffLimitExceeded",
            "Job has reached the specified backoff limit",
        );
    }
    if is_complete(job, st, active) {
        return Decision::Complete;
    }
    if spec.suspend == Some(true) {
        return Decision::Suspend;
    }
    let deadline = match (spec.active_deadline_seconds, st.start_time.as_ref()) {
        (Some(secs), Some(start)) => {
            let end = start.0.as_second().saturating_add(secs);
            let left = end - now.as_second();
            if left <= 0 {
                return fail(
                    "DeadlineExceeded",
                    "Job was active longer than specified deadline",
                );
            }
            Some(Duration::from_secs(left as u64))
        }
        _ => None,
    };
    Decision::Run { deadline }
}

fn is_complete(job: &Job, st: &JobStatus, active: &[Arc<CachedPod>]) -> bool {
    let spec = job.spec.as_ref();
    let completions = spec.and_then(|s| s.completions);
    if status::is_indexed(job) {
        let done = indexes::parse(st.completed_indexes.as_deref().unwrap_or("")).len();
        return completions.is_some_and(|c| done as i32 >= c);
    }
    match completions {
        Some(c) => succeeded(st) >= c,
        // Without completions, the first success ends the Job once the rest stopped.
        None => succeeded(st) > 0 && active.is_empty(),
    }
}

/// The pods to create (their indexes, `None` for NonIndexed) and delete.
#[derive(Debug, Default)]
pub struct Plan {
    pub create: Vec<Option<i32>>,
    pub excess: Vec<Arc<CachedPod>>,
}

pub fn plan(job: &Job, st: &JobStatus, active: &[Arc<CachedPod>]) -> Plan {
    let spec = job.spec.clone().unwrap_or_default();
    let parallelism = spec.parallelism.unwrap_or(1).max(0) as usize;
    if status::is_indexed(job) {
        return plan_indexed(spec.completions.unwrap_or(0), parallelism, st, active);
    }
    let done = succeeded(st);
    let want = match spec.completions {
        None if done > 0 => 0,
        None => parallelism,
        Some(c) => parallelism.min((c - done).max(0) as usize),
    };
    if active.len() > want {
        return Plan {
            create: Vec::new(),
            excess: first_to_delete(active, active.len() - want),
        };
    }
    Plan {
        create: vec![None; want - active.len()],
        excess: Vec::new(),
    }
}

fn plan_indexed(
    completions: i32,
    parallelism: usize,
    st: &JobStatus,
    active: &[Arc<CachedPod>],
) -> Plan {
    let completed = indexes::parse(st.completed_indexes.as_deref().unwrap_or(""));
    let mut held = BTreeSet::new();
    let mut excess = Vec::new();
    for p in active {
        match indexes::index_of(p.as_ref(), completions) {
            // Duplicate, out-of-range or already completed index: not needed.
            Some(i) if !completed.contains(&i) && held.insert(i) => {}
            _ => excess.push(p.clone()),
        }
    }
    let keep = active.len() - excess.len();
    let missing = (0..completions).filter(|i| !completed.contains(i) && !held.contains(i));
    let create: Vec<Option<i32>> = missing
        .take(parallelism.saturating_sub(keep))
        .map(Some)
        .collect();
    if keep > parallelism {
        // Highest indexes go first when parallelism shrank.
        let mut mine: Vec<&Arc<CachedPod>> = active
            .iter()
            .filter(|p| !excess.iter().any(|e| Arc::ptr_eq(e, p)))
            .collect();
        mine.sort_by_key(|p| std::cmp::Reverse(indexes::index_of(p.as_ref(), completions)));
        excess.extend(mine.into_iter().take(keep - parallelism).cloned());
    }
    Plan { create, excess }
}

/// The `n` active pods upstream deletes first (not ready, pending, newest).
fn first_to_delete(active: &[Arc<CachedPod>], n: usize) -> Vec<Arc<CachedPod>> {
    let mut ranked: Vec<Ranked<CachedPod>> = active
        .iter()
        .map(|p| Ranked {
            pod: p.as_ref(),
            colocated: 0,
        })
        .collect();
    let now = Timestamp::now();
    ranked.sort_by(|a, b| pod_state::deletion_order(a, b, now));
    let uids: Vec<&str> = ranked.iter().take(n).map(|r| PodView::uid(r.pod)).collect();
    active
        .iter()
        .filter(|p| uids.contains(&PodView::uid(p.as_ref())))
        .cloned()
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::batch::v1::JobSpec;

    fn job(completions: Option<i32>, parallelism: i32, indexed: bool) -> Job {
        Job {
            spec: Some(JobSpec {
                completions,
                parallelism: Some(parallelism),
                completion_mode: Some(if indexed { "Indexed" } else { "NonIndexed" }.into()),
                backoff_limit: Some(2),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn pod(uid: &str, index: Option<i32>) -> Arc<CachedPod> {
        let mut p = CachedPod::default();
        p.metadata.uid = Some(uid.into());
        p.phase = Some("Running".into());
        if let Some(i) = index {
            p.metadata.annotations =
                Some([(indexes::INDEX_ANNOTATION.to_string(), i.to_string())].into());
        }
        Arc::new(p)
    }

    #[test]
    fn non_indexed_counts_toward_completions() {
        let j = job(Some(5), 2, false);
        let mut st = JobStatus::default();
        assert_eq!(plan(&j, &st, &[]).create.len(), 2);
        st.succeeded = Some(4);
        assert_eq!(plan(&j, &st, &[]).create.len(), 1);
        let running = [pod("a", None), pod("b", None)];
        assert_eq!(plan(&j, &st, &running).excess.len(), 1);
        st.succeeded = Some(5);
        assert_eq!(
            decide(&j, &st, &[], None, Timestamp::now()),
            Decision::Complete
        );
    }

    #[test]
    fn backoff_limit_fails_the_job() {
        let j = job(Some(5), 2, false);
        let st = JobStatus {
            failed: Some(3),
            ..Default::default()
        };
        assert!(matches!(
            decide(&j, &st, &[], None, Timestamp::now()),
            Decision::Fail { reason, .. } if reason == "BackoffLimitExceeded"
        ));
    }

    #[test]
    fn indexed_fills_the_lowest_missing_indexes() {
        let j = job(Some(5), 3, true);
        let st = JobStatus {
            completed_indexes: Some("0,2".into()),
            ..Default::default()
        };
        let p = plan(&j, &st, &[pod("a", Some(1)), pod("dup", Some(1))]);
        assert_eq!(p.create, vec![Some(3), Some(4)]);
        assert_eq!(p.excess.len(), 1);
        assert_eq!(PodView::uid(p.excess[0].as_ref()), "dup");
        let st = JobStatus {
            completed_indexes: Some("0-4".into()),
            ..Default::default()
        };
        assert_eq!(
            decide(&j, &st, &[], None, Timestamp::now()),
            Decision::Complete
        );
    }
}
