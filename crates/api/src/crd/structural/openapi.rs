//! apiextensions' `ValidateCustomResourceDefinitionOpenAPISchema` (what a CRD's schema may
//! say at all, independent of structurality) and `NewStructural`'s refusals.

use serde_json::Value;

use super::gofmt::{self, child, index, key, sharp_v_strings};
use super::schema::{AdditionalProperties, Items, Schema};
use crate::status::Cause;

const TYPES: [&str; 6] = ["array", "boolean", "integer", "number", "object", "string"];
const META_FIELDS: [&str; 3] = ["metadata", "kind", "apiVersion"];

/// What `specStandardValidatorV3` carries down the schema.
#[derive(Debug, Clone, Default)]
struct Ctx {
    /// Why defaults are forbidden here (`None`: allowed).
    forbid_defaults: Option<String>,
    inside_resource_meta: bool,
}

impl Ctx {
    fn forbidding_defaults(&self, reason: &str) -> Ctx {
        Ctx {
            forbid_defaults: Some(reason.to_string()),
            ..self.clone()
        }
    }
}

/// The schema checks of a CRD version, in upstream's order for one node and schema order
/// across properties.
pub(crate) fn openapi_schema(s: &Schema, path: &str) -> Vec<Cause> {
    let mut errs = Vec::new();
    node(&mut errs, s, path, &Ctx::default(), true);
    errs
}

fn node(errs: &mut Vec<Cause>, s: &Schema, path: &str, ctx: &Ctx, is_root: bool) {
    standard(errs, s, path, ctx);
    if s.unique_items {
        errs.push(gofmt::forbidden(
            &child(path, "uniqueItems"),
            "uniqueItems cannot be set to true since the runtime complexity becomes quadratic",
        ));
    }
    if let Some(ap) = &s.additional_properties {
        let exclusive = !s.properties.is_empty() && !matches!(ap, AdditionalProperties::Bool(true));
        if exclusive {
            errs.push(gofmt::forbidden(
                &child(path, "additionalProperties"),
                "additionalProperties and properties are mutual exclusive",
            ));
        }
        let sub = if ctx.inside_resource_meta {
            ctx.forbidding_defaults("inside additionalProperties applying to object metadata")
        } else {
            ctx.clone()
        };
        if let Some(aps) = ap.schema() {
            node(errs, aps, &child(path, "additionalProperties"), &sub, false);
        }
    }
    for (k, p) in &s.properties {
        let mut sub = ctx.clone();
        if (is_root || s.embedded_resource) && META_FIELDS.contains(&k.as_str()) {
            sub.inside_resource_meta = true;
            if is_root {
                sub = sub.forbidding_defaults(&format!("in top-level {k}"));
            }
        }
        node(errs, p, &key(&child(path, "properties"), k), &sub, false);
    }
    if let Some(not) = &s.not {
        node(errs, not, &child(path, "not"), ctx, false);
    }
    let groups = [
        ("allOf", &s.all_of),
        ("oneOf", &s.one_of),
        ("anyOf", &s.any_of),
    ];
    for (name, group) in groups {
        for (i, x) in group.iter().enumerate() {
            node(errs, x, &index(&child(path, name), i), ctx, false);
        }
    }
    match &s.items {
        Some(Items::Schema(is)) => node(errs, is, &child(path, "items"), ctx, false),
        Some(Items::Array(list)) => {
            for (i, x) in list.iter().enumerate() {
                node(errs, x, &index(&child(path, "items"), i), ctx, false);
            }
        }
        None => {}
    }
    extensions(errs, s, path);
    list_map(errs, s, path);
}

/// `specStandardValidatorV3.validate`.
fn standard(errs: &mut Vec<Cause>, s: &Schema, path: &str, ctx: &Ctx) {
    let f = |name: &str| child(path, name);
    if !s.ty.is_empty() && !TYPES.contains(&s.ty.as_str()) {
        let valid: Vec<String> = TYPES.iter().map(|t| t.to_string()).collect();
        errs.push(gofmt::not_supported(
            &f("type"),
            &Value::from(s.ty.as_str()),
            &valid,
        ));
    }
    if let (Some(_), Some(reason)) = (&s.default, &ctx.forbid_defaults) {
        errs.push(gofmt::forbidden(
            &f("default"),
            &format!("must not be set {reason}"),
        ));
    }
    let u = &s.unsupported;
    let checks = [
        (!u.id.is_empty(), "id", "id is not supported"),
        (
            u.additional_items,
            "additionalItems",
            "additionalItems is not supported",
        ),
        (
            u.pattern_properties,
            "patternProperties",
            "patternProperties is not supported",
        ),
        (u.definitions, "definitions", "definitions is not supported"),
        (
            u.dependencies,
            "dependencies",
            "dependencies is not supported",
        ),
        (u.reference.is_some(), "$ref", "$ref is not supported"),
        (
            s.ty == "null",
            "type",
            "type cannot be set to null, use nullable as an alternative",
        ),
        (
            matches!(s.items, Some(Items::Array(_))),
            "items",
            "items must be a schema object and not an array",
        ),
        (
            ctx.inside_resource_meta && s.embedded_resource,
            "x-kubernetes-embedded-resource",
            "must not be used inside of resource meta",
        ),
    ];
    for (bad, name, detail) in checks {
        if bad {
            errs.push(gofmt::forbidden(&f(name), detail));
        }
    }
}

