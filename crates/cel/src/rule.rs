//! One `x-kubernetes-validations` entry: the checks upstream's CRD
//! validation makes on it, its compilation, and the messages it produces.

use crate::cost::{exceeds_budget, STATIC_RULE_LIMIT};
use crate::error::{forbidden, go_json, go_quote, invalid, not_supported, required, CompileError};
use crate::fieldpath;
use crate::path::FieldPath;
use crate::program::{compile, Expect, Program};
use crate::ty::Ty;
use crate::walk::{Site, Walker};
use crate::RuleError;
use serde_json::{json, Value};

/// The `reason`s upstream accepts.
const REASONS: [&str; 4] = [
    "FieldValueDuplicate",
    "FieldValueForbidden",
    "FieldValueInvalid",
    "FieldValueRequired",
];

#[derive(Debug)]
pub(crate) struct Rule {
    pub(crate) program: Program,
    pub(crate) message_expression: Option<(String, Program)>,
    pub(crate) rule: String,
    pub(crate) message: String,
    pub(crate) reason: Option<String>,
    /// `fieldPath`, normalized: appended to the violation's path.
    pub(crate) field_path: Option<String>,
    pub(crate) optional_old_self: bool,
    pub(crate) uses_old_self: bool,
}

impl Rule {
    /// Upstream's `ruleErrorString`: how errors name the rule.
    pub(crate) fn error_string(&self) -> &str {
        if self.message.is_empty() {
            self.rule.trim()
        } else {
            self.message.trim()
        }
    }

    /// Upstream's `ruleMessageOrDefault`.
    pub(crate) fn message_or_default(&self) -> String {
        if self.message.is_empty() {
            format!("failed rule: {}", self.error_string())
        } else {
            self.message.trim().to_owned()
        }
    }
}

fn text<'a>(r: &'a Value, key: &str) -> &'a str {
    r.get(key).and_then(Value::as_str).unwrap_or("")
}

fn has_newlines(s: &str) -> bool {
    s.contains(['\n', '\r'])
}

/// The rule as upstream prints it in `Invalid value: ...`: its internal
/// `ValidationRule` struct, JSON-encoded by Go.
pub(crate) fn go_rule_value(r: &Value) -> String {
    let value = json!({
        "Rule": text(r, "rule"),
        "Message": text(r, "message"),
        "MessageExpression": text(r, "messageExpression"),
        "Reason": r.get("reason").and_then(Value::as_str),
        "FieldPath": text(r, "fieldPath"),
        "OptionalOldSelf": r.get("optionalOldSelf").and_then(Value::as_bool),
    });
    go_json(&value)
}

impl Walker {
    /// The rules at `site`, compiled; their errors go to `self.errors`.
    pub(crate) fn rules(&mut self, site: &Site<'_>) -> Vec<Rule> {
        let Some(list) = site
            .schema
            .get("x-kubernetes-validations")
            .and_then(Value::as_array)
        else {
            return Vec::new();
        };
        let base = site.path.child("x-kubernetes-validations");
        let before = self.errors.len();
        for (i, r) in list.iter().enumerate() {
            let errors = static_checks(&base.index(i), r, site.schema);
            self.errors.extend(errors);
        }
        // As upstream: schema mistakes first, the CEL only once they are fixed.
        if self.errors.len() > before {
            return Vec::new();
        }
        list.iter()
            .enumerate()
            .filter_map(|(i, r)| self.compile_rule(&base.index(i), r, site))
            .collect()
    }

