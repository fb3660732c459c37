//! ValidatingAdmissionPolicy (admissionregistration.k8s.io): what cairn does that is specific to it.

use crate::kinds::prelude::*;

pub const STRATEGY: Strategy = Strategy {
    default: Some(default),
    validate: Some(crate::validation::admission_policy::validate_policy),
    columns: Some(columns),
    row: Some(row),
    normalize: roundtrip::<k8s_openapi::api::admissionregistration::v1::ValidatingAdmissionPolicy>,
    admission: &[Admission::PolicyCompile],
    ..Strategy::NONE
};

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
