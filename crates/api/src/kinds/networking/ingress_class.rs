//! IngressClass (networking.k8s.io): what cairn does that is specific to it.

use crate::kinds::prelude::*;

pub const STRATEGY: Strategy = Strategy {
    validate: Some(validate_ingress_class),
    validate_update: Some(validate_update),
    columns: Some(columns),
    row: Some(row),
    normalize: roundtrip::<k8s_openapi::api::networking::v1::IngressClass>,
    tracks_generation: true,
    ..Strategy::NONE
};

fn validate_ingress_class(o: &Map<String, Value>, errs: &mut Vec<Cause>) {
    let empty = Map::new();
    let spec = obj(o, "spec").unwrap_or(&empty);
    let controller = s(spec, "controller");
    if controller.is_empty() {
        errs.push(Cause::required("spec.controller"));
    } else if controller.len() > 250 {
        errs.push(Cause::too_long("spec.controller", 250));
    } else if let Some(msg) = domain_prefixed_path_error(controller) {
        errs.push(Cause::invalid("spec.controller", controller, &msg));
    }
    if let Some(params) = obj(spec, "parameters") {
        for key in ["kind", "name"] {
            if s(params, key).is_empty() {
                errs.push(Cause::required(format!("spec.parameters.{key}")));
            }
        }
        match s(params, "scope") {
            "" | "Cluster" => {
                if !s(params, "namespace").is_empty() {
                    errs.push(Cause::forbidden(
                        "spec.parameters.namespace",
                        "`parameters.scope` is set to 'Cluster'",
                    ));
                }
            }
            "Namespace" if s(params, "namespace").is_empty() => errs.push(Cause::required_detail(
                "spec.parameters.namespace",
                "`parameters.scope` is set to 'Namespace'",
            )),
            "Namespace" => {}
            other => errs.push(Cause::not_supported(
                "spec.parameters.scope",
                other,
                &["Cluster", "Namespace"],
            )),
        }
    }
}

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
