//! ValidatingAdmissionPolicy: every write of a resource a bound policy matches is checked
//! with the policy's CEL validations (`cairn-cel` expressions over `object`, `oldObject`
//! and `request`), after the object's own validation, as kube-apiserver's
//! `ValidatingAdmissionPolicy` plugin does. A failed validation denies the write (action
//! `Deny`, a 422 in upstream's words) or adds a warning (`Warn`); `Audit` is not recorded
//! (there is no audit log). Policies with `paramKind` are not evaluated yet.

use std::collections::HashMap;
use std::sync::Arc;

use cairn_api::status::Cause;
use cairn_cel::Expression;
use cairn_semantics::selector::{Labels, Selector};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use serde_json::{json, Value};

use super::*;

const GROUP: &str = "admissionregistration.k8s.io";

/// Policy expressions compiled once per distinct text, not once per write.
#[derive(Default)]
pub struct ExpressionCache(parking_lot::Mutex<HashMap<String, Arc<Result<Expression, String>>>>);

/// Distinct expressions kept before the cache starts over (policies edited many times).
const EXPRESSION_CACHE_LIMIT: usize = 4096;

type Compile<'a> = &'a dyn Fn(&str) -> Arc<Result<Expression, String>>;

impl ExpressionCache {
    fn compiled(&self, source: &str) -> Arc<Result<Expression, String>> {
        if let Some(e) = self.0.lock().get(source) {
            return e.clone();
        }
        let compiled = Arc::new(cairn_cel::compile_expression(source));
        let mut map = self.0.lock();
        if map.len() >= EXPRESSION_CACHE_LIMIT {
            map.clear();
        }
        map.insert(source.to_string(), compiled.clone());
        compiled
    }
}

/// The 422 causes of a policy whose validations do not compile.
pub(super) fn policy_compile_errors(policy: &Value) -> Vec<Cause> {
    let validations = policy
        .pointer("/spec/validations")
        .and_then(Value::as_array);
    let mut causes = Vec::new();
    for (i, v) in validations.into_iter().flatten().enumerate() {
        let expr = v["expression"].as_str().unwrap_or("");
        if let Err(e) = cairn_cel::compile_expression(expr) {
            causes.push(Cause::invalid(
                format!("spec.validations[{i}].expression"),
                expr,
                &e,
            ));
        }
    }
    causes
}

fn rule_matches(rule: &Value, r: &ResourceInfo, operation: &str) -> bool {
    let listed = |key: &str, value: &str| {
        rule[key]
            .as_array()
            .is_some_and(|l| l.iter().any(|x| x == "*" || x.as_str() == Some(value)))
    };
    let scope_ok = match rule["scope"].as_str() {
        Some("Namespaced") => r.namespaced,
        Some("Cluster") => !r.namespaced,
        _ => true,
    };
    listed("apiGroups", r.group)
        && listed("apiVersions", r.version)
        && listed("resources", r.plural)
        && listed("operations", operation)
        && scope_ok
}

fn selector_matches(selector: &Value, labels: &Labels) -> bool {
    if selector.is_null() {
        return true;
    }
    serde_json::from_value::<LabelSelector>(selector.clone())
        .ok()
        .and_then(|s| Selector::from_label_selector(&s).ok())
        .is_some_and(|s| s.matches(labels))
}

fn labels_of(obj: &Value) -> Labels {
    obj.pointer("/metadata/labels")
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .map(|(k, v)| (k.clone(), v.as_str().unwrap_or("").to_string()))
                .collect()
        })
        .unwrap_or_default()
}

/// Whether `constraints` (a policy's `matchConstraints` or a binding's `matchResources`)
/// select this write.
fn constraints_match(
    constraints: &Value,
    r: &ResourceInfo,
    operation: &str,
    obj: &Value,
    namespace_labels: &Labels,
) -> bool {
    if constraints.is_null() {
        return true;
    }
    // No resourceRules (a binding narrowing by namespace only): whatever the policy matches.
    let rules = constraints["resourceRules"]
        .as_array()
        .filter(|rs| !rs.is_empty());
    let included = rules.is_none_or(|rs| rs.iter().any(|rule| rule_matches(rule, r, operation)));
    let excluded = constraints["excludeResourceRules"]
        .as_array()
        .is_some_and(|rs| rs.iter().any(|rule| rule_matches(rule, r, operation)));
    let namespace_ok =
        !r.namespaced || selector_matches(&constraints["namespaceSelector"], namespace_labels);
    included
        && !excluded
        && namespace_ok
        && selector_matches(&constraints["objectSelector"], &labels_of(obj))
}

