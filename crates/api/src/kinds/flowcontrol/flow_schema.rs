//! FlowSchema (flowcontrol.apiserver.k8s.io/v1): API Priority and Fairness' request
//! classes. cairn serves and validates them as kube-apiserver does (so `kubectl get
//! flowschemas` and manifests that carry them work); it does not yet queue requests by them.

use crate::kinds::prelude::*;

pub const STRATEGY: Strategy = Strategy {
    default: Some(default),
    validate: Some(validate),
    columns: Some(columns),
    row: Some(row),
    tracks_generation: true,
    normalize: roundtrip::<k8s_openapi::api::flowcontrol::v1::FlowSchema>,
    ..Strategy::NONE
};

/// The largest `spec.matchingPrecedence` (upstream's FlowSchemaMaxMatchingPrecedence).
const MAX_MATCHING_PRECEDENCE: i64 = 10_000;
const DISTINGUISHER_METHODS: &[&str] = &["ByNamespace", "ByUser"];

/// `SetDefaults_FlowSchemaSpec`: an unset precedence is 1000.
fn default(o: &mut Map<String, Value>) {
    if let Some(spec) = o.get_mut("spec").and_then(Value::as_object_mut) {
        if spec.get("matchingPrecedence").is_none_or(Value::is_null) {
            spec.insert("matchingPrecedence".into(), json!(1000));
        }
    }
}

/// `ValidateFlowSchemaSpec`: the precedence range, the distinguisher and the priority level.
fn validate(o: &Map<String, Value>, errs: &mut Vec<Cause>) {
    let empty = Map::new();
    let spec = obj(o, "spec").unwrap_or(&empty);
    let precedence = int(spec, "matchingPrecedence").unwrap_or(0);
    if precedence <= 0 {
        errs.push(Cause::invalid_value(
            "spec.matchingPrecedence",
            &json!(precedence),
            "must be a positive value",
        ));
    } else if precedence > MAX_MATCHING_PRECEDENCE {
        errs.push(Cause::invalid_value(
            "spec.matchingPrecedence",
            &json!(precedence),
            "must not be greater than 10000",
        ));
    }
    if let Some(method) = obj(spec, "distinguisherMethod") {
        let ty = s(method, "type");
        if !DISTINGUISHER_METHODS.contains(&ty) {
            errs.push(Cause::not_supported(
                "spec.distinguisherMethod.type",
                ty,
                DISTINGUISHER_METHODS,
            ));
        }
    }
    let level = obj(spec, "priorityLevelConfiguration").map_or("", |p| s(p, "name"));
    if level.is_empty() {
        errs.push(Cause::required_detail(
            "spec.priorityLevelConfiguration.name",
            "must reference a priority level",
        ));
    } else {
        for msg in is_path_segment_name(level) {
            errs.push(Cause::invalid(
                "spec.priorityLevelConfiguration.name",
                level,
                &msg,
            ));
        }
    }
}

/// Upstream's `printFlowSchema` columns.
fn columns() -> Vec<Col> {
    vec![
        NAME,
        col("PriorityLevel", "string", "`name` is the name of the priority level configuration being referenced Required."),
        col("MatchingPrecedence", "string", "`matchingPrecedence` is used to choose among the FlowSchemas that match a given request. The chosen FlowSchema is among those with the numerically lowest (which we take to be logically highest) MatchingPrecedence.  Each MatchingPrecedence value must be ranged in [1,10000]. Note that if the precedence is not specified, it will be set to 1000 as default."),
        col("DistinguisherMethod", "string", "`distinguisherMethod` defines how to compute the flow distinguisher for requests that match this schema. `nil` specifies that the distinguisher is disabled and thus will always be the empty string."),
        AGE,
        col("MissingPL", "string", "references a broken or non-existent PriorityLevelConfiguration"),
    ]
}

/// Name, level, precedence, distinguisher (`<none>`), age, and the `Dangling` condition's
/// status (`?` while no controller has judged the reference).
fn row(obj: &Value, name: Value, created: &str, _now: DateTime<Utc>) -> Vec<Value> {
    let distinguisher = match get_str(obj, &["spec", "distinguisherMethod", "type"]) {
        "" => "<none>",
        ty => ty,
    };
    let dangling = get_arr(obj, &["status", "conditions"])
        .iter()
        .find(|c| get_str(c, &["type"]) == "Dangling")
        .map_or("?", |c| get_str(c, &["status"]));
    let cells = vec![
        name,
        json!(get_str(
            obj,
            &["spec", "priorityLevelConfiguration", "name"]
        )),
        json!(get_int(obj, &["spec", "matchingPrecedence"])),
        json!(distinguisher),
        json!(created),
        json!(dangling),
    ];
    cells
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::find;

    fn flow_schema(spec: Value) -> Value {
        json!({"apiVersion": "flowcontrol.apiserver.k8s.io/v1", "kind": "FlowSchema",
               "metadata": {"name": "fs", "creationTimestamp": "2026-01-01T00:00:00Z"}, "spec": spec})
    }

    #[test]
    fn served_with_its_strategy() {
        let r = find("flowcontrol.apiserver.k8s.io", "v1", "flowschemas").unwrap();
        assert!(!r.namespaced);
        assert!(r.subresource("status").is_some());
        assert_eq!(r.kind, "FlowSchema");
    }

    #[test]
    fn defaults_and_validates_like_upstream() {
        let r = find("flowcontrol.apiserver.k8s.io", "v1", "flowschemas").unwrap();
        let mut ok = flow_schema(json!({"priorityLevelConfiguration": {"name": "workload-low"}}));
        crate::defaults::apply_defaults(r, &mut ok);
        assert_eq!(ok["spec"]["matchingPrecedence"], 1000);
        assert!(crate::validation::validate_create(r, &ok).is_empty());

        let bad = flow_schema(
            json!({"matchingPrecedence": 10001, "distinguisherMethod": {"type": "ByPod"}}),
        );
        let messages: Vec<String> = crate::validation::validate_create(r, &bad)
            .iter()
            .map(Cause::describe)
            .collect();
        assert_eq!(
            messages,
            [
                "spec.matchingPrecedence: Invalid value: 10001: must not be greater than 10000",
                "spec.distinguisherMethod.type: Unsupported value: \"ByPod\": supported values: \"ByNamespace\", \"ByUser\"",
                "spec.priorityLevelConfiguration.name: Required value: must reference a priority level",
            ]
        );
    }

    #[test]
    fn table_row_as_kubectl_prints_it() {
        let r = find("flowcontrol.apiserver.k8s.io", "v1", "flowschemas").unwrap();
        let fs = flow_schema(
            json!({"priorityLevelConfiguration": {"name": "global-default"},
                                    "matchingPrecedence": 9900, "distinguisherMethod": {"type": "ByUser"}}),
        );
        let now = "2026-01-01T00:05:00Z".parse().unwrap();
        let table = crate::table::table(r, &[fs], now);
        let names: Vec<&str> = table["columnDefinitions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["name"].as_str().unwrap())
            .collect();
        assert_eq!(
            names,
            [
                "Name",
                "PriorityLevel",
                "MatchingPrecedence",
                "DistinguisherMethod",
                "Age",
                "MissingPL"
            ]
        );
        assert_eq!(
            table["rows"][0]["cells"],
            json!(["fs", "global-default", 9900, "ByUser", "5m", "?"])
        );
    }
}
