//! Calling the webhooks that match a write: mutating ones one after another, each seeing
//! the previous one's patch (and those with `reinvocationPolicy: IfNeeded` once more when
//! a later one changed the object), validating ones all at once. A failed call follows
//! the webhook's `failurePolicy`.

use std::sync::Arc;

use bytes::Bytes;
use cairn_api::status::Status;
use cairn_semantics::selector::Labels;
use serde_json::Value;
use tracing::{debug, warn};

use super::review::{self, Attributes};
use super::{CallError, Caller, Hook};
use crate::admission::expressions::ExpressionCache;
use crate::admission::matching::{object_selector_matches, rule_matches, selector_matches};

/// What dispatching needs besides the webhooks and the objects.
pub struct Context<'a> {
    pub caller: &'a dyn Caller,
    pub expressions: &'a ExpressionCache,
    pub attributes: Attributes<'a>,
    /// The labels the `namespaceSelector` sees: the object's namespace's (or a
    /// Namespace's own), `None` for other cluster-scoped objects (never filtered).
    pub namespace_labels: Option<Labels>,
}

/// Applies a mutating webhook's JSON patch to the object and re-admits the result
/// (decoding, defaulting, fields the webhook may not change).
pub type Reapply<'a> = dyn FnMut(&Hook, &mut Value, &Value) -> Result<(), Status> + Send + 'a;

/// The outcome of matching one webhook against a write.
enum Applies {
    Yes,
    No,
    /// A matchCondition failed to evaluate under `failurePolicy: Fail`.
    Refused(Status),
}

fn applies(ctx: &Context<'_>, hook: &Hook, object: Option<&Value>, old: Option<&Value>) -> Applies {
    let t = ctx.attributes.target;
    if !hook
        .rules
        .iter()
        .any(|r| rule_matches(r, t, hook.exact_version))
    {
        return Applies::No;
    }
    if let Some(labels) = &ctx.namespace_labels {
        if !selector_matches(&hook.namespace_selector, labels) {
            return Applies::No;
        }
    }
    if !object_selector_matches(&hook.object_selector, object, old) {
        return Applies::No;
    }
    if hook.match_conditions.is_empty() {
        return Applies::Yes;
    }
    let request = review::request("", &ctx.attributes, None, None, review::ReviewVersion::V1)
        ["request"]
        .clone();
    let null = Value::Null;
    let vars: [(&str, &Value); 3] = [
        ("object", object.unwrap_or(&null)),
        ("oldObject", old.unwrap_or(&null)),
        ("request", &request),
    ];
    for (name, expression) in &hook.match_conditions {
        match ctx.expressions.eval_bool(expression, &vars) {
            Ok(true) => {}
            Ok(false) => return Applies::No,
            Err(e) if hook.fail_closed => {
                // Upstream answers a forbidden with the CEL errors.
                let r = ctx.attributes.target.resource;
                return Applies::Refused(
                    Status::forbidden(format!(
                        "{} \"{}\" is forbidden: failed to evaluate match condition \"{name}\" of webhook \"{}\": {e}",
                        r.group_resource(),
                        ctx.attributes.name,
                        hook.name
                    ))
                    .with_details(r.group, r.plural, ctx.attributes.name),
                );
            }
            Err(e) => {
                warn!(webhook = %hook.name, condition = %name, error = %e, "match condition failed; webhook skipped (failurePolicy Ignore)");
                return Applies::No;
            }
        }
    }
    Applies::Yes
}

/// Upstream's `NewInternalError`: code 500, `Internal error occurred: <message>`.
fn internal(message: String) -> Status {
    Status::new(
        500,
        "InternalError",
        format!("Internal error occurred: {message}"),
    )
}

/// One call: the review out, the verdict back, errors as upstream words them.
async fn call(
    ctx: &Context<'_>,
    hook: &Hook,
    object: Option<&Value>,
    old: Option<&Value>,
) -> Result<review::Verdict, String> {
    let Some(version) = hook.review_version else {
        return Err("webhook does not accept known AdmissionReview versions (v1, v1beta1)".into());
    };
    let uid = uuid::Uuid::new_v4().to_string();
    let body = review::request(&uid, &ctx.attributes, object, old, version);
    let bytes = serde_json::to_vec(&body).map_err(|e| e.to_string())?;
    let response = ctx
        .caller
        .call(hook, Bytes::from(bytes))
        .await
        .map_err(|e: CallError| e.to_string())?;
    review::verdict(&response, &uid, hook.mutating, version)
        .map_err(|e| format!("{}: {e}", review::INVALID_RESPONSE))
}

/// What a call that did not produce a verdict means for the write.
fn on_failure(hook: &Hook, error: &str) -> Result<(), Status> {
    let message = format!("failed calling webhook \"{}\": {error}", hook.name);
    if hook.fail_closed {
        return Err(internal(message));
    }
    warn!(webhook = %hook.name, configuration = %hook.configuration, error = %error, "webhook call failed; ignored (failurePolicy Ignore)");
    Ok(())
}

