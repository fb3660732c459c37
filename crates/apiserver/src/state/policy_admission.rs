//! ValidatingAdmissionPolicy: every write of a resource a bound policy matches is checked
//! with the policy's CEL validations (`cairn-cel` expressions over `object`, `oldObject`
//! and `request`), after the object's own validation, as kube-apiserver's
//! `ValidatingAdmissionPolicy` plugin does. A failed validation denies the write (action
//! `Deny`, a 422 in upstream's words) or adds a warning (`Warn`); `Audit` is not recorded
//! (there is no audit log). A policy with a `paramKind` is evaluated once per
//! parameter object its binding's `paramRef` selects (`params`); `variables` are expanded
//! into the expressions that use them; `namespaceObject` is the object's namespace.

use cairn_api::status::Cause;
use cairn_semantics::selector::Labels;
use serde_json::{json, Value};

use super::*;
use crate::admission::expressions::Compiled;
use crate::admission::matching::{labels_of, rule_matches, selector_matches, Target};
use crate::admission::GROUP;

pub use crate::admission::expressions::ExpressionCache;

type Compile<'a> = &'a dyn Fn(&str) -> Compiled;

/// The 422 causes of a policy whose variables, match conditions or validations do not
/// compile.
pub(super) fn policy_compile_errors(policy: &Value) -> Vec<Cause> {
    let mut causes = Vec::new();
    for list in ["variables", "matchConditions", "validations"] {
        let items = policy
            .pointer(&format!("/spec/{list}"))
            .and_then(Value::as_array);
        for (i, v) in items.into_iter().flatten().enumerate() {
            let expr = v["expression"].as_str().unwrap_or("");
            if let Err(e) = cairn_cel::compile_expression(expr) {
                causes.push(Cause::invalid(
                    format!("spec.{list}[{i}].expression"),
                    expr,
                    &e,
                ));
            }
        }
    }
    causes
}

/// Whether `constraints` (a policy's `matchConstraints` or a binding's `matchResources`)
/// select this write.
fn constraints_match(
    constraints: &Value,
    t: Target<'_>,
    obj: &Value,
    namespace_labels: &Labels,
) -> bool {
    if constraints.is_null() {
        return true;
    }
    let r = t.resource;
    let exact = constraints["matchPolicy"].as_str() == Some("Exact");
    // No resourceRules (a binding narrowing by namespace only): whatever the policy matches.
    let rules = constraints["resourceRules"]
        .as_array()
        .filter(|rs| !rs.is_empty());
    let included = rules.is_none_or(|rs| rs.iter().any(|rule| rule_matches(rule, t, exact)));
    let excluded = constraints["excludeResourceRules"]
        .as_array()
        .is_some_and(|rs| rs.iter().any(|rule| rule_matches(rule, t, exact)));
    let namespace_ok =
        !r.namespaced || selector_matches(&constraints["namespaceSelector"], namespace_labels);
    included
        && !excluded
        && namespace_ok
        && selector_matches(&constraints["objectSelector"], &labels_of(Some(obj)))
}

/// One binding's outcome on one write.
enum Outcome {
    Allowed,
    Denied(String),
    /// The binding cannot be evaluated (no parameters, a missing paramRef): denied
    /// whatever its validation actions, unless the policy's failurePolicy is `Ignore`.
    Misconfigured(String),
}

