//! Writes of CustomResourceDefinitions and of custom resources.
//!
//! A CRD's status is the server's: on every write its names are accepted (or not, when
//! another CRD holds them), it is `Established`, and `storedVersions` keeps every version
//! objects were ever stored in. After the write the served set is rebuilt
//! ([`ApiState::refresh_custom_resources`], from `written`).
//!
//! A custom resource is pruned, defaulted and validated against its CRD's structural
//! schema (the storage version's: objects are converted to it first), as
//! apiextensions-apiserver does; unknown fields answer `fieldValidation` as typed objects'
//! do.

use cairn_api::status::Cause;
use serde_json::{json, Value};

use super::*;

pub(super) fn is_crd(r: &ResourceInfo) -> bool {
    r.strategy
        .admits(cairn_api::kinds::Admission::CustomResourceDefinition)
}

/// The CEL rules of every version's schema that do not compile.
fn crd_rule_errors(crd: &Value) -> Vec<Cause> {
    let versions = crd.pointer("/spec/versions").and_then(Value::as_array);
    let mut causes = Vec::new();
    for (i, v) in versions.into_iter().flatten().enumerate() {
        let Some(schema) = v.pointer("/schema/openAPIV3Schema") else {
            continue;
        };
        let path = format!("spec.versions[{i}].schema.openAPIV3Schema");
        if let Err(errors) = cairn_cel::compile_schema_rules(schema, &path) {
            causes.extend(
                errors
                    .into_iter()
                    .map(|e| Cause::from_message(e.field, e.message)),
            );
        }
    }
    causes
}

impl ApiState {
    /// Removes what the custom resource's schema does not declare (its CRD's strategy,
    /// `custom/strategy.rs`); the removed paths are an error under
    /// `fieldValidation=Strict` and warnings under `Warn`.
    pub(super) fn prune_custom(
        &self,
        r: &ResourceInfo,
        obj: &mut Value,
        opts: &WriteOptions,
    ) -> Result<Vec<String>, Status> {
        let Some(custom) = self.custom.stored(r) else {
            return Ok(Vec::new());
        };
        let described = custom.prune(obj);
        match opts.field_validation {
            _ if described.is_empty() => Ok(Vec::new()),
            FieldValidation::Strict => Err(Status::bad_request(format!(
                "strict decoding error: {}",
                described.join(", ")
            ))),
            FieldValidation::Warn => Ok(described),
            FieldValidation::Ignore => Ok(Vec::new()),
        }
    }

    pub(super) fn default_custom(&self, r: &ResourceInfo, obj: &mut Value) {
        if let Some(custom) = self.custom.stored(r) {
            custom.default(obj);
        }
    }

    /// Schema and CEL violations of a custom resource (`old` for transition rules); for a
    /// CRD, the CEL rules of its schemas that do not compile.
    pub(super) fn validate_custom(
        &self,
        r: &ResourceInfo,
        obj: &Value,
        old: Option<&Value>,
    ) -> Vec<Cause> {
        if is_crd(r) {
            return crd_rule_errors(obj);
        }
        self.custom
            .stored(r)
            .map(|custom| custom.validate(obj, old))
            .unwrap_or_default()
    }

    /// The server-owned status of a CRD being written.
    pub(super) fn admit_crd(&self, obj: &mut Value, old: Option<&Value>) {
        let name = name_of(obj).to_string();
        let names = obj.pointer("/spec/names").cloned().unwrap_or(json!({}));
        let conflict = self.names_conflict(&name, obj);
        let mut stored: Vec<Value> = old
            .and_then(|o| o.pointer("/status/storedVersions"))
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        let storage = obj["spec"]["versions"]
            .as_array()
            .and_then(|vs| vs.iter().find(|v| v["storage"] == json!(true)))
            .map(|v| v["name"].clone());
        if let Some(s) = storage.filter(|s| !stored.contains(s)) {
            stored.push(s);
        }
        let now = now_rfc3339();
        let since = |kind: &str| {
            old.and_then(|o| o.pointer("/status/conditions"))
                .and_then(Value::as_array)
                .and_then(|cs| cs.iter().find(|c| c["type"] == kind))
                .map(|c| c["lastTransitionTime"].clone())
                .unwrap_or_else(|| json!(now))
        };
        let (accepted, names_condition) = match &conflict {
            None => (
                names,
                json!({"type": "NamesAccepted", "status": "True", "reason": "NoConflicts",
                    "message": "no conflicts found", "lastTransitionTime": since("NamesAccepted")}),
            ),
            Some(message) => (
                json!({"plural": "", "kind": ""}),
                json!({"type": "NamesAccepted", "status": "False", "reason": "NameConflict",
                    "message": message, "lastTransitionTime": since("NamesAccepted")}),
            ),
        };
        let established = match conflict {
            None => {
                json!({"type": "Established", "status": "True", "reason": "InitialNamesAccepted",
                "message": "the initial names have been accepted", "lastTransitionTime": since("Established")})
            }
            Some(_) => json!({"type": "Established", "status": "False", "reason": "NotAccepted",
                "message": "not all names are accepted", "lastTransitionTime": since("Established")}),
        };
        obj["status"] = json!({
            "acceptedNames": accepted,
            "conditions": [names_condition, established],
            "storedVersions": stored,
        });
    }

    /// Upstream's NameConflict message when another CRD of the group serves the plural or
    /// the kind already.
    fn names_conflict(&self, name: &str, crd: &Value) -> Option<String> {
        let group = crd.pointer("/spec/group")?.as_str()?;
        let plural = crd.pointer("/spec/names/plural").and_then(Value::as_str)?;
        let kind = crd.pointer("/spec/names/kind").and_then(Value::as_str)?;
        let all = self.custom.all();
        let others = all
            .iter()
            .filter(|c| c.crd != name && c.info.group == group);
        for other in others {
            if other.info.plural == plural {
                return Some(format!("\"{plural}\" is already in use"));
            }
            if other.info.kind == kind {
                return Some(format!("\"{kind}\" is already in use"));
            }
        }
        None
    }

    /// After a CRD is gone: its objects go too, and it stops being served.
    pub(super) async fn remove_custom_objects(&self, crd: &Value) {
        self.refresh_custom_resources();
        let group = crd
            .pointer("/spec/group")
            .and_then(Value::as_str)
            .unwrap_or("");
        let plural = crd
            .pointer("/spec/names/plural")
            .and_then(Value::as_str)
            .unwrap_or("");
        if group.is_empty() || plural.is_empty() {
            return;
        }
        let prefix = format!("/registry/{group}/{plural}/");
        let (objects, _) = self.cache.list(&prefix);
        for o in objects {
            // Best effort: an object already gone (a concurrent delete) needs nothing more.
            if let Err(e) = self.cache.backend().delete(&o.key, None).await {
                tracing::debug!(key = %o.key, error = %e, "removing a custom resource of a deleted CRD");
            }
        }
        tracing::info!(crd = %name_of(crd), removed = %prefix, "custom resources of a deleted CRD removed");
    }
}
