//! Tests of the structural-schema functions, by function; `certificate` runs them all on
//! a cert-manager-like schema.

use serde_json::Value;

use crate::status::Cause;

mod certificate;
mod check;
mod defaulting;
mod gofmt;
mod objects;
mod pruning;
mod robustness;
mod validation;

/// The causes as `field: message` lines, as a 422 lists them.
fn lines(causes: &[Cause]) -> Vec<String> {
    causes.iter().map(Cause::describe).collect()
}

/// The `field: message` lines of validating `obj` against `schema`.
fn validate_lines(schema: &Value, obj: &Value) -> Vec<String> {
    lines(&super::validate(schema, obj))
}

/// The `field: message` lines of checking `schema` under the path `s`.
fn check_lines(schema: &Value) -> Vec<String> {
    lines(&super::check_structural(schema, "s"))
}