/// `required` or `invalid` on `type`, as upstream words a missing or wrong type.
fn type_must_be(errs: &mut Vec<Cause>, s: &Schema, path: &str, detail: &str) {
    let f = child(path, "type");
    errs.push(if s.ty.is_empty() {
        gofmt::required(&f, detail)
    } else {
        gofmt::invalid_str(&f, &s.ty, detail)
    });
}

/// A `*string` as a bad value: `"null"` when unset.
fn opt_str(v: &Option<String>) -> Value {
    Value::from(v.as_deref().unwrap_or("null"))
}

fn extensions(errs: &mut Vec<Cause>, s: &Schema, path: &str) {
    let f = |name: &str| child(path, name);
    if s.preserve_unknown_fields == Some(false) {
        let field = f("x-kubernetes-preserve-unknown-fields");
        errs.push(gofmt::invalid(
            &field,
            &Value::Bool(false),
            "must be true or undefined",
        ));
    }
    if let Some(mt) = &s.map_type {
        if s.ty != "object" {
            type_must_be(
                errs,
                s,
                path,
                "must be object if x-kubernetes-map-type is specified",
            );
        }
        if mt != "atomic" && mt != "granular" {
            let valid = ["atomic".to_string(), "granular".to_string()];
            errs.push(gofmt::not_supported(
                &f("x-kubernetes-map-type"),
                &Value::from(mt.as_str()),
                &valid,
            ));
        }
    }
    if let Some(lt) = &s.list_type {
        if s.ty != "array" {
            type_must_be(
                errs,
                s,
                path,
                "must be array if x-kubernetes-list-type is specified",
            );
        } else if let (true, Some(is)) = (lt == "set", s.items_schema()) {
            atomic_set_items(errs, is, path);
        }
        if !["atomic", "set", "map"].contains(&lt.as_str()) {
            let valid: Vec<String> = ["atomic", "set", "map"]
                .iter()
                .map(|t| t.to_string())
                .collect();
            errs.push(gofmt::not_supported(
                &f("x-kubernetes-list-type"),
                &Value::from(lt.as_str()),
                &valid,
            ));
        }
    }
    if !s.list_map_keys.is_empty() {
        let detail = "must be map if x-kubernetes-list-map-keys is non-empty";
        match &s.list_type {
            None => errs.push(gofmt::required(&f("x-kubernetes-list-type"), detail)),
            Some(lt) if lt != "map" => {
                errs.push(gofmt::invalid_str(&f("x-kubernetes-list-type"), lt, detail))
            }
            _ => {}
        }
    }
}

/// Items of a `set` list must be atomic.
fn atomic_set_items(errs: &mut Vec<Cause>, is: &Schema, path: &str) {
    let detail = "must be atomic as item of a list with x-kubernetes-list-type=set";
    let items = child(path, "items");
    match is.ty.as_str() {
        "array" if is.list_type.as_deref().is_some_and(|t| t != "atomic") => {
            let f = child(&items, "x-kubernetes-list-type");
            errs.push(gofmt::invalid(&f, &opt_str(&is.list_type), detail));
        }
        "object" if is.map_type.as_deref() != Some("atomic") => {
            // upstream reports the items' list type here
            let f = child(&items, "x-kubernetes-map-type");
            errs.push(gofmt::invalid(&f, &opt_str(&is.list_type), detail));
        }
        _ => {}
    }
}

