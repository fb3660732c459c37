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

fn type_name(v: &Value) -> &'static str {
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

// ---------------------------------------------------------------------------
// JSON merge patch (RFC 7386)
// ---------------------------------------------------------------------------

/// Applies a JSON merge patch (RFC 7386) to `target`.
///
/// Objects merge recursively, `null` removes a member, anything else (arrays
/// included) replaces. A non-object patch replaces the whole target. Key order is
/// preserved; new members are appended in patch order. Implemented without recursion.
pub fn merge_patch(target: &Value, patch: &Value) -> Value {
    let mut out = target.clone();
    let mut stack: Vec<(&mut Value, &Value)> = vec![(&mut out, patch)];
    while let Some((t, p)) = stack.pop() {
        let Value::Object(pm) = p else {
            *t = p.clone();
            continue;
        };
        if !t.is_object() {
            *t = Value::Object(Map::new());
        }
        let Value::Object(tm) = t else {
            continue;
        };
        for (k, pv) in pm {
            match pv {
                Value::Null => {
                    tm.shift_remove(k);
                }
                Value::Object(_) => {
                    if !tm.contains_key(k) {
                        tm.insert(k.clone(), Value::Object(Map::new()));
                    }
                }
                other => {
                    tm.insert(k.clone(), other.clone());
                }
            }
        }
        for (k, tv) in tm.iter_mut() {
            if let Some(pv @ Value::Object(_)) = pm.get(k) {
                stack.push((tv, pv));
            }
        }
    }
    out
}

// ---------------------------------------------------------------------------
// JSON patch (RFC 6902)
// ---------------------------------------------------------------------------

/// Parses an RFC 6901 JSON pointer into unescaped reference tokens.
fn parse_pointer(p: &str) -> Result<Vec<String>, String> {
    if p.is_empty() {
        return Ok(Vec::new());
    }
    let Some(rest) = p.strip_prefix('/') else {
        return Err(format!(
            "JSON pointer {p:?} must be empty or start with '/'"
        ));
    };
    rest.split('/')
        .map(|tok| {
            let mut out = String::with_capacity(tok.len());
            let mut chars = tok.chars();
            while let Some(c) = chars.next() {
                if c == '~' {
                    match chars.next() {
                        Some('0') => out.push('~'),
                        Some('1') => out.push('/'),
                        _ => {
                            return Err(format!(
                                "JSON pointer {p:?} has an invalid escape ('~' must be followed by '0' or '1')"
                            ))
                        }
                    }
                } else {
                    out.push(c);
                }
            }
            Ok(out)
        })
        .collect()
}

/// An RFC 6902 array index: `0` or a digit string without leading zeros.
fn parse_index(tok: &str) -> Result<usize, String> {
    let valid = !tok.is_empty()
        && tok.bytes().all(|b| b.is_ascii_digit())
        && (tok == "0" || !tok.starts_with('0'));
    if !valid {
        return Err(format!("{tok:?} is not a valid array index"));
    }
    tok.parse::<usize>()
        .map_err(|_| format!("array index {tok} is too large"))
}

fn resolve_mut<'a>(doc: &'a mut Value, tokens: &[String]) -> Result<&'a mut Value, String> {
    let mut cur = doc;
    for (i, tok) in tokens.iter().enumerate() {
        cur = match cur {
            Value::Object(m) => m
                .get_mut(tok)
                .ok_or_else(|| format!("member {tok:?} not found (at token {i})"))?,
            Value::Array(a) => {
                if tok == "-" {
                    return Err("'-' refers past the end of the array".to_string());
                }
                let idx = parse_index(tok)?;
                let len = a.len();
                a.get_mut(idx)
                    .ok_or_else(|| format!("index {idx} is out of bounds (array length {len})"))?
            }
            other => {
                return Err(format!(
                    "cannot reference {tok:?} inside a {}",
                    type_name(other)
                ))
            }
        };
    }
    Ok(cur)
}

fn resolve<'a>(doc: &'a Value, tokens: &[String]) -> Result<&'a Value, String> {
    let mut cur = doc;
    for (i, tok) in tokens.iter().enumerate() {
        cur = match cur {
            Value::Object(m) => m
                .get(tok)
                .ok_or_else(|| format!("member {tok:?} not found (at token {i})"))?,
            Value::Array(a) => {
                if tok == "-" {
                    return Err("'-' refers past the end of the array".to_string());
                }
                let idx = parse_index(tok)?;
                a.get(idx).ok_or_else(|| {
                    format!("index {idx} is out of bounds (array length {})", a.len())
                })?
            }
            other => {
                return Err(format!(
                    "cannot reference {tok:?} inside a {}",
                    type_name(other)
                ))
            }
        };
    }
    Ok(cur)
}

fn json_add(doc: &mut Value, tokens: &[String], value: Value) -> Result<(), String> {
    if tokens.len() + depth_of(&value) > MAX_DEPTH {
        return Err(format!(
            "the result would be nested more than {MAX_DEPTH} levels deep"
        ));
    }
    let Some((last, parent_tokens)) = tokens.split_last() else {
        *doc = value;
        return Ok(());
    };
    match resolve_mut(doc, parent_tokens)? {
        Value::Object(m) => {
            m.insert(last.clone(), value);
            Ok(())
        }
        Value::Array(a) => {
            if last == "-" {
                a.push(value);
                return Ok(());
            }
            let idx = parse_index(last)?;
            if idx > a.len() {
                return Err(format!(
                    "index {idx} is out of bounds (array length {})",
                    a.len()
                ));
            }
            a.insert(idx, value);
            Ok(())
        }
        other => Err(format!("cannot add {last:?} to a {}", type_name(other))),
    }
}

fn json_remove(doc: &mut Value, tokens: &[String]) -> Result<Value, String> {
    let Some((last, parent_tokens)) = tokens.split_last() else {
        return Err("cannot remove the whole document".to_string());
    };
    match resolve_mut(doc, parent_tokens)? {
        Value::Object(m) => m
            .shift_remove(last)
            .ok_or_else(|| format!("member {last:?} not found")),
        Value::Array(a) => {
            if last == "-" {
                return Err("'-' refers past the end of the array".to_string());
            }
            let idx = parse_index(last)?;
            if idx >= a.len() {
                return Err(format!(
                    "index {idx} is out of bounds (array length {})",
                    a.len()
                ));
            }
            Ok(a.remove(idx))
        }
        other => Err(format!(
            "cannot remove {last:?} from a {}",
            type_name(other)
        )),
    }
}

