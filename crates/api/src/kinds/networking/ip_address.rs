//! IPAddress (networking.k8s.io): what cairn does that is specific to it.

use std::net::IpAddr;

use crate::kinds::prelude::*;

pub const STRATEGY: Strategy = Strategy {
    validate: Some(validate_ip_address),
    validate_update: Some(validate_update),
    columns: Some(columns),
    row: Some(row),
    normalize: roundtrip::<k8s_openapi::api::networking::v1::IPAddress>,
    name_rule: NameRule::PathSegment,
    ..Strategy::NONE
};

/// An IPAddress is named by its address, in canonical form, and says what it belongs to.
fn validate_ip_address(o: &Map<String, Value>, errs: &mut Vec<Cause>) {
    let empty = Map::new();
    let name = obj(o, "metadata").map_or("", |m| s(m, "name"));
    match name.parse::<IpAddr>() {
        Ok(ip) if ip.to_string() == name => {}
        _ if name.is_empty() => {}
        _ => errs.push(Cause::invalid(
            "metadata.name",
            name,
            "must be a canonical format IP address",
        )),
    }
    let parent = obj(o, "spec").and_then(|s| obj(s, "parentRef"));
    let Some(parent) = parent else {
        errs.push(Cause::required("spec.parentRef"));
        return;
    };
    let parent = if parent.is_empty() { &empty } else { parent };
    for key in ["resource", "name"] {
        if s(parent, key).is_empty() {
            errs.push(Cause::required(format!("spec.parentRef.{key}")));
        }
    }
}

fn validate_update(o: &Map<String, Value>, n: &Map<String, Value>, errs: &mut Vec<Cause>) {
    immutable_fields(o, n, &[&["spec"]], errs)
}

fn columns() -> Vec<Col> {
    vec![
        NAME,
        col("ParentRef", "string", "ParentRef references the resource that an IPAddress is attached to. An IPAddress must reference a parent object."),
    ]
}

fn row(obj: &Value, name: Value, _created: &str, _now: DateTime<Utc>) -> Vec<Value> {
    vec![name, json!(ip_parent(obj))]
}

fn ip_parent(obj: &Value) -> String {
    let Some(p) = get(obj, &["spec", "parentRef"]) else {
        return "<none>".to_string();
    };
    let resource = get_str(p, &["resource"]);
    let mut out = match get_str(p, &["group"]) {
        "" => resource.to_lowercase(),
        group => format!("{resource}.{group}").to_lowercase(),
    };
    let ns = get_str(p, &["namespace"]);
    if !ns.is_empty() {
        out.push('/');
        out.push_str(ns);
    }
    format!("{out}/{}", get_str(p, &["name"]))
}
