//! Updates (PUT and the writes PATCH and apply resolve to): what a write through a
//! subresource may change, admission and validation of the result, the optimistic
//! concurrency check, and removal of a terminating object whose finalizers are gone.

use serde_json::{json, Value};

use super::*;
use cairn_api::kinds::Admission;

mod scope;

impl ApiState {
    /// Prepares `new` as the update of `old` (main resource, or a subresource): the update
    /// pipeline, decode → prepare (what the write may change, defaults, server-owned
    /// metadata) → admit (mutating webhooks, the kind's admission steps) → validate (the
    /// kind's strategy, CRD schema and CEL, policies, validating webhooks).
    async fn prepare_update(
        &self,
        r: &ResourceInfo,
        old: &Value,
        new: Value,
        subresource: Option<&str>,
        opts: &WriteOptions,
    ) -> Result<(Value, Vec<String>), Status> {
        let (new, mut warnings) = self.decode_update(r, new, opts)?;
        let mut obj = self.prepare_changed(r, old, new, subresource)?;
        let hooks = WebhookWrite {
            resource: r,
            subresource,
            operation: "UPDATE",
            dry_run: opts.dry_run,
            field_manager: opts.field_manager.as_deref(),
        };
        warnings.extend(self.admit_update(r, &hooks, old, &mut obj, opts).await?);
        warnings.extend(self.validate_changed(r, &hooks, old, &obj).await?);
        self.check_rbac_escalation(r, &obj, Some(old), opts)?;
        let write = NodeWrite {
            resource: r,
            subresource: subresource.unwrap_or(""),
            operation: cairn_auth::node::restriction::Operation::Update,
            namespace: meta_str(old, "namespace").unwrap_or(""),
            name: name_of(old),
            object: Some(&obj),
            old_object: Some(old),
        };
        self.check_node_restriction(&write, opts.requester.as_ref())?;
        Ok((obj, warnings))
    }

    /// The body in the stored shape, typed-decoded and pruned, with the decoder's warnings.
    fn decode_update(
        &self,
        r: &ResourceInfo,
        mut new: Value,
        opts: &WriteOptions,
    ) -> Result<(Value, Vec<String>), Status> {
        Self::check_type(r, &mut new, r.kind)?;
        let (mut new, mut warnings) = Self::normalize(r, new, opts)?;
        warnings.extend(self.prune_custom(r, &mut new, opts)?);
        Ok((new, warnings))
    }

    /// What the write may change of `old`, defaulted, with the metadata the client may not
    /// change taken from `old`.
    fn prepare_changed(
        &self,
        r: &ResourceInfo,
        old: &Value,
        new: Value,
        subresource: Option<&str>,
    ) -> Result<Value, Status> {
        let mut obj = scope::scoped_update(r, old, new, subresource);
        cairn_api::defaults::apply_defaults(r, &mut obj);
        self.default_custom(r, &mut obj);
        keep_server_metadata(r, old, &mut obj)?;
        Ok(obj)
    }

    /// Mutating webhooks (bounded again by what the write may change), the generation,
    /// the field manager, then the kind's admission steps.
    async fn admit_update(
        &self,
        r: &ResourceInfo,
        hooks: &WebhookWrite<'_>,
        old: &Value,
        obj: &mut Value,
        opts: &WriteOptions,
    ) -> Result<Vec<String>, Status> {
        let (warnings, mutated) = self
            .run_mutating_webhooks(hooks, Some(&mut *obj), Some(old))
            .await?;
        if mutated {
            *obj = scope::scoped_update(r, old, obj.take(), hooks.subresource);
        }
        if r.strategy.tracks_generation && spec_of(obj) != spec_of(old) {
            let gen = old
                .pointer("/metadata/generation")
                .and_then(Value::as_i64)
                .unwrap_or(0)
                + 1;
            set_meta(obj, "generation", json!(gen));
        }
        let op = if opts.apply { "Apply" } else { "Update" };
        Self::record_manager(obj, opts.field_manager.as_deref(), op, hooks.subresource);
        self.admit_kind_specific(r, obj, Some(old));
        if r.strategy.admits(Admission::CustomResourceDefinition) {
            self.admit_crd(obj, Some(old));
        }
        if r.strategy.admits(Admission::PriorityClass) {
            crate::priority::admit_class(&self.priority_classes, &self.cache, obj, Some(old))?;
        }
        Ok(warnings)
    }

    /// The kind's update validation, CRD schema and CEL, then policies and validating
    /// webhooks; their warnings.
    async fn validate_changed(
        &self,
        r: &ResourceInfo,
        hooks: &WebhookWrite<'_>,
        old: &Value,
        obj: &Value,
    ) -> Result<Vec<String>, Status> {
        let mut causes = if hooks.subresource == Some("ephemeralcontainers") {
            scope::ephemeral_update_causes(r, old, obj)
        } else {
            cairn_api::validation::validate_update(r, old, obj)
        };
        causes.extend(self.validate_custom(r, obj, Some(old)));
        if r.strategy.admits(Admission::WebhookMatchConditions) {
            causes.extend(webhook_admission::match_condition_errors(obj));
        }
        if r.strategy.admits(Admission::PolicyCompile) {
            causes.extend(super::policy_admission::policy_compile_errors(obj));
        }
        if !causes.is_empty() {
            return Err(Status::invalid(r.kind, r.group, name_of(obj), causes));
        }
        let mut warnings = self.admit_policies(r, hooks.subresource, obj, Some(old))?;
        warnings.extend(
            self.run_validating_webhooks(hooks, Some(obj), Some(old))
                .await?,
        );
        Ok(warnings)
    }

