//! Evaluating the compiled rules on an object, as upstream's validator walks
//! it: depth first, old values correlated by property, map key and
//! list-map keys, one cost budget for the whole object, and ratcheting
//! (a rule without `oldSelf` that fails on a value left unchanged by an
//! update is not reported, as with upstream's CRDValidationRatcheting).

use crate::cost::{PER_CALL_LIMIT, RUNTIME_BUDGET};
use crate::decl::ListType;
use crate::error::{go_quote, EvalError};
use crate::path::FieldPath;
use crate::program::{Outcome, Vars};
use crate::rule::Rule;
use crate::schema::Node;
use crate::values::to_val;
use crate::Violation;
use cel::common::types::CelOptional;
use cel::common::value::Val;
use serde_json::Value;

/// The most bytes of an evaluated `messageExpression` upstream keeps.
const MAX_MESSAGE_EXPRESSION_BYTES: usize = 5 * 1024;
const OUT_OF_BUDGET: &str =
    "validation failed due to running out of cost budget, no further validation rules will be run";

pub(crate) struct Validation {
    budget: u64,
    stopped: bool,
    pub(crate) violations: Vec<Violation>,
}

impl Validation {
    pub(crate) fn new() -> Self {
        Validation {
            budget: RUNTIME_BUDGET,
            stopped: false,
            violations: Vec::new(),
        }
    }

    /// `unchanged`: whether this value (or, under a list whose items cannot
    /// be correlated, the nearest correlatable ancestor) equals its old value.
    pub(crate) fn node(
        &mut self,
        n: &Node,
        path: &FieldPath,
        obj: &Value,
        old: Option<&Value>,
        unchanged: bool,
    ) {
        if self.stopped || obj.is_null() {
            return;
        }
        let old = old.filter(|o| !o.is_null());
        if !n.rules.is_empty() {
            self.rules(n, path, obj, old, unchanged);
        }
        match obj {
            Value::Array(items) => {
                if let Some(child) = &n.items {
                    let old_items = old
                        .and_then(Value::as_array)
                        .map(Vec::as_slice)
                        .unwrap_or(&[]);
                    self.items(n, child, path, items, old_items, unchanged);
                }
            }
            Value::Object(map) => {
                if let Some(child) = &n.additional {
                    for (k, v) in map {
                        let old_v = old.and_then(|o| o.get(k));
                        self.node(child, &path.key(k), v, old_v, old_v == Some(v));
                    }
                }
                for (k, v) in map {
                    if let Some(child) = n.properties.get(k) {
                        let old_v = old.and_then(|o| o.get(k));
                        self.node(child, &path.child(k), v, old_v, old_v == Some(v));
                    }
                }
            }
            _ => {}
        }
    }

    fn items(
        &mut self,
        n: &Node,
        child: &Node,
        path: &FieldPath,
        items: &[Value],
        old: &[Value],
        unchanged: bool,
    ) {
        for (i, item) in items.iter().enumerate() {
            let (old_item, item_unchanged) = match &n.list {
                ListType::Map(keys) => {
                    let found = old.iter().find(|o| same_keys(keys, item, o));
                    (found, found == Some(item))
                }
                ListType::Set => (None, old.contains(item)),
                ListType::Atomic => (None, unchanged),
            };
            self.node(child, &path.index(i), item, old_item, item_unchanged);
        }
    }

    fn rules(
        &mut self,
        n: &Node,
        path: &FieldPath,
        obj: &Value,
        old: Option<&Value>,
        unchanged: bool,
    ) {
        let self_val = to_val(obj, &n.decl);
        let old_val = old.map(|o| to_val(o, &n.decl));
        // Rules with `optionalOldSelf` see an optional, which owns its value:
        // only they pay for the copy.
        let optional_old: Box<dyn Val> = match &old_val {
            Some(o) if n.rules.iter().any(|r| r.optional_old_self) => {
                Box::new(CelOptional::of(o.clone_as_boxed()))
            }
            _ => Box::new(CelOptional::none()),
        };
        let mut plain = Vars::new().with("self", self_val.as_ref());
        if let Some(o) = &old_val {
            plain = plain.with("oldSelf", o.as_ref());
        }
        let optional = Vars::new()
            .with("self", self_val.as_ref())
            .with("oldSelf", optional_old.as_ref());
        for rule in &n.rules {
            if self.stopped {
                return;
            }
            // Transition rules wait for an old value, unless it is optional.
            if rule.uses_old_self && old.is_none() && !rule.optional_old_self {
                continue;
            }
            let vars = if rule.optional_old_self {
                &optional
            } else {
                &plain
            };
            self.rule(n, rule, path, vars, &plain, unchanged);
        }
    }

