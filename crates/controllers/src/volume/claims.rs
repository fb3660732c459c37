//! One claim's sync: bind it, hand it to a provisioner, or keep its status right.

use std::collections::BTreeMap;
use std::sync::Arc;

use cairn_events::EventType;
use k8s_openapi::api::core::v1::{ObjectReference, PersistentVolume, PersistentVolumeClaim};
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::runtime::controller::Action;
use kube::runtime::reflector::ObjectRef;
use kube::ResourceExt;
use serde_json::json;
use tracing::info;

use super::matching::best_volume;
use super::*;
use crate::reconcile_loop::{key_of, note};

fn err(obj: String, action: &'static str) -> impl FnOnce(kube::Error) -> Error {
    move |source| Error {
        object: obj,
        action,
        source,
    }
}

#[tracing::instrument(skip_all, fields(claim = %key_of(c.as_ref())))]
pub(super) async fn reconcile(
    c: Arc<PersistentVolumeClaim>,
    ctx: Arc<Ctx>,
) -> Result<Action, Error> {
    if c.metadata.deletion_timestamp.is_some() {
        return Ok(Action::await_change());
    }
    match c
        .spec
        .as_ref()
        .and_then(|s| s.volume_name.clone())
        .filter(|n| !n.is_empty())
    {
        Some(volume) => sync_named(&c, &volume, &ctx).await?,
        None => sync_unbound(&c, &ctx).await?,
    }
    Ok(Action::await_change())
}

async fn sync_unbound(c: &PersistentVolumeClaim, ctx: &Ctx) -> Result<(), Error> {
    let class_name = c
        .spec
        .as_ref()
        .and_then(|s| s.storage_class_name.clone())
        .unwrap_or_default();
    let class = (!class_name.is_empty())
        .then(|| ctx.classes.get(&ObjectRef::new(&class_name)))
        .flatten();
    let waits = class
        .as_ref()
        .and_then(|k| k.volume_binding_mode.as_deref())
        == Some("WaitForFirstConsumer");
    let selected = has_annotation(&c.metadata, SELECTED_NODE);
    if waits && selected.is_none() {
        let msg = "waiting for first consumer to be created before binding";
        note(
            &ctx.recorder,
            c,
            EventType::Normal,
            "WaitForFirstConsumer",
            msg,
        );
        return Ok(());
    }
    let node = selected
        .as_deref()
        .and_then(|n| ctx.nodes.get(&ObjectRef::new(n)));
    let empty = BTreeMap::new();
    let placed = node
        .as_ref()
        .map(|n| (n.name_any(), n.metadata.labels.clone().unwrap_or_default()));
    let on = placed
        .as_ref()
        .map(|(n, l)| (n.as_str(), l))
        .or(selected.as_deref().map(|n| (n, &empty)));
    let volumes = ctx.volumes.state();
    if let Some(v) = best_volume(c, &volumes, on) {
        return bind(ctx, c, v).await;
    }
    match class.as_ref().map(|k| k.provisioner.as_str()) {
        Some(p) if p != NO_PROVISIONER => hand_to_provisioner(ctx, c, p).await,
        Some(_) => {
            let msg = "waiting for a volume to be created or bound by the system administrator";
            note(&ctx.recorder, c, EventType::Normal, "FailedBinding", msg);
            Ok(())
        }
        None if class_name.is_empty() => {
            let msg = "no persistent volumes available for this claim and no storage class is set";
            note(&ctx.recorder, c, EventType::Normal, "FailedBinding", msg);
            Ok(())
        }
        None => {
            let msg = format!("storageclass.storage.k8s.io \"{class_name}\" not found");
            note(
                &ctx.recorder,
                c,
                EventType::Warning,
                "ProvisioningFailed",
                &msg,
            );
            Ok(())
        }
    }
}

async fn hand_to_provisioner(
    ctx: &Ctx,
    c: &PersistentVolumeClaim,
    provisioner: &str,
) -> Result<(), Error> {
    if has_annotation(&c.metadata, STORAGE_PROVISIONER).as_deref() == Some(provisioner) {
        return Ok(());
    }
    let patch = json!({"metadata": {"annotations": {
        STORAGE_PROVISIONER: provisioner, BETA_STORAGE_PROVISIONER: provisioner}}});
    let api: Api<PersistentVolumeClaim> =
        Api::namespaced(ctx.client.clone(), &c.namespace().unwrap_or_default());
    api.patch(
        &c.name_any(),
        &PatchParams::default(),
        &Patch::Merge(&patch),
    )
    .await
    .map_err(err(key_of(c), "annotating for its provisioner"))?;
    let msg = format!("Waiting for a volume to be created either by the external provisioner '{provisioner}' or manually by the system administrator. If volume creation is delayed, please verify that the provisioner is running and correctly registered.");
    note(
        &ctx.recorder,
        c,
        EventType::Normal,
        "ExternalProvisioning",
        &msg,
    );
    Ok(())
}