    /// Writes `obj` as the new state of `old` (at `old_rev`), handling Service allocations
    /// and the removal of terminating objects whose finalizers are gone.
    #[allow(clippy::too_many_arguments)]
    async fn commit_update(
        &self,
        r: &ResourceInfo,
        key: &str,
        old: &Value,
        old_rev: Revision,
        mut obj: Value,
        warnings: Vec<String>,
        dry_run: bool,
    ) -> Result<Written, Status> {
        let name = name_of(&obj).to_string();
        if !dry_run && same_but_version(old, &obj) {
            // Nothing changed: no write, no new resourceVersion, no watch event (upstream's
            // GuaranteedUpdate compares the encoded bytes). Without this, a client that
            // writes what is stored wakes every watcher, itself included.
            return self.written(key, old_rev, warnings).await;
        }
        let mut allocs = Allocations::default();
        let owner = claims::owner_name(&obj);
        if r.strategy.admits(Admission::ServiceAllocation) {
            if dry_run {
                self.allocate_service(&mut obj, Some(old), &mut allocs, &name)?;
            } else {
                self.allocate_and_claim(&mut obj, Some(old), &mut allocs, (&name, &owner))
                    .await?;
            }
        }
        if dry_run {
            self.release(&allocs);
            let bytes = serde_json::to_vec(&obj).map_err(|e| Status::internal(e.to_string()))?;
            return Ok(Written {
                name: name.to_string(),
                bytes: Bytes::from(bytes),
                revision: old_rev,
                warnings,
            });
        }
        let bytes =
            Bytes::from(serde_json::to_vec(&obj).map_err(|e| Status::internal(e.to_string()))?);
        let rev = match self.cache.backend().update(key, bytes, old_rev).await {
            Ok(rev) => rev,
            Err(e) => {
                self.release_claimed(&allocs, &owner).await;
                return Err(store_status(e, r, &name));
            }
        };
        if r.strategy.admits(Admission::ServiceAllocation) {
            self.release_dropped_service_allocations(old, &obj, &owner)
                .await;
        }
        let written = self.written(key, rev, warnings).await?;
        // A terminating object whose last finalizer was just removed goes away now.
        if has_deletion_timestamp(&obj)
            && finalizers(&obj).is_empty()
            && spec_finalizers(&obj).is_empty()
            && !self.awaits_node(r, &obj)
        {
            self.remove_now(r, key, &obj, rev).await?;
        }
        Ok(written)
    }

    /// PUT: replaces the object (or its status). `resourceVersion` in the body, when given,
    /// is a precondition. Creates the object when it does not exist and the kind allows it.
    pub async fn update(
        &self,
        r: &'static ResourceInfo,
        ns: Option<&str>,
        name: &str,
        subresource: Option<&str>,
        body: Value,
        opts: &WriteOptions,
    ) -> Result<(Written, bool), Status> {
        let (r, body) = self.to_storage_shape(r, body, opts)?;
        let key = r.key(ns, name);
        let Some(current) = self.cache.get(&key) else {
            if subresource.is_none() && r.strategy.allow_create_on_update {
                return Ok((self.create(r, ns, body, opts).await?, true));
            }
            return Err(
                Status::not_found(&r.group_resource(), name).with_details(r.group, r.plural, name)
            );
        };
        let body_name = meta_str(&body, "name").unwrap_or("");
        if !body_name.is_empty() && body_name != name {
            return Err(Status::bad_request(format!(
                "the name of the object ({body_name}) does not match the name on the URL ({name})"
            )));
        }
        let expected = match meta_str(&body, "resourceVersion").filter(|v| !v.is_empty()) {
            Some(v) => Some(v.parse::<Revision>().map_err(|_| {
                Status::bad_request(format!("invalid resourceVersion {v:?}: must be an integer"))
            })?),
            None => None,
        };
        let old: Value =
            serde_json::from_slice(&current.bytes).map_err(|e| Status::internal(e.to_string()))?;
        if let Some(expected) = expected {
            if expected != current.mod_revision {
                return Err(store_status(
                    StoreError::Conflict {
                        key: key.clone(),
                        expected,
                        actual: current.mod_revision,
                    },
                    r,
                    name,
                ));
            }
        }
        let (obj, warnings) = self
            .prepare_update(r, &old, body, subresource, opts)
            .await?;
        let w = self
            .commit_update(
                r,
                &key,
                &old,
                expected.unwrap_or(current.mod_revision),
                obj,
                warnings,
                opts.dry_run,
            )
            .await?;
        Ok((w, false))
    }

