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
