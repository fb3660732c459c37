//! ServiceCIDR (networking.k8s.io): what cairn does that is specific to it.

use crate::kinds::prelude::*;

pub const STRATEGY: Strategy = Strategy {
    validate: Some(crate::validation::networking::validate_service_cidr),
    columns: Some(columns),
    row: Some(row),
    normalize: roundtrip::<k8s_openapi::api::networking::v1::ServiceCIDR>,
    ..Strategy::NONE
};

fn columns() -> Vec<Col> {
    vec![NAME, col("CIDRs", "string", "list of IP CIDRs"), AGE]
}

fn row(obj: &Value, name: Value, created: &str, _now: DateTime<Utc>) -> Vec<Value> {
    let cidrs: Vec<&str> = get_arr(obj, &["spec", "cidrs"])
        .iter()
        .filter_map(Value::as_str)
        .collect();
    vec![name, json!(cidrs.join(",")), json!(created)]
}
