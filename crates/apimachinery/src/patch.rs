//! The patch formats a Kubernetes API server accepts:
//!
//! * [`merge_patch`]: JSON merge patch (RFC 7386, `application/merge-patch+json`);
//! * [`json_patch`]: JSON patch (RFC 6902, `application/json-patch+json`);
//! * [`strategic_merge_patch`]: Kubernetes strategic merge patch
//!   (`application/strategic-merge-patch+json`), following
//!   `k8s.io/apimachinery/pkg/util/strategicpatch` (apply side) with the patch
//!   strategies of the built-in kinds listed in [`STRATEGIC_KINDS`].
//!
//! None of these functions panics or recurses without bound, whatever the input:
//! documents nested deeper than [`MAX_DEPTH`] are rejected, JSON patches are limited
//! to [`MAX_JSON_PATCH_OPERATIONS`] operations and [`MAX_JSON_PATCH_COPIED_VALUES`]
//! copied values.

use std::collections::{HashMap, HashSet};
use std::fmt::Write as _;

use serde_json::{Map, Value};

mod directives;
mod go_sort;
mod json;
mod merge;
mod smp;
mod strategies;

use directives::*;
use go_sort::*;
pub use json::*;
pub use merge::*;
use smp::*;
use strategies::*;

/// Deepest nesting of objects and arrays accepted in a patch or a patched document.
pub const MAX_DEPTH: usize = 256;
/// Most operations accepted in one JSON patch (the Kubernetes limit).
pub const MAX_JSON_PATCH_OPERATIONS: usize = 10_000;
/// Most JSON values (nodes) that the `copy` operations of one JSON patch may duplicate.
pub const MAX_JSON_PATCH_COPIED_VALUES: usize = 1_000_000;

/// The kinds whose strategic-merge-patch strategies are known. Any other kind is
/// patched with every list treated as atomic (replaced), directives still honored.
pub const STRATEGIC_KINDS: &[&str] = &[
    "Pod",
    "Deployment",
    "ReplicaSet",
    "DaemonSet",
    "StatefulSet",
    "ReplicationController",
    "Job",
    "CronJob",
    "Service",
    "Node",
    "Namespace",
    "ConfigMap",
    "Secret",
    "ServiceAccount",
    "Endpoints",
    "EndpointSlice",
    "Event",
    "Lease",
];

/// Errors from applying a patch.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PatchError {
    /// The JSON patch document is not an array.
    #[error("json patch must be an array of operations, got {0}")]
    JsonPatchNotArray(&'static str),
    /// The JSON patch has more than [`MAX_JSON_PATCH_OPERATIONS`] operations.
    #[error("json patch has {0} operations, more than the allowed {MAX_JSON_PATCH_OPERATIONS}")]
    TooManyOperations(usize),
    /// A JSON patch operation is malformed (not an object, unknown `op`, missing member,
    /// bad JSON pointer).
    #[error("json patch operation {index}: {message}")]
    InvalidOperation {
        /// Position of the operation in the patch array.
        index: usize,
        /// What is wrong with it.
        message: String,
    },
    /// A JSON patch operation could not be applied to the document.
    #[error("json patch operation {index} ({op} at {path:?}): {message}")]
    OperationFailed {
        /// Position of the operation in the patch array.
        index: usize,
        /// The operation name.
        op: String,
        /// The operation's `path`.
        path: String,
        /// Why it failed.
        message: String,
    },
    /// A JSON patch `test` operation found a different value.
    #[error("json patch operation {index} (test at {path:?}): test failed: the value differs from the expected one")]
    TestFailed {
        /// Position of the operation in the patch array.
        index: usize,
        /// The operation's `path`.
        path: String,
    },
    /// A strategic merge patch argument is not a JSON object.
    #[error("strategic merge patch: the {what} must be a JSON object, got {got}")]
    NotAnObject {
        /// `"original document"` or `"patch"`.
        what: &'static str,
        /// The JSON type received.
        got: &'static str,
    },
    /// A strategic merge patch could not be applied at `path`.
    #[error("strategic merge patch at {path}: {message}")]
    Strategic {
        /// Where in the document (e.g. `spec.template.spec.containers`).
        path: String,
        /// What failed there (Kubernetes wording where there is one).
        message: String,
    },
    /// The input, or the document a patch would produce, is nested too deeply.
    #[error("{what} is nested more than {MAX_DEPTH} levels deep")]
    TooDeep {
        /// Which document.
        what: &'static str,
    },
}