/// One binding's outcome on one write.
enum Outcome {
    Allowed,
    Denied(String),
}

impl ApiState {
    /// Runs every bound policy that matches this write. `Err` denies it; the `Ok` strings
    /// are warnings for the response.
    pub(super) fn admit_policies(
        &self,
        r: &ResourceInfo,
        obj: &Value,
        old: Option<&Value>,
    ) -> Result<Vec<String>, Status> {
        if r.group == GROUP {
            return Ok(Vec::new());
        }
        let (bindings, _) = self.cache.list(&format!(
            "/registry/{GROUP}/validatingadmissionpolicybindings/"
        ));
        if bindings.is_empty() {
            return Ok(Vec::new());
        }
        let operation = if old.is_some() { "UPDATE" } else { "CREATE" };
        let namespace_labels = self.namespace_labels(obj);
        let mut warnings = Vec::new();
        for cached in bindings {
            let Ok(binding) = serde_json::from_slice::<Value>(&cached.bytes) else {
                continue;
            };
            let policy_name = binding
                .pointer("/spec/policyName")
                .and_then(Value::as_str)
                .unwrap_or("");
            let key = format!("/registry/{GROUP}/validatingadmissionpolicies/{policy_name}");
            let Some(policy) = self
                .cache
                .get(&key)
                .and_then(|o| serde_json::from_slice::<Value>(&o.bytes).ok())
            else {
                continue;
            };
            let applies = constraints_match(
                &policy["spec"]["matchConstraints"],
                r,
                operation,
                obj,
                &namespace_labels,
            ) && constraints_match(
                &binding["spec"]["matchResources"],
                r,
                operation,
                obj,
                &namespace_labels,
            ) && policy.pointer("/spec/paramKind").is_none();
            if !applies {
                continue;
            }
            if let Outcome::Denied(message) = evaluate(&policy, r, operation, obj, old, &|src| {
                self.policy_expressions.compiled(src)
            }) {
                let text = format!(
                    "ValidatingAdmissionPolicy '{policy_name}' with binding '{}' denied request: {message}",
                    name_of(&binding)
                );
                let actions = binding
                    .pointer("/spec/validationActions")
                    .and_then(Value::as_array);
                let has = |a: &str| actions.is_some_and(|l| l.iter().any(|x| x == a));
                if has("Deny") {
                    return Err(Status::invalid(
                        r.plural,
                        r.group,
                        name_of(obj),
                        vec![Cause::from_message("", text)],
                    ));
                }
                if has("Warn") {
                    warnings.push(format!(
                        "Validation failed for ValidatingAdmissionPolicy '{policy_name}' with binding '{}': {message}",
                        name_of(&binding)
                    ));
                }
            }
        }
        Ok(warnings)
    }

    fn namespace_labels(&self, obj: &Value) -> Labels {
        let ns = obj
            .pointer("/metadata/namespace")
            .and_then(Value::as_str)
            .unwrap_or("");
        self.cache
            .get(&format!("/registry/core/namespaces/{ns}"))
            .and_then(|o| serde_json::from_slice::<Value>(&o.bytes).ok())
            .map(|n| labels_of(&n))
            .unwrap_or_default()
    }
}

/// The policy's matchConditions, then its validations, on one write. An expression that
/// fails to compile or evaluate follows the policy's `failurePolicy` (default `Fail`).
fn evaluate(
    policy: &Value,
    r: &ResourceInfo,
    operation: &str,
    obj: &Value,
    old: Option<&Value>,
    compile: Compile<'_>,
) -> Outcome {
    let request = json!({"operation": operation, "name": name_of(obj),
        "namespace": obj.pointer("/metadata/namespace").cloned().unwrap_or(Value::Null),
        "resource": {"group": r.group, "version": r.version, "resource": r.plural},
        "kind": {"group": r.group, "version": r.version, "kind": r.kind}});
    let null = Value::Null;
    let vars: [(&str, &Value); 3] = [
        ("object", obj),
        ("oldObject", old.unwrap_or(&null)),
        ("request", &request),
    ];
    let fail_closed = policy
        .pointer("/spec/failurePolicy")
        .and_then(Value::as_str)
        != Some("Ignore");
    let check = |expr: &str| match compile(expr).as_ref() {
        Ok(e) => e.eval_bool(&vars),
        Err(e) => Err(e.clone()),
    };
    let conditions = policy
        .pointer("/spec/matchConditions")
        .and_then(Value::as_array);
    for c in conditions.into_iter().flatten() {
        match check(c["expression"].as_str().unwrap_or("")) {
            Ok(true) => {}
            Ok(false) => return Outcome::Allowed,
            Err(e) if fail_closed => {
                return Outcome::Denied(format!(
                    "expression '{}' resulted in error: {e}",
                    c["expression"].as_str().unwrap_or("")
                ))
            }
            Err(_) => return Outcome::Allowed,
        }
    }
    let validations = policy
        .pointer("/spec/validations")
        .and_then(Value::as_array);
    for v in validations.into_iter().flatten() {
        let expr = v["expression"].as_str().unwrap_or("");
        match check(expr) {
            Ok(true) => {}
            Ok(false) => return Outcome::Denied(validation_message(v, expr, &vars, compile)),
            Err(e) if fail_closed => {
                return Outcome::Denied(format!("expression '{expr}' resulted in error: {e}"))
            }
            Err(_) => {}
        }
    }
    Outcome::Allowed
}

