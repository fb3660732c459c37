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