/// The JSON type of `v` as error messages name it.
pub(crate) fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// Nesting depth of a value (a scalar is 0), computed without recursion.
fn depth_of(v: &Value) -> usize {
    let mut max = 0;
    let mut stack: Vec<(&Value, usize)> = vec![(v, 0)];
    while let Some((v, d)) = stack.pop() {
        max = max.max(d);
        match v {
            Value::Array(a) => stack.extend(a.iter().map(|x| (x, d + 1))),
            Value::Object(m) => stack.extend(m.values().map(|x| (x, d + 1))),
            _ => {}
        }
    }
    max
}

/// Number of JSON values in a value, computed without recursion.
fn node_count(v: &Value) -> usize {
    let mut n = 0;
    let mut stack = vec![v];
    while let Some(v) = stack.pop() {
        n += 1;
        match v {
            Value::Array(a) => stack.extend(a.iter()),
            Value::Object(m) => stack.extend(m.values()),
            _ => {}
        }
    }
    n
}

fn check_depth(v: &Value, what: &'static str) -> Result<(), PatchError> {
    if depth_of(v) > MAX_DEPTH {
        return Err(PatchError::TooDeep { what });
    }
    Ok(())
}

/// A short JSON rendering of a value for error messages.
fn render(v: &Value) -> String {
    let mut s = serde_json::to_string(v).unwrap_or_default();
    if s.len() > 200 {
        let mut cut = 200;
        while !s.is_char_boundary(cut) {
            cut -= 1;
        }
        s.truncate(cut);
        s.push('…');
    }
    s
}

/// Applies a Kubernetes strategic merge patch to `original` for an object of `kind`.
///
/// Maps merge recursively and `null` deletes a key. Lists are replaced, unless the
/// field's Go struct tag says `patchStrategy:"merge"`: then lists of objects merge
/// by the `patchMergeKey` (new items appended in patch order) and lists of scalars
/// are unioned. Directives: `$patch: replace|delete` on maps and list items,
/// `$retainKeys`, `$setElementOrder/<field>`, `$deleteFromPrimitiveList/<field>`;
/// `$patch: merge` is rejected as Kubernetes does. Directives never appear in the
/// output. The result is what Kubernetes'
/// `strategicpatch.StrategicMergeMapPatch` produces (after its typed decoding, which
/// drops `null` members and directive keys from patch content), key order preserved
/// and new keys appended. Kinds not in [`STRATEGIC_KINDS`] are patched with every
/// list treated as atomic.
pub fn strategic_merge_patch(
    original: &Value,
    patch: &Value,
    kind: &str,
) -> Result<Value, PatchError> {
    check_depth(original, "the original document")?;
    check_depth(patch, "the patch")?;
    let Value::Object(orig) = original else {
        return Err(PatchError::NotAnObject {
            what: "original document",
            got: type_name(original),
        });
    };
    let patch = match patch {
        Value::Object(p) => p.clone(),
        // Go decodes `null` into an empty map: nothing to apply.
        Value::Null => Map::new(),
        other => {
            return Err(PatchError::NotAnObject {
                what: "patch",
                got: type_name(other),
            })
        }
    };
    let mut smp = Smp { path: Vec::new() };
    let merged = smp.merge_map(orig.clone(), patch, schema_for_kind(kind), 0)?;
    Ok(Value::Object(merged))
}

#[cfg(test)]
mod tests;
