//! The checks a custom resource gets besides its schema's validation, as
//! apiextensions-apiserver's strategy runs them: embedded resources (objectmeta
//! `Validate`: `apiVersion`, `kind` and `metadata` of `x-kubernetes-embedded-resource`
//! values) and list invariants (listtype `ValidateListSetsAndMaps`: unique items of
//! `set` lists, unique keys of `map` lists).

use std::collections::HashMap;

use serde_json::{Map, Value};

use super::gofmt::{self, child, index, key, Num};
use super::schema::{Schema, MAX_DEPTH};
use crate::status::Cause;
use crate::validation::{is_dns1035_label, is_dns1123_label, is_path_segment_name};

/// Embedded resources below the root (the root's own type and object meta are the server's).
pub(crate) fn embedded_resources(obj: &Value, s: &Schema) -> Vec<Cause> {
    let mut errs = Vec::new();
    embedded(&mut errs, "", obj, Some(s), 0);
    errs
}

fn embedded(errs: &mut Vec<Cause>, path: &str, x: &Value, s: Option<&Schema>, depth: usize) {
    let Some(s) = s.filter(|_| depth <= MAX_DEPTH) else {
        return;
    };
    match x {
        Value::Object(m) => {
            if s.embedded_resource {
                embedded_resource(errs, path, m);
            }
            for (k, v) in m {
                if let Some(p) = s.prop(k) {
                    embedded(errs, &child(path, k), v, Some(p), depth + 1);
                } else if let Some(ap) = &s.additional_properties {
                    embedded(errs, &key(path, k), v, ap.schema(), depth + 1);
                }
            }
        }
        Value::Array(items) => {
            for (i, v) in items.iter().enumerate() {
                embedded(errs, &index(path, i), v, s.items_schema(), depth + 1);
            }
        }
        _ => {}
    }
}

/// `schema.ParseGroupVersion`'s complaint, if any.
fn group_version_error(gv: &str) -> Option<String> {
    (gv != "/" && gv.matches('/').count() > 1)
        .then(|| format!("unexpected GroupVersion string: {gv}"))
}

/// The Go JSON type name `encoding/json` uses in "cannot unmarshal X" errors.
fn json_type(v: &Value) -> &'static str {
    match v {
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
        Value::Null => "null",
    }
}

fn embedded_resource(errs: &mut Vec<Cause>, path: &str, m: &Map<String, Value>) {
    for field in ["apiVersion", "kind"] {
        if !m.contains_key(field) {
            errs.push(gofmt::required(&child(path, field), "must not be empty"));
        }
    }
    for (k, v) in m {
        let field = child(path, k);
        match (k.as_str(), v) {
            ("apiVersion" | "kind", Value::String(s)) if s.is_empty() => {
                errs.push(gofmt::invalid_str(&field, s, "must not be empty"));
            }
            ("apiVersion", Value::String(s)) => {
                if let Some(e) = group_version_error(s) {
                    errs.push(gofmt::invalid_str(&field, s, &e));
                }
            }
            ("kind", Value::String(s)) => {
                let problems = is_dns1035_label(&s.to_lowercase());
                if !problems.is_empty() {
                    let detail = format!(
                        "may have mixed case, but should otherwise match: {}",
                        problems.join(",")
                    );
                    errs.push(gofmt::invalid_str(&field, s, &detail));
                }
            }
            ("apiVersion" | "kind", _) => errs.push(gofmt::invalid(&field, v, "must be a string")),
            ("metadata", _) => embedded_metadata(errs, &field, v),
            _ => {}
        }
    }
}

/// Decoding into `ObjectMeta` (type errors as `encoding/json` words them), then the
/// name, generateName and namespace checks of `ValidateObjectMeta`.
fn embedded_metadata(errs: &mut Vec<Cause>, path: &str, v: &Value) {
    let m = match v {
        Value::Object(m) => m,
        Value::Null => return,
        _ => {
            let detail = format!(
                "json: cannot unmarshal {} into Go value of type v1.ObjectMeta",
                json_type(v)
            );
            errs.push(gofmt::invalid(path, v, &detail));
            return;
        }
    };
    if let Some(e) = metadata_type_error(m) {
        errs.push(gofmt::invalid(path, v, &e));
        return;
    }
    let text = |f: &str| m.get(f).and_then(Value::as_str).unwrap_or("");
    let generate_name = text("generateName");
    if !generate_name.is_empty() {
        for msg in ["/", "%"].iter().filter(|c| generate_name.contains(**c)) {
            let detail = format!("may not contain '{msg}'");
            errs.push(gofmt::invalid_str(
                &child(path, "generateName"),
                generate_name,
                &detail,
            ));
        }
    }
    let name = text("name");
    for msg in is_path_segment_name(name)
        .iter()
        .filter(|_| !name.is_empty())
    {
        errs.push(gofmt::invalid_str(&child(path, "name"), name, msg));
    }
    let namespace = text("namespace");
    for msg in is_dns1123_label(namespace)
        .iter()
        .filter(|_| !namespace.is_empty())
    {
        errs.push(gofmt::invalid_str(
            &child(path, "namespace"),
            namespace,
            msg,
        ));
    }
}