/// JSON equality as RFC 6902 `test` defines it: numbers compare by value.
fn json_equal(a: &Value, b: &Value) -> bool {
    let mut stack = vec![(a, b)];
    while let Some((a, b)) = stack.pop() {
        let same = match (a, b) {
            (Value::Number(x), Value::Number(y)) => {
                if let (Some(x), Some(y)) = (x.as_i64(), y.as_i64()) {
                    x == y
                } else if let (Some(x), Some(y)) = (x.as_u64(), y.as_u64()) {
                    x == y
                } else if x.is_f64() || y.is_f64() {
                    x.as_f64() == y.as_f64()
                } else {
                    false
                }
            }
            (Value::Array(x), Value::Array(y)) => {
                if x.len() != y.len() {
                    false
                } else {
                    stack.extend(x.iter().zip(y.iter()));
                    true
                }
            }
            (Value::Object(x), Value::Object(y)) => {
                if x.len() != y.len() {
                    false
                } else {
                    let mut ok = true;
                    for (k, xv) in x {
                        match y.get(k) {
                            Some(yv) => stack.push((xv, yv)),
                            None => {
                                ok = false;
                                break;
                            }
                        }
                    }
                    ok
                }
            }
            (x, y) => x == y,
        };
        if !same {
            return false;
        }
    }
    true
}

/// Applies a JSON patch (RFC 6902) to `target`.
///
/// `patch` must be an array of operations (`add`, `remove`, `replace`, `move`,
/// `copy`, `test`) with RFC 6901 pointers (`~0`, `~1` escapes, `-` to append).
/// The operations apply in order and the patch is atomic: any failure returns an
/// error and no result.
pub fn json_patch(target: &Value, patch: &Value) -> Result<Value, PatchError> {
    let Value::Array(ops) = patch else {
        return Err(PatchError::JsonPatchNotArray(type_name(patch)));
    };
    if ops.len() > MAX_JSON_PATCH_OPERATIONS {
        return Err(PatchError::TooManyOperations(ops.len()));
    }
    check_depth(target, "the document to patch")?;
    let mut doc = target.clone();
    let mut copied = 0usize;
    for (index, op) in ops.iter().enumerate() {
        let invalid = |message: String| PatchError::InvalidOperation { index, message };
        let Value::Object(obj) = op else {
            return Err(invalid(format!(
                "an operation must be an object, got {}",
                type_name(op)
            )));
        };
        let str_member = |name: &str| -> Result<&str, PatchError> {
            match obj.get(name) {
                Some(Value::String(s)) => Ok(s.as_str()),
                Some(other) => Err(invalid(format!(
                    "member {name:?} must be a string, got {}",
                    type_name(other)
                ))),
                None => Err(invalid(format!("member {name:?} is missing"))),
            }
        };
        let op_name = str_member("op")?;
        let path = str_member("path")?;
        let tokens = parse_pointer(path).map_err(invalid)?;
        let value_member = || {
            obj.get("value")
                .ok_or_else(|| invalid(format!("{op_name:?} needs a \"value\" member")))
        };
        let failed = |message: String| PatchError::OperationFailed {
            index,
            op: op_name.to_string(),
            path: path.to_string(),
            message,
        };
        match op_name {
            "add" => {
                let value = value_member()?.clone();
                json_add(&mut doc, &tokens, value).map_err(failed)?;
            }
            "remove" => {
                json_remove(&mut doc, &tokens).map_err(failed)?;
            }
            "replace" => {
                let value = value_member()?;
                if tokens.len() + depth_of(value) > MAX_DEPTH {
                    return Err(failed(format!(
                        "the result would be nested more than {MAX_DEPTH} levels deep"
                    )));
                }
                let slot = resolve_mut(&mut doc, &tokens).map_err(failed)?;
                *slot = value.clone();
            }
            "move" => {
                let from = str_member("from")?;
                let from_tokens = parse_pointer(from).map_err(invalid)?;
                if from_tokens == tokens {
                    resolve(&doc, &from_tokens).map_err(failed)?;
                    continue;
                }
                if tokens.len() > from_tokens.len() && tokens.starts_with(&from_tokens) {
                    return Err(failed(format!(
                        "cannot move {from:?} into one of its own children"
                    )));
                }
                let value = json_remove(&mut doc, &from_tokens)
                    .map_err(|m| failed(format!("from {from:?}: {m}")))?;
                json_add(&mut doc, &tokens, value).map_err(failed)?;
            }
            "copy" => {
                let from = str_member("from")?;
                let from_tokens = parse_pointer(from).map_err(invalid)?;
                let value = resolve(&doc, &from_tokens)
                    .map_err(|m| failed(format!("from {from:?}: {m}")))?;
                copied = copied.saturating_add(node_count(value));
                if copied > MAX_JSON_PATCH_COPIED_VALUES {
                    return Err(failed(format!(
                        "the patch copies more than {MAX_JSON_PATCH_COPIED_VALUES} values in total"
                    )));
                }
                let value = value.clone();
                json_add(&mut doc, &tokens, value).map_err(failed)?;
            }
            "test" => {
                let expected = value_member()?;
                let actual = resolve(&doc, &tokens).map_err(failed)?;
                if !json_equal(actual, expected) {
                    return Err(PatchError::TestFailed {
                        index,
                        path: path.to_string(),
                    });
                }
            }
            other => {
                return Err(invalid(format!(
                    "unknown op {other:?} (expected add, remove, replace, move, copy or test)"
                )))
            }
        }
    }
    Ok(doc)
}

// ---------------------------------------------------------------------------
// Strategic merge patch: patch strategies of the built-in kinds
// ---------------------------------------------------------------------------

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Strategy {
    /// No strategy: maps merge, lists are replaced.
    Default,
    /// `patchStrategy:"merge"`: lists merge (by `merge_key` for lists of objects,
    /// as a set union for lists of scalars).
    Merge,
    /// `patchStrategy:"replace"`: maps are replaced.
    #[allow(dead_code)]
    Replace,
}

#[derive(Debug, Clone, Copy)]
struct FieldMeta {
    strategy: Strategy,
    merge_key: &'static str,
    /// The struct of the field (for a list: of its elements).
    schema: Schema,
}

#[derive(Debug)]
struct StructSchema {
    name: &'static str,
    fields: &'static [(&'static str, FieldMeta)],
}

type Schema = Option<&'static StructSchema>;

const NO_META: FieldMeta = FieldMeta {
    strategy: Strategy::Default,
    merge_key: "",
    schema: None,
};

const fn object(schema: &'static StructSchema) -> FieldMeta {
    FieldMeta {
        strategy: Strategy::Default,
        merge_key: "",
        schema: Some(schema),
    }
}

const fn merge_by(key: &'static str, schema: Schema) -> FieldMeta {
    FieldMeta {
        strategy: Strategy::Merge,
        merge_key: key,
        schema,
    }
}

