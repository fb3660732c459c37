//! What the collector's workers do for each piece of [`Work`], through the API: owners are
//! checked live before a dependent is deleted (the graph may lag), and every write is
//! conditional on the object it read, so a concurrent change is retried, never lost.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams, Preconditions};
use tracing::{debug, info};

use super::graph::{Node, Owner, Work, FOREGROUND, ORPHAN};
use super::{Ctx, Watched};

const RETRY: Duration = Duration::from_secs(1);

pub async fn process(ctx: &Arc<Ctx>, work: Work) {
    let result = match &work {
        Work::Dependent(uid) => dependent(ctx, uid).await,
        Work::Orphan(uid) => orphan(ctx, uid).await,
        Work::Foreground(uid) => foreground(ctx, uid).await,
    };
    match result {
        Ok(true) => {}
        Ok(false) => ctx.retry_later(work, RETRY),
        Err(e) => {
            debug!(?work, error = %e, "garbage collector step failed, retrying");
            ctx.retry_later(work, RETRY);
        }
    }
}

fn api_for(ctx: &Ctx, w: &Watched, namespace: Option<&str>) -> Api<DynamicObject> {
    match (w.namespaced, namespace) {
        (true, Some(ns)) => Api::namespaced_with(ctx.client.clone(), ns, &w.api),
        _ => Api::all_with(ctx.client.clone(), &w.api),
    }
}

fn node_api(ctx: &Ctx, node: &Node) -> Api<DynamicObject> {
    api_for(
        ctx,
        &ctx.resources[node.resource],
        node.namespace.as_deref(),
    )
}

/// Whether `owner` (of an object in `namespace`) exists, asked of the API server.
/// `None` when its kind is not served (it may be a CRD not discovered yet).
async fn owner_exists(
    ctx: &Ctx,
    owner: &Owner,
    namespace: Option<&str>,
) -> Result<Option<bool>, kube::Error> {
    if ctx.graph.lock().contains(&owner.uid) {
        return Ok(Some(true));
    }
    let Some(w) = ctx.resource_of(&owner.api_version, &owner.kind) else {
        return Ok(None);
    };
    let found = api_for(ctx, w, namespace)
        .get_metadata_opt(&owner.name)
        .await?;
    Ok(Some(found.is_some_and(|m| {
        m.metadata.uid.as_deref() == Some(owner.uid.as_str())
    })))
}

fn delete_params(uid: &str, policy: &str) -> DeleteParams {
    DeleteParams {
        preconditions: Some(Preconditions {
            uid: Some(uid.to_string()),
            resource_version: None,
        }),
        propagation_policy: Some(match policy {
            "Foreground" => kube::api::PropagationPolicy::Foreground,
            _ => kube::api::PropagationPolicy::Background,
        }),
        ..Default::default()
    }
}

async fn delete_node(ctx: &Ctx, uid: &str, node: &Node, policy: &str) -> Result<(), kube::Error> {
    match node_api(ctx, node)
        .delete(&node.name, &delete_params(uid, policy))
        .await
    {
        Ok(_) => {
            info!(object = %node.name, namespace = ?node.namespace, policy, "garbage collector deleted dependent");
            Ok(())
        }
        Err(kube::Error::Api(s)) if s.code == 404 || s.code == 409 => Ok(()),
        Err(e) => Err(e),
    }
}

/// A dependent some of whose owners may be gone. `Ok(false)`: look again later.
async fn dependent(ctx: &Ctx, uid: &str) -> Result<bool, kube::Error> {
    let Some(node) = ctx.graph.lock().get(uid) else {
        return Ok(true);
    };
    if node.deleting || node.owners.is_empty() {
        return Ok(true);
    }
    // The graph may lag (watches of different resources are not ordered): decide on the
    // dependent's live owner references, as upstream's attemptToDeleteItem does.
    let Some(live) = node_api(ctx, &node).get_metadata_opt(&node.name).await? else {
        return Ok(true);
    };
    if live.metadata.uid.as_deref() != Some(uid) || live.metadata.deletion_timestamp.is_some() {
        return Ok(true);
    }
    let node = Node::from_meta(node.resource, &live.metadata);
    if node.owners.is_empty() {
        return Ok(true);
    }
    let mut absent = Vec::new();
    let mut waiting_on = 0;
    for o in &node.owners {
        match owner_exists(ctx, o, node.namespace.as_deref()).await? {
            None => return Ok(false),
            Some(false) => absent.push(o.uid.clone()),
            Some(true) => {
                if o.block && ctx.graph.lock().waits_for_dependents(&o.uid) {
                    waiting_on += 1;
                }
            }
        }
    }
    let present = node.owners.len() - absent.len();
    if present == 0 {
        delete_node(ctx, uid, &node, "Background").await?;
    } else if !absent.is_empty() {
        remove_owner_refs(ctx, uid, &node, &absent).await?;
    } else if waiting_on == present {
        // Every owner is being deleted in the foreground and waits for this object.
        let policy = if ctx.graph.lock().dependents(uid).is_empty() {
            "Background"
        } else {
            "Foreground"
        };
        delete_node(ctx, uid, &node, policy).await?;
    }
    Ok(true)
}

