//! The strategy a CRD builds for its custom resources: what `cairn_api::kinds::CUSTOM`
//! (a const table shared by every custom resource) cannot hold because it comes from one
//! CRD version: pruning, defaulting and validation by its structural schema and CEL rules,
//! and its Table by the printer columns. The API server's write and read paths call these
//! as they call a built-in kind's strategy.

use cairn_api::crd::structural;
use cairn_api::status::Cause;
use chrono::{DateTime, Utc};
use serde_json::Value;

use super::CustomVersion;

impl CustomVersion {
    /// Removes what the schema does not declare; each removed field described as upstream
    /// does (`unknown field "spec.x"`).
    pub fn prune(&self, obj: &mut Value) -> Vec<String> {
        let Some(schema) = &self.schema else {
            return Vec::new();
        };
        structural::prune(schema, obj)
            .iter()
            .map(|f| format!("unknown field \"{}\"", f.trim_start_matches('.')))
            .collect()
    }

    /// The schema's defaults, where the object leaves a field unset.
    pub fn default(&self, obj: &mut Value) {
        if let Some(schema) = &self.schema {
            structural::apply_defaults(schema, obj);
        }
    }

    /// Schema and CEL violations (`old` for transition rules).
    pub fn validate(&self, obj: &Value, old: Option<&Value>) -> Vec<Cause> {
        let mut causes = match &self.schema {
            Some(schema) => structural::validate(schema, obj),
            None => Vec::new(),
        };
        if let Some(rules) = &self.rules {
            causes.extend(rules.validate(obj, old).into_iter().map(violation_cause));
        }
        causes
    }

    /// The Table of `objects` by the version's `additionalPrinterColumns`.
    pub fn table(&self, objects: &[Value], now: DateTime<Utc>) -> Value {
        cairn_api::table::custom_table(&self.columns, objects, now)
    }
}

/// A broken CEL rule, as upstream words it by the rule's `reason`.
fn violation_cause(v: cairn_cel::Violation) -> Cause {
    let quoted_type = format!("{:?}", v.type_name);
    let message = match v.reason.as_deref() {
        Some("FieldValueForbidden") => format!("Forbidden: {}", v.message),
        Some("FieldValueRequired") => format!("Required value: {}", v.message),
        Some("FieldValueDuplicate") => format!("Duplicate value: {quoted_type}"),
        _ => format!("Invalid value: {quoted_type}: {}", v.message),
    };
    Cause::from_message(v.field, message)
}
