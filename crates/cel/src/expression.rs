//! Standalone expressions, as `ValidatingAdmissionPolicy` validations,
//! match conditions, audit annotations and message expressions use them:
//! schemaless variables (`object`, `oldObject`, `request`, `params`,
//! `namespaceObject`, `variables`), bound from JSON.

use crate::cost::PER_CALL_LIMIT;
use crate::error::CompileError;
use crate::program::{compile, Expect, Outcome, Program, Vars};
use crate::ty::Ty;
use crate::values::generic;
use cel::common::types::CelNull;
use cel::common::value::Val;
use serde_json::Value;

/// The variables an admission-policy expression can use; any not bound at
/// evaluation is `null`, as `params` is without a param kind.
pub(crate) const VARIABLES: [&str; 6] = [
    "object",
    "oldObject",
    "request",
    "params",
    "namespaceObject",
    "variables",
];

#[derive(Debug)]
pub struct Expression {
    program: Program,
}

pub(crate) fn compile_expression(source: &str) -> Result<Expression, String> {
    let vars: Vec<(&str, Ty)> = VARIABLES.iter().map(|n| (*n, Ty::dyn_())).collect();
    match compile(source, &vars, Expect::Any) {
        Ok(program) => Ok(Expression { program }),
        Err(CompileError::Issues(issues)) => Err(format!("compilation failed: {issues}")),
        Err(e) => Err(e.to_string()),
    }
}

impl Expression {
    fn eval(&self, vars: &[(&str, &Value)]) -> Result<Outcome, String> {
        let bound: Vec<(&str, Box<dyn Val + '_>)> =
            vars.iter().map(|(n, v)| (*n, generic(v))).collect();
        let null = CelNull;
        let mut resolver = Vars::new();
        for (name, value) in &bound {
            resolver = resolver.with(name, value.as_ref());
        }
        for name in VARIABLES {
            if !vars.iter().any(|(n, _)| *n == name) {
                resolver = resolver.with(name, &null);
            }
        }
        self.program
            .eval(&resolver, PER_CALL_LIMIT)
            .0
            .map_err(|e| e.to_string())
    }

    /// Evaluates to a bool (a validation or match condition); any other
    /// result is an error.
    pub fn eval_bool(&self, vars: &[(&str, &Value)]) -> Result<bool, String> {
        match self.eval(vars)? {
            Outcome::Bool(b) => Ok(b),
            _ => Err("expression must evaluate to a bool".to_owned()),
        }
    }

    /// Evaluates to a string (a message expression or audit annotation).
    pub fn eval_string(&self, vars: &[(&str, &Value)]) -> Result<String, String> {
        match self.eval(vars)? {
            Outcome::String(s) => Ok(s),
            _ => Err("expression must evaluate to a string".to_owned()),
        }
    }
}
