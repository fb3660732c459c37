//! Where admission webhooks sit in the write pipeline: mutating webhooks after the
//! built-in mutations and before the object's own validation (a patched object is
//! decoded and defaulted again), validating webhooks after validation and the
//! ValidatingAdmissionPolicies, both for DELETE too. Service references resolve to a
//! ready endpoint of the Service (what upstream does with `--enable-aggregator-routing`):
//! the control host need not run a service proxy.

use std::net::SocketAddr;

use cairn_semantics::selector::Labels;
use serde_json::Value;

use super::*;
use crate::admission::matching::{labels_of, Target};
use crate::admission::webhook::client::ServiceResolver;
use crate::admission::webhook::dispatch::{self, Context};
use crate::admission::webhook::review::Attributes;
use crate::admission::webhook::Hook;
use crate::admission::GROUP;

/// Metadata a webhook's patch does not change (the server owns it).
const PINNED_METADATA: [&str; 7] = [
    "name",
    "namespace",
    "uid",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "generation",
];

/// One write, as the webhook step sees it.
pub(super) struct WebhookWrite<'a> {
    pub resource: &'a ResourceInfo,
    pub subresource: Option<&'a str>,
    pub operation: &'a str,
    pub dry_run: bool,
    pub field_manager: Option<&'a str>,
}

impl ApiState {
    fn webhook_context<'a>(
        &'a self,
        w: &'a WebhookWrite<'a>,
        name: &'a str,
        namespace: Option<&'a str>,
        object: Option<&Value>,
        old: Option<&Value>,
    ) -> Context<'a> {
        Context {
            caller: self.webhook_caller.as_ref(),
            expressions: &self.policy_expressions,
            attributes: Attributes {
                target: Target {
                    resource: w.resource,
                    subresource: w.subresource,
                    operation: w.operation,
                },
                name,
                namespace,
                dry_run: w.dry_run,
                field_manager: w.field_manager,
            },
            namespace_labels: self.selector_namespace_labels(w, namespace, object.or(old)),
        }
    }

    /// What a webhook's `namespaceSelector` is matched against: a namespaced object's
    /// namespace's labels, a Namespace's own (from the request on create and update),
    /// nothing for other cluster-scoped objects.
    fn selector_namespace_labels(
        &self,
        w: &WebhookWrite<'_>,
        namespace: Option<&str>,
        object: Option<&Value>,
    ) -> Option<Labels> {
        let r = w.resource;
        if r.strategy
            .admits(cairn_api::kinds::Admission::NamespaceLifecycle)
        {
            if w.operation != "DELETE" && w.subresource.is_none() {
                return Some(labels_of(object));
            }
            let name = object.map(name_of).unwrap_or("");
            return Some(self.stored_namespace_labels(name));
        }
        if !r.namespaced {
            return None;
        }
        Some(self.stored_namespace_labels(namespace.unwrap_or("")))
    }

    fn stored_namespace_labels(&self, ns: &str) -> Labels {
        self.cache
            .get(&format!("/registry/core/namespaces/{ns}"))
            .and_then(|o| serde_json::from_slice::<Value>(&o.bytes).ok())
            .map(|n| labels_of(Some(&n)))
            .unwrap_or_default()
    }

    /// Runs the mutating webhooks over `obj`; a DELETE passes no object (`obj` None) and
    /// gets denials only. Returns their warnings and whether any webhook ran.
    pub(super) async fn run_mutating_webhooks(
        &self,
        w: &WebhookWrite<'_>,
        obj: Option<&mut Value>,
        old: Option<&Value>,
    ) -> Result<(Vec<String>, bool), Status> {
        if w.resource.group == GROUP {
            return Ok((Vec::new(), false));
        }
        let hooks = self.webhook_hooks.current(&self.cache, true);
        if hooks.is_empty() {
            return Ok((Vec::new(), false));
        }
        let source = obj.as_deref().or(old);
        let name = source.map(name_of).unwrap_or("").to_string();
        let namespace = source
            .and_then(|o| meta_str(o, "namespace"))
            .map(str::to_string);
        let ctx = self.webhook_context(w, &name, namespace.as_deref(), source, old);
        let r = w.resource;
        let mut reapply =
            |hook: &Hook, o: &mut Value, patch: &Value| self.apply_webhook_patch(r, hook, o, patch);
        let warnings = dispatch::mutate(&ctx, &hooks, obj, old, &mut reapply).await?;
        Ok((warnings, true))
    }

    /// DELETE admission: the webhooks see the stored object as `oldObject`. Nothing to
    /// admit when the object is already gone (the delete answers 404).
    pub(super) async fn admit_delete(
        &self,
        r: &ResourceInfo,
        ns: Option<&str>,
        name: &str,
        dry_run: bool,
    ) -> Result<Vec<String>, Status> {
        let Ok((old, _)) = self.get_value(r, ns, name) else {
            return Ok(Vec::new());
        };
        let w = WebhookWrite {
            resource: r,
            subresource: None,
            operation: "DELETE",
            dry_run,
            field_manager: None,
        };
        let (mut warnings, _) = self.run_mutating_webhooks(&w, None, Some(&old)).await?;
        warnings.extend(self.run_validating_webhooks(&w, None, Some(&old)).await?);
        Ok(warnings)
    }

    /// Runs the validating webhooks; returns their warnings.
    pub(super) async fn run_validating_webhooks(
        &self,
        w: &WebhookWrite<'_>,
        obj: Option<&Value>,
        old: Option<&Value>,
    ) -> Result<Vec<String>, Status> {
        if w.resource.group == GROUP {
            return Ok(Vec::new());
        }
        let hooks = self.webhook_hooks.current(&self.cache, false);
        if hooks.is_empty() {
            return Ok(Vec::new());
        }
        let source = obj.or(old);
        let name = source.map(name_of).unwrap_or("");
        let namespace = source.and_then(|o| meta_str(o, "namespace"));
        let ctx = self.webhook_context(w, name, namespace, obj, old);
        dispatch::validate(&ctx, &hooks, obj, old).await
    }

    /// Applies a mutating webhook's JSON patch and admits the result again: the same type
    /// and kind, decoded (unknown fields dropped) and defaulted, server-owned metadata kept.
    fn apply_webhook_patch(
        &self,
        r: &ResourceInfo,
        hook: &Hook,
        obj: &mut Value,
        patch: &Value,
    ) -> Result<(), Status> {
        let patched = cairn_apimachinery::patch::json_patch(obj, patch).map_err(|e| {
            Status::new(
                500,
                "InternalError",
                format!(
                    "Internal error occurred: applying the patch of admission webhook \"{}\": {e}",
                    hook.name
                ),
            )
        })?;
        let mut patched = patched;
        Self::check_type(r, &mut patched, r.kind)?;
        let opts = WriteOptions {
            field_validation: FieldValidation::Ignore,
            ..Default::default()
        };
        let (mut patched, _) = Self::normalize(r, patched, &opts)?;
        // Unknown fields of a custom resource are pruned (their warnings are moot here).
        self.prune_custom(r, &mut patched, &opts)?;
        cairn_api::defaults::apply_defaults(r, &mut patched);
        self.default_custom(r, &mut patched);
        for field in PINNED_METADATA {
            match obj.get("metadata").and_then(|m| m.get(field)) {
                Some(v) => set_meta(&mut patched, field, v.clone()),
                None => remove_meta(&mut patched, field),
            }
        }
        *obj = patched;
        Ok(())
    }
}

