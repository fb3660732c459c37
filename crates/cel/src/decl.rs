//! What a structural schema exposes to CEL, and how large its values can be:
//! the counterpart of upstream's `SchemaDeclType`
//! (`k8s.io/apiserver/pkg/cel/common/schemas.go`). The type checker reads the
//! fields, the cost estimator the sizes, and the value conversion both.

use crate::escape::escape;
use serde_json::{Map, Value};
use std::borrow::Cow;
use std::collections::BTreeMap;
use std::sync::Arc;

/// Upstream's largest request; every size estimate falls back to it.
pub(crate) const MAX_REQUEST_SIZE: u64 = 3 * 1024 * 1024;

#[derive(Debug)]
pub(crate) struct Decl {
    pub(crate) kind: DeclKind,
    /// Items of a list, properties of a map, bytes of a string: the most a
    /// value can hold, from `maxItems`/`maxProperties`/`maxLength`, else what
    /// fits in a request.
    pub(crate) max_elements: u64,
    /// The fewest bytes a value takes serialized, which bounds how many fit in
    /// a request.
    pub(crate) min_size: u64,
    /// For lists: how items correlate, and how two lists compare.
    pub(crate) list_type: ListType,
}

/// How the items of a list correlate with the old list's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ListType {
    /// By position never: no `oldSelf` below, ratcheting follows the list.
    Atomic,
    /// By value.
    Set,
    /// By the `x-kubernetes-list-map-keys` values.
    Map(Vec<String>),
}

#[derive(Debug)]
pub(crate) enum DeclKind {
    Bool,
    Int,
    Double,
    String,
    Bytes,
    Duration,
    /// `format: date` (midnight UTC) or `format: date-time`.
    Timestamp,
    /// `x-kubernetes-int-or-string`: dynamic, an int or a string at runtime.
    IntOrString,
    List(Arc<Decl>),
    /// `additionalProperties`: string keys, unescaped.
    Map(Arc<Decl>),
    /// `properties`, keyed by escaped name.
    Object(BTreeMap<String, Field>),
}

#[derive(Debug)]
pub(crate) struct Field {
    pub(crate) json_name: String,
    pub(crate) decl: Arc<Decl>,
}

/// The declaration for schema `s`, or `None` where upstream exposes nothing
/// (no type, an array without items, a map whose values aren't exposed).
/// `resource_root` adds `apiVersion`, `kind` and `metadata.name`/`generateName`,
/// which rules at the root of a resource (or an embedded one) can always read.
pub(crate) fn schema_decl(s: &Value, resource_root: bool) -> Option<Arc<Decl>> {
    if is_int_or_string(s) {
        let max = get_u64(s, "maxLength").map_or(MAX_REQUEST_SIZE - 2, |l| l.saturating_mul(4));
        return Some(decl(DeclKind::IntOrString, max, 1));
    }
    let s = if resource_root {
        with_type_and_object_meta(s)
    } else {
        Cow::Borrowed(s)
    };
    match get_str(&s, "type")? {
        "array" => array_decl(&s),
        "object" => object_decl(&s),
        "string" => Some(string_decl(&s)),
        "boolean" => Some(decl(DeclKind::Bool, 0, 4)),
        "number" => Some(decl(DeclKind::Double, 0, 1)),
        "integer" => Some(decl(DeclKind::Int, 0, 1)),
        _ => None,
    }
}

fn decl(kind: DeclKind, max_elements: u64, min_size: u64) -> Arc<Decl> {
    Arc::new(Decl {
        kind,
        max_elements,
        min_size,
        list_type: ListType::Atomic,
    })
}

fn array_decl(s: &Value) -> Option<Arc<Decl>> {
    let items = items(s)?;
    let elem = schema_decl(items, is_embedded(items))?;
    let max = get_u64(s, "maxItems").unwrap_or((MAX_REQUEST_SIZE - 2) / (elem.min_size + 1));
    Some(Arc::new(Decl {
        kind: DeclKind::List(elem),
        max_elements: max,
        min_size: 2,
        list_type: list_type(s),
    }))
}

fn object_decl(s: &Value) -> Option<Arc<Decl>> {
    if let Some(values) = additional_properties(s) {
        let elem = schema_decl(values, is_embedded(values))?;
        let max =
            get_u64(s, "maxProperties").unwrap_or((MAX_REQUEST_SIZE - 2) / (elem.min_size + 6));
        return Some(decl(DeclKind::Map(elem), max, 2));
    }
    let required: Vec<&str> = s
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let mut fields = BTreeMap::new();
    // An object is at least `{}`, plus its required properties without a
    // default (the server fills defaults in before validating).
    let mut min_size = 2;
    for (name, prop) in properties(s).into_iter().flatten() {
        let Some(field) = schema_decl(prop, is_embedded(prop)) else {
            continue;
        };
        if required.contains(&name.as_str()) && prop.get("default").is_none() {
            min_size += name.len() as u64 + field.min_size + 4;
        }
        if let Some(escaped) = escape(name) {
            fields.insert(
                escaped,
                Field {
                    json_name: name.clone(),
                    decl: field,
                },
            );
        }
    }
    Some(decl(DeclKind::Object(fields), 0, min_size))
}