const MERGE_SCALARS: FieldMeta = FieldMeta {
    strategy: Strategy::Merge,
    merge_key: "",
    schema: None,
};

// The tables below mirror the `patchStrategy`/`patchMergeKey` struct tags of
// k8s.io/api (core/v1, apps/v1) and k8s.io/apimachinery (meta/v1), v1.33.
// Fields without tags are omitted: they merge (maps) or are replaced (lists).

static OBJECT_META: StructSchema = StructSchema {
    name: "ObjectMeta",
    fields: &[
        ("ownerReferences", merge_by("uid", None)),
        ("finalizers", MERGE_SCALARS),
    ],
};

/// Container and EphemeralContainer (via EphemeralContainerCommon) share these tags.
static CONTAINER: StructSchema = StructSchema {
    name: "Container",
    fields: &[
        ("ports", merge_by("containerPort", None)),
        ("env", merge_by("name", None)),
        ("volumeMounts", merge_by("mountPath", None)),
        ("volumeDevices", merge_by("devicePath", None)),
    ],
};

static POD_SPEC: StructSchema = StructSchema {
    name: "PodSpec",
    fields: &[
        // patchStrategy:"merge,retainKeys"
        ("volumes", merge_by("name", None)),
        ("initContainers", merge_by("name", Some(&CONTAINER))),
        ("containers", merge_by("name", Some(&CONTAINER))),
        ("ephemeralContainers", merge_by("name", Some(&CONTAINER))),
        ("imagePullSecrets", merge_by("name", None)),
        ("hostAliases", merge_by("ip", None)),
        ("topologySpreadConstraints", merge_by("topologyKey", None)),
        ("schedulingGates", merge_by("name", None)),
        // patchStrategy:"merge,retainKeys"
        ("resourceClaims", merge_by("name", None)),
    ],
};

static CONTAINER_STATUS: StructSchema = StructSchema {
    name: "ContainerStatus",
    fields: &[
        ("volumeMounts", merge_by("mountPath", None)),
        ("allocatedResourcesStatus", merge_by("name", None)),
    ],
};

static POD_STATUS: StructSchema = StructSchema {
    name: "PodStatus",
    fields: &[
        ("conditions", merge_by("type", None)),
        ("hostIPs", merge_by("ip", None)),
        ("podIPs", merge_by("ip", None)),
        // patchStrategy:"merge,retainKeys"
        ("resourceClaimStatuses", merge_by("name", None)),
        // The status lists themselves are atomic; kept for completeness.
        ("containerStatuses", object(&CONTAINER_STATUS)),
    ],
};

static POD: StructSchema = StructSchema {
    name: "Pod",
    fields: &[
        ("metadata", object(&OBJECT_META)),
        ("spec", object(&POD_SPEC)),
        ("status", object(&POD_STATUS)),
    ],
};

static POD_TEMPLATE_SPEC: StructSchema = StructSchema {
    name: "PodTemplateSpec",
    fields: &[
        ("metadata", object(&OBJECT_META)),
        ("spec", object(&POD_SPEC)),
    ],
};

/// DeploymentSpec, ReplicaSetSpec and DaemonSetSpec: only `template` has tagged
/// fields below it (`DeploymentSpec.strategy` is `retainKeys`, which only matters
/// when computing patches).
static WORKLOAD_SPEC: StructSchema = StructSchema {
    name: "WorkloadSpec",
    fields: &[("template", object(&POD_TEMPLATE_SPEC))],
};

/// DeploymentStatus, ReplicaSetStatus, DaemonSetStatus, ServiceStatus, NamespaceStatus.
static CONDITIONS_STATUS: StructSchema = StructSchema {
    name: "Status",
    fields: &[("conditions", merge_by("type", None))],
};

static WORKLOAD: StructSchema = StructSchema {
    name: "Workload",
    fields: &[
        ("metadata", object(&OBJECT_META)),
        ("spec", object(&WORKLOAD_SPEC)),
        ("status", object(&CONDITIONS_STATUS)),
    ],
};

/// CronJobSpec: the Job template's pod template is where the merge keys are.
static JOB_TEMPLATE: StructSchema = StructSchema {
    name: "JobTemplateSpec",
    fields: &[
        ("metadata", object(&OBJECT_META)),
        ("spec", object(&WORKLOAD_SPEC)),
    ],
};

static CRON_JOB_SPEC: StructSchema = StructSchema {
    name: "CronJobSpec",
    fields: &[("jobTemplate", object(&JOB_TEMPLATE))],
};

static CRON_JOB: StructSchema = StructSchema {
    name: "CronJob",
    fields: &[
        ("metadata", object(&OBJECT_META)),
        ("spec", object(&CRON_JOB_SPEC)),
    ],
};

static SERVICE_SPEC: StructSchema = StructSchema {
    name: "ServiceSpec",
    fields: &[("ports", merge_by("port", None))],
};

static SERVICE: StructSchema = StructSchema {
    name: "Service",
    fields: &[
        ("metadata", object(&OBJECT_META)),
        ("spec", object(&SERVICE_SPEC)),
        ("status", object(&CONDITIONS_STATUS)),
    ],
};

static NODE_SPEC: StructSchema = StructSchema {
    name: "NodeSpec",
    // `taints` has no patch strategy (atomic).
    fields: &[("podCIDRs", MERGE_SCALARS)],
};

static NODE_STATUS: StructSchema = StructSchema {
    name: "NodeStatus",
    fields: &[
        ("conditions", merge_by("type", None)),
        ("addresses", merge_by("type", None)),
    ],
};

static NODE: StructSchema = StructSchema {
    name: "Node",
    fields: &[
        ("metadata", object(&OBJECT_META)),
        ("spec", object(&NODE_SPEC)),
        ("status", object(&NODE_STATUS)),
    ],
};

static NAMESPACE: StructSchema = StructSchema {
    name: "Namespace",
    // `spec.finalizers` has no patch strategy (atomic).
    fields: &[
        ("metadata", object(&OBJECT_META)),
        ("status", object(&CONDITIONS_STATUS)),
    ],
};

static SERVICE_ACCOUNT: StructSchema = StructSchema {
    name: "ServiceAccount",
    fields: &[
        ("metadata", object(&OBJECT_META)),
        ("secrets", merge_by("name", None)),
    ],
};

/// ConfigMap, Secret, Endpoints, EndpointSlice, Event, Lease: only ObjectMeta has tags.
static METADATA_ONLY: StructSchema = StructSchema {
    name: "Object",
    fields: &[("metadata", object(&OBJECT_META))],
};

