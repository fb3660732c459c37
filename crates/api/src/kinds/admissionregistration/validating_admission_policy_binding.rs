//! ValidatingAdmissionPolicyBinding (admissionregistration.k8s.io): what cairn does that is specific to it.

use crate::kinds::prelude::*;

pub const STRATEGY: Strategy = Strategy {
    default: Some(default),
    validate: Some(validate),
    columns: Some(columns),
    row: Some(row),
    normalize: roundtrip::<
        k8s_openapi::api::admissionregistration::v1::ValidatingAdmissionPolicyBinding,
    >,
    ..Strategy::NONE
};

/// A binding names its policy and says what a failed validation does.
fn validate_policy_binding(o: &Map<String, Value>, errs: &mut Vec<Cause>) {
    let empty = Map::new();
    let spec = obj(o, "spec").unwrap_or(&empty);
    if s(spec, "policyName").is_empty() {
        errs.push(Cause::required("spec.policyName"));
    }
    let actions: Vec<&str> = arr(spec, "validationActions")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    if actions.is_empty() {
        errs.push(Cause::required_detail(
            "spec.validationActions",
            "at least one validation action is required",
        ));
    }
    for (i, a) in actions.iter().enumerate() {
        if !matches!(*a, "Deny" | "Warn" | "Audit") {
            errs.push(Cause::not_supported(
                format!("spec.validationActions[{i}]"),
                a,
                &["Audit", "Deny", "Warn"],
            ));
        }
    }
    if let Some(param_ref) = obj(spec, "paramRef") {
        validate_param_ref(param_ref, errs);
    }
    if actions.contains(&"Deny") && actions.contains(&"Warn") {
        errs.push(Cause::forbidden(
            "spec.validationActions",
            "Deny and Warn may not be used together",
        ));
    }
}

/// A binding's `paramRef`: a name or a selector, and what happens when nothing is found.
fn validate_param_ref(param_ref: &Map<String, Value>, errs: &mut Vec<Cause>) {
    let has_name = !s(param_ref, "name").is_empty();
    let has_selector = obj(param_ref, "selector").is_some();
    if has_name && has_selector {
        errs.push(Cause::forbidden(
            "spec.paramRef.name",
            "name and selector are mutually exclusive",
        ));
    }
    if !has_name && !has_selector {
        errs.push(Cause::required_detail(
            "spec.paramRef",
            "one of name or selector must be specified",
        ));
    }
    if let Some(sel) = obj(param_ref, "selector") {
        validate_label_selector(sel, "spec.paramRef.selector", errs);
    }
    match s(param_ref, "parameterNotFoundAction") {
        "" => errs.push(Cause::required("spec.paramRef.parameterNotFoundAction")),
        "Allow" | "Deny" => {}
        other => errs.push(Cause::not_supported(
            "spec.paramRef.parameterNotFoundAction",
            other,
            &["Allow", "Deny"],
        )),
    }
}

fn validate(o: &Map<String, Value>, errs: &mut Vec<Cause>) {
    validate_policy_binding(o, errs)
}

fn default(o: &mut Map<String, Value>) {
    crate::defaults::admission::default_policy_binding(o)
}

fn columns() -> Vec<Col> {
    vec![
        NAME,
        col("PolicyName", "string", "PolicyName references a ValidatingAdmissionPolicy name which the ValidatingAdmissionPolicyBinding binds to."),
        col("ParamRef", "string", "paramRef specifies the parameter resource used to configure the admission control policy."),
        AGE,
    ]
}

fn row(obj: &Value, name: Value, created: &str, _now: DateTime<Utc>) -> Vec<Value> {
    let policy = obj
        .pointer("/spec/policyName")
        .and_then(Value::as_str)
        .unwrap_or("");
    let param = match obj.pointer("/spec/paramRef") {
        Some(r) => {
            let ns = r["namespace"].as_str().unwrap_or("");
            let n = r["name"].as_str().unwrap_or("");
            if ns.is_empty() {
                format!("*/{n}")
            } else {
                format!("{ns}/{n}")
            }
        }
        None => "<unset>".to_string(),
    };
    vec![name, json!(policy), json!(param), json!(created)]
}