fn string_decl(s: &Value) -> Arc<Decl> {
    let request = MAX_REQUEST_SIZE - 2;
    match get_str(s, "format") {
        Some("byte") => decl(
            DeclKind::Bytes,
            get_u64(s, "maxLength").unwrap_or(request),
            2,
        ),
        Some("duration") => decl(DeclKind::Duration, 32, 3),
        Some("date") => decl(DeclKind::Timestamp, 12, 12),
        Some("date-time") => decl(DeclKind::Timestamp, 32, 21),
        _ => {
            let max = match (
                get_u64(s, "maxLength"),
                s.get("enum").and_then(Value::as_array),
            ) {
                (Some(len), _) => len.saturating_mul(4),
                (None, Some(values)) if !values.is_empty() => values
                    .iter()
                    .filter_map(Value::as_str)
                    .map(|v| v.len() as u64)
                    .max()
                    .unwrap_or(0),
                _ => request,
            };
            decl(DeclKind::String, max, 2)
        }
    }
}

/// Upstream's `WithTypeAndObjectMeta`: unless the schema already declares
/// `kind`, `apiVersion`, `metadata.name` and `metadata.generateName` as it
/// expects, those three properties are replaced, so `metadata` exposes only
/// `name` and `generateName`.
pub(crate) fn with_type_and_object_meta(s: &Value) -> Cow<'_, Value> {
    let prop_type = |path: &[&str]| {
        let mut node = s;
        for name in path {
            node = properties(node)?.get(*name)?;
        }
        get_str(node, "type")
    };
    let complete = prop_type(&["kind"]) == Some("string")
        && prop_type(&["apiVersion"]) == Some("string")
        && prop_type(&["metadata"]) == Some("object")
        && prop_type(&["metadata", "name"]) == Some("string")
        && prop_type(&["metadata", "generateName"]) == Some("string");
    if complete {
        return Cow::Borrowed(s);
    }
    let mut result = s.clone();
    let string = serde_json::json!({"type": "string"});
    let metadata = serde_json::json!({
        "type": "object",
        "properties": {"name": {"type": "string"}, "generateName": {"type": "string"}},
    });
    if let Some(obj) = result.as_object_mut() {
        let props = obj
            .entry("properties")
            .or_insert_with(|| Value::Object(Map::new()));
        if let Some(props) = props.as_object_mut() {
            props.insert("kind".to_owned(), string.clone());
            props.insert("apiVersion".to_owned(), string);
            props.insert("metadata".to_owned(), metadata);
        }
    }
    Cow::Owned(result)
}

pub(crate) fn get_str<'a>(s: &'a Value, key: &str) -> Option<&'a str> {
    s.get(key).and_then(Value::as_str)
}

/// A non-negative bound; upstream treats negative ones as zero.
pub(crate) fn get_u64(s: &Value, key: &str) -> Option<u64> {
    let v = s.get(key)?;
    v.as_u64().or_else(|| v.as_i64().map(|_| 0))
}

pub(crate) fn get_bool(s: &Value, key: &str) -> bool {
    s.get(key).and_then(Value::as_bool).unwrap_or(false)
}

pub(crate) fn properties(s: &Value) -> Option<&Map<String, Value>> {
    s.get("properties").and_then(Value::as_object)
}

pub(crate) fn items(s: &Value) -> Option<&Value> {
    s.get("items").filter(|i| i.is_object())
}

/// `additionalProperties` when it is a schema (not `true`/`false`).
pub(crate) fn additional_properties(s: &Value) -> Option<&Value> {
    s.get("additionalProperties").filter(|a| a.is_object())
}

pub(crate) fn is_embedded(s: &Value) -> bool {
    get_bool(s, "x-kubernetes-embedded-resource")
}

pub(crate) fn is_int_or_string(s: &Value) -> bool {
    get_bool(s, "x-kubernetes-int-or-string")
}

/// The schema's `type`, as upstream puts it in `Invalid value: "<type>"`.
pub(crate) fn type_name(s: &Value) -> &'static str {
    match get_str(s, "type") {
        Some("object") => "object",
        Some("array") => "array",
        Some("string") => "string",
        Some("integer") => "integer",
        Some("number") => "number",
        Some("boolean") => "boolean",
        _ => "",
    }
}

pub(crate) fn list_type(s: &Value) -> ListType {
    match get_str(s, "x-kubernetes-list-type") {
        Some("map") => {
            let keys = s
                .get("x-kubernetes-list-map-keys")
                .and_then(Value::as_array);
            let keys: Vec<String> = keys
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect();
            if keys.is_empty() {
                ListType::Atomic
            } else {
                ListType::Map(keys)
            }
        }
        Some("set") => ListType::Set,
        _ => ListType::Atomic,
    }
}
