//! ControllerRevision (apps): what cairn does that is specific to it.

use crate::kinds::prelude::*;

pub const STRATEGY: Strategy = Strategy {
    columns: Some(columns),
    row: Some(row),
    normalize: roundtrip::<k8s_openapi::api::apps::v1::ControllerRevision>,
    ..Strategy::NONE
};

fn columns() -> Vec<Col> {
    vec![
        NAME,
        col("Controller", "string", "Controller of the object"),
        col(
            "Revision",
            "integer",
            "Revision indicates the revision of the state represented by Data.",
        ),
        AGE,
    ]
}

fn row(obj: &Value, name: Value, created: &str, _now: DateTime<Utc>) -> Vec<Value> {
    vec![
        name,
        json!(controller_name(obj)),
        json!(get_int(obj, &["revision"])),
        json!(created),
    ]
}
