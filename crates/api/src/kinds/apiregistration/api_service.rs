//! APIService (apiregistration.k8s.io): what cairn does that is specific to it.

use crate::kinds::prelude::*;

pub const STRATEGY: Strategy = Strategy {
    validate: Some(crate::validation::cluster::validate_api_service),
    columns: Some(columns),
    row: Some(row),
    normalize: roundtrip::<k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1::APIService>,
    name_rule: NameRule::PathSegment,
    ..Strategy::NONE
};

fn columns() -> Vec<Col> {
    vec![
        NAME,
        col(
            "Service",
            "string",
            "The reference to the service that hosts this API endpoint.",
        ),
        col("Available", "string", "Whether this service is available."),
        AGE,
    ]
}

fn row(obj: &Value, name: Value, created: &str, _now: DateTime<Utc>) -> Vec<Value> {
    api_service_row(obj, name, created)
}

fn api_service_row(obj: &Value, name: Value, created: &str) -> Vec<Value> {
    let service = match get(obj, &["spec", "service"]) {
        Some(s) => format!("{}/{}", get_str(s, &["namespace"]), get_str(s, &["name"])),
        None => "Local".to_string(),
    };
    let available = get_arr(obj, &["status", "conditions"])
        .iter()
        .find(|c| get_str(c, &["type"]) == "Available")
        .map_or("Unknown".to_string(), |c| {
            match (get_str(c, &["status"]), get_str(c, &["reason"])) {
                ("True", _) | (_, "") => get_str(c, &["status"]).to_string(),
                (status, reason) => format!("{status} ({reason})"),
            }
        });
    vec![name, json!(service), json!(available), json!(created)]
}
