//! The create path, as a pipeline: decode → place (namespace, generateName) → prepare
//! (defaults, server-owned metadata, the kind's PrepareForCreate) → admit (the kind's
//! admission steps, mutating webhooks) → validate (the kind's strategy, CRD schema and CEL,
//! policies, validating webhooks, namespace and quota) → store. The per-kind parts are
//! called through the kind's strategy (`cairn_api::kinds`).

use bytes::Bytes;
use cairn_api::kinds::Admission;
use cairn_api::registry::ResourceInfo;
use cairn_api::status::Status;
use serde_json::{json, Value};
use tracing::debug;

use super::allocate::Allocations;
use super::claims;
use super::webhook_admission::WebhookWrite;
use super::{
    policy_admission, qos_class, store_status, webhook_admission, ApiState, WriteOptions, Written,
};
use crate::objects::*;

const GENERATE_NAME_ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";

fn generated_suffix() -> String {
    let id = uuid::Uuid::new_v4();
    id.as_bytes()
        .iter()
        .take(5)
        .map(|b| char::from(GENERATE_NAME_ALPHABET[usize::from(*b) % GENERATE_NAME_ALPHABET.len()]))
        .collect()
}

impl ApiState {
    /// Creates an object. `ns` comes from the URL (None for cluster-scoped resources).
    pub async fn create(
        &self,
        r: &'static ResourceInfo,
        ns: Option<&str>,
        body: Value,
        opts: &WriteOptions,
    ) -> Result<Written, Status> {
        let (r, mut obj, mut warnings) = self.decode_new(r, body, opts)?;
        place(r, ns, &mut obj)?;
        self.prepare_new(r, &mut obj, opts);
        super::csr::stamp_requester(r, &mut obj, opts);
        let name = name_of(&obj).to_string();
        self.admit_new(r, &mut obj, &name)?;
        let hooks = WebhookWrite {
            resource: r,
            subresource: None,
            operation: "CREATE",
            dry_run: opts.dry_run,
            field_manager: opts.field_manager.as_deref(),
        };
        let (hook_warnings, mutated) = self
            .run_mutating_webhooks(&hooks, Some(&mut obj), None)
            .await?;
        warnings.extend(hook_warnings);
        if mutated && r.strategy.admits(Admission::PodResources) {
            obj["status"]["qosClass"] = json!(qos_class(&obj));
        }
        warnings.extend(self.validate_new(r, &hooks, &obj, &name).await?);
        self.check_rbac_escalation(r, &obj, None, opts)?;
        let write = super::NodeWrite {
            resource: r,
            subresource: "",
            operation: cairn_auth::node::restriction::Operation::Create,
            namespace: meta_str(&obj, "namespace").unwrap_or(""),
            name: &name,
            object: Some(&obj),
            old_object: None,
        };
        self.check_node_restriction(&write, opts.requester.as_ref())?;
        self.store_new(r, obj, &name, warnings, opts).await
    }

    /// The body in the stored shape, typed-decoded and pruned, with the decoder's warnings.
    fn decode_new(
        &self,
        r: &'static ResourceInfo,
        body: Value,
        opts: &WriteOptions,
    ) -> Result<(&'static ResourceInfo, Value, Vec<String>), Status> {
        let (r, mut obj) = self.to_storage_shape(r, body, opts)?;
        Self::check_type(r, &mut obj, r.kind)?;
        let (mut obj, mut warnings) = Self::normalize(r, obj, opts)?;
        warnings.extend(self.prune_custom(r, &mut obj, opts)?);
        Ok((r, obj, warnings))
    }

    /// Defaults, the server-owned metadata, the field manager and the kind's
    /// PrepareForCreate.
    fn prepare_new(&self, r: &ResourceInfo, obj: &mut Value, opts: &WriteOptions) {
        if r.strategy.admits(Admission::PodTolerations) {
            // Before defaulting, which would add the 300 s ones.
            let (not_ready, unreachable) = self.settings.default_toleration_seconds;
            if let Some(spec) = obj.get_mut("spec").and_then(Value::as_object_mut) {
                cairn_api::defaults::add_default_tolerations(spec, not_ready, unreachable);
            }
        }
        cairn_api::defaults::apply_defaults(r, obj);
        self.default_custom(r, obj);
        let meta = metadata_mut(obj);
        meta.insert("uid".into(), json!(uuid::Uuid::new_v4().to_string()));
        meta.insert("creationTimestamp".into(), json!(now_rfc3339()));
        for server_owned in [
            "resourceVersion",
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
            "selfLink",
        ] {
            meta.remove(server_owned);
        }
        if r.strategy.tracks_generation {
            meta.insert("generation".into(), json!(1));
        } else {
            meta.remove("generation");
        }
        let op = if opts.apply { "Apply" } else { "Update" };
        Self::record_manager(obj, opts.field_manager.as_deref(), op, None);
        self.admit_kind_specific(r, obj, None);
    }

