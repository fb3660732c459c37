//! DELETE: preconditions, graceful pod deletion, finalizers, namespace termination, and
//! the ownerReference propagation policies as kube-apiserver records them: Orphan and
//! Foreground put the `orphan` / `foregroundDeletion` finalizer on the owner, which the
//! garbage collector (in cairn-controllers) acts on and removes; Background deletes the
//! owner at once and the collector removes dependents whose owners are all gone.

use cairn_api::kinds::Admission;
use std::sync::Arc;

use bytes::Bytes;
use cairn_api::registry::ResourceInfo;
use cairn_api::status::Status;
use cairn_store::Revision;
use serde_json::{json, Value};
use tracing::info;

use super::{store_status, ApiState, DeleteOptions, Written};
use crate::objects::*;

impl ApiState {
    /// DELETE of one object. Returns the object as it is after the call and whether it is
    /// gone (false: it is now terminating, waiting for finalizers or its node).
    pub async fn delete(
        self: &Arc<Self>,
        r: &'static ResourceInfo,
        ns: Option<&str>,
        name: &str,
        opts: &DeleteOptions,
    ) -> Result<(Written, bool), Status> {
        let key = r.key(ns, name);
        let hook_warnings = self.admit_delete(r, ns, name, opts.dry_run).await?;
        let mut attempt = 0;
        loop {
            attempt += 1;
            match self.delete_once(r, ns, name, &key, opts).await {
                Err(s) if s.code == 409 && s.reason == "Conflict" && attempt < 10 => {
                    let rev = self.cache.backend().current_revision().await.unwrap_or(0);
                    self.settle(rev).await?;
                }
                other => {
                    return other.map(|(mut written, gone)| {
                        written.warnings.extend(hook_warnings);
                        if opts.propagation_policy.is_none() && default_propagation(r) == "Orphan" {
                            written.warnings.push(JOB_ORPHAN_WARNING.to_string());
                        }
                        (written, gone)
                    })
                }
            }
        }
    }

    async fn delete_once(
        self: &Arc<Self>,
        r: &'static ResourceInfo,
        ns: Option<&str>,
        name: &str,
        key: &str,
        opts: &DeleteOptions,
    ) -> Result<(Written, bool), Status> {
        let current = self.get(r, ns, name)?;
        let mut obj: Value =
            serde_json::from_slice(&current.bytes).map_err(|e| Status::internal(e.to_string()))?;
        check_preconditions(r, name, &obj, current.mod_revision, opts)?;
        let unchanged = Written {
            name: name.to_string(),
            bytes: current.bytes.clone(),
            revision: current.mod_revision,
            warnings: Vec::new(),
        };
        if opts.dry_run {
            return Ok((unchanged, false));
        }
        let propagation = opts
            .propagation_policy
            .as_deref()
            .unwrap_or_else(|| default_propagation(r));
        // Namespaces terminate first: their contents are removed by the namespace loop.
        if r.strategy.admits(Admission::NamespaceLifecycle) {
            if has_deletion_timestamp(&obj) {
                return Ok((unchanged, false));
            }
            set_meta(&mut obj, "deletionTimestamp", json!(now_rfc3339()));
            set_meta(&mut obj, "deletionGracePeriodSeconds", json!(0));
            obj["status"] = json!({"phase": "Terminating"});
            let written = self
                .store_unadmitted(r, key, obj, current.mod_revision)
                .await?;
            info!(namespace = name, "namespace terminating");
            return Ok((written, false));
        }
        let gc_finalizer = gc_finalizer(propagation)?;
        if let Some(f) = gc_finalizer.filter(|f| !finalizers(&obj).iter().any(|x| x == f)) {
            add_finalizer(&mut obj, f);
            if has_deletion_timestamp(&obj) {
                // Already terminating: the new policy still takes effect.
                let written = self
                    .store_unadmitted(r, key, obj, current.mod_revision)
                    .await?;
                return Ok((written, false));
            }
        }
        let grace = if r.strategy.admits(Admission::GracefulDeletion) {
            pod_grace(&obj, opts)
        } else {
            0
        };
        let must_wait = !finalizers(&obj).is_empty() || grace > 0;
        if must_wait {
            let existing_grace = obj
                .pointer("/metadata/deletionGracePeriodSeconds")
                .and_then(Value::as_i64);
            if has_deletion_timestamp(&obj) && existing_grace.is_some_and(|g| g <= grace) {
                return Ok((unchanged, false));
            }
            let deadline = chrono::Utc::now() + chrono::Duration::seconds(grace);
            set_meta(&mut obj, "deletionTimestamp", json!(rfc3339_at(deadline)));
            set_meta(&mut obj, "deletionGracePeriodSeconds", json!(grace));
            let written = self
                .store_unadmitted(r, key, obj, current.mod_revision)
                .await?;
            return Ok((written, false));
        }
        self.remove_now(r, key, &obj, current.mod_revision).await?;
        Ok((unchanged, true))
    }