    fn compile_rule(&mut self, path: &FieldPath, r: &Value, site: &Site<'_>) -> Option<Rule> {
        let source = text(r, "rule");
        let optional = r.get("optionalOldSelf").and_then(Value::as_bool);
        let self_ty = Ty::from_decl(&site.decl);
        let old_ty = if optional == Some(true) {
            Ty::Optional(Box::new(self_ty.clone()))
        } else {
            self_ty.clone()
        };
        let vars = [("self", self_ty), ("oldSelf", old_ty)];
        let rule_path = path.child("rule");
        let compiled = compile(source, &vars, Expect::Bool);
        self.check_rule_cost(
            &rule_path,
            compiled.as_ref().map_or(0, |p| p.static_cost),
            site,
        );
        let program = match compiled {
            Ok(p) => p,
            Err(e) => {
                let detail = match e {
                    CompileError::Issues(issues) => format!("compilation failed: {issues}"),
                    CompileError::WrongType => "cel expression must evaluate to a bool".to_owned(),
                    CompileError::Environment(e) => format!("unexpected compilation error: {e}"),
                };
                self.invalid_rule(&rule_path, r, &detail);
                return None;
            }
        };
        let uses_old_self = program.uses.contains("oldSelf");
        match (&site.uncorrelatable, optional) {
            (Some(within), _) if uses_old_self => {
                let detail = format!(
                    "oldSelf cannot be used on the uncorrelatable portion of the schema within {}",
                    within.render()
                );
                self.errors
                    .push(invalid(&rule_path, &go_quote(source), &detail));
            }
            (_, Some(flag)) if !uses_old_self => {
                self.errors.push(invalid(
                    &path.child("optionalOldSelf"),
                    &flag.to_string(),
                    "may not be set if oldSelf is not used in rule",
                ));
            }
            _ => {}
        }
        let message_expression = self.compile_message_expression(path, r, &vars);
        Some(Rule {
            program,
            message_expression,
            rule: source.to_owned(),
            message: text(r, "message").to_owned(),
            reason: r.get("reason").and_then(Value::as_str).map(str::to_owned),
            field_path: Some(text(r, "fieldPath"))
                .filter(|f| !f.is_empty())
                .and_then(|f| fieldpath::normalize(f, site.schema)),
            optional_old_self: optional == Some(true),
            uses_old_self,
        })
    }

    fn compile_message_expression(
        &mut self,
        path: &FieldPath,
        r: &Value,
        vars: &[(&str, Ty)],
    ) -> Option<(String, Program)> {
        let source = text(r, "messageExpression");
        if source.trim().is_empty() {
            return None;
        }
        let field = path.child("messageExpression");
        match compile(source, vars, Expect::String) {
            Ok(program) => {
                if program.static_cost > STATIC_RULE_LIMIT {
                    let detail = exceeds_budget(
                        "estimated messageExpression cost",
                        program.static_cost,
                        STATIC_RULE_LIMIT,
                    );
                    self.errors.push(forbidden(&field, &detail));
                }
                self.observe_cost(&field, program.static_cost);
                Some((source.to_owned(), program))
            }
            Err(e) => {
                let detail = match e {
                    CompileError::Issues(issues) => {
                        format!("messageExpression compilation failed: {issues}")
                    }
                    CompileError::WrongType => {
                        "messageExpression must evaluate to a string".to_owned()
                    }
                    CompileError::Environment(e) => {
                        format!("unexpected messageExpression compilation error: {e}")
                    }
                };
                self.invalid_rule(&field, r, &detail);
                None
            }
        }
    }
}

/// Upstream's checks of a rule's fields, made before any CEL is compiled.
fn static_checks(path: &FieldPath, r: &Value, schema: &Value) -> Vec<RuleError> {
    let mut errors = Vec::new();
    let (rule, message) = (text(r, "rule"), text(r, "message"));
    if rule.trim().is_empty() {
        errors.push(required(&path.child("rule"), "rule is not specified"));
    } else if !message.is_empty() && message.trim().is_empty() {
        errors.push(invalid(
            &path.child("message"),
            &go_quote(message),
            "must be non-empty if specified",
        ));
    } else if has_newlines(message.trim()) {
        errors.push(invalid(
            &path.child("message"),
            &go_quote(message),
            "must not contain line breaks",
        ));
    } else if has_newlines(rule.trim()) && message.trim().is_empty() {
        errors.push(required(
            &path.child("message"),
            "message must be specified if rule contains line breaks",
        ));
    }
    let message_expression = text(r, "messageExpression");
    if !message_expression.is_empty() && message_expression.trim().is_empty() {
        errors.push(required(
            &path.child("messageExpression"),
            "messageExpression must be non-empty if specified",
        ));
    }
    if let Some(reason) = r.get("reason").and_then(Value::as_str) {
        if !REASONS.contains(&reason) {
            errors.push(not_supported(&path.child("reason"), reason, &REASONS));
        }
    }
    let field_path = text(r, "fieldPath");
    let field = path.child("fieldPath");
    if !field_path.is_empty() && field_path.trim().is_empty() {
        errors.push(invalid(
            &field,
            &go_quote(field_path),
            "must be non-empty if specified",
        ));
    }
    if has_newlines(field_path) {
        errors.push(invalid(
            &field,
            &go_quote(field_path),
            "must not contain line breaks",
        ));
    }
    if !field_path.is_empty() && fieldpath::normalize(field_path, schema).is_none() {
        errors.push(invalid(
            &field,
            &go_quote(field_path),
            "must be a valid path",
        ));
    }
    errors
}
