//! ValidatingAdmissionPolicy (admissionregistration.k8s.io): what cairn does that is specific to it.

use crate::kinds::prelude::*;

pub const STRATEGY: Strategy = Strategy {
    default: Some(default),
    validate: Some(validate_policy),
    columns: Some(columns),
    row: Some(row),
    normalize: roundtrip::<k8s_openapi::api::admissionregistration::v1::ValidatingAdmissionPolicy>,
    admission: &[Admission::PolicyCompile],
    ..Strategy::NONE
};

/// A policy's failurePolicy and validations (their CEL is compiled by the server).
fn validate_policy(o: &Map<String, Value>, errs: &mut Vec<Cause>) {
    let empty = Map::new();
    let spec = obj(o, "spec").unwrap_or(&empty);
    let failure = s(spec, "failurePolicy");
    if !matches!(failure, "" | "Fail" | "Ignore") {
        errs.push(Cause::not_supported(
            "spec.failurePolicy",
            failure,
            &["Fail", "Ignore"],
        ));
    }
    if obj(spec, "matchConstraints").is_none_or(|m| arr(m, "resourceRules").is_empty()) {
        errs.push(Cause::required("spec.matchConstraints.resourceRules"));
    }
    for (i, v) in objs(spec, "validations") {
        if s(v, "expression").is_empty() {
            errs.push(Cause::required(format!("spec.validations[{i}].expression")));
        }
    }
    if arr(spec, "validations").is_empty() && arr(spec, "auditAnnotations").is_empty() {
        errs.push(Cause::required_detail(
            "spec.validations",
            "validations or auditAnnotations must contain at least one item",
        ));
    }
}

fn default(o: &mut Map<String, Value>) {
    crate::defaults::admission::default_policy(o)
}

fn columns() -> Vec<Col> {
    vec![
        NAME,
        col(
            "Validations",
            "integer",
            "Validations contain CEL expressions which is used to apply the validation.",
        ),
        col(
            "ParamKind",
            "string",
            "ParamKind specifies the kind of resources used to parameterize this policy",
        ),
        AGE,
    ]
}

fn row(obj: &Value, name: Value, created: &str, _now: DateTime<Utc>) -> Vec<Value> {
    let count = obj
        .pointer("/spec/validations")
        .and_then(Value::as_array)
        .map_or(0, Vec::len);
    let param = match obj.pointer("/spec/paramKind") {
        Some(k) => format!(
            "{}/{}",
            k["apiVersion"].as_str().unwrap_or(""),
            k["kind"].as_str().unwrap_or("")
        ),
        None => "<unset>".to_string(),
    };
    vec![name, json!(count), json!(param), json!(created)]
}