    /// Read-modify-write with retries on conflict, as Kubernetes' GuaranteedUpdate:
    /// `mutate` gets the current object and returns the desired one.
    pub async fn guaranteed_update<F>(
        &self,
        r: &'static ResourceInfo,
        ns: Option<&str>,
        name: &str,
        subresource: Option<&str>,
        opts: &WriteOptions,
        mut mutate: F,
    ) -> Result<Written, Status>
    where
        F: FnMut(&Value) -> Result<Value, Status>,
    {
        let served = r;
        let r = self.storage_of(served);
        let mut mutate = |cur: &Value| self.mutate_in_served_shape(served, cur, opts, &mut mutate);
        let key = r.key(ns, name);
        let mut attempt = 0;
        loop {
            attempt += 1;
            let current = self.get(r, ns, name)?;
            let old: Value = serde_json::from_slice(&current.bytes)
                .map_err(|e| Status::internal(e.to_string()))?;
            let desired = mutate(&old)?;
            let (obj, warnings) = self
                .prepare_update(r, &old, desired, subresource, opts)
                .await?;
            match self
                .commit_update(
                    r,
                    &key,
                    &old,
                    current.mod_revision,
                    obj,
                    warnings,
                    opts.dry_run,
                )
                .await
            {
                Err(s) if s.code == 409 && s.reason == "Conflict" && attempt < 10 => {
                    // The cache was behind the store: let it catch up and retry.
                    let rev = self.cache.backend().current_revision().await.unwrap_or(0);
                    self.settle(rev).await?;
                }
                other => return other,
            }
        }
    }
}

/// Metadata the client may not change comes from `old`; a name or namespace in the body
/// must be the URL's.
fn keep_server_metadata(r: &ResourceInfo, old: &Value, obj: &mut Value) -> Result<(), Status> {
    for field in [
        "uid",
        "creationTimestamp",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "generation",
    ] {
        match old.get("metadata").and_then(|m| m.get(field)) {
            Some(v) => set_meta(obj, field, v.clone()),
            None => remove_meta(obj, field),
        }
    }
    for field in ["name", "namespace"] {
        let old_v = meta_str(old, field).unwrap_or("");
        let new_v = meta_str(obj, field).unwrap_or("");
        if new_v.is_empty() {
            set_meta(obj, field, json!(old_v));
        } else if new_v != old_v {
            return Err(Status::bad_request(format!(
                "the {field} of the object ({new_v}) does not match the {field} on the URL ({old_v})"
            )));
        }
    }
    if !r.namespaced {
        remove_meta(obj, "namespace");
    }
    remove_meta(obj, "resourceVersion");
    Ok(())
}

/// Whether `new` is `old` but for `metadata.resourceVersion`.
fn same_but_version(old: &Value, new: &Value) -> bool {
    let (Some(a), Some(b)) = (old.as_object(), new.as_object()) else {
        return old == new;
    };
    let meta_same = |x: &Value, y: &Value| match (x.as_object(), y.as_object()) {
        (Some(x), Some(y)) => {
            let rest = |m: &serde_json::Map<String, Value>| {
                m.iter()
                    .filter(|(k, _)| k.as_str() != "resourceVersion")
                    .count()
            };
            rest(x) == rest(y)
                && x.iter()
                    .filter(|(k, _)| k.as_str() != "resourceVersion")
                    .all(|(k, v)| y.get(k) == Some(v))
        }
        _ => x == y,
    };
    a.len() == b.len()
        && a.iter().all(|(k, v)| match b.get(k) {
            Some(w) if k == "metadata" => meta_same(v, w),
            Some(w) => v == w,
            None => false,
        })
}

/// A namespace's `spec.finalizers` (other kinds have none).
fn spec_finalizers(obj: &Value) -> Vec<&str> {
    obj.pointer("/spec/finalizers")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default()
}

#[cfg(test)]
mod no_op_tests {
    use super::same_but_version;
    use serde_json::json;

    #[test]
    fn an_update_that_changes_nothing_but_the_version_is_a_no_op() {
        let stored = json!({"metadata": {"name": "d", "resourceVersion": "7", "labels": {"a": "1"}},
                            "status": {"replicas": 1}});
        let same =
            json!({"metadata": {"name": "d", "labels": {"a": "1"}}, "status": {"replicas": 1}});
        assert!(same_but_version(&stored, &same));
        let other_rv = json!({"metadata": {"name": "d", "resourceVersion": "9", "labels": {"a": "1"}},
                              "status": {"replicas": 1}});
        assert!(same_but_version(&stored, &other_rv));
        let changed =
            json!({"metadata": {"name": "d", "labels": {"a": "1"}}, "status": {"replicas": 2}});
        assert!(!same_but_version(&stored, &changed));
        let relabelled =
            json!({"metadata": {"name": "d", "labels": {"a": "2"}}, "status": {"replicas": 1}});
        assert!(!same_but_version(&stored, &relabelled));
        let more = json!({"metadata": {"name": "d", "labels": {"a": "1"}}, "status": {"replicas": 1}, "spec": {}});
        assert!(!same_but_version(&stored, &more));
    }
}
