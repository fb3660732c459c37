//! Validation of objects as Kubernetes validates them (pkg/apis/core/validation, apps
//! validation, apimachinery's ObjectMeta and name checks), with Kubernetes' field paths and
//! messages, so a 422 reads the same: `spec.containers[0].image: Required value`.
//!
//! Objects are expected to be normalized ([`crate::schema`]) and defaulted
//! ([`crate::defaults`]) first, as Kubernetes validates the decoded, defaulted object; but any
//! JSON shape is accepted without panicking (wrong types read as absent).
//!
//! Not covered here (the server's): `metadata.resourceVersion` on update, generateName
//! expansion, and copying server-owned values (`uid`, `creationTimestamp`, a service's
//! allocated `clusterIP`/`nodePort`s) from the old object before an update is validated, as
//! Kubernetes' `BeforeUpdate`/`PrepareForUpdate` do. An empty new `uid`, `creationTimestamp` or
//! `clusterIP` is treated as unchanged.

use std::collections::{BTreeMap, HashSet};
use std::net::IpAddr;

use serde_json::{Map, Value};

use crate::registry::ResourceInfo;
use crate::status::{go_repr, Cause};
use cairn_apimachinery::quantity;

pub(crate) const IS_NEGATIVE: &str = "must be greater than or equal to 0";
pub(crate) const IMMUTABLE: &str = "field is immutable";
pub(crate) const IMMUTABLE_WHEN_SET: &str = "field is immutable when `immutable` is set";
pub(crate) const TOTAL_ANNOTATION_SIZE: usize = 256 * 1024;
pub(crate) const MAX_SECRET_SIZE: usize = 1024 * 1024;

/// A required enum field: `Required value` when empty, `Unsupported value` when not one of
/// `supported` (listed in the order Kubernetes prints them).
pub(crate) mod admission;
pub(crate) mod apps;
pub(crate) mod batch;
pub(crate) mod name_rule;
pub(crate) mod names;
pub(crate) mod pod;
pub(crate) mod rbac;
pub(crate) mod storage;

pub use apps::*;
pub use names::*;

pub(crate) fn require_one_of(errs: &mut Vec<Cause>, path: String, value: &str, supported: &[&str]) {
    if value.is_empty() {
        errs.push(Cause::required(path));
    } else if !supported.contains(&value) {
        errs.push(Cause::not_supported(path, value, supported));
    }
}

/// Validate a new object of `resource`.
pub fn validate_create(resource: &ResourceInfo, obj: &Value) -> Vec<Cause> {
    let mut errs = Vec::new();
    validate_object_meta(resource, obj, &mut errs);
    let o = obj.as_object();
    let empty = Map::new();
    let o = o.unwrap_or(&empty);
    if let Some(validate) = resource.strategy.validate {
        validate(o, &mut errs);
    }
    errs
}

/// Validate an update: everything [`validate_create`] checks, plus the fields that may not change.
pub fn validate_update(resource: &ResourceInfo, old: &Value, new: &Value) -> Vec<Cause> {
    let mut errs = validate_meta_update(old, new);
    errs.extend(validate_create(resource, new));
    let empty = Map::new();
    let o = old.as_object().unwrap_or(&empty);
    let n = new.as_object().unwrap_or(&empty);
    if let Some(validate_update) = resource.strategy.validate_update {
        validate_update(o, n, &mut errs);
    }
    errs
}

// ---------------------------------------------------------------------------------------------
// Name and label checks (apimachinery/pkg/util/validation)

pub(crate) fn field<'a>(o: &'a Map<String, Value>, key: &str) -> Option<&'a Value> {
    o.get(key).filter(|v| !v.is_null())
}

pub(crate) fn path<'a>(o: &'a Map<String, Value>, keys: &[&str]) -> Option<&'a Value> {
    let mut cur = field(o, keys.first()?)?;
    for k in &keys[1..] {
        cur = cur.as_object().and_then(|m| field(m, k))?;
    }
    Some(cur)
}

