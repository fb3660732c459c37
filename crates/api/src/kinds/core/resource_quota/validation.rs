//! ResourceQuotas (upstream `ValidateResourceQuota`): each `hard` name standard (or
//! qualified with a `/`), amounts not negative and whole for counts, known scopes that
//! do not conflict and suit the tracked resources, and well-formed scope selectors.

use cairn_apimachinery::quantity;
use cairn_semantics::quota::{is_integer_resource, is_standard_quota_resource, STANDARD_SCOPES};
use serde_json::{Map, Value};

use crate::status::Cause;
use crate::validation::*;

const CONFLICTING: [(&str, &str); 2] = [
    ("BestEffort", "NotBestEffort"),
    ("Terminating", "NotTerminating"),
];

pub(super) fn validate_resource_quota(o: &Map<String, Value>, errs: &mut Vec<Cause>) {
    let empty = Map::new();
    let spec = obj(o, "spec").unwrap_or(&empty);
    validate_amounts(spec, "hard", "spec.hard", errs);
    let hard: Vec<&str> = obj(spec, "hard")
        .map(|m| m.keys().map(String::as_str).collect())
        .unwrap_or_default();
    validate_scopes(spec, &hard, errs);
    if let Some(selector) = obj(spec, "scopeSelector") {
        validate_scope_selector(selector, &hard, errs);
    }
}

/// `spec.hard` (or a status list): names and amounts.
fn validate_amounts(o: &Map<String, Value>, key: &str, p: &str, errs: &mut Vec<Cause>) {
    for (name, v) in obj(o, key).into_iter().flatten() {
        let path = format!("{p}[{name}]");
        for msg in is_qualified_name(name) {
            errs.push(Cause::invalid(path.clone(), name, &msg));
        }
        if !name.contains('/') && !is_standard_quota_resource(name) {
            errs.push(Cause::invalid(
                path.clone(),
                name,
                "must be a standard resource for quota",
            ));
        }
        let text = match v {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        let Some(nanos) = quantity::nanos(&text) else {
            continue;
        };
        if nanos < 0 {
            errs.push(Cause::invalid(path.clone(), &text, IS_NEGATIVE));
        }
        if is_integer_resource(name) && nanos % 1_000_000_000 != 0 {
            errs.push(Cause::invalid(path, &text, "must be an integer"));
        }
    }
}

/// Upstream `IsResourceQuotaScopeValidForResource`: pod scopes fit pod counts and compute.
fn scope_fits(scope: &str, resource: &str) -> bool {
    const POD_COMPUTE: [&str; 8] = [
        "pods",
        "count/pods",
        "cpu",
        "memory",
        "limits.cpu",
        "limits.memory",
        "requests.cpu",
        "requests.memory",
    ];
    match scope {
        "BestEffort" => matches!(resource, "pods" | "count/pods"),
        s if STANDARD_SCOPES.contains(&s) => POD_COMPUTE.contains(&resource),
        _ => false,
    }
}

fn scopes_repr(scopes: &[&str]) -> String {
    let quoted: Vec<String> = scopes.iter().map(|s| format!("{s:?}")).collect();
    format!("[]core.ResourceQuotaScope{{{}}}", quoted.join(", "))
}

fn validate_scopes(spec: &Map<String, Value>, hard: &[&str], errs: &mut Vec<Cause>) {
    let scopes: Vec<&str> = arr(spec, "scopes")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    let repr = scopes_repr(&scopes);
    for scope in &scopes {
        if !STANDARD_SCOPES.contains(scope) {
            errs.push(Cause::invalid_repr(
                "spec.scopes",
                &repr,
                "unsupported scope",
            ));
        }
        for r in hard.iter().filter(|r| is_standard_quota_resource(r)) {
            if !scope_fits(scope, r) {
                errs.push(Cause::invalid_repr(
                    "spec.scopes",
                    &repr,
                    "unsupported scope applied to resource",
                ));
            }
        }
    }
    for (a, b) in CONFLICTING {
        if scopes.contains(&a) && scopes.contains(&b) {
            errs.push(Cause::invalid_repr(
                "spec.scopes",
                &repr,
                "conflicting scopes",
            ));
        }
    }
}

const EXISTS_ONLY: &str = "must be 'Exist' when scope is any of ResourceQuotaScopeTerminating, ResourceQuotaScopeNotTerminating, ResourceQuotaScopeBestEffort, ResourceQuotaScopeNotBestEffort or ResourceQuotaScopeCrossNamespacePodAffinity";

fn validate_scope_selector(selector: &Map<String, Value>, hard: &[&str], errs: &mut Vec<Cause>) {
    let p = "spec.scopeSelector.matchExpressions";
    let selector_value = Value::Object(selector.clone());
    let mut seen = Vec::new();
    for (_, req) in objs(selector, "matchExpressions") {
        let scope = s(req, "scopeName");
        let op = s(req, "operator");
        if !STANDARD_SCOPES.contains(&scope) {
            errs.push(Cause::invalid(
                format!("{p}.scopeName"),
                scope,
                "unsupported scope",
            ));
        }
        if hard
            .iter()
            .any(|r| is_standard_quota_resource(r) && !scope_fits(scope, r))
        {
            let msg = "unsupported scope applied to resource";
            errs.push(Cause::invalid_value(p, &selector_value, msg));
        }
        if scope != "PriorityClass" && STANDARD_SCOPES.contains(&scope) && op != "Exists" {
            errs.push(Cause::invalid(format!("{p}.operator"), op, EXISTS_ONLY));
        }
        let values = arr(req, "values");
        match op {
            "In" | "NotIn" if values.is_empty() => errs.push(Cause::required_detail(
                format!("{p}.values"),
                "must be at least one value when `operator` is 'In' or 'NotIn' for scope selector",
            )),
            "Exists" | "DoesNotExist" if !values.is_empty() => errs.push(Cause::invalid_value(
                format!("{p}.values"),
                &Value::Array(values.to_vec()),
                "must be no value when `operator` is 'Exist' or 'DoesNotExist' for scope selector",
            )),
            "In" | "NotIn" | "Exists" | "DoesNotExist" => {}
            other => errs.push(Cause::invalid(
                format!("{p}.operator"),
                other,
                "not a valid selector operator",
            )),
        }
        seen.push(scope);
    }
    for (a, b) in CONFLICTING {
        if seen.contains(&a) && seen.contains(&b) {
            errs.push(Cause::invalid_value(
                p,
                &selector_value,
                "conflicting scopes",
            ));
        }
    }
}
