//! One scheduling attempt with extenders in the loop: the pure filters, then each
//! interested extender's filter, the plugins' scores plus the extenders' weighted
//! scores, and the pick.

use std::collections::BTreeMap;

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
    if snap.num_nodes() == 0 {
        return Err(FitError::NoNodes.into());
    }
    let mut state = algorithm::pre_filter(info, snap, profile);
    let found = algorithm::find_feasible(info, snap, profile, &state, cursor);
    let mut reasons: BTreeMap<String, usize> = algorithm::histogram(&found.failures);
    let mut nodes: Vec<&NodeInfo> = found.nodes;
    for ext in extenders.iter().filter(|e| e.interested(info)) {
        if nodes.is_empty() {
            break;
        }
        let objects: Vec<&Node> = nodes.iter().map(|n| n.node.as_ref()).collect();
        match ext.filter(pod, &objects).await {
            Ok(f) => {
                nodes.retain(|n| f.nodes.contains(&n.name));
                for (reason, _) in f.failed.values() {
                    *reasons.entry(reason.clone()).or_default() += 1;
                }
            }
            Err(e) if ext.config.ignorable => {
                warn!(error = %e, "ignorable extender failed, skipped")
            }
            Err(e) => return Err(e.into()),
        }
    }
    match nodes.len() {
        0 => return Err(FitError::unfit(snap.num_nodes(), reasons).into()),
        1 => return Ok(nodes[0].name.clone()),
        _ => {}
    }
    let mut totals = algorithm::prioritize(info, snap, profile, &nodes, &mut state);
    for ext in extenders.iter().filter(|e| e.interested(info)) {
        let objects: Vec<&Node> = nodes.iter().map(|n| n.node.as_ref()).collect();
        match ext.prioritize(pod, &objects).await {
            Ok(scores) => {
                for (t, n) in totals.iter_mut().zip(&nodes) {
                    *t += scores.get(&n.name).copied().unwrap_or(0);
                }
            }
            // As upstream: a failed prioritize call only loses that extender's scores.
            Err(e) => warn!(error = %e, "extender prioritize failed, its scores skipped"),
        }
    }
    Ok(nodes[algorithm::select_host(&totals, cursor)].name.clone())
}