    /// Writes `obj` over `key` at `expected` revision, bypassing admission: for changes the
    /// server itself makes (deletion marks), which update validation would refuse.
    async fn store_unadmitted(
        &self,
        r: &ResourceInfo,
        key: &str,
        mut obj: Value,
        expected: Revision,
    ) -> Result<Written, Status> {
        remove_meta(&mut obj, "resourceVersion");
        let bytes =
            Bytes::from(serde_json::to_vec(&obj).map_err(|e| Status::internal(e.to_string()))?);
        let rev = self
            .cache
            .backend()
            .update(key, bytes, expected)
            .await
            .map_err(|e| store_status(e, r, name_of(&obj)))?;
        self.written(key, rev, Vec::new()).await
    }
}

/// Graceful pod deletion: a bound, running pod gets its grace period and the node agent
/// finishes the deletion; an unbound or finished one goes at once.
fn pod_grace(pod: &Value, opts: &DeleteOptions) -> i64 {
    let bound = pod
        .pointer("/spec/nodeName")
        .and_then(Value::as_str)
        .is_some_and(|n| !n.is_empty());
    let phase = pod
        .pointer("/status/phase")
        .and_then(Value::as_str)
        .unwrap_or("");
    if !bound || matches!(phase, "Succeeded" | "Failed") {
        return 0;
    }
    let spec_grace = pod
        .pointer("/spec/terminationGracePeriodSeconds")
        .and_then(Value::as_i64)
        .unwrap_or(30);
    opts.grace_period_seconds.unwrap_or(spec_grace).max(0)
}

/// `preconditions.uid` and `preconditions.resourceVersion` of a DeleteOptions.
fn check_preconditions(
    r: &ResourceInfo,
    name: &str,
    obj: &Value,
    revision: Revision,
    opts: &DeleteOptions,
) -> Result<(), Status> {
    if let Some(uid) = &opts.precondition_uid {
        let actual = meta_str(obj, "uid").unwrap_or("");
        if actual != uid {
            return Err(Status::conflict(
                &r.group_resource(),
                name,
                &format!(
                    "Precondition failed: UID in precondition: {uid}, UID in object meta: {actual}"
                ),
            ));
        }
    }
    if let Some(rv) = &opts.precondition_resource_version {
        if *rv != revision.to_string() {
            return Err(Status::conflict(
                &r.group_resource(),
                name,
                &format!(
                    "Precondition failed: ResourceVersion in precondition: {rv}, ResourceVersion in object meta: {}",
                    revision
                ),
            ));
        }
    }
    Ok(())
}

/// The finalizer a propagation policy leaves on the object for the garbage collector.
fn gc_finalizer(propagation: &str) -> Result<Option<&'static str>, Status> {
    match propagation {
        "Orphan" => Ok(Some(ORPHAN_FINALIZER)),
        "Foreground" => Ok(Some(FOREGROUND_FINALIZER)),
        "Background" => Ok(None),
        other => Err(Status::bad_request(format!(
            "propagationPolicy {other:?} is not one of Orphan, Foreground, Background"
        ))),
    }
}

/// The finalizers kube-apiserver sets for the propagation policies.
pub const ORPHAN_FINALIZER: &str = "orphan";
pub const FOREGROUND_FINALIZER: &str = "foregroundDeletion";

/// The policy of a DELETE that names none: Background, except for batch/v1 Jobs, whose
/// pods are kept (upstream's compatibility default, with a warning).
pub fn default_propagation(r: &ResourceInfo) -> &'static str {
    if r.strategy.admits(Admission::OrphanByDefault) {
        "Orphan"
    } else {
        "Background"
    }
}

/// The warning kube-apiserver sends when a Job is deleted without a policy.
pub const JOB_ORPHAN_WARNING: &str = "child pods are preserved by default when jobs are deleted; set propagationPolicy=Background to remove them or set propagationPolicy=Orphan to suppress this warning";

fn add_finalizer(obj: &mut Value, f: &str) {
    let meta = metadata_mut(obj);
    let list = meta.entry("finalizers").or_insert_with(|| json!([]));
    if let Some(a) = list.as_array_mut() {
        a.push(json!(f));
    } else {
        *list = json!([f]);
    }
}
