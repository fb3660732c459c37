//! VolumeBinding (upstream `pkg/scheduler/framework/plugins/volumebinding`), for the
//! claims a pod names: a missing or deleting claim makes the pod unschedulable; a bound
//! claim's volume must allow the node (its node affinity, as local volumes have); an
//! unbound claim of an `Immediate` class waits for the binder; an unbound claim of a
//! `WaitForFirstConsumer` class is provisioned where the pod goes (the scheduler
//! annotates it with the chosen node before binding the pod).

use std::collections::HashMap;

use cairn_semantics::selector::NodeSelectorTerms;
use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use k8s_openapi::api::storage::v1::StorageClass;

use crate::node_info::NodeInfo;
use crate::verdict::Unfit;

pub const AFFINITY_CONFLICT: &str = "node(s) had volume node affinity conflict";
pub const UNBOUND_IMMEDIATE: &str = "pod has unbound immediate PersistentVolumeClaims";
/// The annotation that tells a provisioner where the first consumer runs.
pub const SELECTED_NODE: &str = "volume.kubernetes.io/selected-node";

/// What the scheduler knows of one claim.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ClaimInfo {
    pub volume_name: Option<String>,
    pub class: Option<String>,
    pub deleting: bool,
}

/// The claims, volumes and classes the scheduler watches.
#[derive(Debug, Default)]
pub struct VolumeState {
    pub claims: HashMap<(String, String), ClaimInfo>,
    /// Volume name → its node affinity (None: any node).
    pub volumes: HashMap<String, Option<NodeSelectorTerms>>,
    /// Class name → whether it waits for the first consumer.
    pub classes: HashMap<String, bool>,
}

impl VolumeState {
    pub fn upsert_claim(&mut self, c: &PersistentVolumeClaim) {
        let key = (
            c.metadata.namespace.clone().unwrap_or_default(),
            c.metadata.name.clone().unwrap_or_default(),
        );
        let spec = c.spec.clone().unwrap_or_default();
        let info = ClaimInfo {
            volume_name: spec.volume_name.filter(|v| !v.is_empty()),
            class: spec.storage_class_name,
            deleting: c.metadata.deletion_timestamp.is_some(),
        };
        self.claims.insert(key, info);
    }

    pub fn remove_claim(&mut self, c: &PersistentVolumeClaim) {
        let ns = c.metadata.namespace.clone().unwrap_or_default();
        self.claims
            .remove(&(ns, c.metadata.name.clone().unwrap_or_default()));
    }

    pub fn upsert_volume(&mut self, v: &PersistentVolume) {
        let affinity = v
            .spec
            .as_ref()
            .and_then(|s| s.node_affinity.as_ref())
            .and_then(|a| a.required.as_ref())
            .and_then(|r| NodeSelectorTerms::compile(r).ok());
        self.volumes
            .insert(v.metadata.name.clone().unwrap_or_default(), affinity);
    }

    pub fn remove_volume(&mut self, v: &PersistentVolume) {
        self.volumes
            .remove(v.metadata.name.as_deref().unwrap_or(""));
    }

    pub fn upsert_class(&mut self, c: &StorageClass) {
        let wait = c.volume_binding_mode.as_deref() == Some("WaitForFirstConsumer");
        self.classes
            .insert(c.metadata.name.clone().unwrap_or_default(), wait);
    }

    pub fn remove_class(&mut self, c: &StorageClass) {
        self.classes
            .remove(c.metadata.name.as_deref().unwrap_or(""));
    }
}

/// A pod's claims, sorted out once per cycle.
#[derive(Debug, Clone, Default)]
pub struct PodVolumes {
    /// Why no node can take the pod now, if so.
    pub blocked: Option<String>,
    /// Node affinities of the bound volumes.
    pub affinities: Vec<NodeSelectorTerms>,
    /// Unbound claims to provision on the chosen node: `(namespace, name)`.
    pub to_provision: Vec<(String, String)>,
}

pub fn pre_filter(namespace: &str, claims: &[String], state: &VolumeState) -> PodVolumes {
    let mut out = PodVolumes::default();
    for name in claims {
        let key = (namespace.to_string(), name.clone());
        let Some(claim) = state.claims.get(&key) else {
            out.blocked = Some(format!("persistentvolumeclaim \"{name}\" not found"));
            return out;
        };
        if claim.deleting {
            out.blocked = Some(format!("persistentvolumeclaim \"{name}\" is being deleted"));
            return out;
        }
        match &claim.volume_name {
            Some(volume) => match state.volumes.get(volume) {
                Some(Some(terms)) => out.affinities.push(terms.clone()),
                Some(None) => {}
                None => {
                    out.blocked = Some(format!("persistentvolume \"{volume}\" not found"));
                    return out;
                }
            },
            None => {
                let class = claim.class.as_deref().unwrap_or_default();
                if state.classes.get(class).copied().unwrap_or(false) {
                    out.to_provision.push(key);
                } else {
                    out.blocked = Some(UNBOUND_IMMEDIATE.to_string());
                    return out;
                }
            }
        }
    }
    out
}

pub fn filter(volumes: &PodVolumes, node: &NodeInfo) -> Result<(), Unfit> {
    if let Some(why) = &volumes.blocked {
        return Err(Unfit::unresolvable(why));
    }
    if volumes
        .affinities
        .iter()
        .all(|t| t.matches(&node.name, &node.labels))
    {
        Ok(())
    } else {
        Err(Unfit::unresolvable(AFFINITY_CONFLICT))
    }
}
