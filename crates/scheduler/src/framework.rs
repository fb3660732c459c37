//! The scheduling framework's shapes: plugin names as upstream spells them, a node's
//! filter verdict, per-cycle state, and a profile (which plugins run, with what weights).

use crate::plugins::{inter_pod_affinity, node_resources, topology_spread, volume_binding};
pub use crate::verdict::{Unfit, MAX_NODE_SCORE};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PluginName {
    NodeUnschedulable,
    NodeName,
    TaintToleration,
    NodeAffinity,
    NodeResourcesFit,
    NodePorts,
    InterPodAffinity,
    PodTopologySpread,
    NodeResourcesBalancedAllocation,
    ImageLocality,
    VolumeBinding,
}

impl PluginName {
    pub const ALL: [PluginName; 11] = [
        PluginName::NodeUnschedulable,
        PluginName::NodeName,
        PluginName::TaintToleration,
        PluginName::NodeAffinity,
        PluginName::NodeResourcesFit,
        PluginName::NodePorts,
        PluginName::InterPodAffinity,
        PluginName::PodTopologySpread,
        PluginName::NodeResourcesBalancedAllocation,
        PluginName::ImageLocality,
        PluginName::VolumeBinding,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            PluginName::NodeUnschedulable => "NodeUnschedulable",
            PluginName::NodeName => "NodeName",
            PluginName::TaintToleration => "TaintToleration",
            PluginName::NodeAffinity => "NodeAffinity",
            PluginName::NodeResourcesFit => "NodeResourcesFit",
            PluginName::NodePorts => "NodePorts",
            PluginName::InterPodAffinity => "InterPodAffinity",
            PluginName::PodTopologySpread => "PodTopologySpread",
            PluginName::NodeResourcesBalancedAllocation => "NodeResourcesBalancedAllocation",
            PluginName::ImageLocality => "ImageLocality",
            PluginName::VolumeBinding => "VolumeBinding",
        }
    }

    pub fn parse(s: &str) -> Option<PluginName> {
        PluginName::ALL.into_iter().find(|p| p.as_str() == s)
    }

    pub fn has_filter(self) -> bool {
        !matches!(
            self,
            PluginName::NodeResourcesBalancedAllocation | PluginName::ImageLocality
        )
    }

    pub fn has_score(self) -> bool {
        !matches!(
            self,
            PluginName::NodeUnschedulable
                | PluginName::NodeName
                | PluginName::NodePorts
                | PluginName::VolumeBinding
        )
    }
}

/// What pre-filter and pre-score computed for one pod's cycle.
#[derive(Debug, Default)]
pub struct CycleState {
    pub inter_pod: Option<inter_pod_affinity::FilterState>,
    pub spread: Option<topology_spread::FilterState>,
    pub inter_pod_score: Option<inter_pod_affinity::ScoreState>,
    pub spread_score: Option<topology_spread::ScoreState>,
    pub volumes: Option<volume_binding::PodVolumes>,
    /// Plugins whose pre-score found nothing to score for this pod.
    pub skip_score: Vec<PluginName>,
}

/// One scheduling profile (a `KubeSchedulerProfile`, resolved).
#[derive(Debug, Clone)]
pub struct Profile {
    pub scheduler_name: String,
    pub filters: Vec<PluginName>,
    pub scores: Vec<(PluginName, i64)>,
    pub fit: node_resources::FitArgs,
    pub balanced_resources: Vec<(node_resources::ResourceName, i64)>,
    pub hard_pod_affinity_weight: i64,
    /// PodTopologySpread's `defaultingType: System` constraints.
    pub system_default_spreading: bool,
    pub percentage_of_nodes_to_score: Option<i32>,
    /// The DefaultPreemption post-filter.
    pub preemption: bool,
}

impl Profile {
    /// Upstream's default plugins and weights (kube-scheduler 1.33).
    pub fn default_profile(name: &str) -> Profile {
        use PluginName::*;
        Profile {
            scheduler_name: name.to_string(),
            filters: vec![
                NodeUnschedulable,
                NodeName,
                TaintToleration,
                NodeAffinity,
                NodePorts,
                NodeResourcesFit,
                VolumeBinding,
                PodTopologySpread,
                InterPodAffinity,
            ],
            scores: vec![
                (TaintToleration, 3),
                (NodeAffinity, 2),
                (NodeResourcesFit, 1),
                (PodTopologySpread, 2),
                (InterPodAffinity, 2),
                (NodeResourcesBalancedAllocation, 1),
                (ImageLocality, 1),
            ],
            fit: node_resources::FitArgs::default(),
            balanced_resources: node_resources::ResourceName::cpu_and_memory(),
            hard_pod_affinity_weight: 1,
            system_default_spreading: true,
            percentage_of_nodes_to_score: None,
            preemption: true,
        }
    }
}