fn metadata_type_error(m: &Map<String, Value>) -> Option<String> {
    let unmarshal = |v: &Value, field: &str, ty: &str| {
        format!(
            "json: cannot unmarshal {} into Go struct field ObjectMeta.{field} of type {ty}",
            json_type(v)
        )
    };
    for field in [
        "name",
        "generateName",
        "namespace",
        "uid",
        "resourceVersion",
    ] {
        if let Some(v @ (Value::Bool(_) | Value::Number(_) | Value::Array(_) | Value::Object(_))) =
            m.get(field)
        {
            return Some(unmarshal(v, field, "string"));
        }
    }
    for field in ["labels", "annotations"] {
        match m.get(field) {
            Some(Value::Object(entries)) => {
                if let Some(bad) = entries.values().find(|x| !x.is_string() && !x.is_null()) {
                    return Some(unmarshal(bad, field, "string"));
                }
            }
            Some(Value::Null) | None => {}
            Some(v) => return Some(unmarshal(v, field, "map[string]string")),
        }
    }
    None
}

/// `x-kubernetes-list-type: set` and `map` invariants.
pub(crate) fn list_sets_and_maps(obj: &Value, s: &Schema) -> Vec<Cause> {
    let mut errs = Vec::new();
    if let Value::Object(m) = obj {
        lists_in_object(&mut errs, "", s, m, 0);
    }
    errs
}

fn lists_in_object(
    errs: &mut Vec<Cause>,
    path: &str,
    s: &Schema,
    m: &Map<String, Value>,
    depth: usize,
) {
    if depth > MAX_DEPTH {
        return;
    }
    if let Some(ap) = s.additional_properties.as_ref().and_then(|a| a.schema()) {
        for (k, v) in m {
            lists_in_value(errs, &key(path, k), ap, v, depth + 1);
        }
    }
    for (k, v) in m {
        if let Some(p) = s.prop(k) {
            lists_in_value(errs, &child(path, k), p, v, depth + 1);
        }
    }
}

fn lists_in_value(errs: &mut Vec<Cause>, path: &str, s: &Schema, v: &Value, depth: usize) {
    match v {
        Value::Array(items) => lists_in_array(errs, path, s, items, depth),
        Value::Object(m) => lists_in_object(errs, path, s, m, depth),
        _ => {}
    }
}

fn lists_in_array(errs: &mut Vec<Cause>, path: &str, s: &Schema, items: &[Value], depth: usize) {
    match s.list_type.as_deref() {
        Some("set") => {
            for i in non_unique(items.iter().map(Some)) {
                errs.push(gofmt::duplicate(&index(path, i), &items[i]));
            }
        }
        Some("map") => errs.extend(list_map(path, s, items)),
        _ => {}
    }
    if let Some(is) = s.items_schema() {
        for (i, x) in items.iter().enumerate() {
            lists_in_value(errs, &index(path, i), is, x, depth + 1);
        }
    }
}

/// How listtype's `validateListSet` tells values apart: scalars by Go type and value,
/// compounds by their JSON. `None` is an unspecified map key.
fn identity(v: Option<&Value>) -> String {
    match v {
        None => "u".to_string(),
        Some(x @ (Value::Object(_) | Value::Array(_))) => format!("c{}", gofmt::json(x)),
        Some(x @ Value::Number(_)) => match Num::of(x) {
            Some(Num::Int(i)) => format!("i{i}"),
            Some(Num::Float(f)) => format!("f{}", f.to_bits()),
            None => "f".to_string(),
        },
        Some(Value::String(s)) => format!("s{s}"),
        Some(Value::Bool(b)) => format!("b{b}"),
        Some(Value::Null) => "n".to_string(),
    }
}

/// Indices of the second appearance of each repeated value.
fn non_unique<'v>(items: impl Iterator<Item = Option<&'v Value>>) -> Vec<usize> {
    let mut seen: HashMap<String, usize> = HashMap::new();
    let mut out = Vec::new();
    for (i, x) in items.enumerate() {
        let count = seen.entry(identity(x)).or_insert(0);
        *count += 1;
        if *count == 2 {
            out.push(i);
        }
    }
    out
}

fn list_map(path: &str, s: &Schema, items: &[Value]) -> Vec<Cause> {
    if let Some((i, x)) = items
        .iter()
        .enumerate()
        .find(|(_, x)| !x.is_null() && !x.is_object())
    {
        let detail = "must be an object for an array of list-type map";
        return vec![gofmt::invalid(&index(path, i), x, detail)];
    }
    if items.len() <= 1 {
        return Vec::new();
    }
    if let [key_field] = s.list_map_keys.as_slice() {
        let keys: Vec<Option<&Value>> = items.iter().map(|x| x.get(key_field)).collect();
        return non_unique(keys.iter().copied())
            .into_iter()
            .map(|i| {
                let mut shown = Map::new();
                if let Some(k) = keys[i] {
                    shown.insert(key_field.clone(), k.clone());
                }
                gofmt::duplicate(&index(path, i), &Value::Object(shown))
            })
            .collect();
    }
    let keys: Vec<Value> = items
        .iter()
        .map(|x| {
            let mut k = Map::new();
            for f in &s.list_map_keys {
                if let Some(v) = x.get(f) {
                    k.insert(f.clone(), v.clone());
                }
            }
            Value::Object(k)
        })
        .collect();
    non_unique(keys.iter().map(Some))
        .into_iter()
        .map(|i| gofmt::duplicate(&index(path, i), &keys[i]))
        .collect()
}