fn schema_for_kind(kind: &str) -> Schema {
    Some(match kind {
        "Pod" => &POD,
        "Deployment"
        | "ReplicaSet"
        | "DaemonSet"
        | "StatefulSet"
        | "ReplicationController"
        | "Job" => &WORKLOAD,
        "CronJob" => &CRON_JOB,
        "Service" => &SERVICE,
        "Node" => &NODE,
        "Namespace" => &NAMESPACE,
        "ServiceAccount" => &SERVICE_ACCOUNT,
        "ConfigMap" | "Secret" | "Endpoints" | "EndpointSlice" | "Event" | "Lease" => {
            &METADATA_ONLY
        }
        _ => return None,
    })
}

fn lookup(schema: Schema, key: &str) -> FieldMeta {
    schema
        .and_then(|s| s.fields.iter().find(|(name, _)| *name == key))
        .map_or(NO_META, |(_, meta)| *meta)
}

// ---------------------------------------------------------------------------
// Strategic merge patch: the algorithm
// ---------------------------------------------------------------------------

const DIRECTIVE_MARKER: &str = "$patch";
const DELETE_DIRECTIVE: &str = "delete";
const REPLACE_DIRECTIVE: &str = "replace";
const MERGE_DIRECTIVE: &str = "merge";
const RETAIN_KEYS_DIRECTIVE: &str = "$retainKeys";
const DELETE_FROM_PRIMITIVE_LIST_PREFIX: &str = "$deleteFromPrimitiveList";
const SET_ELEMENT_ORDER_PREFIX: &str = "$setElementOrder";

fn is_directive_key(k: &str) -> bool {
    k == DIRECTIVE_MARKER
        || k == RETAIN_KEYS_DIRECTIVE
        || k.starts_with(SET_ELEMENT_ORDER_PREFIX)
        || k.starts_with(DELETE_FROM_PRIMITIVE_LIST_PREFIX)
}

/// A patch value that lands in the result without being merged (its key is new,
/// or its type differs from the original's): like Kubernetes, drop `null` members
/// (`discardNullValuesFromPatch`) and objects carrying `$patch` (`removeDirectives`),
/// and drop the other directive keys, which Kubernetes' typed decoding drops.
/// `None`: the value itself is a directive object and the key must go.
fn sanitize_inserted(v: Value) -> Option<Value> {
    match v {
        Value::Object(m) => {
            if m.get(DIRECTIVE_MARKER).is_some_and(|d| !d.is_null()) {
                return None;
            }
            let mut out = Map::new();
            for (k, v) in m {
                if v.is_null() || is_directive_key(&k) {
                    continue;
                }
                if let Some(v) = sanitize_inserted(v) {
                    out.insert(k, v);
                }
            }
            Some(Value::Object(out))
        }
        Value::Array(a) => Some(Value::Array(
            a.into_iter().filter_map(sanitize_inserted).collect(),
        )),
        other => Some(other),
    }
}

/// A patch value taken as-is by Kubernetes (replaced list, `$patch: replace` map,
/// appended list item): drop directive keys and `null` members, as Kubernetes'
/// conversion of the result to a typed object does.
fn strip_directives(v: Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(strip_directives_map(m)),
        Value::Array(a) => Value::Array(a.into_iter().map(strip_directives).collect()),
        other => other,
    }
}

fn strip_directives_map(m: Map<String, Value>) -> Map<String, Value> {
    m.into_iter()
        .filter(|(k, v)| !v.is_null() && !is_directive_key(k))
        .map(|(k, v)| (k, strip_directives(v)))
        .collect()
}

/// The JSON type of a value as Go's `reflect.TypeOf` sees the decoded value
/// (integers decode to int64, other numbers to float64).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Class {
    Null,
    Bool,
    Int,
    Float,
    String,
    Array,
    Object,
}

fn class(v: &Value) -> Class {
    match v {
        Value::Null => Class::Null,
        Value::Bool(_) => Class::Bool,
        Value::Number(n) if n.is_i64() => Class::Int,
        Value::Number(_) => Class::Float,
        Value::String(_) => Class::String,
        Value::Array(_) => Class::Array,
        Value::Object(_) => Class::Object,
    }
}

/// A hashable rendering of a value such that equal values (`serde_json` equality,
/// which is Go's `==` for the scalars Kubernetes compares) render equally.
fn key_repr(v: &Value) -> String {
    let mut out = String::new();
    write_key_repr(v, &mut out);
    out
}

fn write_key_repr(v: &Value, out: &mut String) {
    match v {
        Value::Null => out.push('z'),
        Value::Bool(b) => out.push(if *b { 'T' } else { 'F' }),
        Value::Number(n) => {
            if let Some(f) = n.as_f64().filter(|_| n.is_f64()) {
                if f == 0.0 {
                    out.push_str("f0");
                } else {
                    let _ = write!(out, "f{n}");
                }
            } else {
                let _ = write!(out, "i{n}");
            }
        }
        Value::String(s) => {
            let _ = write!(out, "s{}:{s}", s.len());
        }
        Value::Array(a) => {
            out.push('[');
            for x in a {
                write_key_repr(x, out);
                out.push(',');
            }
            out.push(']');
        }
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort_unstable();
            out.push('{');
            for k in keys {
                let _ = write!(out, "{}:{k}=", k.len());
                if let Some(x) = m.get(k) {
                    write_key_repr(x, out);
                }
                out.push(',');
            }
            out.push('}');
        }
    }
}

/// Positions of items in an "order" list, looked up by merge-key value (lists of
/// objects) or by value (lists of scalars): Kubernetes' `index()`, in O(1).
struct OrderIndex {
    first: HashMap<String, usize>,
    /// Why the list fails Kubernetes' `validateMergeKeyInLists`, if it does.
    invalid: Option<String>,
}

impl OrderIndex {
    fn build(list: &[Value], merge_key: &str, is_map: bool) -> Self {
        let mut first = HashMap::with_capacity(list.len());
        let mut invalid = None;
        for (i, item) in list.iter().enumerate() {
            let probe = if is_map {
                match item {
                    Value::Object(m) => match m.get(merge_key) {
                        Some(v) => Some(v),
                        None => {
                            invalid.get_or_insert_with(|| no_merge_key_msg(m, merge_key));
                            None
                        }
                    },
                    other => {
                        invalid.get_or_insert_with(|| {
                            format!("expected an object, but received a {}", type_name(other))
                        });
                        None
                    }
                }
            } else {
                Some(item)
            };
            if let Some(v) = probe {
                first.entry(key_repr(v)).or_insert(i);
            }
        }
        OrderIndex { first, invalid }
    }

    fn index_of(&self, item: &Value, merge_key: &str, is_map: bool) -> Option<usize> {
        let probe = if is_map {
            item.as_object()?.get(merge_key)?
        } else {
            item
        };
        self.first.get(&key_repr(probe)).copied()
    }
}

