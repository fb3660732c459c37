//! DELETE: preconditions, graceful pod deletion, finalizers, namespace termination, and
//! the ownerReference propagation policies (Orphan and Foreground before the owner goes,
//! Background by a sweep after it).

use std::sync::Arc;

use bytes::Bytes;
use cairn_api::registry::{ResourceInfo, RESOURCES};
use cairn_api::status::Status;
use cairn_store::cache::CachedObject;
use cairn_store::Revision;
use serde_json::{json, Value};
use tracing::{info, warn};

use super::{store_status, ApiState, DeleteOptions, WriteOptions, Written};
use crate::decorate::{OWNER_UIDS_FIELD, UID_FIELD};
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
        let mut attempt = 0;
        loop {
            attempt += 1;
            match self.delete_once(r, ns, name, &key, opts).await {
                Err(s) if s.code == 409 && s.reason == "Conflict" && attempt < 10 => {
                    let rev = self.cache.backend().current_revision().await.unwrap_or(0);
                    self.settle(rev).await?;
                }
                other => return other,
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
        if let Some(uid) = &opts.precondition_uid {
            let actual = meta_str(&obj, "uid").unwrap_or("");
            if actual != uid {
                return Err(Status::conflict(
                    &r.group_resource(),
                    name,
                    &format!("Precondition failed: UID in precondition: {uid}, UID in object meta: {actual}"),
                ));
            }
        }
        if let Some(rv) = &opts.precondition_resource_version {
            if *rv != current.mod_revision.to_string() {
                return Err(Status::conflict(
                    &r.group_resource(),
                    name,
                    &format!(
                        "Precondition failed: ResourceVersion in precondition: {rv}, ResourceVersion in object meta: {}",
                        current.mod_revision
                    ),
                ));
            }
        }
        let unchanged = Written {
            bytes: current.bytes.clone(),
            revision: current.mod_revision,
            warnings: Vec::new(),
        };
        if opts.dry_run {
            return Ok((unchanged, false));
        }
        let uid = meta_str(&obj, "uid").unwrap_or("").to_string();
        let propagation = opts.propagation_policy.as_deref().unwrap_or("Background");
        // Namespaces terminate first: their contents are removed by the namespace loop.
        if r.kind == "Namespace" {
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
        match propagation {
            "Orphan" => self.orphan_dependents(&uid).await,
            "Foreground" => self.delete_dependents(&uid).await,
            "Background" => {}
            other => {
                return Err(Status::bad_request(format!(
                    "propagationPolicy {other:?} is not one of Orphan, Foreground, Background"
                )))
            }
        }
        // Graceful pod deletion: the node agent finishes it.
        let mut grace = 0;
        if r.kind == "Pod" {
            let bound = obj
                .pointer("/spec/nodeName")
                .and_then(Value::as_str)
                .is_some_and(|n| !n.is_empty());
            let phase = obj
                .pointer("/status/phase")
                .and_then(Value::as_str)
                .unwrap_or("");
            let spec_grace = obj
                .pointer("/spec/terminationGracePeriodSeconds")
                .and_then(Value::as_i64)
                .unwrap_or(30);
            grace = opts.grace_period_seconds.unwrap_or(spec_grace).max(0);
            if !bound || matches!(phase, "Succeeded" | "Failed") {
                grace = 0;
            }
        }
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
        if propagation == "Background" && !uid.is_empty() {
            self.spawn_collect_orphans(uid);
        }
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

    /// Every live object (of any resource) that names `owner_uid` among its owners.
    fn dependents_of(&self, owner_uid: &str) -> Vec<(&'static ResourceInfo, Arc<CachedObject>)> {
        let mut out = Vec::new();
        for r in RESOURCES {
            let (objects, _) = self.cache.list(&r.list_prefix(None));
            for o in objects {
                if o.fields
                    .get(OWNER_UIDS_FIELD)
                    .is_some_and(|uids| uids.split(',').any(|u| u == owner_uid))
                {
                    out.push((r, o));
                }
            }
        }
        out
    }

    fn uid_exists(&self, uid: &str) -> bool {
        RESOURCES.iter().any(|r| {
            let (objects, _) = self.cache.list(&r.list_prefix(None));
            objects
                .iter()
                .any(|o| o.fields.get(UID_FIELD).is_some_and(|u| u == uid))
        })
    }

    async fn orphan_dependents(&self, owner_uid: &str) {
        for (r, o) in self.dependents_of(owner_uid) {
            let ns = o.fields.get("metadata.namespace").cloned();
            let name = o.fields.get("metadata.name").cloned().unwrap_or_default();
            let result = self
                .guaranteed_update(
                    r,
                    ns.as_deref(),
                    &name,
                    None,
                    &WriteOptions::default(),
                    |cur| {
                        let mut next = cur.clone();
                        if let Some(refs) = next
                            .pointer_mut("/metadata/ownerReferences")
                            .and_then(Value::as_array_mut)
                        {
                            refs.retain(|o| {
                                o.get("uid").and_then(Value::as_str) != Some(owner_uid)
                            });
                        }
                        Ok(next)
                    },
                )
                .await;
            if let Err(e) = result {
                warn!(object = %o.key, error = %e, "orphaning dependent failed");
            }
        }
    }

    /// Foreground deletion, done before the owner goes: delete every dependent.
    async fn delete_dependents(self: &Arc<Self>, owner_uid: &str) {
        for (r, o) in self.dependents_of(owner_uid) {
            let ns = o.fields.get("metadata.namespace").cloned();
            let name = o.fields.get("metadata.name").cloned().unwrap_or_default();
            let opts = DeleteOptions {
                propagation_policy: Some("Background".into()),
                ..Default::default()
            };
            if let Err(e) = Box::pin(self.delete(r, ns.as_deref(), &name, &opts)).await {
                if e.code != 404 {
                    warn!(object = %o.key, error = %e, "deleting dependent failed");
                }
            }
        }
    }

    /// Background garbage collection after an owner is gone: delete dependents none of
    /// whose owners exist any more.
    fn spawn_collect_orphans(self: &Arc<Self>, owner_uid: String) {
        let state = Arc::clone(self);
        tokio::spawn(async move {
            for (r, o) in state.dependents_of(&owner_uid) {
                let alive = o
                    .fields
                    .get(OWNER_UIDS_FIELD)
                    .map(|uids| {
                        uids.split(',')
                            .any(|u| u != owner_uid && state.uid_exists(u))
                    })
                    .unwrap_or(false);
                if alive {
                    continue;
                }
                let ns = o.fields.get("metadata.namespace").cloned();
                let name = o.fields.get("metadata.name").cloned().unwrap_or_default();
                let opts = DeleteOptions {
                    propagation_policy: Some("Background".into()),
                    ..Default::default()
                };
                if let Err(e) = state.delete(r, ns.as_deref(), &name, &opts).await {
                    if e.code != 404 {
                        warn!(object = %o.key, error = %e, "garbage collecting dependent failed");
                    }
                }
            }
        });
    }
}
