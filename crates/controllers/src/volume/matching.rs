//! Which volume an unbound claim gets (upstream `findMatchingVolume`): a volume
//! pre-bound to the claim wins; otherwise the smallest Available volume whose class,
//! access modes, volume mode, size and labels fit, and (for a claim placed on a node)
//! whose node affinity admits that node.

use std::collections::BTreeMap;

use cairn_semantics::quantity;
use cairn_semantics::selector::{NodeSelectorTerms, Selector};
use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};

fn storage(
    list: Option<&BTreeMap<String, k8s_openapi::apimachinery::pkg::api::resource::Quantity>>,
) -> i64 {
    list.and_then(|l| l.get("storage"))
        .and_then(|q| quantity::value(q).ok())
        .unwrap_or(0)
}

/// The claim's requested bytes.
pub fn requested(c: &PersistentVolumeClaim) -> i64 {
    storage(
        c.spec
            .as_ref()
            .and_then(|s| s.resources.as_ref())
            .and_then(|r| r.requests.as_ref()),
    )
}

/// The volume's capacity in bytes.
pub fn capacity(v: &PersistentVolume) -> i64 {
    storage(v.spec.as_ref().and_then(|s| s.capacity.as_ref()))
}

fn is_prebound_to(v: &PersistentVolume, c: &PersistentVolumeClaim) -> bool {
    let Some(r) = v.spec.as_ref().and_then(|s| s.claim_ref.as_ref()) else {
        return false;
    };
    r.name == c.metadata.name
        && r.namespace == c.metadata.namespace
        && (r.uid.as_deref().unwrap_or_default().is_empty() || r.uid == c.metadata.uid)
}

/// Whether `v` could serve `c` (claim refs aside), on `node` if given.
pub fn fits(
    v: &PersistentVolume,
    c: &PersistentVolumeClaim,
    node: Option<(&str, &BTreeMap<String, String>)>,
) -> bool {
    let (Some(vs), Some(cs)) = (v.spec.as_ref(), c.spec.as_ref()) else {
        return false;
    };
    let class = |s: &Option<String>| s.clone().unwrap_or_default();
    let mode = |m: &Option<String>| m.clone().unwrap_or_else(|| "Filesystem".into());
    let modes = vs.access_modes.clone().unwrap_or_default();
    let selector_ok = match &cs.selector {
        Some(sel) => Selector::from_label_selector(sel)
            .is_ok_and(|s| s.matches(v.metadata.labels.as_ref().unwrap_or(&BTreeMap::new()))),
        None => true,
    };
    let node_ok = match (
        node,
        vs.node_affinity.as_ref().and_then(|a| a.required.as_ref()),
    ) {
        (Some((name, labels)), Some(req)) => {
            NodeSelectorTerms::compile(req).is_ok_and(|t| t.matches(name, labels))
        }
        _ => true,
    };
    v.metadata.deletion_timestamp.is_none()
        && class(&vs.storage_class_name) == class(&cs.storage_class_name)
        && cs.access_modes.iter().flatten().all(|m| modes.contains(m))
        && mode(&vs.volume_mode) == mode(&cs.volume_mode)
        && capacity(v) >= requested(c)
        && selector_ok
        && node_ok
}

/// The volume to bind `c` to, if any.
pub fn best_volume<'a>(
    c: &PersistentVolumeClaim,
    volumes: &'a [std::sync::Arc<PersistentVolume>],
    node: Option<(&str, &BTreeMap<String, String>)>,
) -> Option<&'a PersistentVolume> {
    if let Some(v) = volumes
        .iter()
        .find(|v| is_prebound_to(v, c) && fits(v, c, node))
    {
        return Some(v);
    }
    volumes
        .iter()
        .filter(|v| v.spec.as_ref().is_some_and(|s| s.claim_ref.is_none()))
        .filter(|v| v.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Available"))
        .filter(|v| fits(v, c, node))
        .min_by_key(|v| capacity(v))
        .map(|v| v.as_ref())
}