fn no_merge_key_msg(m: &Map<String, Value>, merge_key: &str) -> String {
    format!(
        "map: {} does not contain declared merge key: {merge_key}",
        render(&Value::Object(m.clone()))
    )
}

/// `sort.SliceStable` from Go, ported exactly (insertion sort in blocks of 20,
/// then SymMerge), so that Kubernetes' inconsistent comparators give the same
/// order here as there.
fn go_stable_sort<T>(data: &mut [T], less: &dyn Fn(&T, &T) -> bool) {
    let n = data.len();
    let mut block = 20;
    let (mut a, mut b) = (0, block);
    while b <= n {
        go_insertion_sort(data, a, b, less);
        a = b;
        b += block;
    }
    go_insertion_sort(data, a, n, less);
    while block < n {
        a = 0;
        b = 2 * block;
        while b <= n {
            go_sym_merge(data, a, a + block, b, less);
            a = b;
            b += 2 * block;
        }
        let m = a + block;
        if m < n {
            go_sym_merge(data, a, m, n, less);
        }
        block *= 2;
    }
}

fn go_less<T>(data: &[T], i: usize, j: usize, less: &dyn Fn(&T, &T) -> bool) -> bool {
    match (data.get(i), data.get(j)) {
        (Some(x), Some(y)) => less(x, y),
        _ => false,
    }
}

fn go_insertion_sort<T>(data: &mut [T], a: usize, b: usize, less: &dyn Fn(&T, &T) -> bool) {
    for i in a + 1..b {
        let mut j = i;
        while j > a && go_less(data, j, j - 1, less) {
            data.swap(j, j - 1);
            j -= 1;
        }
    }
}

fn go_sym_merge<T>(data: &mut [T], a: usize, m: usize, b: usize, less: &dyn Fn(&T, &T) -> bool) {
    if m <= a || b <= m || b > data.len() {
        return;
    }
    if m - a == 1 {
        let (mut i, mut j) = (m, b);
        while i < j {
            let h = (i + j) / 2;
            if go_less(data, h, a, less) {
                i = h + 1;
            } else {
                j = h;
            }
        }
        for k in a..i - 1 {
            data.swap(k, k + 1);
        }
        return;
    }
    if b - m == 1 {
        let (mut i, mut j) = (a, m);
        while i < j {
            let h = (i + j) / 2;
            if !go_less(data, m, h, less) {
                i = h + 1;
            } else {
                j = h;
            }
        }
        let mut k = m;
        while k > i {
            data.swap(k, k - 1);
            k -= 1;
        }
        return;
    }
    let mid = (a + b) / 2;
    let n = mid + m;
    let (mut start, mut r) = if m > mid { (n - b, mid) } else { (a, m) };
    let p = n - 1;
    while start < r {
        let c = (start + r) / 2;
        if !go_less(data, p - c, c, less) {
            start = c + 1;
        } else {
            r = c;
        }
    }
    let end = n - start;
    if start < m && m < end {
        if let Some(s) = data.get_mut(start..end) {
            s.rotate_left(m - start);
        }
    }
    if a < start && start < mid {
        go_sym_merge(data, a, start, mid, less);
    }
    if mid < end && end < b {
        go_sym_merge(data, mid, end, b, less);
    }
}

/// One strategic merge patch application; tracks the current path for errors.
struct Smp {
    path: Vec<String>,
}

impl Smp {
    fn err(&self, message: impl Into<String>) -> PatchError {
        let mut path = String::new();
        for seg in &self.path {
            if !path.is_empty() && !seg.starts_with('[') {
                path.push('.');
            }
            path.push_str(seg);
        }
        if path.is_empty() {
            path.push_str("<root>");
        }
        PatchError::Strategic {
            path,
            message: message.into(),
        }
    }

    fn check_depth(&self, depth: usize) -> Result<(), PatchError> {
        if depth > MAX_DEPTH {
            return Err(PatchError::TooDeep { what: "the patch" });
        }
        Ok(())
    }

    /// Kubernetes `mergeMap`.
    fn merge_map(
        &mut self,
        mut original: Map<String, Value>,
        mut patch: Map<String, Value>,
        schema: Schema,
        depth: usize,
    ) -> Result<Map<String, Value>, PatchError> {
        self.check_depth(depth)?;
        if let Some(directive) = patch.get(DIRECTIVE_MARKER) {
            return match directive.as_str() {
                Some(REPLACE_DIRECTIVE) => {
                    patch.shift_remove(DIRECTIVE_MARKER);
                    Ok(strip_directives_map(patch))
                }
                Some(DELETE_DIRECTIVE) => Ok(Map::new()),
                _ => Err(self.err(format!(
                    "unknown patch type: {} in map: {}",
                    render(directive),
                    render(&Value::Object(patch.clone()))
                ))),
            };
        }

        self.apply_retain_keys(&mut original, &mut patch)?;
        self.merge_set_element_order_lists(&mut original, &mut patch, schema, depth)?;

        for (k, patch_v) in patch {
            let (k, is_delete_list) = if k.starts_with(DELETE_FROM_PRIMITIVE_LIST_PREFIX) {
                (
                    self.extract_key(&k, DELETE_FROM_PRIMITIVE_LIST_PREFIX)?,
                    true,
                )
            } else {
                (k, false)
            };
            if patch_v.is_null() {
                original.shift_remove(&k);
                continue;
            }
            let Some(orig_v) = original.get_mut(&k) else {
                if !is_delete_list {
                    if let Some(v) = sanitize_inserted(patch_v) {
                        original.insert(k, v);
                    }
                }
                continue;
            };
            if class(orig_v) != class(&patch_v) {
                if !is_delete_list {
                    match sanitize_inserted(patch_v) {
                        Some(v) => *orig_v = v,
                        None => {
                            original.shift_remove(&k);
                        }
                    }
                }
                continue;
            }
            let meta = lookup(schema, &k);
            match (std::mem::take(orig_v), patch_v) {
                (Value::Object(o), Value::Object(p)) => {
                    self.path.push(k.clone());
                    let merged = if meta.strategy == Strategy::Replace {
                        Ok(strip_directives_map(p))
                    } else {
                        self.merge_map(o, p, meta.schema, depth + 1)
                    };
                    self.path.pop();
                    *orig_v = Value::Object(merged?);
                }
                (Value::Array(o), Value::Array(p)) => {
                    self.path.push(k.clone());
                    let merged = self.merge_slice_handler(o, p, meta, is_delete_list, depth + 1);
                    self.path.pop();
                    *orig_v = Value::Array(merged?);
                }
                (_, p) => match sanitize_inserted(p) {
                    Some(v) => *orig_v = v,
                    None => {
                        original.shift_remove(&k);
                    }
                },
            }
        }
        Ok(original)
    }