pub(crate) fn obj<'a>(o: &'a Map<String, Value>, key: &str) -> Option<&'a Map<String, Value>> {
    field(o, key).and_then(Value::as_object)
}

pub(crate) fn arr<'a>(o: &'a Map<String, Value>, key: &str) -> &'a [Value] {
    field(o, key)
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice)
}

pub(crate) fn objs<'a>(
    o: &'a Map<String, Value>,
    key: &str,
) -> impl Iterator<Item = (usize, &'a Map<String, Value>)> {
    arr(o, key)
        .iter()
        .enumerate()
        .filter_map(|(i, v)| v.as_object().map(|m| (i, m)))
}

pub(crate) fn s<'a>(o: &'a Map<String, Value>, key: &str) -> &'a str {
    field(o, key).and_then(Value::as_str).unwrap_or("")
}

pub(crate) fn int(o: &Map<String, Value>, key: &str) -> Option<i64> {
    field(o, key).and_then(Value::as_i64)
}

pub(crate) fn str_map(o: &Map<String, Value>, key: &str) -> BTreeMap<String, String> {
    obj(o, key)
        .map(|m| {
            m.iter()
                .map(|(k, v)| (k.clone(), v.as_str().unwrap_or("").to_string()))
                .collect()
        })
        .unwrap_or_default()
}

/// A value with nulls, empty lists and empty objects removed: Kubernetes compares specs
/// semantically, where nil and empty are equal.
pub(crate) fn strip(v: Option<&Value>) -> Value {
    fn go(v: &Value) -> Option<Value> {
        match v {
            Value::Null => None,
            Value::Array(a) if a.is_empty() => None,
            Value::Array(a) => Some(Value::Array(
                a.iter().map(|x| go(x).unwrap_or(Value::Null)).collect(),
            )),
            Value::Object(m) => {
                let out: Map<String, Value> = m
                    .iter()
                    .filter_map(|(k, v)| go(v).map(|v| (k.clone(), v)))
                    .collect();
                if out.is_empty() {
                    None
                } else {
                    Some(Value::Object(out))
                }
            }
            other => Some(other.clone()),
        }
    }
    v.and_then(go).unwrap_or(Value::Null)
}

pub(crate) fn nonnegative(o: &Map<String, Value>, key: &str, p: &str, errs: &mut Vec<Cause>) {
    if let Some(v) = int(o, key) {
        if v < 0 {
            errs.push(Cause::invalid_value(
                format!("{p}.{key}"),
                &Value::from(v),
                IS_NEGATIVE,
            ));
        }
    }
}

// ---------------------------------------------------------------------------------------------
// ObjectMeta

pub use name_rule::NameRule;

pub(crate) fn name_rule(resource: &ResourceInfo) -> NameRule {
    resource.strategy.name_rule
}

pub fn check_name(rule: NameRule, name: &str, prefix: bool) -> Vec<String> {
    // A generateName prefix may end in '-': the random suffix follows.
    let masked;
    let name = if prefix && name.len() > 1 && name.ends_with('-') {
        masked = format!("{}a", &name[..name.len() - 1]);
        masked.as_str()
    } else {
        name
    };
    match rule {
        NameRule::PathSegment => is_path_segment_name(name),
        NameRule::Subdomain => is_dns1123_subdomain(name),
        NameRule::Label => is_dns1123_label(name),
        NameRule::Dns1035 => is_dns1035_label(name),
    }
}

