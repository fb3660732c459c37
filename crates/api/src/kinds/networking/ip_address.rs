//! IPAddress (networking.k8s.io): what cairn does that is specific to it.

use crate::kinds::prelude::*;

pub const STRATEGY: Strategy = Strategy {
    validate: Some(crate::validation::networking::validate_ip_address),
    validate_update: Some(validate_update),
    columns: Some(columns),
    row: Some(row),
    normalize: roundtrip::<k8s_openapi::api::networking::v1::IPAddress>,
    name_rule: NameRule::PathSegment,
    ..Strategy::NONE
};

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