    fn extract_key(&self, s: &str, prefix: &str) -> Result<String, PatchError> {
        match s.split_once('/') {
            Some((p, rest)) if p == prefix => Ok(rest.to_string()),
            _ => Err(self.err(if prefix == DELETE_FROM_PRIMITIVE_LIST_PREFIX {
                format!("invalid patch format of primitive list: {s:?} must be \"{prefix}/<field>\"")
            } else {
                format!("invalid patch format of setElementOrder list: {s:?} must be \"{prefix}/<field>\"")
            })),
        }
    }

    /// Kubernetes `applyRetainKeysDirective` (applying, not diffing).
    fn apply_retain_keys(
        &self,
        original: &mut Map<String, Value>,
        patch: &mut Map<String, Value>,
    ) -> Result<(), PatchError> {
        let Some(retain) = patch.shift_remove(RETAIN_KEYS_DIRECTIVE) else {
            return Ok(());
        };
        let Value::Array(list) = retain else {
            return Err(self.err(format!(
                "invalid patch format of retainKeys: $retainKeys must be a list, got {}",
                type_name(&retain)
            )));
        };
        let keep: HashSet<&str> = list.iter().filter_map(Value::as_str).collect();
        for (k, v) in patch.iter() {
            if v.is_null()
                || k.starts_with(DELETE_FROM_PRIMITIVE_LIST_PREFIX)
                || k.starts_with(SET_ELEMENT_ORDER_PREFIX)
            {
                continue;
            }
            if !keep.contains(k.as_str()) {
                return Err(self.err(format!(
                    "invalid patch format of retainKeys: the patch sets {k:?}, which is not in $retainKeys"
                )));
            }
        }
        original.retain(|k, _| keep.contains(k.as_str()));
        Ok(())
    }

    /// Kubernetes `mergePatchIntoOriginal`: handles every `$setElementOrder/<field>`
    /// together with the patch list of `<field>`.
    fn merge_set_element_order_lists(
        &mut self,
        original: &mut Map<String, Value>,
        patch: &mut Map<String, Value>,
        schema: Schema,
        depth: usize,
    ) -> Result<(), PatchError> {
        let keys: Vec<String> = patch
            .keys()
            .filter(|k| k.starts_with(SET_ELEMENT_ORDER_PREFIX))
            .cloned()
            .collect();
        for key in keys {
            let Some(order_v) = patch.shift_remove(&key) else {
                continue;
            };
            let Value::Array(order) = order_v else {
                return Err(self.err(format!("{key} must be a list, got {}", type_name(&order_v))));
            };
            let field = self.extract_key(&key, SET_ELEMENT_ORDER_PREFIX)?;
            let original_list = match original.get_mut(&field) {
                None => None,
                Some(Value::Array(a)) => Some(std::mem::take(a)),
                Some(other) => {
                    return Err(self.err(format!(
                        "{field} must be a list to apply {key}, got {}",
                        type_name(other)
                    )))
                }
            };
            let patch_list = match patch.get_mut(&field) {
                None => None,
                Some(Value::Array(a)) => Some(std::mem::take(a)),
                Some(other) => {
                    return Err(self.err(format!(
                        "{field} in the patch must be a list to apply {key}, got {}",
                        type_name(other)
                    )))
                }
            };
            let meta = lookup(schema, &field);
            self.path.push(field.clone());
            let result = self.order_one_list(original_list, patch_list, &order, meta, &key, depth);
            self.path.pop();
            match result? {
                Some(both) => {
                    original.insert(field.clone(), Value::Array(both));
                }
                None => {
                    original.shift_remove(&field);
                }
            }
            patch.shift_remove(&field);
        }
        Ok(())
    }

    fn order_one_list(
        &mut self,
        original_list: Option<Vec<Value>>,
        patch_list: Option<Vec<Value>>,
        order: &[Value],
        meta: FieldMeta,
        directive: &str,
        depth: usize,
    ) -> Result<Option<Vec<Value>>, PatchError> {
        let merge_key = meta.merge_key;
        self.validate_patch_with_set_order_list(
            patch_list.as_deref().unwrap_or(&[]),
            order,
            merge_key,
            directive,
        )?;
        let kind = slice_element_type(&[
            original_list.as_deref().unwrap_or(&[]),
            patch_list.as_deref().unwrap_or(&[]),
        ]);
        let is_map = matches!(kind, Ok(Class::Object));
        let server_order =
            OrderIndex::build(original_list.as_deref().unwrap_or(&[]), merge_key, is_map);
        let merged = match (original_list, patch_list) {
            (Some(o), None) => o,
            (None, Some(p)) => p.into_iter().filter_map(sanitize_inserted).collect(),
            (Some(o), Some(p)) => self.merge_slice_handler(o, p, meta, false, depth + 1)?,
            (None, None) => return Ok(None),
        };
        let (patch_items, server_only) = if merge_key.is_empty() {
            self.partition_scalars(merged, order)?
        } else {
            self.partition_maps(merged, order, merge_key)?
        };
        let kind = kind.map_err(|m| self.err(m))?;
        let is_map = kind == Class::Object;
        let order_index = OrderIndex::build(order, merge_key, is_map);
        let both = self.normalize_element_order(
            patch_items,
            server_only,
            &order_index,
            &server_order,
            merge_key,
            is_map,
        )?;
        Ok(Some(both))
    }

    /// Kubernetes `validatePatchWithSetOrderList`: the patch list must follow the
    /// order of the `$setElementOrder` list.
    fn validate_patch_with_set_order_list(
        &self,
        patch_list: &[Value],
        order: &[Value],
        merge_key: &str,
        directive: &str,
    ) -> Result<(), PatchError> {
        if order.is_empty() || patch_list.is_empty() {
            return Ok(());
        }
        let mut non_delete: Vec<&Value> = Vec::with_capacity(patch_list.len());
        if merge_key.is_empty() {
            non_delete.extend(patch_list.iter());
        } else {
            for v in patch_list {
                let Value::Object(m) = v else {
                    return Err(self.err(format!(
                        "expected an object in the list, but received a {}",
                        type_name(v)
                    )));
                };
                if m.get(DIRECTIVE_MARKER).and_then(Value::as_str) != Some(DELETE_DIRECTIVE) {
                    non_delete.push(v);
                }
            }
        }
        let (mut pi, mut si) = (0, 0);
        while let (Some(p), Some(s)) = (non_delete.get(pi), order.get(si)) {
            if p.as_object()
                .is_some_and(|m| m.contains_key(DIRECTIVE_MARKER))
            {
                pi += 1;
                continue;
            }
            let equal = if merge_key.is_empty() {
                *p == s
            } else {
                let pk = self.merge_key_value(p, merge_key)?;
                let sk = self.merge_key_value(s, merge_key)?;
                pk == sk
            };
            if equal {
                pi += 1;
            }
            si += 1;
        }
        if pi < non_delete.len() && si >= order.len() {
            return Err(self.err(format!(
                "the order in patch list:\n{}\n doesn't match {directive} list:\n{}",
                render(&Value::Array(patch_list.to_vec())),
                render(&Value::Array(order.to_vec()))
            )));
        }
        Ok(())
    }

