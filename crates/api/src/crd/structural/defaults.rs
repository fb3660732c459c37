//! apiextensions' `defaulting.ValidateDefaults`: every default must survive pruning
//! unchanged, make valid embedded resources, and validate against its own schema.

use super::gofmt::{self, child, key};
use super::objects;
use super::prune::prune_value;
use super::schema::{Schema, MAX_DEPTH};
use super::validate::{validate_value, Mode};
use crate::status::Cause;

const META_FIELDS: [&str; 3] = ["apiVersion", "kind", "metadata"];

/// The errors of the defaults in a structural schema (the root is a resource).
pub(crate) fn validate_defaults(s: &Schema, path: &str) -> Vec<Cause> {
    let mut errs = Vec::new();
    node(&mut errs, s, path, true, false, 0);
    errs
}

fn node(
    errs: &mut Vec<Cause>,
    s: &Schema,
    path: &str,
    root: bool,
    inside_meta: bool,
    depth: usize,
) {
    if depth > MAX_DEPTH {
        return;
    }
    let resource = root || s.embedded_resource;
    let inside_meta = inside_meta && !s.embedded_resource;
    if let Some(d) = s.default_value() {
        let at = child(path, "default");
        if inside_meta {
            errs.extend(validate_value(s, d, Some(&at), Mode::Default, false));
        } else {
            let mut pruned = d.clone();
            prune_value(&mut pruned, Some(s), resource, &mut Vec::new());
            if pruned != *d {
                errs.push(gofmt::invalid(&at, d, "must not have unknown fields"));
            }
            let meta = embedded_errors(s, d, &at, resource);
            if meta.is_empty() {
                errs.extend(validate_value(s, d, Some(&at), Mode::Default, false));
            } else {
                errs.extend(meta);
            }
        }
    }
    if let Some(items) = s.items_schema() {
        node(
            errs,
            items,
            &child(path, "items"),
            false,
            inside_meta,
            depth + 1,
        );
    }
    for (k, p) in &s.properties {
        let sub_meta = inside_meta || (resource && META_FIELDS.contains(&k.as_str()));
        let pp = key(&child(path, "properties"), k);
        node(errs, p, &pp, false, sub_meta, depth + 1);
    }
}

/// objectmeta's `Validate` of a default: its embedded resources, itself included when
/// the schema is one, with paths under `at`.
fn embedded_errors(s: &Schema, d: &serde_json::Value, at: &str, resource: bool) -> Vec<Cause> {
    let schema = Schema {
        embedded_resource: resource,
        ..s.clone()
    };
    objects::embedded_resources(d, &schema)
        .into_iter()
        .map(|mut c| {
            c.field = if c.field.is_empty() {
                at.to_string()
            } else if c.field.starts_with('[') {
                format!("{at}{}", c.field)
            } else {
                format!("{at}.{}", c.field)
            };
            c
        })
        .collect()
}