impl ApiState {
    /// Runs every bound policy that matches this write. `Err` denies it; the `Ok` strings
    /// are warnings for the response.
    pub(super) fn admit_policies(
        &self,
        r: &ResourceInfo,
        subresource: Option<&str>,
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
        let target = Target {
            resource: r,
            subresource,
            operation,
        };
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
                target,
                obj,
                &namespace_labels,
            ) && constraints_match(
                &binding["spec"]["matchResources"],
                target,
                obj,
                &namespace_labels,
            );
            if !applies {
                continue;
            }
            let outcome = self.binding_outcome(&policy, &binding, r, operation, obj, old);
            act(&outcome, &policy, &binding, r, obj, &mut warnings)?;
        }
        Ok(warnings)
    }

    /// One binding on one write: its parameters resolved, the policy evaluated with each
    /// (the first denial counts).
    fn binding_outcome(
        &self,
        policy: &Value,
        binding: &Value,
        r: &ResourceInfo,
        operation: &str,
        obj: &Value,
        old: Option<&Value>,
    ) -> Outcome {
        let params = match self.policy_params(policy, binding, obj) {
            Ok(params) => params,
            Err(outcome) => return outcome,
        };
        let namespace = self.namespace_object(obj);
        let compile = |src: &str| self.policy_expressions.compiled(src);
        let write = Write {
            r,
            operation,
            obj,
            old,
            namespace: &namespace,
        };
        for param in &params {
            if let denied @ (Outcome::Denied(_) | Outcome::Misconfigured(_)) =
                evaluate(policy, &write, param, &compile)
            {
                return denied;
            }
        }
        Outcome::Allowed
    }

    /// The parameter objects of a binding (`[null]` for a policy without `paramKind`), or
    /// the outcome when there are none or the binding is misconfigured.
    fn policy_params(
        &self,
        policy: &Value,
        binding: &Value,
        obj: &Value,
    ) -> Result<Vec<Value>, Outcome> {
        let Some(kind) = policy.pointer("/spec/paramKind") else {
            return Ok(vec![Value::Null]);
        };
        let misconfigured =
            |why: &str| Outcome::Misconfigured(format!("failed to configure binding: {why}"));
        let Some(param_ref) = binding.pointer("/spec/paramRef") else {
            return Err(misconfigured("paramRef is required when paramKind is set"));
        };
        let (api_version, kind) = (
            kind["apiVersion"].as_str().unwrap_or(""),
            kind["kind"].as_str().unwrap_or(""),
        );
        let Some(resource) = self
            .resources()
            .into_iter()
            .find(|r| (r.api_version().as_str(), r.kind) == (api_version, kind))
        else {
            return Err(misconfigured(&format!(
                "failed to find resource referenced by paramKind: '{api_version}, Kind={kind}'"
            )));
        };
        let namespace = match param_ref["namespace"].as_str().filter(|n| !n.is_empty()) {
            Some(ns) => Some(ns),
            None if resource.namespaced => {
                obj.pointer("/metadata/namespace").and_then(Value::as_str)
            }
            None => None,
        };
        let found = self.find_params(resource, namespace, param_ref);
        if !found.is_empty() {
            return Ok(found);
        }
        match param_ref["parameterNotFoundAction"].as_str() {
            Some("Allow") => Err(Outcome::Allowed),
            _ => Err(misconfigured(
                "no params found for policy binding with `Deny` parameterNotFoundAction",
            )),
        }
    }

    /// The objects `param_ref` names (`name`) or selects (`selector`) in `namespace`.
    fn find_params(
        &self,
        r: &ResourceInfo,
        namespace: Option<&str>,
        param_ref: &Value,
    ) -> Vec<Value> {
        let decode = |bytes: &[u8]| serde_json::from_slice::<Value>(bytes).ok();
        if let Some(name) = param_ref["name"].as_str().filter(|n| !n.is_empty()) {
            return self
                .cache
                .get(&r.key(namespace, name))
                .and_then(|o| decode(&o.bytes))
                .into_iter()
                .collect();
        }
        let (objects, _) = self.cache.list(&r.list_prefix(namespace));
        objects
            .iter()
            .filter_map(|o| decode(&o.bytes))
            .filter(|p| selector_matches(&param_ref["selector"], &labels_of(Some(p))))
            .collect()
    }

    /// The stored Namespace of a namespaced object (`null` for others).
    fn namespace_object(&self, obj: &Value) -> Value {
        let ns = obj
            .pointer("/metadata/namespace")
            .and_then(Value::as_str)
            .unwrap_or("");
        self.cache
            .get(&format!("/registry/core/namespaces/{ns}"))
            .and_then(|o| serde_json::from_slice::<Value>(&o.bytes).ok())
            .unwrap_or(Value::Null)
    }

    fn namespace_labels(&self, obj: &Value) -> Labels {
        labels_of(Some(&self.namespace_object(obj)))
    }
}

/// What a binding's outcome does to the write: a denial under `Deny` (or a
/// misconfigured binding whose policy fails closed) answers upstream's 422, one under
/// `Warn` adds a warning.
fn act(
    outcome: &Outcome,
    policy: &Value,
    binding: &Value,
    r: &ResourceInfo,
    obj: &Value,
    warnings: &mut Vec<String>,
) -> Result<(), Status> {
    let policy_name = name_of(policy);
    let fail_closed = policy
        .pointer("/spec/failurePolicy")
        .and_then(Value::as_str)
        != Some("Ignore");
    let actions = binding
        .pointer("/spec/validationActions")
        .and_then(Value::as_array);
    let has = |a: &str| actions.is_some_and(|l| l.iter().any(|x| x == a));
    let (message, deny, warn) = match outcome {
        Outcome::Allowed => return Ok(()),
        Outcome::Misconfigured(_) if !fail_closed => return Ok(()),
        Outcome::Misconfigured(m) => (m, true, false),
        Outcome::Denied(m) => (m, has("Deny"), has("Warn")),
    };
    if deny {
        let text = format!(
            "ValidatingAdmissionPolicy '{policy_name}' with binding '{}' denied request: {message}",
            name_of(binding)
        );
        return Err(Status::invalid(
            r.plural,
            r.group,
            name_of(obj),
            vec![Cause::from_message("", text)],
        ));
    }
    if warn {
        warnings.push(format!(
            "Validation failed for ValidatingAdmissionPolicy '{policy_name}' with binding '{}': {message}",
            name_of(binding)
        ));
    }
    Ok(())
}

