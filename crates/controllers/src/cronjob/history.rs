//! History limits: finished Jobs beyond `successfulJobsHistoryLimit` /
//! `failedJobsHistoryLimit` are deleted, oldest first.

use std::sync::Arc;

use k8s_openapi::api::batch::v1::{CronJob, Job};
use tracing::warn;

use super::jobs::{self, finished};
use super::Ctx;

/// Deletes the finished Jobs over the limits. Best effort: a failed delete is retried at
/// the next sync.
pub async fn clean(ctx: &Ctx, cj: &CronJob, children: &[Arc<Job>]) {
    let spec = cj.spec.as_ref();
    let limits = [
        (
            "Complete",
            spec.and_then(|s| s.successful_jobs_history_limit),
        ),
        ("Failed", spec.and_then(|s| s.failed_jobs_history_limit)),
    ];
    for (how, limit) in limits {
        let Some(limit) = limit else {
            continue;
        };
        for job in over_limit(children, how, limit.max(0) as usize) {
            if let Err(e) = jobs::delete(ctx, cj, &job).await {
                warn!(cronjob = ?cj.metadata.name, job = ?job.metadata.name, error = %e, "history cleanup failed");
            }
        }
    }
}

/// The oldest finished-`how` Jobs beyond `limit` (ordered by start, then creation).
fn over_limit(children: &[Arc<Job>], how: &str, limit: usize) -> Vec<Arc<Job>> {
    let mut done: Vec<Arc<Job>> = children
        .iter()
        .filter(|j| finished(j) == Some(how) && j.metadata.deletion_timestamp.is_none())
        .cloned()
        .collect();
    done.sort_by_key(|j| {
        let start = j
            .status
            .as_ref()
            .and_then(|s| s.start_time.as_ref())
            .map(|t| t.0);
        (start, j.metadata.creation_timestamp.as_ref().map(|t| t.0))
    });
    let extra = done.len().saturating_sub(limit);
    done.truncate(extra);
    done
}