/// The 422 causes of a webhook configuration whose matchConditions do not compile.
pub(super) fn match_condition_errors(config: &Value) -> Vec<cairn_api::status::Cause> {
    let mut causes = Vec::new();
    let webhooks = config["webhooks"].as_array().into_iter().flatten();
    for (i, w) in webhooks.enumerate() {
        let conditions = w["matchConditions"].as_array().into_iter().flatten();
        for (k, c) in conditions.enumerate() {
            let expr = c["expression"].as_str().unwrap_or("");
            if expr.is_empty() {
                continue;
            }
            if let Err(e) = cairn_cel::compile_expression(expr) {
                causes.push(cairn_api::status::Cause::invalid(
                    format!("webhooks[{i}].matchConditions[{k}].expression"),
                    expr,
                    &e,
                ));
            }
        }
    }
    causes
}

/// Resolves webhook services from the watch cache: the Service's port named in the
/// configuration, then a ready address of its Endpoints for that port.
pub struct CachedServices(pub Arc<WatchCache>);

impl ServiceResolver for CachedServices {
    fn resolve(&self, namespace: &str, name: &str, port: u16) -> Result<SocketAddr, String> {
        let read = |key: String| {
            self.0
                .get(&key)
                .and_then(|o| serde_json::from_slice::<Value>(&o.bytes).ok())
        };
        let service = read(format!("/registry/core/services/{namespace}/{name}"))
            .ok_or_else(|| format!("service \"{name}\" not found"))?;
        let ports = service.pointer("/spec/ports").and_then(Value::as_array);
        let port_name = ports
            .into_iter()
            .flatten()
            .find(|p| p["port"].as_u64() == Some(u64::from(port)))
            .map(|p| p["name"].as_str().unwrap_or(""))
            .ok_or_else(|| format!("no service port {port} found for service \"{name}\""))?;
        let endpoints = read(format!("/registry/core/endpoints/{namespace}/{name}"));
        let subsets = endpoints
            .as_ref()
            .and_then(|e| e["subsets"].as_array())
            .into_iter()
            .flatten();
        for subset in subsets {
            let target = subset["ports"]
                .as_array()
                .into_iter()
                .flatten()
                .find(|p| p["name"].as_str().unwrap_or("") == port_name);
            let address = subset["addresses"]
                .as_array()
                .and_then(|a| a.first())
                .and_then(|a| a["ip"].as_str());
            if let (Some(target), Some(ip)) = (target, address) {
                let port = target["port"].as_u64().and_then(|p| u16::try_from(p).ok());
                if let (Ok(ip), Some(port)) = (ip.parse(), port) {
                    return Ok(SocketAddr::new(ip, port));
                }
            }
        }
        Err(format!("no endpoints available for service \"{name}\""))
    }
}