/// Binds both sides: the volume's `claimRef` (optimistically, so two claims cannot take
/// one volume), its phase, the claim's `volumeName`, then the claim's status.
pub(super) async fn bind(
    ctx: &Ctx,
    c: &PersistentVolumeClaim,
    v: &PersistentVolume,
) -> Result<(), Error> {
    let ns = c.namespace().unwrap_or_default();
    let mut pv = v.clone();
    let chosen = pv.spec.as_ref().is_some_and(|s| s.claim_ref.is_none());
    let spec = pv.spec.get_or_insert_with(Default::default);
    spec.claim_ref = Some(ObjectReference {
        api_version: Some("v1".into()),
        kind: Some("PersistentVolumeClaim".into()),
        namespace: Some(ns.clone()),
        name: c.metadata.name.clone(),
        uid: c.metadata.uid.clone(),
        resource_version: c.metadata.resource_version.clone(),
        field_path: None,
    });
    if chosen {
        pv.annotations_mut()
            .insert(BOUND_BY_CONTROLLER.into(), "yes".into());
    }
    pv.metadata.managed_fields = None;
    let volumes: Api<PersistentVolume> = Api::all(ctx.client.clone());
    let pv = volumes
        .replace(&v.name_any(), &PostParams::default(), &pv)
        .await
        .map_err(err(v.name_any(), "binding the volume to its claim"))?;
    let phase = json!({"status": {"phase": "Bound"}});
    volumes
        .patch_status(
            &pv.name_any(),
            &PatchParams::default(),
            &Patch::Merge(&phase),
        )
        .await
        .map_err(err(pv.name_any(), "marking the volume Bound"))?;
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(ctx.client.clone(), &ns);
    let patch = json!({"metadata": {"annotations": {BIND_COMPLETED: "yes", BOUND_BY_CONTROLLER: "yes"}},
        "spec": {"volumeName": pv.name_any()}});
    claims
        .patch(
            &c.name_any(),
            &PatchParams::default(),
            &Patch::Merge(&patch),
        )
        .await
        .map_err(err(key_of(c), "naming the bound volume"))?;
    info!(volume = %pv.name_any(), "bound");
    write_bound_status(ctx, c, &pv).await
}

async fn write_bound_status(
    ctx: &Ctx,
    c: &PersistentVolumeClaim,
    v: &PersistentVolume,
) -> Result<(), Error> {
    let vs = v.spec.clone().unwrap_or_default();
    let status = c.status.clone().unwrap_or_default();
    if status.phase.as_deref() == Some("Bound")
        && status.capacity == vs.capacity
        && status.access_modes == vs.access_modes
    {
        return Ok(());
    }
    let patch = json!({"status": {"phase": "Bound", "accessModes": vs.access_modes, "capacity": vs.capacity}});
    let api: Api<PersistentVolumeClaim> =
        Api::namespaced(ctx.client.clone(), &c.namespace().unwrap_or_default());
    api.patch_status(
        &c.name_any(),
        &PatchParams::default(),
        &Patch::Merge(&patch),
    )
    .await
    .map_err(err(key_of(c), "writing the Bound status"))?;
    Ok(())
}

/// A claim that names its volume: finish the binding, follow the volume's size, or
/// mark the claim Lost when its volume is gone or taken.
async fn sync_named(c: &PersistentVolumeClaim, volume: &str, ctx: &Ctx) -> Result<(), Error> {
    let Some(v) = ctx.volumes.get(&ObjectRef::new(volume)) else {
        if c.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Bound") {
            return mark_lost(ctx, c).await;
        }
        return Ok(());
    };
    let claim_ref = v.spec.as_ref().and_then(|s| s.claim_ref.clone());
    match claim_ref {
        None => bind(ctx, c, &v).await,
        Some(r) if r.name == c.metadata.name && r.namespace == c.metadata.namespace => {
            if r.uid.as_deref().unwrap_or_default().is_empty() {
                return bind(ctx, c, &v).await;
            }
            if r.uid != c.metadata.uid {
                return mark_lost(ctx, c).await;
            }
            write_bound_status(ctx, c, &v).await
        }
        Some(_) => mark_lost(ctx, c).await,
    }
}

async fn mark_lost(ctx: &Ctx, c: &PersistentVolumeClaim) -> Result<(), Error> {
    if c.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Lost") {
        return Ok(());
    }
    let msg = "Bound claim has lost its PersistentVolume. Data on the volume is lost!";
    note(&ctx.recorder, c, EventType::Warning, "ClaimLost", msg);
    let api: Api<PersistentVolumeClaim> =
        Api::namespaced(ctx.client.clone(), &c.namespace().unwrap_or_default());
    let patch = json!({"status": {"phase": "Lost"}});
    api.patch_status(
        &c.name_any(),
        &PatchParams::default(),
        &Patch::Merge(&patch),
    )
    .await
    .map_err(err(key_of(c), "marking the claim Lost"))?;
    Ok(())
}