/// Runs the mutating webhooks over `object` (the new object of a CREATE or UPDATE; a
/// DELETE passes `None` and patches are not asked for). Returns the webhooks' warnings.
pub async fn mutate(
    ctx: &Context<'_>,
    configurations: &[Arc<Vec<Hook>>],
    mut object: Option<&mut Value>,
    old: Option<&Value>,
    reapply: &mut Reapply<'_>,
) -> Result<Vec<String>, Status> {
    let hooks: Vec<&Hook> = configurations.iter().flat_map(|c| c.iter()).collect();
    let mut warnings = Vec::new();
    // Per invoked webhook: how many changes the object had seen when it was called.
    let mut invoked: Vec<(usize, usize)> = Vec::new();
    let mut changes = 0usize;
    for (i, hook) in hooks.iter().enumerate() {
        let changed = mutate_one(
            ctx,
            hook,
            object.as_deref_mut(),
            old,
            reapply,
            &mut warnings,
        )
        .await?;
        if let Some(changed) = changed {
            invoked.push((i, changes));
            changes += usize::from(changed);
        }
    }
    // Reinvocation: once more, in order, each IfNeeded webhook called before a change
    // that came after it.
    for (i, seen) in invoked {
        if hooks[i].reinvoke && changes > seen {
            debug!(webhook = %hooks[i].name, "reinvoking");
            mutate_one(
                ctx,
                hooks[i],
                object.as_deref_mut(),
                old,
                reapply,
                &mut warnings,
            )
            .await?;
        }
    }
    Ok(warnings)
}

/// Calls one mutating webhook if it applies: `None` when it did not apply, else whether
/// it changed the object.
async fn mutate_one(
    ctx: &Context<'_>,
    hook: &Hook,
    object: Option<&mut Value>,
    old: Option<&Value>,
    reapply: &mut Reapply<'_>,
    warnings: &mut Vec<String>,
) -> Result<Option<bool>, Status> {
    match applies(ctx, hook, object.as_deref(), old) {
        Applies::No => return Ok(None),
        Applies::Refused(s) => return Err(s),
        Applies::Yes => {}
    }
    refuse_unsafe_dry_run(ctx, hook)?;
    let verdict = match call(ctx, hook, object.as_deref(), old).await {
        Ok(v) => v,
        Err(e) => return on_failure(hook, &e).map(|()| Some(false)),
    };
    warnings.extend(verdict.warnings.iter().cloned());
    if !verdict.allowed {
        return Err(review::denial(&hook.name, &verdict.status));
    }
    let Some(patch) = verdict.patch else {
        return Ok(Some(false));
    };
    let Some(object) = object else {
        return Err(internal(format!(
            "admission webhook \"{}\" attempted to modify the object, which is not supported for this operation",
            hook.name
        )));
    };
    let before = object.clone();
    reapply(hook, object, &patch)?;
    Ok(Some(*object != before))
}

/// A dry run never reaches a webhook that may have side effects, whatever its
/// failurePolicy (only v1beta1-era configurations can have them).
fn refuse_unsafe_dry_run(ctx: &Context<'_>, hook: &Hook) -> Result<(), Status> {
    if ctx.attributes.dry_run && !hook.dry_run_safe {
        return Err(Status::bad_request(format!(
            "admission webhook \"{}\" does not support dry run",
            hook.name
        )));
    }
    Ok(())
}

/// Runs the validating webhooks that match, concurrently. The first denial (in webhook
/// order) answers the write; the warnings of all are returned otherwise.
pub async fn validate(
    ctx: &Context<'_>,
    configurations: &[Arc<Vec<Hook>>],
    object: Option<&Value>,
    old: Option<&Value>,
) -> Result<Vec<String>, Status> {
    let mut matching = Vec::new();
    for hook in configurations.iter().flat_map(|c| c.iter()) {
        match applies(ctx, hook, object, old) {
            Applies::No => {}
            Applies::Refused(s) => return Err(s),
            Applies::Yes => {
                refuse_unsafe_dry_run(ctx, hook)?;
                matching.push(hook);
            }
        }
    }
    let calls = matching.iter().map(|hook| call(ctx, hook, object, old));
    let results = futures::future::join_all(calls).await;
    let mut warnings = Vec::new();
    for (hook, result) in matching.iter().zip(results) {
        match result {
            Ok(v) if v.allowed => warnings.extend(v.warnings),
            Ok(v) => return Err(review::denial(&hook.name, &v.status)),
            Err(e) => on_failure(hook, &e)?,
        }
    }
    Ok(warnings)
}

#[cfg(test)]
mod tests;