/// The write a policy is evaluated on.
struct Write<'a> {
    r: &'a ResourceInfo,
    operation: &'a str,
    obj: &'a Value,
    old: Option<&'a Value>,
    namespace: &'a Value,
}

/// The policy's matchConditions, then its validations, on one write with one parameter
/// object. An expression that fails to compile or evaluate follows the policy's
/// `failurePolicy` (default `Fail`).
fn evaluate(policy: &Value, w: &Write<'_>, params: &Value, compile: Compile<'_>) -> Outcome {
    let (r, obj) = (w.r, w.obj);
    let request = json!({"operation": w.operation, "name": name_of(obj),
        "namespace": obj.pointer("/metadata/namespace").cloned().unwrap_or(Value::Null),
        "resource": {"group": r.group, "version": r.version, "resource": r.plural},
        "kind": {"group": r.group, "version": r.version, "kind": r.kind},
        "userInfo": {"username": crate::admission::webhook::review::USER,
            "groups": crate::admission::webhook::review::USER_GROUPS}});
    let null = Value::Null;
    let vars: [(&str, &Value); 5] = [
        ("object", obj),
        ("oldObject", w.old.unwrap_or(&null)),
        ("request", &request),
        ("params", params),
        ("namespaceObject", w.namespace),
    ];
    let fail_closed = policy
        .pointer("/spec/failurePolicy")
        .and_then(Value::as_str)
        != Some("Ignore");
    let variables = Variables::of(policy);
    let check = |expr: &str| {
        let expanded = variables
            .expand(expr)
            .ok_or_else(|| format!("variables expand beyond {MAX_EXPANDED} bytes"))?;
        match compile(&expanded).as_ref() {
            Ok(e) => e.eval_bool(&vars),
            Err(e) => Err(e.clone()),
        }
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
            Ok(false) => {
                let expand = |src: &str| match variables.expand(src) {
                    Some(expanded) => compile(&expanded),
                    None => std::sync::Arc::new(Err("variables expand too far".to_string())),
                };
                return Outcome::Denied(validation_message(v, expr, &vars, &expand));
            }
            Err(e) if fail_closed => {
                return Outcome::Denied(format!("expression '{expr}' resulted in error: {e}"))
            }
            Err(_) => {}
        }
    }
    Outcome::Allowed
}

/// A policy's `variables`, each expanded (earlier ones inside later ones) so that
/// `variables.<name>` in an expression can be replaced by the variable's expression:
/// CEL has no side effects, so this means what upstream's lazily evaluated variables mean.
struct Variables(Vec<(String, String)>);

impl Variables {
    fn of(policy: &Value) -> Variables {
        let mut out: Vec<(String, String)> = Vec::new();
        let list = policy.pointer("/spec/variables").and_then(Value::as_array);
        for v in list.into_iter().flatten() {
            let name = v["name"].as_str().unwrap_or("").to_string();
            // A variable that expands too far is left as written: using it then fails.
            let source = v["expression"].as_str().unwrap_or("");
            let expr = Variables(out.clone())
                .expand(source)
                .unwrap_or_else(|| source.to_string());
            out.push((name, expr));
        }
        Variables(out)
    }

    /// `source` with each `variables.<name>` (outside string literals) replaced by the
    /// variable's expression; `None` past [`MAX_EXPANDED`] (variables that use earlier
    /// ones several times grow exponentially).
    fn expand(&self, source: &str) -> Option<String> {
        if self.0.is_empty() || !source.contains("variables.") {
            return Some(source.to_string());
        }
        let mut out = String::with_capacity(source.len());
        let mut quote: Option<char> = None;
        let mut rest = source;
        while let Some(c) = rest.chars().next() {
            if out.len() > MAX_EXPANDED {
                return None;
            }
            match quote {
                Some(q) => {
                    if c == '\\' {
                        let escaped: String = rest.chars().take(2).collect();
                        out.push_str(&escaped);
                        rest = &rest[escaped.len()..];
                        continue;
                    }
                    if c == q {
                        quote = None;
                    }
                }
                None if c == '"' || c == '\'' => quote = Some(c),
                None if rest.starts_with("variables.") && !ends_in_identifier(&out) => {
                    let after = &rest["variables.".len()..];
                    let len = after
                        .find(|c: char| !(c.is_alphanumeric() || c == '_'))
                        .unwrap_or(after.len());
                    if let Some((_, expr)) = self.0.iter().find(|(n, _)| n == &after[..len]) {
                        out.push('(');
                        out.push_str(expr);
                        out.push(')');
                        rest = &after[len..];
                        continue;
                    }
                }
                None => {}
            }
            out.push(c);
            rest = &rest[c.len_utf8()..];
        }
        (out.len() <= MAX_EXPANDED).then_some(out)
    }
}

