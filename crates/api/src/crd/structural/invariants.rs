//! apiextensions' `ValidateStructural`: the invariants of a structural schema and the
//! completeness of its value validations (every field a value validation speaks of is
//! specified outside of it), sorted as upstream sorts them.

use serde_json::Value;

use super::gofmt::{self, child, index, key};
use super::schema::{AdditionalProperties, Items, Schema};
use crate::status::Cause;

#[derive(Debug, Clone, Copy, PartialEq)]
enum Level {
    Root,
    Item,
    Field,
}

/// The invariant and completeness errors of a (convertible) schema, sorted.
pub(crate) fn validate_structural(s: &Schema, path: &str) -> Vec<Cause> {
    let mut errs = Vec::new();
    invariants(&mut errs, s, Level::Root, path);
    value_completeness(&mut errs, s, Some(s), path, path);
    errs.sort_by_key(Cause::describe);
    errs
}

fn invariants(errs: &mut Vec<Cause>, s: &Schema, lvl: Level, path: &str) {
    if s.ty == "array" && s.items.is_none() {
        errs.push(gofmt::required(&child(path, "items"), "must be specified"));
    }
    if let Some(items) = s.items_schema() {
        invariants(errs, items, Level::Item, &child(path, "items"));
    }
    for (k, p) in &s.properties {
        invariants(errs, p, Level::Field, &key(&child(path, "properties"), k));
    }
    if let Some(ap) = &s.additional_properties {
        let ap_path = child(path, "additionalProperties");
        if lvl == Level::Root {
            errs.push(gofmt::forbidden(&ap_path, "must not be used at the root"));
        }
        if let AdditionalProperties::Schema(aps) = ap {
            invariants(errs, aps, Level::Field, &ap_path);
        }
    }
    extensions(errs, s, path);
    let skip_any_of = is_int_or_string_any_of(&s.any_of);
    let skip_first_all_of = s
        .all_of
        .first()
        .is_some_and(|a| is_int_or_string_any_of(&a.any_of));
    value_validation(errs, s, skip_any_of, skip_first_all_of, path);
    types(errs, s, lvl, path);
    meta_properties(errs, s, lvl, path);
    if s.embedded_resource && !s.preserves() && s.properties.is_empty() {
        errs.push(gofmt::required(
            &child(path, "properties"),
            "must not be empty if x-kubernetes-embedded-resource is true without x-kubernetes-preserve-unknown-fields",
        ));
    }
}

fn extensions(errs: &mut Vec<Cause>, s: &Schema, path: &str) {
    let both = "must be false if x-kubernetes-int-or-string is true";
    if s.int_or_string && s.preserves() {
        let f = child(path, "x-kubernetes-preserve-unknown-fields");
        errs.push(gofmt::invalid(&f, &Value::Bool(true), both));
    }
    if s.int_or_string && s.embedded_resource {
        let f = child(path, "x-kubernetes-embedded-resource");
        errs.push(gofmt::invalid(&f, &Value::Bool(true), both));
    }
}

fn types(errs: &mut Vec<Cause>, s: &Schema, lvl: Level, path: &str) {
    let type_path = child(path, "type");
    if s.embedded_resource && s.ty != "object" {
        let detail = "must be object if x-kubernetes-embedded-resource is true";
        errs.push(if s.ty.is_empty() {
            gofmt::required(&type_path, detail)
        } else {
            gofmt::invalid_str(&type_path, &s.ty, detail)
        });
    } else if s.ty.is_empty() && !s.int_or_string && !s.preserves() {
        let detail = match lvl {
            Level::Root => "must not be empty at the root",
            Level::Item => "must not be empty for specified array items",
            Level::Field => "must not be empty for specified object fields",
        };
        errs.push(gofmt::required(&type_path, detail));
    }
    if s.embedded_resource && s.additional_properties.is_some() {
        errs.push(gofmt::forbidden(
            &child(path, "additionalProperties"),
            "must not be used if x-kubernetes-embedded-resource is set",
        ));
    }
    if lvl == Level::Root && !s.ty.is_empty() && s.ty != "object" {
        errs.push(gofmt::invalid_str(
            &type_path,
            &s.ty,
            "must be object at the root",
        ));
    }
}

/// `kind`, `apiVersion` and `metadata` of a resource (the root, or an embedded one).
fn meta_properties(errs: &mut Vec<Cause>, s: &Schema, lvl: Level, path: &str) {
    let check = lvl == Level::Root || s.embedded_resource;
    let props = child(path, "properties");
    for name in ["kind", "apiVersion"] {
        if let Some(p) = s.prop(name).filter(|p| check && p.ty != "string") {
            let f = child(&key(&props, name), "type");
            errs.push(gofmt::invalid_str(&f, &p.ty, "must be string"));
        }
    }
    let Some(m) = s.prop("metadata") else { return };
    let mpath = key(&props, "metadata");
    if check && m.ty != "object" {
        errs.push(gofmt::invalid_str(
            &child(&mpath, "type"),
            &m.ty,
            "must be object",
        ));
    }
    if lvl == Level::Root && !only_names(m) {
        errs.push(gofmt::forbidden(
            &mpath,
            "must not specify anything other than name and generateName, but metadata is implicitly specified",
        ));
    }
}

/// Whether a root `metadata` schema says nothing beyond its type, a default and the
/// schemas of `name` and `generateName`.
fn only_names(m: &Schema) -> bool {
    let names_only = m
        .properties
        .iter()
        .all(|(k, _)| k == "name" || k == "generateName");
    let rest = Schema {
        ty: String::new(),
        default: None,
        properties: Vec::new(),
        ..m.clone()
    };
    names_only && rest == Schema::default()
}

