//! One compiled expression: parsed by cel-rust, checked and costed by
//! [`crate::check`], instrumented by [`crate::cost`], evaluated against
//! borrowed variables.

use crate::check;
use crate::cost;
use crate::env::env;
use crate::error::{cel_go_issues, CompileError, EvalError};
use crate::ty::Ty;
use cel::common::ast::IdedExpr;
use cel::common::types::{CelBool, CelString};
use cel::common::value::{CowVal, Val};
use cel::context::VariableResolver;
use cel::Context;
use std::collections::BTreeSet;
use std::sync::Arc;

/// The result type an expression must have.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Expect {
    Bool,
    String,
    Any,
}

#[derive(Debug)]
pub(crate) struct Program {
    expr: IdedExpr,
    /// What one evaluation costs before comprehensions charge iterations.
    base_cost: u64,
    /// cel-go's estimated worst-case cost.
    pub(crate) static_cost: u64,
    /// The declared variables the expression references.
    pub(crate) uses: BTreeSet<String>,
}

/// A value an evaluation produced, detached from the evaluation.
#[derive(Debug, PartialEq)]
pub(crate) enum Outcome {
    Bool(bool),
    String(String),
    Other,
}

pub(crate) fn compile(
    source: &str,
    vars: &[(&str, Ty)],
    expect: Expect,
) -> Result<Program, CompileError> {
    let env = env().map_err(CompileError::Environment)?;
    let parsed = env
        .compile(source)
        .map_err(|e| CompileError::Issues(cel_go_issues(&e.to_string())))?;
    let analysis = check::analyze(parsed.expression(), source, parsed.source_info(), vars);
    if !analysis.errors.is_empty() {
        return Err(CompileError::Issues(analysis.errors.join("\n")));
    }
    let type_ok = match expect {
        Expect::Bool => matches!(analysis.ty, Ty::Bool | Ty::Dyn(_)),
        Expect::String => matches!(analysis.ty, Ty::String(_) | Ty::Dyn(_)),
        Expect::Any => true,
    };
    if !type_ok {
        return Err(CompileError::WrongType);
    }
    let mut expr = parsed.expression().clone();
    crate::library::use_go_durations(&mut expr);
    let base_cost = cost::instrument(&mut expr);
    Ok(Program {
        expr,
        base_cost,
        static_cost: analysis.cost,
        uses: analysis.used,
    })
}

/// Variables borrowed for one evaluation.
pub(crate) struct Vars<'a> {
    entries: Vec<(&'a str, &'a (dyn Val + 'a))>,
}

impl<'a> Vars<'a> {
    pub(crate) fn new() -> Self {
        Vars {
            entries: Vec::new(),
        }
    }

    pub(crate) fn with(mut self, name: &'a str, value: &'a (dyn Val + 'a)) -> Self {
        self.entries.push((name, value));
        self
    }
}

impl VariableResolver for Vars<'_> {
    fn resolve<'b>(&'b self, variable: &str) -> Option<CowVal<'b, 'b>> {
        self.entries
            .iter()
            .find(|(name, _)| *name == variable)
            .map(|(_, v)| CowVal::Borrowed(*v))
    }
}

impl Program {
    /// Evaluates with `vars` and at most `limit` cost units; returns what the
    /// evaluation cost either way.
    pub(crate) fn eval(&self, vars: &Vars<'_>, limit: u64) -> (Result<Outcome, EvalError>, u64) {
        let env = match env() {
            Ok(env) => env,
            Err(e) => return (Err(EvalError::Other(e)), 0),
        };
        let (result, usage) = cost::metered(limit, self.base_cost, || {
            let mut ctx = Context::with_env(Arc::clone(env));
            ctx.set_variable_resolver(vars);
            cel::Value::resolve_val(&self.expr, &ctx).map(|v| outcome(v.as_ref()))
        });
        let result = if usage.exceeded {
            Err(EvalError::CostLimit)
        } else {
            result.map_err(EvalError::from)
        };
        (result, usage.used)
    }
}

fn outcome(v: &dyn Val) -> Outcome {
    if let Some(b) = v.downcast_ref::<CelBool>() {
        return Outcome::Bool(*b.inner());
    }
    match v.downcast_ref::<CelString>() {
        Some(s) => Outcome::String(s.inner().to_owned()),
        None => Outcome::Other,
    }
}