    /// The kind's admission steps that read other objects (and may refuse).
    fn admit_new(&self, r: &ResourceInfo, obj: &mut Value, name: &str) -> Result<(), Status> {
        let steps = r.strategy;
        if steps.admits(Admission::CustomResourceDefinition) {
            self.admit_crd(obj, None);
        }
        if steps.admits(Admission::PodResources) {
            crate::priority::admit_pod(&self.priority_classes, &self.cache, obj, name)?;
            crate::limitranger::admit_pod(&self.cache, obj, name)?;
            crate::serviceaccount_admission::admit_pod(&self.cache, obj);
            // The class follows the resources admission settled on.
            obj["status"]["qosClass"] = json!(qos_class(obj));
        }
        if steps.admits(Admission::ClaimStorage) {
            crate::storage::admit_claim(&self.cache, obj);
            crate::limitranger::admit_claim(&self.cache, obj, name)?;
        }
        if steps.admits(Admission::VolumeProtection) {
            crate::storage::admit_volume(obj);
        }
        if steps.admits(Admission::DefaultIngressClass) {
            crate::default_class::admit_ingress(&self.cache, obj);
        }
        if steps.admits(Admission::PriorityClass) {
            crate::priority::admit_class(&self.priority_classes, &self.cache, obj, None)?;
        }
        Ok(())
    }

    /// Validation (the kind's, the CRD's, compiled webhooks and policies), then the
    /// admission policies, validating webhooks, the namespace and quota. Returns warnings.
    async fn validate_new(
        &self,
        r: &'static ResourceInfo,
        hooks: &WebhookWrite<'_>,
        obj: &Value,
        name: &str,
    ) -> Result<Vec<String>, Status> {
        let mut causes = cairn_api::validation::validate_create(r, obj);
        causes.extend(self.validate_custom(r, obj, None));
        if r.strategy.admits(Admission::WebhookMatchConditions) {
            causes.extend(webhook_admission::match_condition_errors(obj));
        }
        if r.strategy.admits(Admission::PolicyCompile) {
            causes.extend(policy_admission::policy_compile_errors(obj));
        }
        if !causes.is_empty() {
            return Err(Status::invalid(r.kind, r.group, name, causes));
        }
        let mut warnings = self.admit_policies(r, None, obj, None)?;
        warnings.extend(self.run_validating_webhooks(hooks, Some(obj), None).await?);
        if let Some(ns) = meta_str(obj, "namespace") {
            self.check_namespace(ns)?;
            self.charge_quotas(r, ns, obj, name, hooks.dry_run).await?;
        }
        Ok(warnings)
    }

    /// Allocations, then the store (or, on a dry run, what would have been stored).
    async fn store_new(
        &self,
        r: &ResourceInfo,
        mut obj: Value,
        name: &str,
        warnings: Vec<String>,
        opts: &WriteOptions,
    ) -> Result<Written, Status> {
        let key = r.key(meta_str(&obj, "namespace"), name);
        let mut allocs = Allocations::default();
        let owner = claims::owner_name(&obj);
        if r.strategy.admits(Admission::ServiceAllocation) {
            if opts.dry_run {
                self.allocate_service(&mut obj, None, &mut allocs, name)?;
            } else {
                self.allocate_and_claim(&mut obj, None, &mut allocs, (name, &owner))
                    .await?;
            }
        }
        let bytes = serde_json::to_vec(&obj).map_err(|e| Status::internal(e.to_string()));
        if opts.dry_run {
            self.release(&allocs);
            let bytes = bytes?;
            if self.cache.get(&key).is_some() {
                return Err(Status::already_exists(&r.group_resource(), name)
                    .with_details(r.group, r.plural, name));
            }
            return Ok(Written {
                name: name.to_string(),
                bytes: Bytes::from(bytes),
                revision: self.cache.revision(),
                warnings,
            });
        }
        let created = match bytes {
            Ok(bytes) => self.cache.backend().create(&key, Bytes::from(bytes)).await,
            Err(status) => {
                self.release_claimed(&allocs, &owner).await;
                return Err(status);
            }
        };
        match created {
            Ok(rev) => {
                debug!(%key, rev, "created");
                self.written(&key, rev, warnings).await
            }
            Err(e) => {
                self.release_claimed(&allocs, &owner).await;
                Err(store_status(e, r, name))
            }
        }
    }
}

/// The object's namespace is the URL's (`default` when the URL names none); a body that
/// names another is refused. Cluster-scoped objects have none. A missing name comes from
/// `generateName`.
fn place(r: &ResourceInfo, ns: Option<&str>, obj: &mut Value) -> Result<(), Status> {
    if r.namespaced {
        let url_ns = ns.unwrap_or("default");
        match meta_str(obj, "namespace") {
            Some(body_ns) if !body_ns.is_empty() && body_ns != url_ns => {
                return Err(Status::bad_request(
                    "the namespace of the provided object does not match the namespace sent on the request",
                ))
            }
            _ => set_meta(obj, "namespace", json!(url_ns)),
        }
    } else {
        remove_meta(obj, "namespace");
    }
    if meta_str(obj, "name").unwrap_or("").is_empty() {
        if let Some(prefix) = meta_str(obj, "generateName").map(str::to_string) {
            set_meta(
                obj,
                "name",
                json!(format!("{prefix}{}", generated_suffix())),
            );
        }
    }
    Ok(())
}