/// The `anyOf: [{type: integer}, {type: string}]` of an int-or-string.
fn is_int_or_string_any_of(any_of: &[Schema]) -> bool {
    let bare = |t: &str| Schema {
        ty: t.to_string(),
        ..Schema::default()
    };
    any_of.len() == 2 && any_of[0] == bare("integer") && any_of[1] == bare("string")
}

fn value_validation(
    errs: &mut Vec<Cause>,
    s: &Schema,
    skip_any_of: bool,
    skip_first: bool,
    path: &str,
) {
    if !skip_any_of {
        for (i, x) in s.any_of.iter().enumerate() {
            nested(errs, x, false, &index(&child(path, "anyOf"), i));
        }
    }
    for (i, x) in s.all_of.iter().enumerate() {
        nested(
            errs,
            x,
            skip_first && i == 0,
            &index(&child(path, "allOf"), i),
        );
    }
    for (i, x) in s.one_of.iter().enumerate() {
        nested(errs, x, false, &index(&child(path, "oneOf"), i));
    }
    if let Some(not) = &s.not {
        nested(errs, not, false, &child(path, "not"));
    }
    if !s.pattern.is_empty() {
        if let Err(e) = super::pattern::compile(&s.pattern) {
            let detail = format!("must be a valid regular expression, but isn't: {e}");
            errs.push(gofmt::invalid_str(
                &child(path, "pattern"),
                &s.pattern,
                &detail,
            ));
        }
    }
}

/// A schema under allOf/anyOf/oneOf/not: value validations only.
fn nested(errs: &mut Vec<Cause>, v: &Schema, skip_any_of: bool, path: &str) {
    value_validation(errs, v, skip_any_of, false, path);
    if let Some(Items::Schema(items)) = &v.items {
        nested(errs, items, false, &child(path, "items"));
    }
    for (k, p) in &v.properties {
        nested(errs, p, false, &key(&child(path, "properties"), k));
    }
    for (name, detail) in forbidden_keywords(v) {
        errs.push(gofmt::forbidden(&child(path, name), detail));
    }
    if v.prop("metadata").is_some() {
        let p = key(&child(path, "properties"), "metadata");
        errs.push(gofmt::forbidden(
            &p,
            "must not be specified in a nested context",
        ));
    }
}

const EMPTY: &str = "must be empty to be structural";
const UNDEFINED: &str = "must be undefined to be structural";
const FALSE: &str = "must be false to be structural";

/// The keywords a schema under a junctor sets but must not, with upstream's complaint.
fn forbidden_keywords(v: &Schema) -> Vec<(&'static str, &'static str)> {
    let additional = matches!(
        v.additional_properties,
        Some(AdditionalProperties::Schema(_) | AdditionalProperties::Bool(true))
    );
    let checks = [
        (!v.ty.is_empty(), "type", EMPTY),
        (additional, "additionalProperties", UNDEFINED),
        (v.default_value().is_some(), "default", UNDEFINED),
        (!v.title.is_empty(), "title", EMPTY),
        (!v.description.is_empty(), "description", EMPTY),
        (v.nullable, "nullable", FALSE),
        (v.preserves(), "x-kubernetes-preserve-unknown-fields", FALSE),
        (v.embedded_resource, "x-kubernetes-embedded-resource", FALSE),
        (v.int_or_string, "x-kubernetes-int-or-string", FALSE),
        (
            !v.list_map_keys.is_empty(),
            "x-kubernetes-list-map-keys",
            EMPTY,
        ),
        (v.list_type.is_some(), "x-kubernetes-list-type", UNDEFINED),
        (v.map_type.is_some(), "x-kubernetes-map-type", UNDEFINED),
        (v.validations > 0, "x-kubernetes-validations", EMPTY),
    ];
    checks
        .into_iter()
        .filter(|(bad, _, _)| *bad)
        .map(|(_, name, detail)| (name, detail))
        .collect()
}

fn required_because(errs: &mut Vec<Cause>, s_path: &str, v_path: &str) {
    errs.push(gofmt::required(
        s_path,
        &format!("because it is defined in {v_path}"),
    ));
}

/// Every field the value validations of `v` speak of is specified in `s`.
fn value_completeness(
    errs: &mut Vec<Cause>,
    v: &Schema,
    s: Option<&Schema>,
    s_path: &str,
    v_path: &str,
) {
    if let Some(not) = &v.not {
        nested_completeness(errs, not, s, s_path, &child(v_path, "not"));
    }
    let groups = [
        ("allOf", &v.all_of),
        ("anyOf", &v.any_of),
        ("oneOf", &v.one_of),
    ];
    for (name, group) in groups {
        for (i, x) in group.iter().enumerate() {
            nested_completeness(errs, x, s, s_path, &index(&child(v_path, name), i));
        }
    }
}

fn nested_completeness(
    errs: &mut Vec<Cause>,
    v: &Schema,
    s: Option<&Schema>,
    s_path: &str,
    v_path: &str,
) {
    let Some(s) = s else {
        return required_because(errs, s_path, v_path);
    };
    value_completeness(errs, v, Some(s), s_path, v_path);
    if let Some(Items::Schema(vi)) = &v.items {
        let si = s.items_schema();
        nested_completeness(
            errs,
            vi,
            si,
            &child(s_path, "items"),
            &child(v_path, "items"),
        );
    }
    for (k, vp) in &v.properties {
        let sp = key(&child(s_path, "properties"), k);
        let vpp = key(&child(v_path, "properties"), k);
        match s.prop(k) {
            Some(sf) => nested_completeness(errs, vp, Some(sf), &sp, &vpp),
            None => required_because(errs, &sp, &vpp),
        }
    }
}
