//! ConfigMap (core): what cairn does that is specific to it.

use crate::kinds::prelude::*;

pub const STRATEGY: Strategy = Strategy {
    validate: Some(validate_config_map),
    validate_update: Some(validate_update),
    columns: Some(columns),
    row: Some(row),
    normalize: roundtrip::<k8s_openapi::api::core::v1::ConfigMap>,
    ..Strategy::NONE
};

fn validate_config_map(o: &Map<String, Value>, errs: &mut Vec<Cause>) {
    let mut total = validate_data_keys(o, "data", errs);
    total += validate_data_keys(o, "binaryData", errs);
    if let (Some(data), Some(binary)) = (obj(o, "data"), obj(o, "binaryData")) {
        for k in data.keys().filter(|k| binary.contains_key(*k)) {
            errs.push(Cause::invalid(
                format!("data[{k}]"),
                k,
                "duplicate of key present in binaryData",
            ));
        }
    }
    if total > MAX_SECRET_SIZE {
        errs.push(Cause::too_long("", MAX_SECRET_SIZE));
    }
}

fn validate_update(o: &Map<String, Value>, n: &Map<String, Value>, errs: &mut Vec<Cause>) {
    validate_immutable_data(o, n, &["data", "binaryData"], errs)
}

fn columns() -> Vec<Col> {
    vec![
        NAME,
        col("Data", "string", "Data contains the configuration data. Each key must consist of alphanumeric characters, '-', '_' or '.'. Values with non-UTF-8 byte sequences must use the BinaryData field. The keys stored in Data must not overlap with the keys in the BinaryData field, this is enforced during validation process."),
        AGE,
    ]
}

fn row(obj: &Value, name: Value, created: &str, _now: DateTime<Utc>) -> Vec<Value> {
    vec![
        name,
        json!(obj_len(obj, &["data"]) + obj_len(obj, &["binaryData"])),
        json!(created),
    ]
}