pub(crate) fn validate_object_meta(resource: &ResourceInfo, obj: &Value, errs: &mut Vec<Cause>) {
    let empty = Map::new();
    let meta = obj
        .as_object()
        .and_then(|o| obj_of(o, "metadata"))
        .unwrap_or(&empty);
    let rule = name_rule(resource);
    let generate_name = s(meta, "generateName");
    if !generate_name.is_empty() {
        for msg in check_name(rule, generate_name, true) {
            errs.push(Cause::invalid("metadata.generateName", generate_name, &msg));
        }
    }
    let name = s(meta, "name");
    if name.is_empty() {
        errs.push(Cause::required_detail(
            "metadata.name",
            "name or generateName is required",
        ));
    } else {
        for msg in check_name(rule, name, false) {
            errs.push(Cause::invalid("metadata.name", name, &msg));
        }
    }
    let namespace = s(meta, "namespace");
    if resource.namespaced {
        if namespace.is_empty() {
            errs.push(Cause::required("metadata.namespace"));
        } else {
            for msg in is_dns1123_label(namespace) {
                errs.push(Cause::invalid("metadata.namespace", namespace, &msg));
            }
        }
    } else if !namespace.is_empty() {
        errs.push(Cause::forbidden(
            "metadata.namespace",
            "not allowed on this type",
        ));
    }
    nonnegative(meta, "generation", "metadata", errs);
    validate_labels(meta, "labels", "metadata.labels", errs);
    validate_annotations(meta, errs);
    for (i, owner) in objs(meta, "ownerReferences") {
        let p = format!("metadata.ownerReferences[{i}]");
        let api_version = s(owner, "apiVersion");
        let version = api_version.rsplit('/').next().unwrap_or("");
        if version.is_empty() {
            errs.push(Cause::invalid(
                format!("{p}.apiVersion"),
                version,
                "version must not be empty",
            ));
        }
        if s(owner, "kind").is_empty() {
            errs.push(Cause::invalid(
                format!("{p}.kind"),
                "",
                "kind must not be empty",
            ));
        }
        if s(owner, "name").is_empty() {
            errs.push(Cause::invalid(
                format!("{p}.name"),
                "",
                "name must not be empty",
            ));
        }
        if s(owner, "uid").is_empty() {
            errs.push(Cause::invalid(
                format!("{p}.uid"),
                "",
                "uid must not be empty",
            ));
        }
    }
    let controllers: Vec<String> = objs(meta, "ownerReferences")
        .filter(|(_, o)| field(o, "controller") == Some(&Value::Bool(true)))
        .map(|(_, o)| format!("{}/{}", s(o, "kind"), s(o, "name")))
        .collect();
    if controllers.len() > 1 {
        errs.push(Cause::invalid(
            "metadata.ownerReferences",
            "",
            &format!(
                "Only one reference can have Controller set to true. Found \"true\" in references for {}",
                controllers.join(" and ")
            ),
        ));
    }
    for (i, f) in arr(meta, "finalizers").iter().enumerate() {
        let f = f.as_str().unwrap_or("");
        for msg in is_qualified_name(f) {
            errs.push(Cause::invalid(format!("metadata.finalizers[{i}]"), f, &msg));
        }
    }
}

pub(crate) fn obj_of<'a>(o: &'a Map<String, Value>, key: &str) -> Option<&'a Map<String, Value>> {
    obj(o, key)
}

pub(crate) fn validate_labels(o: &Map<String, Value>, key: &str, p: &str, errs: &mut Vec<Cause>) {
    let Some(labels) = obj(o, key) else {
        return;
    };
    for (k, v) in labels {
        for msg in is_qualified_name(k) {
            errs.push(Cause::invalid(p, k, &msg));
        }
        let v = v.as_str().unwrap_or("");
        for msg in is_valid_label_value(v) {
            errs.push(Cause::invalid(p, v, &msg));
        }
    }
}

pub(crate) fn validate_annotations(meta: &Map<String, Value>, errs: &mut Vec<Cause>) {
    let Some(annotations) = obj(meta, "annotations") else {
        return;
    };
    let mut total = 0;
    for (k, v) in annotations {
        // Keys are qualified names, case aside.
        for msg in is_qualified_name(&k.to_lowercase()) {
            errs.push(Cause::invalid("metadata.annotations", k, &msg));
        }
        total += k.len() + v.as_str().map_or(0, str::len);
    }
    if total > TOTAL_ANNOTATION_SIZE {
        errs.push(Cause::too_long(
            "metadata.annotations",
            TOTAL_ANNOTATION_SIZE,
        ));
    }
}