/// Re-reads the object `uid` and merge-patches the metadata field `field` with what
/// `next` makes of the live object's metadata, conditionally on the version read (a
/// concurrent change fails it and the work is retried). Gone or replaced: nothing to do.
async fn patch_live_metadata(
    ctx: &Ctx,
    uid: &str,
    node: &Node,
    field: &str,
    next: impl FnOnce(&ObjectMeta) -> serde_json::Value,
) -> Result<(), kube::Error> {
    let api = node_api(ctx, node);
    let Some(live) = api.get_metadata_opt(&node.name).await? else {
        return Ok(());
    };
    if live.metadata.uid.as_deref() != Some(uid) {
        return Ok(());
    }
    let patch = serde_json::json!({"metadata": {
        field: next(&live.metadata),
        "resourceVersion": live.metadata.resource_version,
    }});
    match api
        .patch_metadata(&node.name, &PatchParams::default(), &Patch::Merge(patch))
        .await
    {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
        Err(e) => Err(e),
    }
}

/// Drops the references to `gone` owners from a live object.
async fn remove_owner_refs(
    ctx: &Ctx,
    uid: &str,
    node: &Node,
    gone: &[String],
) -> Result<(), kube::Error> {
    patch_live_metadata(ctx, uid, node, "ownerReferences", |m| {
        let refs: Vec<_> = m
            .owner_references
            .iter()
            .flatten()
            .filter(|r| !gone.contains(&r.uid))
            .collect();
        serde_json::json!(refs)
    })
    .await
}

/// Removes finalizer `f` from the owner `uid` once its dependents are dealt with.
async fn remove_finalizer(ctx: &Ctx, uid: &str, node: &Node, f: &str) -> Result<(), kube::Error> {
    patch_live_metadata(ctx, uid, node, "finalizers", |m| {
        let kept: Vec<&String> = m.finalizers.iter().flatten().filter(|x| *x != f).collect();
        serde_json::json!(kept)
    })
    .await
}

/// Orphan: every dependent loses its reference to the owner, then the owner goes.
async fn orphan(ctx: &Ctx, uid: &str) -> Result<bool, kube::Error> {
    let Some(node) = ctx.graph.lock().get(uid) else {
        return Ok(true);
    };
    if !(node.deleting && node.orphan) {
        return Ok(true);
    }
    let dependents: Vec<(String, Node)> = {
        let g = ctx.graph.lock();
        g.dependents(uid)
            .into_iter()
            .filter_map(|d| g.get(&d).map(|n| (d, n)))
            .collect()
    };
    for (dep_uid, dep) in &dependents {
        remove_owner_refs(ctx, dep_uid, dep, &[uid.to_string()]).await?;
    }
    remove_finalizer(ctx, uid, &node, ORPHAN).await?;
    Ok(true)
}

/// Foreground: dependents are deleted first; the owner's finalizer goes once none is left.
async fn foreground(ctx: &Ctx, uid: &str) -> Result<bool, kube::Error> {
    let Some(node) = ctx.graph.lock().get(uid) else {
        return Ok(true);
    };
    if !(node.deleting && node.foreground) {
        return Ok(true);
    }
    let dependents: Vec<(String, Node, bool)> = {
        let g = ctx.graph.lock();
        g.dependents(uid)
            .into_iter()
            .filter_map(|d| {
                let n = g.get(&d)?;
                let has_own = !g.dependents(&d).is_empty();
                Some((d, n, has_own))
            })
            .collect()
    };
    if dependents.is_empty() {
        remove_finalizer(ctx, uid, &node, FOREGROUND).await?;
        return Ok(true);
    }
    for (dep_uid, dep, has_own) in dependents.iter().filter(|(_, n, _)| !n.deleting) {
        let policy = if *has_own { "Foreground" } else { "Background" };
        delete_node(ctx, dep_uid, dep, policy).await?;
    }
    // Woken again when the last dependent leaves the graph.
    Ok(true)
}