    fn merge_key_value<'v>(&self, v: &'v Value, merge_key: &str) -> Result<&'v Value, PatchError> {
        match v {
            Value::Object(m) => m
                .get(merge_key)
                .ok_or_else(|| self.err(no_merge_key_msg(m, merge_key))),
            other => Err(self.err(format!(
                "expected an object, but received a {}",
                type_name(other)
            ))),
        }
    }

    /// Kubernetes `partitionPrimitivesByPresentInList`.
    fn partition_scalars(
        &self,
        items: Vec<Value>,
        by: &[Value],
    ) -> Result<(Vec<Value>, Vec<Value>), PatchError> {
        if let Some(bad) = items
            .iter()
            .chain(by.iter())
            .find(|v| matches!(v, Value::Object(_) | Value::Array(_)))
        {
            // Go panics here ("hash of unhashable type").
            return Err(self.err(format!(
                "cannot order a list of {}s without a merge key",
                type_name(bad)
            )));
        }
        let present: HashSet<String> = by.iter().map(key_repr).collect();
        Ok(items
            .into_iter()
            .partition(|v| present.contains(&key_repr(v))))
    }

    /// Kubernetes `partitionMapsByPresentInList`.
    fn partition_maps(
        &self,
        items: Vec<Value>,
        by: &[Value],
        merge_key: &str,
    ) -> Result<(Vec<Value>, Vec<Value>), PatchError> {
        let first_non_map = by.iter().position(|v| !v.is_object());
        let index = OrderIndex::build(by, merge_key, true);
        let mut in_patch = Vec::new();
        let mut server_only = Vec::new();
        for item in items {
            let key_value = self.merge_key_value(&item, merge_key)?;
            let found = index.first.get(&key_repr(key_value)).copied();
            if let Some(bad) = first_non_map {
                if found.is_none_or(|i| i > bad) {
                    return Err(self.err(format!("value for key {bad} is not a map")));
                }
            }
            if found.is_some() {
                in_patch.push(item);
            } else {
                server_only.push(item);
            }
        }
        Ok((in_patch, server_only))
    }

    /// Kubernetes `mergeSliceHandler`.
    fn merge_slice_handler(
        &mut self,
        original: Vec<Value>,
        patch: Vec<Value>,
        meta: FieldMeta,
        is_delete_list: bool,
        depth: usize,
    ) -> Result<Vec<Value>, PatchError> {
        if meta.strategy == Strategy::Merge || is_delete_list {
            self.merge_slice(original, patch, meta, is_delete_list, depth)
        } else {
            Ok(patch.into_iter().map(strip_directives).collect())
        }
    }

    /// Kubernetes `mergeSlice`.
    fn merge_slice(
        &mut self,
        original: Vec<Value>,
        patch: Vec<Value>,
        meta: FieldMeta,
        is_delete_list: bool,
        depth: usize,
    ) -> Result<Vec<Value>, PatchError> {
        self.check_depth(depth)?;
        if original.is_empty() && patch.is_empty() {
            return Ok(original);
        }
        let kind = slice_element_type(&[&original, &patch]).map_err(|m| self.err(m))?;
        let merge_key = meta.merge_key;
        if kind != Class::Object {
            if is_delete_list {
                let remove: HashSet<String> = patch.iter().map(key_repr).collect();
                return Ok(original
                    .into_iter()
                    .filter(|v| !remove.contains(&key_repr(v)))
                    .collect());
            }
            let server_order = OrderIndex::build(&original, merge_key, false);
            let patch_order = OrderIndex::build(&patch, merge_key, false);
            let mut seen = HashSet::new();
            let merged: Vec<Value> = original
                .into_iter()
                .chain(patch)
                .filter(|v| seen.insert(key_repr(v)))
                .collect();
            let (patch_items, server_only): (Vec<Value>, Vec<Value>) = if merge_key.is_empty() {
                merged
                    .into_iter()
                    .partition(|v| patch_order.index_of(v, "", false).is_some())
            } else {
                // A merge key declared on a list of scalars: Kubernetes fails here.
                let Some(v) = merged.first() else {
                    return Ok(merged);
                };
                return Err(self.err(format!(
                    "expected an object, but received a {}",
                    type_name(v)
                )));
            };
            return self.normalize_element_order(
                patch_items,
                server_only,
                &patch_order,
                &server_order,
                merge_key,
                false,
            );
        }

        if merge_key.is_empty() {
            let name = meta.schema.map_or("the list", |s| s.name);
            return Err(self.err(format!("cannot merge lists without merge key for {name}")));
        }
        let (original, patch) =
            self.merge_slice_with_special_elements(original, patch, merge_key)?;
        let server_order = OrderIndex::build(&original, merge_key, true);
        let patch_order = OrderIndex::build(&patch, merge_key, true);
        let merged = self.merge_slice_without_special_elements(original, patch, meta, depth)?;
        let mut patch_items = Vec::new();
        let mut server_only = Vec::new();
        for item in merged {
            let key_value = self.merge_key_value(&item, merge_key)?;
            if patch_order.first.contains_key(&key_repr(key_value)) {
                patch_items.push(item);
            } else {
                server_only.push(item);
            }
        }
        self.normalize_element_order(
            patch_items,
            server_only,
            &patch_order,
            &server_order,
            merge_key,
            true,
        )
    }

    /// Kubernetes `mergeSliceWithSpecialElements`: applies `$patch: delete` and
    /// `$patch: replace` list items; returns the new original and the plain patch items.
    fn merge_slice_with_special_elements(
        &self,
        mut original: Vec<Value>,
        patch: Vec<Value>,
        merge_key: &str,
    ) -> Result<(Vec<Value>, Vec<Value>), PatchError> {
        let mut plain = Vec::with_capacity(patch.len());
        let mut replace = false;
        for v in patch {
            let Value::Object(m) = &v else {
                return Err(self.err(format!(
                    "expected an object in the list, but received a {}",
                    type_name(&v)
                )));
            };
            let Some(directive) = m.get(DIRECTIVE_MARKER) else {
                plain.push(v);
                continue;
            };
            match directive.as_str() {
                Some(DELETE_DIRECTIVE) => {
                    let Some(key_value) = m.get(merge_key) else {
                        return Err(self.err(no_merge_key_msg(m, merge_key)));
                    };
                    original.retain(|item| item.get(merge_key) != Some(key_value));
                }
                Some(REPLACE_DIRECTIVE) => replace = true,
                Some(MERGE_DIRECTIVE) => {
                    return Err(self.err("merging lists cannot yet be specified in the patch"))
                }
                _ => {
                    return Err(self.err(format!(
                        "unknown patch type: {} in map: {}",
                        render(directive),
                        render(&v)
                    )))
                }
            }
        }
        if replace {
            return Ok((
                plain.into_iter().map(strip_directives).collect(),
                Vec::new(),
            ));
        }
        Ok((original, plain))
    }

    /// Kubernetes `mergeSliceWithoutSpecialElements`: merges patch items into the
    /// original items with the same merge-key value, appends the others.
    fn merge_slice_without_special_elements(
        &mut self,
        mut original: Vec<Value>,
        patch: Vec<Value>,
        meta: FieldMeta,
        depth: usize,
    ) -> Result<Vec<Value>, PatchError> {
        let merge_key = meta.merge_key;
        let mut index: HashMap<String, usize> = HashMap::with_capacity(original.len());
        for (i, item) in original.iter().enumerate() {
            if let Some(v) = item.get(merge_key) {
                index.entry(key_repr(v)).or_insert(i);
            }
        }
        for v in patch {
            let Value::Object(pm) = v else {
                return Err(self.err(format!(
                    "expected an object in the list, but received a {}",
                    type_name(&v)
                )));
            };
            let Some(key_value) = pm.get(merge_key) else {
                return Err(self.err(no_merge_key_msg(&pm, merge_key)));
            };
            let repr = key_repr(key_value);
            match index.get(&repr).copied() {
                Some(i) => {
                    let Some(slot) = original.get_mut(i) else {
                        continue;
                    };
                    let Value::Object(om) = std::mem::take(slot) else {
                        return Err(self.err("value in the list is not a map"));
                    };
                    self.path
                        .push(format!("[{merge_key}={}]", render(key_value)));
                    let merged = self.merge_map(om, pm, meta.schema, depth + 1);
                    self.path.pop();
                    *slot = Value::Object(merged?);
                }
                None => {
                    index.insert(repr, original.len());
                    original.push(Value::Object(strip_directives_map(pm)));
                }
            }
        }
        Ok(original)
    }

    /// Kubernetes `normalizeElementOrder`: sorts the patch items by the patch order
    /// and the server-only items by the original order, then interleaves them.
    fn normalize_element_order(
        &self,
        patch_items: Vec<Value>,
        server_only: Vec<Value>,
        patch_order: &OrderIndex,
        server_order: &OrderIndex,
        merge_key: &str,
        is_map: bool,
    ) -> Result<Vec<Value>, PatchError> {
        let patch_items =
            self.normalize_slice_order(patch_items, patch_order, merge_key, is_map)?;
        let server_only =
            self.normalize_slice_order(server_only, server_order, merge_key, is_map)?;
        Ok(merge_sorted_slice(
            server_only,
            patch_items,
            server_order,
            merge_key,
            is_map,
        ))
    }

    /// Kubernetes `normalizeSliceOrder`.
    fn normalize_slice_order(
        &self,
        to_sort: Vec<Value>,
        order: &OrderIndex,
        merge_key: &str,
        is_map: bool,
    ) -> Result<Vec<Value>, PatchError> {
        let mut to_delete = Vec::new();
        let mut keep = Vec::with_capacity(to_sort.len());
        if is_map {
            for item in &to_sort {
                self.merge_key_value(item, merge_key)?;
            }
            if let Some(msg) = &order.invalid {
                return Err(self.err(msg.clone()));
            }
            for item in to_sort {
                let is_delete =
                    item.get(DIRECTIVE_MARKER).and_then(Value::as_str) == Some(DELETE_DIRECTIVE);
                if is_delete {
                    to_delete.push(item);
                } else {
                    keep.push(item);
                }
            }
        } else {
            keep = to_sort;
        }
        let mut keyed: Vec<(Option<usize>, Value)> = keep
            .into_iter()
            .map(|v| (order.index_of(&v, merge_key, is_map), v))
            .collect();
        go_stable_sort(&mut keyed, &|a, b| match (a.0, b.0) {
            (Some(i), Some(j)) => i < j,
            _ => true,
        });
        let mut out: Vec<Value> = keyed.into_iter().map(|(_, v)| v).collect();
        out.extend(to_delete);
        Ok(out)
    }
}

