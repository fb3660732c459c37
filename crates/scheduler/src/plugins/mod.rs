//! The in-tree plugins, one module each, and the dispatch from a [`PluginName`] to them.

pub mod image_locality;
pub mod inter_pod_affinity;
pub mod node_affinity;
pub mod node_basic;
pub mod node_ports;
pub mod node_resources;
pub mod taint_toleration;
pub mod topology_spread;
pub mod volume_binding;

use crate::framework::{CycleState, PluginName, Profile, Unfit, MAX_NODE_SCORE};
use crate::pod_info::PodInfo;
use crate::snapshot::{NodeInfo, Snapshot};

/// Upstream's `DefaultNormalizeScore`: scaled to 0–100 against the maximum, optionally
/// reversed (fewer is better).
pub fn default_normalize(scores: &mut [i64], reverse: bool) {
    let max = scores.iter().copied().max().unwrap_or(0);
    for s in scores.iter_mut() {
        let v = if max == 0 {
            0
        } else {
            MAX_NODE_SCORE * *s / max
        };
        *s = if reverse { MAX_NODE_SCORE - v } else { v };
    }
}

/// Computes what the plugin's filter needs for this pod.
pub fn pre_filter(p: PluginName, pod: &PodInfo, snap: &Snapshot, state: &mut CycleState) {
    match p {
        PluginName::InterPodAffinity => state.inter_pod = inter_pod_affinity::pre_filter(pod, snap),
        PluginName::PodTopologySpread => state.spread = topology_spread::pre_filter(pod, snap),
        PluginName::VolumeBinding if !pod.claims.is_empty() => {
            state.volumes = Some(volume_binding::pre_filter(
                &pod.namespace,
                &pod.claims,
                &snap.volumes,
            ))
        }
        _ => {}
    }
}

pub fn filter(
    p: PluginName,
    pod: &PodInfo,
    node: &NodeInfo,
    state: &CycleState,
    snap: &Snapshot,
) -> Result<(), Unfit> {
    match p {
        PluginName::NodeUnschedulable => node_basic::unschedulable(pod, node),
        PluginName::NodeName => node_basic::node_name(pod, node),
        PluginName::TaintToleration => taint_toleration::filter(pod, node),
        PluginName::NodeAffinity => node_affinity::filter(pod, node),
        PluginName::NodeResourcesFit => node_resources::filter(pod, node),
        PluginName::NodePorts => node_ports::filter(pod, node),
        PluginName::InterPodAffinity => match &state.inter_pod {
            Some(s) => inter_pod_affinity::filter(pod, node, s, snap),
            None => Ok(()),
        },
        PluginName::PodTopologySpread => match &state.spread {
            Some(s) => topology_spread::filter(pod, node, s),
            None => Ok(()),
        },
        PluginName::VolumeBinding => match &state.volumes {
            Some(v) => volume_binding::filter(v, node),
            None => Ok(()),
        },
        PluginName::NodeResourcesBalancedAllocation | PluginName::ImageLocality => Ok(()),
    }
}

/// Computes what scoring needs; plugins with nothing to score are skipped.
pub fn pre_score(
    p: PluginName,
    pod: &PodInfo,
    snap: &Snapshot,
    feasible: &[&NodeInfo],
    profile: &Profile,
    state: &mut CycleState,
) {
    let skip = match p {
        PluginName::InterPodAffinity => {
            state.inter_pod_score =
                inter_pod_affinity::pre_score(pod, snap, profile.hard_pod_affinity_weight);
            state.inter_pod_score.is_none()
        }
        PluginName::PodTopologySpread => {
            state.spread_score =
                topology_spread::pre_score(pod, snap, feasible, profile.system_default_spreading);
            state.spread_score.is_none()
        }
        PluginName::NodeAffinity => pod.preferred_node_affinity.is_empty(),
        PluginName::NodeResourcesBalancedAllocation => {
            node_resources::balanced_skip(pod, &profile.balanced_resources)
        }
        _ => false,
    };
    if skip {
        state.skip_score.push(p);
    }
}

pub fn score(
    p: PluginName,
    pod: &PodInfo,
    node: &NodeInfo,
    snap: &Snapshot,
    profile: &Profile,
    state: &CycleState,
) -> i64 {
    match p {
        PluginName::TaintToleration => taint_toleration::score(pod, node),
        PluginName::NodeAffinity => node_affinity::score(pod, node),
        PluginName::NodeResourcesFit => node_resources::score(pod, node, &profile.fit),
        PluginName::NodeResourcesBalancedAllocation => {
            node_resources::balanced_score(pod, node, &profile.balanced_resources)
        }
        PluginName::ImageLocality => image_locality::score(pod, node, snap),
        PluginName::InterPodAffinity => state
            .inter_pod_score
            .as_ref()
            .map_or(0, |s| inter_pod_affinity::score(node, s)),
        PluginName::PodTopologySpread => state
            .spread_score
            .as_ref()
            .map_or(0, |s| topology_spread::score(pod, node, s)),
        PluginName::NodeUnschedulable
        | PluginName::NodeName
        | PluginName::NodePorts
        | PluginName::VolumeBinding => 0,
    }
}

pub fn normalize(p: PluginName, scores: &mut [i64], nodes: &[&NodeInfo], state: &CycleState) {
    match p {
        PluginName::TaintToleration => taint_toleration::normalize(scores),
        PluginName::NodeAffinity => node_affinity::normalize(scores),
        PluginName::InterPodAffinity => inter_pod_affinity::normalize(scores),
        PluginName::PodTopologySpread => {
            if let Some(s) = &state.spread_score {
                topology_spread::normalize(scores, nodes, s)
            }
        }
        _ => {}
    }
}
