//! A StatefulSet pod's stable identity (upstream `stateful_set_utils`): its name
//! `<set>-<ordinal>`, hostname and subdomain, identity labels, the revision it was made
//! from, and its claims `<claim>-<set>-<ordinal>` mounted in place of same-named volumes.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{
    PersistentVolumeClaim, PersistentVolumeClaimVolumeSource, Pod, PodTemplateSpec, Volume,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::ResourceExt;

use crate::owner;
use crate::revisions::REVISION_LABEL;

pub const POD_NAME_LABEL: &str = "statefulset.kubernetes.io/pod-name";
pub const POD_INDEX_LABEL: &str = "apps.kubernetes.io/pod-index";

pub fn pod_name(set: &StatefulSet, ordinal: i32) -> String {
    format!("{}-{ordinal}", set.name_any())
}

pub fn claim_name(claim: &str, set: &StatefulSet, ordinal: i32) -> String {
    format!("{claim}-{}", pod_name(set, ordinal))
}

fn claim_templates(set: &StatefulSet) -> &[PersistentVolumeClaim] {
    set.spec
        .as_ref()
        .and_then(|s| s.volume_claim_templates.as_deref())
        .unwrap_or_default()
}

/// The pod of `ordinal` from `template`, labelled with `revision`.
pub fn new_pod(set: &StatefulSet, template: &PodTemplateSpec, revision: &str, ordinal: i32) -> Pod {
    let meta = template.metadata.clone().unwrap_or_default();
    let name = pod_name(set, ordinal);
    let mut labels = meta.labels.unwrap_or_default();
    labels.insert(POD_NAME_LABEL.into(), name.clone());
    labels.insert(POD_INDEX_LABEL.into(), ordinal.to_string());
    labels.insert(REVISION_LABEL.into(), revision.into());
    let mut spec = template.spec.clone().unwrap_or_default();
    spec.hostname = Some(name.clone());
    let service = set
        .spec
        .as_ref()
        .and_then(|s| s.service_name.clone())
        .unwrap_or_default();
    if !service.is_empty() {
        spec.subdomain = Some(service);
    }
    let volumes = spec.volumes.get_or_insert_with(Vec::new);
    for claim in claim_templates(set) {
        let vol_name = claim.metadata.name.clone().unwrap_or_default();
        volumes.retain(|v| v.name != vol_name);
        volumes.push(Volume {
            name: vol_name.clone(),
            persistent_volume_claim: Some(PersistentVolumeClaimVolumeSource {
                claim_name: claim_name(&vol_name, set, ordinal),
                read_only: None,
            }),
            ..Default::default()
        });
    }
    if volumes.is_empty() {
        spec.volumes = None;
    }
    Pod {
        metadata: ObjectMeta {
            name: Some(name),
            namespace: set.namespace(),
            labels: Some(labels),
            annotations: meta.annotations,
            owner_references: Some(vec![owner::controller_ref(set)]),
            ..Default::default()
        },
        spec: Some(spec),
        status: None,
    }
}

/// The claims of `ordinal`: each template with its per-pod name, the set's selector
/// labels, and — under `whenDeleted: Delete` — the set as owner, so they go with it.
pub fn claims(set: &StatefulSet, ordinal: i32) -> Vec<PersistentVolumeClaim> {
    let spec = set.spec.clone().unwrap_or_default();
    let selector_labels: BTreeMap<String, String> =
        spec.selector.match_labels.clone().unwrap_or_default();
    let delete_with_set = spec
        .persistent_volume_claim_retention_policy
        .as_ref()
        .and_then(|p| p.when_deleted.as_deref())
        == Some("Delete");
    claim_templates(set)
        .iter()
        .map(|t| {
            let mut labels = t.metadata.labels.clone().unwrap_or_default();
            labels.extend(selector_labels.clone());
            PersistentVolumeClaim {
                metadata: ObjectMeta {
                    name: Some(claim_name(
                        t.metadata.name.as_deref().unwrap_or(""),
                        set,
                        ordinal,
                    )),
                    namespace: set.namespace(),
                    labels: Some(labels),
                    annotations: t.metadata.annotations.clone(),
                    owner_references: delete_with_set.then(|| vec![owner::controller_ref(set)]),
                    ..Default::default()
                },
                spec: t.spec.clone(),
                status: None,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identity_and_claims() {
        let set: StatefulSet = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "web", "namespace": "ns", "uid": "u"},
            "spec": {"serviceName": "web", "selector": {"matchLabels": {"app": "web"}},
                "template": {"metadata": {"labels": {"app": "web"}},
                    "spec": {"containers": [{"name": "c", "image": "nginx"}],
                             "volumes": [{"name": "www", "emptyDir": {}}]}},
                "volumeClaimTemplates": [{"metadata": {"name": "www"},
                    "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}]}
        }))
        .unwrap();
        let template = set.spec.as_ref().unwrap().template.clone();
        let pod = new_pod(&set, &template, "web-abc", 2);
        assert_eq!(pod.metadata.name.as_deref(), Some("web-2"));
        let spec = pod.spec.unwrap();
        assert_eq!(
            (spec.hostname.as_deref(), spec.subdomain.as_deref()),
            (Some("web-2"), Some("web"))
        );
        let vols = spec.volumes.unwrap();
        assert_eq!(vols.len(), 1);
        assert_eq!(
            vols[0].persistent_volume_claim.as_ref().unwrap().claim_name,
            "www-web-2"
        );
        let labels = pod.metadata.labels.unwrap();
        assert_eq!(labels[REVISION_LABEL], "web-abc");
        assert_eq!(labels[POD_INDEX_LABEL], "2");
        let claims = claims(&set, 2);
        assert_eq!(claims[0].metadata.name.as_deref(), Some("www-web-2"));
        assert!(
            claims[0].metadata.owner_references.is_none(),
            "Retain by default"
        );
    }
}
