//! APIService (apiregistration.k8s.io): what cairn does that is specific to it.

use crate::kinds::prelude::*;

pub const STRATEGY: Strategy = Strategy {
    validate: Some(validate_api_service),
    columns: Some(columns),
    row: Some(row),
    normalize: roundtrip::<k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1::APIService>,
    name_rule: NameRule::PathSegment,
    ..Strategy::NONE
};

fn validate_api_service(o: &Map<String, Value>, errs: &mut Vec<Cause>) {
    let empty = Map::new();
    let spec = obj(o, "spec").unwrap_or(&empty);
    let name = obj(o, "metadata").map_or("", |m| s(m, "name"));
    let (group, version) = (s(spec, "group"), s(spec, "version"));
    let required = format!("{version}.{group}");
    if name != required {
        errs.push(Cause::invalid(
            "metadata.name",
            name,
            &format!("must be `spec.version+\".\"+spec.group`: {required:?}"),
        ));
    }
    for msg in is_dns1123_label(version) {
        errs.push(Cause::invalid("spec.version", version, &msg));
    }
    let priorities = [("groupPriorityMinimum", 20000), ("versionPriority", 1000)];
    for (key, max) in priorities {
        let v = int(spec, key).unwrap_or(0);
        if v <= 0 || v > max {
            errs.push(Cause::invalid_value(
                format!("spec.{key}"),
                &Value::from(v),
                &format!("must be positive and less than {max}"),
            ));
        }
    }
    let ca_bundle = !s(spec, "caBundle").is_empty();
    let insecure = field(spec, "insecureSkipTLSVerify").and_then(Value::as_bool) == Some(true);
    match obj(spec, "service") {
        None => {
            if ca_bundle {
                errs.push(Cause::invalid_repr(
                    "spec.caBundle",
                    "[]byte{...}",
                    "local APIServices may not have a caBundle",
                ));
            }
            if insecure {
                errs.push(Cause::invalid_value(
                    "spec.insecureSkipTLSVerify",
                    &Value::Bool(true),
                    "local APIServices may not have insecureSkipTLSVerify",
                ));
            }
        }
        Some(service) => {
            for key in ["namespace", "name"] {
                if s(service, key).is_empty() {
                    errs.push(Cause::required(format!("spec.service.{key}")));
                }
            }
            if insecure && ca_bundle {
                errs.push(Cause::invalid_value(
                    "spec.insecureSkipTLSVerify",
                    &Value::Bool(true),
                    "may not be true if caBundle is present",
                ));
            }
        }
    }
}

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
