//! Secret (core): what cairn does that is specific to it.

use crate::kinds::prelude::*;

pub const STRATEGY: Strategy = Strategy {
    default: Some(crate::defaults::default_secret),
    validate: Some(crate::validation::validate_secret),
    validate_update: Some(validate_update),
    columns: Some(columns),
    row: Some(row),
    normalize: roundtrip::<k8s_openapi::api::core::v1::Secret>,
    ..Strategy::NONE
};

fn validate_update(o: &Map<String, Value>, n: &Map<String, Value>, errs: &mut Vec<Cause>) {
    if field(n, "type") != field(o, "type") {
        errs.push(Cause::invalid_value(
            "type",
            field(n, "type").unwrap_or(&Value::Null),
            IMMUTABLE,
        ));
    }
    validate_immutable_data(o, n, &["data"], errs);
}

fn columns() -> Vec<Col> {
    vec![
        NAME,
        col("Type", "string", "Used to facilitate programmatic handling of secret data. More info: https://kubernetes.io/docs/concepts/configuration/secret/#secret-types"),
        col("Data", "string", "Data contains the secret data. Each key must consist of alphanumeric characters, '-', '_' or '.'. The serialized form of the secret data is a base64 encoded string, representing the arbitrary (possibly non-string) data value here. Described in https://tools.ietf.org/html/rfc4648#section-4"),
        AGE,
    ]
}

fn row(obj: &Value, name: Value, created: &str, _now: DateTime<Utc>) -> Vec<Value> {
    vec![
        name,
        json!(get_str(obj, &["type"])),
        json!(obj_len(obj, &["data"])),
        json!(created),
    ]
}
