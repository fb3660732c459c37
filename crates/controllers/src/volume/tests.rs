use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use serde_json::json;

use super::matching::best_volume;

fn pv(name: &str, size: &str, class: &str, extra: serde_json::Value) -> Arc<PersistentVolume> {
    let mut v = json!({"metadata": {"name": name, "labels": {"tier": "fast"}},
        "spec": {"capacity": {"storage": size}, "accessModes": ["ReadWriteOnce"],
                 "storageClassName": class, "hostPath": {"path": "/x"}},
        "status": {"phase": "Available"}});
    if let (Some(spec), Some(e)) = (v["spec"].as_object_mut(), extra.as_object()) {
        spec.extend(e.clone());
    }
    Arc::new(serde_json::from_value(v).unwrap())
}

fn claim(size: &str, extra: serde_json::Value) -> PersistentVolumeClaim {
    let mut c = json!({"metadata": {"name": "data", "namespace": "ns", "uid": "u1"},
        "spec": {"resources": {"requests": {"storage": size}}, "accessModes": ["ReadWriteOnce"],
                 "storageClassName": "manual"}});
    if let (Some(spec), Some(e)) = (c["spec"].as_object_mut(), extra.as_object()) {
        spec.extend(e.clone());
    }
    serde_json::from_value(c).unwrap()
}

fn name(v: Option<&PersistentVolume>) -> Option<&str> {
    v.and_then(|v| v.metadata.name.as_deref())
}

#[test]
fn the_smallest_fitting_volume_wins() {
    let vols = [
        pv("big", "10Gi", "manual", json!({})),
        pv("small", "1Gi", "manual", json!({})),
        pv("tiny", "100Mi", "manual", json!({})),
        pv("other-class", "1Gi", "fast", json!({})),
    ];
    assert_eq!(
        name(best_volume(&claim("500Mi", json!({})), &vols, None)),
        Some("small")
    );
    assert_eq!(
        name(best_volume(&claim("20Gi", json!({})), &vols, None)),
        None
    );
    let rwx = claim("1Gi", json!({"accessModes": ["ReadWriteMany"]}));
    assert_eq!(name(best_volume(&rwx, &vols, None)), None);
    let block = claim("1Gi", json!({"volumeMode": "Block"}));
    assert_eq!(name(best_volume(&block, &vols, None)), None);
    let selected = claim(
        "1Gi",
        json!({"selector": {"matchLabels": {"tier": "slow"}}}),
    );
    assert_eq!(name(best_volume(&selected, &vols, None)), None);
}

#[test]
fn a_volume_prebound_to_the_claim_is_taken_and_others_skipped() {
    let mine = json!({"claimRef": {"name": "data", "namespace": "ns"}});
    let theirs = json!({"claimRef": {"name": "other", "namespace": "ns", "uid": "u2"}});
    let vols = [
        pv("taken", "1Gi", "manual", theirs),
        pv("mine", "5Gi", "manual", mine),
        pv("free", "1Gi", "manual", json!({})),
    ];
    assert_eq!(
        name(best_volume(&claim("1Gi", json!({})), &vols, None)),
        Some("mine")
    );
}

#[test]
fn node_affinity_limits_where_a_placed_claim_binds() {
    let on_a = json!({"nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
        {"key": "kubernetes.io/hostname", "operator": "In", "values": ["a"]}]}]}}});
    let vols = [pv("local-a", "1Gi", "manual", on_a)];
    let labels = |n: &str| BTreeMap::from([("kubernetes.io/hostname".to_string(), n.to_string())]);
    let (la, lb) = (labels("a"), labels("b"));
    assert_eq!(
        name(best_volume(
            &claim("1Gi", json!({})),
            &vols,
            Some(("a", &la))
        )),
        Some("local-a")
    );
    assert_eq!(
        name(best_volume(
            &claim("1Gi", json!({})),
            &vols,
            Some(("b", &lb))
        )),
        None
    );
}