/// Kubernetes `mergeSortedSlice`: interleaves two sorted lists, using the
/// original order where both items appear in it.
fn merge_sorted_slice(
    left: Vec<Value>,
    right: Vec<Value>,
    server_order: &OrderIndex,
    merge_key: &str,
    is_map: bool,
) -> Vec<Value> {
    let left: Vec<(Option<usize>, Value)> = left
        .into_iter()
        .map(|v| (server_order.index_of(&v, merge_key, is_map), v))
        .collect();
    let right: Vec<(Option<usize>, Value)> = right
        .into_iter()
        .map(|v| (server_order.index_of(&v, merge_key, is_map), v))
        .collect();
    let mut out = Vec::with_capacity(left.len() + right.len());
    let mut left = left.into_iter().peekable();
    let mut right = right.into_iter().peekable();
    loop {
        let take_left = match (left.peek(), right.peek()) {
            (None, None) => break,
            (Some(_), None) => true,
            (None, Some(_)) => false,
            (Some((Some(li), _)), Some((Some(ri), _))) => li < ri,
            (Some(_), Some(_)) => false,
        };
        let next = if take_left { left.next() } else { right.next() };
        if let Some((_, v)) = next {
            out.push(v);
        }
    }
    out
}

/// Kubernetes `sliceElementType`: all items of the lists must have one type, not a list.
fn slice_element_type(lists: &[&[Value]]) -> Result<Class, String> {
    let mut prev: Option<Class> = None;
    for v in lists.iter().flat_map(|l| l.iter()) {
        let c = class(v);
        match prev {
            None => {
                if c == Class::Array {
                    return Err("lists of lists are not supported".to_string());
                }
                if c == Class::Null {
                    return Err("null list items are not supported".to_string());
                }
                prev = Some(c);
            }
            Some(p) if p != c => {
                return Err(format!(
                    "list element types are not identical: {}",
                    render(&Value::Array(
                        lists.iter().flat_map(|l| l.iter().cloned()).collect()
                    ))
                ));
            }
            Some(_) => {}
        }
    }
    prev.ok_or_else(|| "no elements in any of the given lists".to_string())
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
