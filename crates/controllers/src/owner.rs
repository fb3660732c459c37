//! Controller references (`ownerReferences` with `controller: true`) and claiming, as
//! upstream's ControllerRefManager does: an owner adopts matching orphans and releases
//! objects it controls that its selector no longer matches.

use cairn_semantics::pod_state;
use cairn_semantics::selector::Selector;
use k8s_openapi::api::core::v1::Pod;

use crate::cached_pod::CachedPod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::reflector::ObjectRef;
use kube::{Resource, ResourceExt};

use serde::de::DeserializeOwned;
use serde_json::json;
use std::fmt::Debug;

/// The reference a controller puts on what it creates or adopts.
pub fn controller_ref<K: Resource<DynamicType = ()>>(owner: &K) -> OwnerReference {
    controller_ref_as(&K::api_version(&()), &K::kind(&()), owner.meta())
}

/// [`controller_ref`] for an owner kept in the cache as another type (a
/// ReplicationController held as a ReplicaSet).
pub fn controller_ref_as(api_version: &str, kind: &str, owner: &ObjectMeta) -> OwnerReference {
    OwnerReference {
        api_version: api_version.to_string(),
        kind: kind.to_string(),
        name: owner.name.clone().unwrap_or_default(),
        uid: owner.uid.clone().unwrap_or_default(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    }
}

/// The object's controller reference, if it has one.
pub fn controller_of(meta: &ObjectMeta) -> Option<&OwnerReference> {
    meta.owner_references
        .as_ref()?
        .iter()
        .find(|r| r.controller == Some(true))
}

/// The key of the object's controller when it is a `K` (what a touched pod or Job wakes).
pub fn controller_key<K: Resource<DynamicType = ()>>(meta: &ObjectMeta) -> Vec<ObjectRef<K>> {
    let ns = meta.namespace.clone().unwrap_or_default();
    controller_of(meta)
        .filter(|r| r.kind == K::kind(&()))
        .map(|r| vec![ObjectRef::new(&r.name).within(&ns)])
        .unwrap_or_default()
}

/// What an owner does with an object in its namespace.
#[derive(Debug, PartialEq, Eq)]
pub enum Claim {
    /// Controlled by the owner and matched: it counts.
    Mine,
    /// An orphan the owner's selector matches: adopt it, then it counts.
    Adopt,
    /// Controlled by the owner but no longer matched: let it go.
    Release,
    /// Someone else's, or not for this owner.
    Ignore,
}

/// Upstream's ClaimObject decision for one object.
pub fn classify(
    owner_uid: &str,
    owner_deleting: bool,
    selector: &Selector,
    meta: &ObjectMeta,
) -> Claim {
    let empty = Default::default();
    let labels = meta.labels.as_ref().unwrap_or(&empty);
    match controller_of(meta) {
        Some(r) if r.uid != owner_uid => Claim::Ignore,
        Some(_) if selector.matches(labels) => Claim::Mine,
        Some(_) if owner_deleting => Claim::Ignore,
        Some(_) => Claim::Release,
        None if owner_deleting || meta.deletion_timestamp.is_some() => Claim::Ignore,
        None if selector.matches(labels) => Claim::Adopt,
        None => Claim::Ignore,
    }
}

fn patch_owners(meta: &ObjectMeta, refs: Vec<OwnerReference>) -> Patch<serde_json::Value> {
    // resourceVersion makes the patch conditional: a concurrent change of the owners
    // fails it (Conflict) instead of being overwritten.
    Patch::Merge(json!({"metadata": {
        "ownerReferences": refs,
        "uid": meta.uid,
        "resourceVersion": meta.resource_version,
    }}))
}

fn name_of(meta: &ObjectMeta) -> &str {
    meta.name.as_deref().unwrap_or("")
}

/// Whether the owner `r` (in `namespace`) still exists and is not being deleted, asked
/// of the API server: a cached owner may be a deletion behind, and adopting for an owner
/// on its way out (with `orphan`) would hand its dependents to the garbage collector
/// (upstream's `RecheckDeletionTimestamp`).
pub async fn owner_alive(
    client: &kube::Client,
    r: &OwnerReference,
    namespace: &str,
) -> Result<bool, kube::Error> {
    let (group, version) = match r.api_version.rsplit_once('/') {
        Some((g, v)) => (g, v),
        None => ("", r.api_version.as_str()),
    };
    let gvk = kube::api::GroupVersionKind::gvk(group, version, &r.kind);
    let ar = kube::discovery::ApiResource::from_gvk(&gvk);
    let api: Api<kube::api::DynamicObject> = Api::namespaced_with(client.clone(), namespace, &ar);
    Ok(api.get_metadata_opt(&r.name).await?.is_some_and(|m| {
        m.metadata.uid.as_deref() == Some(r.uid.as_str()) && m.metadata.deletion_timestamp.is_none()
    }))
}

/// Adds `owner` as the controller of the orphan whose metadata is `meta`.
pub async fn adopt<K>(
    api: &Api<K>,
    meta: &ObjectMeta,
    owner: OwnerReference,
) -> Result<K, kube::Error>
where
    K: Resource + Clone + DeserializeOwned + Debug,
{
    let mut refs = meta.owner_references.clone().unwrap_or_default();
    refs.push(owner);
    api.patch(
        name_of(meta),
        &PatchParams::default(),
        &patch_owners(meta, refs),
    )
    .await
}

/// Removes the owner `owner_uid` from the owners of the object whose metadata is `meta`.
pub async fn release<K>(api: &Api<K>, meta: &ObjectMeta, owner_uid: &str) -> Result<K, kube::Error>
where
    K: Resource + Clone + DeserializeOwned + Debug,
{
    let refs: Vec<OwnerReference> = meta
        .owner_references
        .clone()
        .unwrap_or_default()
        .into_iter()
        .filter(|r| r.uid != owner_uid)
        .collect();
    api.patch(
        name_of(meta),
        &PatchParams::default(),
        &patch_owners(meta, refs),
    )
    .await
}

/// The active pods in `owner`'s namespace that it controls after claiming: matching
/// orphans adopted, controlled pods it no longer selects released. A pod deleted
/// meanwhile (404) is skipped; other API errors end the claim.
pub async fn claim_pods(
    client: &kube::Client,
    pods: &kube::runtime::reflector::Store<CachedPod>,
    owner: &ObjectMeta,
    owner_ref: OwnerReference,
    selector: &Selector,
) -> Result<Vec<std::sync::Arc<CachedPod>>, kube::Error> {
    let ns = owner.namespace.clone().unwrap_or_default();
    let uid = owner.uid.clone().unwrap_or_default();
    let deleting = owner.deletion_timestamp.is_some();
    let api: Api<Pod> = Api::namespaced(client.clone(), &ns);
    let mut mine = Vec::new();
    let mut may_adopt: Option<bool> = None;
    for pod in pods.state() {
        if pod.namespace().as_deref() != Some(ns.as_str()) || !pod_state::is_active(pod.as_ref()) {
            continue;
        }
        let result = match classify(&uid, deleting, selector, &pod.metadata) {
            Claim::Mine => {
                mine.push(pod);
                continue;
            }
            Claim::Adopt => {
                if may_adopt.is_none() {
                    may_adopt = Some(owner_alive(client, &owner_ref, &ns).await?);
                }
                if may_adopt != Some(true) {
                    continue;
                }
                adopt(&api, &pod.metadata, owner_ref.clone())
                    .await
                    .map(|adopted| mine.push(std::sync::Arc::new(CachedPod::from(adopted))))
            }
            Claim::Release => release(&api, &pod.metadata, &uid).await.map(|_| ()),
            Claim::Ignore => continue,
        };
        match result {
            Ok(()) => {}
            Err(kube::Error::Api(s)) if s.code == 404 => {}
            Err(e) => return Err(e),
        }
    }
    Ok(mine)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn meta(labels: &[(&str, &str)], controller: Option<&str>) -> ObjectMeta {
        ObjectMeta {
            labels: Some(
                labels
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
            ),
            owner_references: controller.map(|uid| {
                vec![OwnerReference {
                    uid: uid.into(),
                    controller: Some(true),
                    ..Default::default()
                }]
            }),
            ..Default::default()
        }
    }

    #[test]
    fn claim_decisions() {
        let sel = Selector::from_map(&BTreeMap::from([("app".to_string(), "web".to_string())]));
        let web = [("app", "web")];
        let db = [("app", "db")];
        assert_eq!(
            classify("me", false, &sel, &meta(&web, Some("me"))),
            Claim::Mine
        );
        assert_eq!(
            classify("me", false, &sel, &meta(&db, Some("me"))),
            Claim::Release
        );
        assert_eq!(
            classify("me", true, &sel, &meta(&db, Some("me"))),
            Claim::Ignore
        );
        assert_eq!(
            classify("me", false, &sel, &meta(&web, Some("other"))),
            Claim::Ignore
        );
        assert_eq!(classify("me", false, &sel, &meta(&web, None)), Claim::Adopt);
        assert_eq!(classify("me", true, &sel, &meta(&web, None)), Claim::Ignore);
        assert_eq!(classify("me", false, &sel, &meta(&db, None)), Claim::Ignore);
    }
}
