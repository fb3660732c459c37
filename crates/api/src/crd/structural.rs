//! Structural schemas: what apiextensions-apiserver (Kubernetes 1.33) does with a CRD
//! version's `schema.openAPIV3Schema`, as pure functions over JSON.
//!
//! - [`check_structural`]: whether a CRD may carry the schema (`ValidateStructural`,
//!   `ValidateCustomResourceDefinitionOpenAPISchema`, `ValidateDefaults`), with upstream's
//!   field paths and messages.
//! - [`prune`]: unknown fields removed (`pruning.PruneWithOptions`).
//! - [`apply_defaults`]: non-nullable `null`s without defaults dropped, then defaults
//!   filled (`PruneNonNullableNullsWithoutDefaults`, `Default`).
//! - [`validate`]: kube-openapi's schema validation as apiextensions reports it, plus the
//!   embedded-resource and list-type invariants the custom resource strategy checks.
//!
//! Errors read as upstream's, including Go's rendering of values: `Invalid value: 11:
//! spec.count in body should be less than or equal to 10`, `Duplicate value:
//! map[string]interface {}{"name":"a"}`, bounds printed with `%v` (`1e+06`).
//!
//! Formats: the registry of 1.33 (`bsonobjectid`, `uri`, `email`, `hostname`, `ipv4`,
//! `ipv6`, `cidr`, `mac`, `uuid`/`uuid3`/`uuid4`/`uuid5`, `isbn`/`isbn10`/`isbn13`,
//! `creditcard`, `ssn`, `hexcolor`, `rgbcolor`, `byte`, `password`, `date`, `duration`,
//! `date-time`). Any other format, `int32`/`int64`/`float`/`double` included, is stripped
//! from custom resources' validation as 1.33 strips it (no range checks).
//!
//! Not covered: CEL (`x-kubernetes-validations` rules are only refused where structurality
//! forbids them), validation ratcheting on update, the status-subresource restriction of
//! root keywords, the metadata coercion of embedded resources (`objectmeta.Coerce`), and
//! label/annotation/owner checks of embedded `metadata` (name, generateName and namespace
//! are checked).

use serde_json::Value;

use crate::status::Cause;

mod defaults;
mod formats;
mod gofmt;
mod invariants;
mod objects;
mod openapi;
mod pattern;
mod prune;
mod schema;
mod validate;

#[cfg(test)]
mod tests;

use schema::Schema;

/// Checks a CRD version's schema is structural, as upstream's `ValidateStructural` +
/// `validateCustomResourceDefinitionOpenAPISchema` do, with upstream's messages. `path` is
/// the field path prefix, e.g. `spec.versions[0].schema.openAPIV3Schema`. Returns `[]`
/// when fine.
///
/// A keyword of the wrong JSON type (which would not decode into `JSONSchemaProps`) is
/// reported as `Invalid value: ...: must be a string` (or the like) and nothing else is
/// checked.
pub fn check_structural(schema: &Value, path: &str) -> Vec<Cause> {
    let mut shape = Vec::new();
    let s = Schema::parse(schema, path, &mut shape);
    if !shape.is_empty() {
        return shape;
    }
    let mut errs = Vec::new();
    if s.nullable {
        errs.push(gofmt::forbidden(
            &gofmt::child(path, "nullable"),
            "nullable cannot be true at the root",
        ));
    }
    let unconvertible = openapi::conversion_error(&s);
    if unconvertible.is_none() {
        let structural = invariants::validate_structural(&s, path);
        if structural.is_empty() {
            errs.extend(defaults::validate_defaults(&s, path));
        } else {
            errs.extend(structural);
        }
    }
    errs.extend(openapi::openapi_schema(&s, path));
    if let (true, Some(e)) = (errs.is_empty(), unconvertible) {
        errs.push(gofmt::invalid_str(path, "", &e));
    }
    errs
}

/// Removes fields the schema does not declare (unless `x-kubernetes-preserve-unknown-fields:
/// true` at that level, or `additionalProperties` given), returning the JSON paths of what
/// was removed, sorted (`.spec.foo`, `.spec.items[0].bar`). At the root, `apiVersion`,
/// `kind` and `metadata` are never pruned; `x-kubernetes-embedded-resource` objects keep
/// theirs too and are otherwise pruned by their own schema.
pub fn prune(schema: &Value, obj: &mut Value) -> Vec<String> {
    let s = Schema::lenient(schema);
    let mut paths = Vec::new();
    prune::prune_value(obj, Some(&s), true, &mut paths);
    paths.sort();
    paths.into_iter().map(|p| format!(".{p}")).collect()
}

/// Fills `default` values where a field is absent, or `null` while not `nullable`,
/// recursing into objects, arrays (`items`) and `additionalProperties` maps. First, as
/// upstream, `null`s of non-nullable fields without a default are dropped.
pub fn apply_defaults(schema: &Value, obj: &mut Value) {
    let s = Schema::lenient(schema);
    prune::prune_non_nullable_nulls(obj, Some(&s), 0);
    prune::default_value(obj, Some(&s), 0);
}

/// Validates an object against the schema (after pruning and defaulting), with upstream's
/// kube-openapi messages (`spec.replicas: Invalid value: "string": spec.replicas in body
/// must be of type integer: "string"`), then the embedded resources
/// (`x-kubernetes-embedded-resource`) and list invariants (`x-kubernetes-list-type`).
/// Root-level `metadata` is the server's: only restrictions of its `name` and
/// `generateName` are checked.
pub fn validate(schema: &Value, obj: &Value) -> Vec<Cause> {
    let s = Schema::lenient(schema);
    let mut errs = validate::validate_value(&s, obj, None, validate::Mode::Resource, true);
    errs.extend(objects::embedded_resources(obj, &s));
    errs.extend(objects::list_sets_and_maps(obj, &s));
    errs
}