/// `messageExpression`'s value, else `message`, else `failed expression: <expression>`.
fn validation_message(
    v: &Value,
    expr: &str,
    vars: &[(&str, &Value)],
    compile: Compile<'_>,
) -> String {
    if let Some(me) = v["messageExpression"].as_str() {
        let text = compile(me)
            .as_ref()
            .as_ref()
            .ok()
            .and_then(|e| e.eval_string(vars).ok());
        if let Some(text) = text {
            if !text.trim().is_empty() {
                return text;
            }
        }
    }
    match v["message"].as_str() {
        Some(m) if !m.is_empty() => m.to_string(),
        _ => format!("failed expression: {expr}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn deployments() -> &'static ResourceInfo {
        registry::find("apps", "v1", "deployments").unwrap()
    }

    #[test]
    fn rules_match_by_group_version_resource_operation_and_scope() {
        let rule = json!({"apiGroups": ["apps"], "apiVersions": ["*"], "resources": ["deployments"],
            "operations": ["CREATE"], "scope": "Namespaced"});
        assert!(rule_matches(&rule, deployments(), "CREATE"));
        assert!(!rule_matches(&rule, deployments(), "UPDATE"));
        let nodes = registry::find("", "v1", "nodes").unwrap();
        let any = json!({"apiGroups": ["*"], "apiVersions": ["*"], "resources": ["*"], "operations": ["*"], "scope": "Namespaced"});
        assert!(!rule_matches(&any, nodes, "CREATE"));
        assert!(!rule_matches(&json!("garbage"), nodes, "CREATE"));
    }

    #[test]
    fn constraints_combine_rules_exclusions_and_selectors() {
        let obj = json!({"metadata": {"name": "web", "labels": {"tier": "web"}}});
        let ns: Labels = [("team".to_string(), "a".to_string())].into();
        let c = json!({"resourceRules": [{"apiGroups": ["apps"], "apiVersions": ["v1"], "resources": ["deployments"], "operations": ["*"]}],
            "namespaceSelector": {"matchLabels": {"team": "a"}}, "objectSelector": {"matchLabels": {"tier": "web"}}});
        assert!(constraints_match(&c, deployments(), "CREATE", &obj, &ns));
        assert!(!constraints_match(
            &c,
            deployments(),
            "CREATE",
            &obj,
            &Labels::new()
        ));
        let mut excluded = c.clone();
        excluded["excludeResourceRules"] = c["resourceRules"].clone();
        assert!(!constraints_match(
            &excluded,
            deployments(),
            "CREATE",
            &obj,
            &ns
        ));
        // A binding narrowing by namespace alone matches what its policy matches.
        let by_namespace = json!({"namespaceSelector": {"matchLabels": {"team": "a"}}});
        assert!(constraints_match(
            &by_namespace,
            deployments(),
            "UPDATE",
            &obj,
            &ns
        ));
        assert!(constraints_match(
            &Value::Null,
            deployments(),
            "UPDATE",
            &obj,
            &ns
        ));
    }

    #[test]
    fn messages_prefer_the_expression_then_the_message() {
        let cache = ExpressionCache::default();
        let fresh = |src: &str| cache.compiled(src);
        let obj = json!({"spec": {"replicas": 7}});
        let vars: [(&str, &Value); 1] = [("object", &obj)];
        let v = json!({"messageExpression": "'got ' + string(object.spec.replicas)", "message": "static"});
        assert_eq!(validation_message(&v, "x", &vars, &fresh), "got 7");
        let broken = json!({"messageExpression": "object.nope.deeper", "message": "static"});
        assert_eq!(validation_message(&broken, "x", &vars, &fresh), "static");
        assert_eq!(
            validation_message(&json!({}), "a < b", &vars, &fresh),
            "failed expression: a < b"
        );
    }
}
