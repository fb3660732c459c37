//! ResourceQuota (core): what cairn does that is specific to it.

use crate::kinds::prelude::*;

mod validation;

pub const STRATEGY: Strategy = Strategy {
    validate: Some(validation::validate_resource_quota),
    columns: Some(columns),
    row: Some(row),
    normalize: roundtrip::<k8s_openapi::api::core::v1::ResourceQuota>,
    prepare_for_create: Some(prepare_for_create),
    ..Strategy::NONE
};

fn columns() -> Vec<Col> {
    vec![
        NAME,
        AGE,
        col(
            "Request",
            "string",
            "Request is a label for resource quota requests",
        ),
        col(
            "Limit",
            "string",
            "Limit is a label for resource quota limits",
        ),
    ]
}

fn row(obj: &Value, name: Value, created: &str, _now: DateTime<Utc>) -> Vec<Value> {
    let (request, limit) = quota_cells(obj);
    vec![name, json!(created), json!(request), json!(limit)]
}

/// The quota controller counts; a client's numbers are not believed.
fn prepare_for_create(obj: &mut Value) {
    if let Some(o) = obj.as_object_mut() {
        o.remove("status");
    }
}
