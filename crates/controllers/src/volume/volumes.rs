//! One volume's sync: its phase from its claim, and what its reclaim policy does once
//! the claim is gone.

use std::sync::Arc;

use cairn_events::EventType;
use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::controller::Action;
use kube::runtime::reflector::ObjectRef;
use kube::ResourceExt;
use serde_json::json;

use super::*;
use crate::reconcile_loop::note;

/// The phase the volume should have, and a message for `Failed`.
async fn desired_phase(
    v: &PersistentVolume,
    ctx: &Ctx,
) -> Result<(&'static str, Option<String>), Error> {
    let Some(r) = v.spec.as_ref().and_then(|s| s.claim_ref.clone()) else {
        return Ok(("Available", None));
    };
    let (ns, name) = (
        r.namespace.clone().unwrap_or_default(),
        r.name.clone().unwrap_or_default(),
    );
    let uid = r.uid.clone().unwrap_or_default();
    let cached = ctx.claims.get(&ObjectRef::new(&name).within(&ns));
    let claim = match cached {
        Some(c) if uid.is_empty() || c.metadata.uid.as_deref() == Some(uid.as_str()) => {
            Some((*c).clone())
        }
        // The cache may trail a claim made a moment ago: ask before releasing.
        _ => {
            let api: Api<PersistentVolumeClaim> = Api::namespaced(ctx.client.clone(), &ns);
            api.get_opt(&name).await.map_err(|source| Error {
                object: v.name_any(),
                action: "reading its claim",
                source,
            })?
        }
    };
    let live = claim.filter(|c| uid.is_empty() || c.metadata.uid.as_deref() == Some(uid.as_str()));
    match live {
        Some(c)
            if c.spec.as_ref().and_then(|s| s.volume_name.as_deref())
                == v.metadata.name.as_deref() =>
        {
            Ok(("Bound", None))
        }
        Some(_) => Ok(("Available", None)),
        None if uid.is_empty() => Ok(("Available", None)),
        None => Ok(released(v)),
    }
}

/// A volume whose claim is gone: Retain keeps it Released; Delete leaves it Released for
/// its provisioner to delete, or Failed when no provisioner made it.
fn released(v: &PersistentVolume) -> (&'static str, Option<String>) {
    let policy = v
        .spec
        .as_ref()
        .and_then(|s| s.persistent_volume_reclaim_policy.as_deref());
    let provisioned = has_annotation(&v.metadata, PROVISIONED_BY).is_some();
    if policy == Some("Delete") && !provisioned {
        let msg = format!(
            "error getting deleter volume plugin for volume \"{}\": no deletable volume plugin matched",
            v.name_any()
        );
        return ("Failed", Some(msg));
    }
    ("Released", None)
}

#[tracing::instrument(skip_all, fields(volume = %v.name_any()))]
pub(super) async fn reconcile(v: Arc<PersistentVolume>, ctx: Arc<Ctx>) -> Result<Action, Error> {
    if v.metadata.deletion_timestamp.is_some() {
        return Ok(Action::await_change());
    }
    let (phase, message) = desired_phase(&v, &ctx).await?;
    let current = v.status.as_ref().and_then(|s| s.phase.as_deref());
    if current == Some(phase) {
        return Ok(Action::await_change());
    }
    if let Some(msg) = &message {
        note(
            &ctx.recorder,
            v.as_ref(),
            EventType::Warning,
            "VolumeFailedDelete",
            msg,
        );
    }
    let patch = json!({"status": {"phase": phase, "message": message}});
    let api: Api<PersistentVolume> = Api::all(ctx.client.clone());
    api.patch_status(
        &v.name_any(),
        &PatchParams::default(),
        &Patch::Merge(&patch),
    )
    .await
    .map_err(|source| Error {
        object: v.name_any(),
        action: "writing its phase",
        source,
    })?;
    Ok(Action::await_change())
}