pub(crate) fn validate_meta_update(old: &Value, new: &Value) -> Vec<Cause> {
    let mut errs = Vec::new();
    let empty = Map::new();
    let om = old
        .get("metadata")
        .and_then(Value::as_object)
        .unwrap_or(&empty);
    let nm = new
        .get("metadata")
        .and_then(Value::as_object)
        .unwrap_or(&empty);
    for key in ["name", "namespace"] {
        if s(om, key) != s(nm, key) {
            errs.push(Cause::invalid(
                format!("metadata.{key}"),
                s(nm, key),
                IMMUTABLE,
            ));
        }
    }
    for key in ["uid", "creationTimestamp"] {
        let (o, n) = (s(om, key), s(nm, key));
        if !n.is_empty() && !o.is_empty() && o != n {
            errs.push(Cause::invalid(format!("metadata.{key}"), n, IMMUTABLE));
        }
    }
    errs
}

// ---------------------------------------------------------------------------------------------
// Checks several kinds share (ConfigMap and Secret data, ports, immutable fields)

pub(crate) fn validate_data_keys(
    o: &Map<String, Value>,
    key: &str,
    errs: &mut Vec<Cause>,
) -> usize {
    let mut total = 0;
    if let Some(data) = obj(o, key) {
        for (k, v) in data {
            for msg in is_config_map_key(k) {
                errs.push(Cause::invalid(format!("{key}[{k}]"), k, &msg));
            }
            total += v.as_str().map_or(0, str::len);
        }
    }
    total
}

pub(crate) fn validate_immutable_data(
    old: &Map<String, Value>,
    new: &Map<String, Value>,
    keys: &[&str],
    errs: &mut Vec<Cause>,
) {
    if field(old, "immutable") != Some(&Value::Bool(true)) {
        return;
    }
    if field(new, "immutable") != Some(&Value::Bool(true)) {
        errs.push(Cause::forbidden("immutable", IMMUTABLE_WHEN_SET));
    }
    for key in keys {
        if strip(field(old, key)) != strip(field(new, key)) {
            errs.push(Cause::forbidden(*key, IMMUTABLE_WHEN_SET));
        }
    }
}

/// A port's `protocol`: SCTP, TCP or UDP.
pub(crate) fn validate_protocol(port: &Map<String, Value>, pp: &str, errs: &mut Vec<Cause>) {
    require_one_of(
        errs,
        format!("{pp}.protocol"),
        s(port, "protocol"),
        &["SCTP", "TCP", "UDP"],
    );
}

/// A port object's required `port` (1-65535) and its protocol (Services, Endpoints).
pub(crate) fn validate_port_and_protocol(
    port: &Map<String, Value>,
    pp: &str,
    errs: &mut Vec<Cause>,
) {
    let num = int(port, "port").unwrap_or(0);
    if !(1..=65535).contains(&num) {
        errs.push(Cause::invalid_value(
            format!("{pp}.port"),
            &Value::from(num),
            &port_range_error(),
        ));
    }
    validate_protocol(port, pp, errs);
}

/// `field is immutable` for each of `paths` that differs (nil and empty are equal).
pub(crate) fn immutable_fields(
    o: &Map<String, Value>,
    n: &Map<String, Value>,
    paths: &[&[&str]],
    errs: &mut Vec<Cause>,
) {
    for keys in paths {
        let (before, after) = (path(o, keys), path(n, keys));
        if strip(before) != strip(after) {
            let value = after.cloned().unwrap_or(Value::Null);
            errs.push(Cause::invalid_value(keys.join("."), &value, IMMUTABLE));
        }
    }
}

#[cfg(test)]
mod tests;