    fn rule(
        &mut self,
        n: &Node,
        rule: &Rule,
        path: &FieldPath,
        vars: &Vars<'_>,
        plain: &Vars<'_>,
        unchanged: bool,
    ) {
        if self.budget == 0 {
            return self.stop(path, n.type_name, OUT_OF_BUDGET.to_owned());
        }
        let (result, cost) = rule.program.eval(vars, PER_CALL_LIMIT);
        if cost > self.budget {
            return self.stop(path, n.type_name, OUT_OF_BUDGET.to_owned());
        }
        self.budget -= cost;
        let rule_name = rule.error_string();
        let detail = match result {
            Ok(Outcome::Bool(true)) => return,
            Ok(_) => None,
            Err(EvalError::CostLimit) => {
                let detail = format!("'{}': no further validation rules will be run due to call cost exceeds limit for rule: {rule_name}", EvalError::CostLimit);
                return self.stop(path, n.type_name, detail);
            }
            Err(EvalError::NoSuchOverload) => Some(format!(
                "'{}': call arguments did not match a supported operator, function or macro signature for rule: {rule_name}",
                EvalError::NoSuchOverload
            )),
            Err(EvalError::Other(e)) => Some(format!("{e} evaluating rule: {rule_name}")),
        };
        if let Some(detail) = detail {
            return self
                .violations
                .push(violation(path.render(), n.type_name, detail, None));
        }
        let field = match &rule.field_path {
            Some(relative) => path.child(relative),
            None => path.clone(),
        };
        let Some(message) = self.message(n, rule, &field, plain) else {
            return;
        };
        // Ratcheting: an unchanged value keeps passing the rules it passed.
        if rule.uses_old_self || !unchanged {
            let reason = rule.reason.clone();
            self.violations
                .push(violation(field.render(), n.type_name, message, reason));
        }
    }

    /// The failure's message: the evaluated `messageExpression` when it gives
    /// a usable one, else the rule's `message` or `failed rule: <rule>`.
    /// `None` when the message expression ran out of budget (reported).
    fn message(
        &mut self,
        n: &Node,
        rule: &Rule,
        field: &FieldPath,
        vars: &Vars<'_>,
    ) -> Option<String> {
        let Some((source, program)) = &rule.message_expression else {
            return Some(rule.message_or_default());
        };
        let (result, cost) = program.eval(vars, PER_CALL_LIMIT);
        if cost > self.budget {
            let detail = "messageExpression evaluation failed due to running out of cost budget, no further validation rules will be run";
            self.stop(field, n.type_name, detail.to_owned());
            return None;
        }
        self.budget -= cost;
        match result {
            Err(EvalError::CostLimit) => {
                let detail = format!("no further validation rules will be run due to call cost exceeds limit for messageExpression: {}", go_quote(source));
                self.stop(field, n.type_name, detail);
                None
            }
            Ok(Outcome::String(s)) => {
                let s = s.trim();
                let usable =
                    !s.is_empty() && !s.contains('\n') && s.len() <= MAX_MESSAGE_EXPRESSION_BYTES;
                Some(if usable {
                    s.to_owned()
                } else {
                    rule.message_or_default()
                })
            }
            _ => Some(rule.message_or_default()),
        }
    }

    fn stop(&mut self, path: &FieldPath, type_name: &'static str, detail: String) {
        self.violations
            .push(violation(path.render(), type_name, detail, None));
        self.stopped = true;
    }
}

fn violation(
    field: String,
    type_name: &'static str,
    message: String,
    reason: Option<String>,
) -> Violation {
    Violation {
        field,
        type_name,
        message,
        reason,
    }
}

/// Whether two list-map items have equal scalar values at every key (and
/// have them all), as upstream correlates them.
fn same_keys(keys: &[String], a: &Value, b: &Value) -> bool {
    keys.iter().all(|k| match (a.get(k), b.get(k)) {
        (Some(x), Some(y)) => is_scalar(x) && x == y,
        _ => false,
    })
}

fn is_scalar(v: &Value) -> bool {
    matches!(v, Value::Bool(_) | Value::Number(_) | Value::String(_))
}
