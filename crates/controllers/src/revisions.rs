//! ControllerRevisions, as StatefulSets and DaemonSets keep their template history
//! (upstream `pkg/controller/history`): one revision per distinct template, named
//! `<owner>-<hash>`, whose `data` is the strategic merge patch that restores that template
//! (`kubectl rollout undo` applies it); the newest revision number is the live template's.

use std::sync::Arc;

use k8s_openapi::api::apps::v1::ControllerRevision;
use k8s_openapi::api::core::v1::PodTemplateSpec;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use k8s_openapi::apimachinery::pkg::runtime::RawExtension;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::runtime::reflector::Store;

use crate::deployment::util::compute_hash;
use crate::owner;

/// The label pods carry with the name of their revision.
pub const REVISION_LABEL: &str = "controller-revision-hash";

/// `data` of a revision of `template`: a patch that replaces the owner's template.
pub fn patch_data(template: &PodTemplateSpec) -> serde_json::Value {
    let mut t = serde_json::to_value(template).unwrap_or_default();
    t["$patch"] = serde_json::json!("replace");
    serde_json::json!({ "spec": { "template": t } })
}

/// The template a revision restores.
pub fn template_of(rev: &ControllerRevision) -> Option<PodTemplateSpec> {
    let t = rev.data.as_ref()?.0.get("spec")?.get("template")?.clone();
    let mut t = t;
    if let Some(o) = t.as_object_mut() {
        o.remove("$patch");
    }
    serde_json::from_value(t).ok()
}

/// The revisions `owner_uid` controls, oldest revision first.
pub fn owned(
    store: &Store<ControllerRevision>,
    ns: &str,
    owner_uid: &str,
) -> Vec<Arc<ControllerRevision>> {
    let mut revs: Vec<Arc<ControllerRevision>> = store
        .state()
        .into_iter()
        .filter(|r| r.metadata.namespace.as_deref() == Some(ns))
        .filter(|r| owner::controller_of(&r.metadata).is_some_and(|o| o.uid == owner_uid))
        .collect();
    revs.sort_by_key(|r| r.revision);
    revs
}

/// What [`ensure`] needs of the owner.
pub struct Owner<'a> {
    pub meta: &'a ObjectMeta,
    pub owner_ref: OwnerReference,
    pub template: &'a PodTemplateSpec,
    pub collision_count: Option<i32>,
}

/// The revision of the owner's live template: found (and made the newest when an older
/// template came back, as on rollback) or created. Returns it with all owned revisions.
pub async fn ensure(
    client: &kube::Client,
    store: &Store<ControllerRevision>,
    owner: &Owner<'_>,
) -> Result<(ControllerRevision, Vec<Arc<ControllerRevision>>), kube::Error> {
    let ns = owner.meta.namespace.clone().unwrap_or_default();
    let revs = owned(store, &ns, owner.meta.uid.as_deref().unwrap_or(""));
    let data = patch_data(owner.template);
    let newest = revs.last().map_or(0, |r| r.revision);
    let api: Api<ControllerRevision> = Api::namespaced(client.clone(), &ns);
    if let Some(same) = revs
        .iter()
        .find(|r| r.data.as_ref().map(|d| &d.0) == Some(&data))
    {
        if same.revision == newest {
            return Ok(((**same).clone(), revs));
        }
        let patch = Patch::Merge(serde_json::json!({ "revision": newest + 1 }));
        let name = same.metadata.name.clone().unwrap_or_default();
        let bumped = api.patch(&name, &PatchParams::default(), &patch).await?;
        return Ok((bumped, revs));
    }
    let hash = compute_hash(owner.template, owner.collision_count);
    let rev = ControllerRevision {
        metadata: ObjectMeta {
            name: Some(format!(
                "{}-{hash}",
                owner.meta.name.as_deref().unwrap_or("")
            )),
            namespace: Some(ns.clone()),
            labels: owner
                .template
                .metadata
                .as_ref()
                .and_then(|m| m.labels.clone()),
            owner_references: Some(vec![owner.owner_ref.clone()]),
            ..Default::default()
        },
        data: Some(RawExtension(data)),
        revision: newest + 1,
    };
    let created = match api.create(&PostParams::default(), &rev).await {
        Ok(r) => r,
        // Made by an earlier sync whose event the cache has not shown yet.
        Err(kube::Error::Api(s)) if s.code == 409 => {
            api.get(rev.metadata.name.as_deref().unwrap_or("")).await?
        }
        Err(e) => return Err(e),
    };
    Ok((created, revs))
}

/// Deletes the oldest revisions no pod uses beyond `limit` (best effort: retried next sync).
pub async fn truncate(
    client: &kube::Client,
    revs: &[Arc<ControllerRevision>],
    live: &[&str],
    limit: usize,
) {
    let unused: Vec<&Arc<ControllerRevision>> = revs
        .iter()
        .filter(|r| !live.contains(&r.metadata.name.as_deref().unwrap_or("")))
        .collect();
    let extra = unused.len().saturating_sub(limit);
    for r in unused.into_iter().take(extra) {
        let ns = r.metadata.namespace.clone().unwrap_or_default();
        let api: Api<ControllerRevision> = Api::namespaced(client.clone(), &ns);
        let name = r.metadata.name.clone().unwrap_or_default();
        if let Err(e) = api.delete(&name, &DeleteParams::default()).await {
            tracing::debug!(revision = name, error = %e, "revision not truncated");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn data_restores_the_template() {
        let t: PodTemplateSpec = serde_json::from_value(serde_json::json!({
            "metadata": {"labels": {"app": "web"}},
            "spec": {"containers": [{"name": "c", "image": "nginx:1"}]}
        }))
        .unwrap();
        let data = patch_data(&t);
        assert_eq!(data["spec"]["template"]["$patch"], "replace");
        let rev = ControllerRevision {
            data: Some(RawExtension(data)),
            ..Default::default()
        };
        assert_eq!(template_of(&rev), Some(t));
    }
}
