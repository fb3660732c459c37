//! ValidatingAdmissionPolicy and ValidatingAdmissionPolicyBinding: the checks both kinds'
//! strategies call (the policy's own, the binding's, and `paramRef`).

use super::*;

/// A policy's failurePolicy and validations (their CEL is compiled by the server).
pub(crate) fn validate_policy(o: &Map<String, Value>, errs: &mut Vec<Cause>) {
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

/// A binding names its policy and says what a failed validation does.
pub(crate) fn validate_policy_binding(o: &Map<String, Value>, errs: &mut Vec<Cause>) {
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
pub(crate) fn validate_param_ref(param_ref: &Map<String, Value>, errs: &mut Vec<Cause>) {
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
