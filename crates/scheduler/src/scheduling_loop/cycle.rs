//! One scheduling attempt with extenders in the loop: the pure filters, then each
//! interested extender's filter, the plugins' scores plus the extenders' weighted
//! scores, and the pick.

use k8s_openapi::api::core::v1::{Node, Pod};
use tracing::warn;

use super::extender::{Extender, ExtenderError};
use crate::algorithm::{self, Cursor};
use crate::fit_error::FitError;
use crate::framework::Profile;
use crate::pod_info::PodInfo;
use crate::snapshot::{NodeInfo, Snapshot};

#[derive(Debug, thiserror::Error)]
pub enum CycleError {
    #[error("{0}")]
    Fit(#[from] FitError),
    #[error("{0}")]
    Extender(#[from] ExtenderError),
}

pub async fn schedule_with_extenders(
    pod: &Pod,
    info: &PodInfo,
    snap: &Snapshot,
    profile: &Profile,
    cursor: &mut Cursor,
    extenders: &[std::sync::Arc<Extender>],
) -> Result<String, CycleError> {
    let mut candidates = algorithm::filter(info, snap, profile, cursor)?;
    for ext in extenders.iter().filter(|e| e.interested(info)) {
        if candidates.nodes.is_empty() {
            break;
        }
        match ext.filter(pod, &node_objects(&candidates.nodes)).await {
            Ok(f) => candidates.narrow(
                |n| f.nodes.contains(&n.name),
                f.failed.values().map(|(reason, _)| reason.clone()),
            ),
            Err(e) if ext.config.ignorable => {
                warn!(error = %e, "ignorable extender failed, skipped")
            }
            Err(e) => return Err(e.into()),
        }
    }
    candidates.none_left(snap)?;
    let mut totals = candidates.scores(info, snap, profile);
    if candidates.nodes.len() > 1 {
        add_extender_scores(pod, info, &candidates.nodes, extenders, &mut totals).await;
    }
    Ok(candidates.pick(&totals, cursor).node)
}

fn node_objects<'a>(nodes: &[&'a NodeInfo]) -> Vec<&'a Node> {
    nodes.iter().map(|n| n.node.as_ref()).collect()
}

/// Each interested extender's weighted scores, added to the plugins' totals.
async fn add_extender_scores(
    pod: &Pod,
    info: &PodInfo,
    nodes: &[&NodeInfo],
    extenders: &[std::sync::Arc<Extender>],
    totals: &mut [i64],
) {
    for ext in extenders.iter().filter(|e| e.interested(info)) {
        match ext.prioritize(pod, &node_objects(nodes)).await {
            Ok(scores) => {
                for (t, n) in totals.iter_mut().zip(nodes) {
                    *t += scores.get(&n.name).copied().unwrap_or(0);
                }
            }
            // As upstream: a failed prioritize call only loses that extender's scores.
            Err(e) => warn!(error = %e, "extender prioritize failed, its scores skipped"),
        }
    }
}
