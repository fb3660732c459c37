//! RuntimeClass (node.k8s.io): what cairn does that is specific to it.

use crate::kinds::prelude::*;

pub const STRATEGY: Strategy = Strategy {
    validate: Some(validate_runtime_class),
    validate_update: Some(validate_update),
    columns: Some(columns),
    row: Some(row),
    normalize: roundtrip::<k8s_openapi::api::node::v1::RuntimeClass>,
    ..Strategy::NONE
};

fn validate_runtime_class(o: &Map<String, Value>, errs: &mut Vec<Cause>) {
    let handler = s(o, "handler");
    for msg in is_dns1123_label(handler) {
        errs.push(Cause::invalid("handler", handler, &msg));
    }
}

fn validate_update(o: &Map<String, Value>, n: &Map<String, Value>, errs: &mut Vec<Cause>) {
    immutable_fields(o, n, &[&["handler"]], errs)
}

fn columns() -> Vec<Col> {
    vec![
        NAME,
        col("Handler", "string", "handler specifies the underlying runtime and configuration that the CRI implementation will use to handle pods of this class."),
        AGE,
    ]
}

fn row(obj: &Value, name: Value, created: &str, _now: DateTime<Utc>) -> Vec<Value> {
    vec![name, json!(get_str(obj, &["handler"])), json!(created)]
}