/// Longest expression variables may expand to (upstream bounds CEL cost instead).
const MAX_EXPANDED: usize = 64 * 1024;

fn ends_in_identifier(text: &str) -> bool {
    text.chars()
        .last()
        .is_some_and(|c| c.is_alphanumeric() || c == '_' || c == '.')
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

    fn target(operation: &'static str) -> Target<'static> {
        Target {
            resource: deployments(),
            subresource: None,
            operation,
        }
    }

    #[test]
    fn constraints_combine_rules_exclusions_and_selectors() {
        let obj = json!({"metadata": {"name": "web", "labels": {"tier": "web"}}});
        let ns: Labels = [("team".to_string(), "a".to_string())].into();
        let c = json!({"resourceRules": [{"apiGroups": ["apps"], "apiVersions": ["v1"], "resources": ["deployments"], "operations": ["*"]}],
            "namespaceSelector": {"matchLabels": {"team": "a"}}, "objectSelector": {"matchLabels": {"tier": "web"}}});
        assert!(constraints_match(&c, target("CREATE"), &obj, &ns));
        assert!(!constraints_match(
            &c,
            target("CREATE"),
            &obj,
            &Labels::new()
        ));
        let mut excluded = c.clone();
        excluded["excludeResourceRules"] = c["resourceRules"].clone();
        assert!(!constraints_match(&excluded, target("CREATE"), &obj, &ns));
        // A binding narrowing by namespace alone matches what its policy matches.
        let by_namespace = json!({"namespaceSelector": {"matchLabels": {"team": "a"}}});
        assert!(constraints_match(
            &by_namespace,
            target("UPDATE"),
            &obj,
            &ns
        ));
        assert!(constraints_match(&Value::Null, target("UPDATE"), &obj, &ns));
        // Subresource writes match `<resource>/<sub>` rules only.
        let status = Target {
            subresource: Some("status"),
            ..target("UPDATE")
        };
        assert!(!constraints_match(&c, status, &obj, &ns));
        let mut with_status = c.clone();
        with_status["resourceRules"][0]["resources"] = json!(["deployments/status"]);
        assert!(constraints_match(&with_status, status, &obj, &ns));
    }

    #[test]
    fn variables_expand_into_expressions_that_use_them() {
        let policy = json!({"spec": {"variables": [
            {"name": "replicas", "expression": "object.spec.replicas"},
            {"name": "limit", "expression": "variables.replicas * 2"}]}});
        let v = Variables::of(&policy);
        assert_eq!(
            v.expand("variables.limit > 3 && myvariables.limit == 1 && 'variables.limit' != \"\\\"variables.limit\"")
                .unwrap(),
            "((object.spec.replicas) * 2) > 3 && myvariables.limit == 1 && 'variables.limit' != \"\\\"variables.limit\""
        );
        assert_eq!(v.expand("variables.unknown").unwrap(), "variables.unknown");
        // Each variable using the previous one twice: refused, not 2^40 bytes.
        let doubling: Vec<Value> = (0..40)
            .map(|i| {
                let expr = if i == 0 {
                    "1".to_string()
                } else {
                    format!("variables.v{} + variables.v{}", i - 1, i - 1)
                };
                json!({"name": format!("v{i}"), "expression": expr})
            })
            .collect();
        let big = Variables::of(&json!({"spec": {"variables": doubling}}));
        assert!(big
            .expand("variables.v39 > 0")
            .is_none_or(|e| e.len() <= MAX_EXPANDED));
        let cache = ExpressionCache::default();
        let compile = |src: &str| cache.compiled(src);
        let obj = json!({"metadata": {"name": "d"}, "spec": {"replicas": 4}});
        let ns = Value::Null;
        let write = Write {
            r: deployments(),
            operation: "CREATE",
            obj: &obj,
            old: None,
            namespace: &ns,
        };
        let mut p = policy.clone();
        p["spec"]["validations"] = json!([{"expression": "variables.limit <= params.max", "messageExpression": "'limit ' + string(variables.limit)"}]);
        let params = json!({"max": 5});
        match evaluate(&p, &write, &params, &compile) {
            Outcome::Denied(m) => assert_eq!(m, "limit 8"),
            _ => panic!("8 > 5 must be denied"),
        }
        assert!(matches!(
            evaluate(&p, &write, &json!({"max": 10}), &compile),
            Outcome::Allowed
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
