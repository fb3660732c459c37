//! IngressClass (networking.k8s.io): what cairn does that is specific to it.

use crate::kinds::prelude::*;

pub const STRATEGY: Strategy = Strategy {
    validate: Some(crate::validation::networking::validate_ingress_class),
    validate_update: Some(validate_update),
    columns: Some(columns),
    row: Some(row),
    normalize: roundtrip::<k8s_openapi::api::networking::v1::IngressClass>,
    tracks_generation: true,
    ..Strategy::NONE
};

fn validate_update(o: &Map<String, Value>, n: &Map<String, Value>, errs: &mut Vec<Cause>) {
    immutable_fields(o, n, &[&["spec", "controller"]], errs)
}

fn columns() -> Vec<Col> {
    vec![
        NAME,
        col(
            "Controller",
            "string",
            "Controller that is responsible for handling this class",
        ),
        col(
            "Parameters",
            "string",
            "A reference to a resource with additional parameters",
        ),
        AGE,
    ]
}

fn row(obj: &Value, name: Value, created: &str, _now: DateTime<Utc>) -> Vec<Value> {
    let params = get(obj, &["spec", "parameters"]).map_or("<none>".to_string(), |p| {
        let (kind, pname) = (get_str(p, &["kind"]), get_str(p, &["name"]));
        match get_str(p, &["apiGroup"]) {
            "" => format!("{kind}/{pname}"),
            group => format!("{kind}.{group}/{pname}"),
        }
    });
    vec![
        name,
        json!(get_str(obj, &["spec", "controller"])),
        json!(params),
        json!(created),
    ]
}