/// `x-kubernetes-list-type: map` (keys, items) and what set/map lists require of items.
fn list_map(errs: &mut Vec<Cause>, s: &Schema, path: &str) {
    let f = |name: &str| child(path, name);
    let items = f("items");
    if s.list_type.as_deref() == Some("map") {
        if s.list_map_keys.is_empty() {
            errs.push(gofmt::required(
                &f("x-kubernetes-list-map-keys"),
                "must not be empty if x-kubernetes-list-type is map",
            ));
        }
        match &s.items {
            None => errs.push(gofmt::required(
                &items,
                "must have a schema if x-kubernetes-list-type is map",
            )),
            Some(Items::Array(_)) => errs.push(gofmt::invalid_repr(
                &items,
                "apiextensions.JSONSchemaPropsOrArray{...}",
                "must only have a single schema if x-kubernetes-list-type is map",
            )),
            Some(Items::Schema(is)) if is.ty != "object" => errs.push(gofmt::invalid_str(
                &child(&items, "type"),
                &is.ty,
                "must be object if parent array's x-kubernetes-list-type is map",
            )),
            Some(Items::Schema(is)) => map_keys(errs, s, is, path),
        }
    }
    let Some(is) = s.items_schema() else { return };
    let Some(lt) = s
        .list_type
        .as_deref()
        .filter(|t| *t == "set" || *t == "map")
    else {
        return;
    };
    if is.nullable {
        let detail = format!("cannot be nullable when x-kubernetes-list-type is {lt}");
        errs.push(gofmt::forbidden(&child(&items, "nullable"), &detail));
    }
    if lt != "map" {
        return;
    }
    for k in &s.list_map_keys {
        let Some(p) = is.prop(k) else { continue };
        let pp = key(&child(&items, "properties"), k);
        if !is.required.contains(k) && p.default.is_none() {
            errs.push(gofmt::required(&child(&pp, "default"), "this property is in x-kubernetes-list-map-keys, so it must have a default or be a required property"));
        }
        if p.nullable {
            errs.push(gofmt::forbidden(
                &child(&pp, "nullable"),
                "this property is in x-kubernetes-list-map-keys, so it cannot be nullable",
            ));
        }
    }
}

fn map_keys(errs: &mut Vec<Cause>, s: &Schema, is: &Schema, path: &str) {
    let keys_field = child(path, "x-kubernetes-list-map-keys");
    let keys_repr = sharp_v_strings(&s.list_map_keys);
    let mut seen: Vec<&str> = Vec::new();
    for k in &s.list_map_keys {
        match is.prop(k) {
            Some(p) if p.ty == "array" || p.ty == "object" => {
                let f = child(&key(&child(&child(path, "items"), "properties"), k), "type");
                // upstream reports the items' type ("object") here
                errs.push(gofmt::invalid_str(
                    &f,
                    &is.ty,
                    "must be a scalar type if parent array's x-kubernetes-list-type is map",
                ));
            }
            Some(_) => {}
            None => errs.push(gofmt::invalid_repr(
                &keys_field,
                &keys_repr,
                "entries must all be names of item properties",
            )),
        }
        if seen.contains(&k.as_str()) {
            errs.push(gofmt::invalid_repr(
                &keys_field,
                &keys_repr,
                "must not contain duplicate entries",
            ));
        }
        seen.push(k);
    }
}

/// `NewStructural`'s error for a schema it cannot convert (reported only when nothing
/// else is), in its order of discovery.
pub(crate) fn conversion_error(s: &Schema) -> Option<String> {
    let u = &s.unsupported;
    let unsupported = [
        (!u.id.is_empty(), "id"),
        (!u.schema.is_empty(), "schema"),
        (
            u.reference.as_deref().is_some_and(|r| !r.is_empty()),
            "$ref",
        ),
        (u.pattern_properties, "patternProperties"),
        (u.dependencies, "dependencies"),
        (u.additional_items, "additionalItems"),
        (u.definitions, "definitions"),
    ];
    if let Some((_, name)) = unsupported.iter().find(|(bad, _)| *bad) {
        return Some(format!("OpenAPIV3Schema '{name}' is not supported"));
    }
    let nested = s
        .not
        .iter()
        .map(|b| &**b)
        .chain(&s.all_of)
        .chain(&s.any_of)
        .chain(&s.one_of);
    if let Some(e) = nested.filter_map(conversion_error).next() {
        return Some(e);
    }
    if s.preserve_unknown_fields == Some(false) {
        return Some(
            "internal error: 'x-kubernetes-preserve-unknown-fields' must be true or undefined"
                .into(),
        );
    }
    match &s.items {
        Some(Items::Array(_)) => {
            return Some("OpenAPIV3Schema 'items' must be a schema, but is an array".into())
        }
        Some(Items::Schema(is)) => {
            if let Some(e) = conversion_error(is) {
                return Some(e);
            }
        }
        None => {}
    }
    let props = s.properties.iter().map(|(_, p)| p);
    let ap = s
        .additional_properties
        .as_ref()
        .and_then(AdditionalProperties::schema);
    props.chain(ap).filter_map(conversion_error).next()
}
