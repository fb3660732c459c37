//! Calls: operators, macros' helpers and library functions.

use super::{add, functions, op, out, string_literal, Analyzer, Out, STRING_TRAVERSAL};
use crate::ty::Ty;
use cel::common::ast::{CallExpr, Expr, IdedExpr};

impl Analyzer<'_> {
    pub(super) fn call(&mut self, id: u64, c: &CallExpr) -> Out {
        if let Some(name) = self.namespaced(c) {
            return self.function(id, &name, None, &c.args);
        }
        let name = c.func_name.as_str();
        match (name, c.target.as_deref(), c.args.as_slice()) {
            (op::CONDITIONAL, None, [cond, yes, no]) => {
                let (cond, yes, no) = (self.expr(cond), self.expr(yes), self.expr(no));
                out(
                    Ty::join(yes.ty, no.ty),
                    add([cond.cost, yes.cost.max(no.cost)]),
                )
            }
            (op::LOGICAL_AND | op::LOGICAL_OR, None, [l, r]) => {
                let (l, r) = (self.expr(l), self.expr(r));
                out(Ty::Bool, add([l.cost, r.cost]))
            }
            (op::LOGICAL_NOT | op::NOT_STRICTLY_FALSE, None, [arg]) => {
                out(Ty::Bool, add([self.expr(arg).cost, 1]))
            }
            (
                op::EQUALS
                | op::NOT_EQUALS
                | op::LESS
                | op::LESS_EQUALS
                | op::GREATER
                | op::GREATER_EQUALS,
                None,
                [l, r],
            ) => {
                let (l, r) = (self.expr(l), self.expr(r));
                let traversal =
                    (l.ty.size().min(r.ty.size()) as f64 * STRING_TRAVERSAL).ceil() as u64;
                out(Ty::Bool, add([l.cost, r.cost, traversal]))
            }
            (op::IN, None, [elem, container]) => {
                let (elem, container) = (self.expr(elem), self.expr(container));
                let cost = if matches!(container.ty, Ty::List(..)) {
                    container.ty.size()
                } else {
                    1
                };
                out(Ty::Bool, add([elem.cost, container.cost, cost]))
            }
            (op::ADD, None, [l, r]) => {
                let (l, r) = (self.expr(l), self.expr(r));
                let cost = add([l.cost, r.cost]);
                out_add(l.ty, r.ty, cost)
            }
            (op::SUBSTRACT | op::MULTIPLY | op::DIVIDE | op::MODULO, None, [l, r]) => {
                let (l, r) = (self.expr(l), self.expr(r));
                let ty = match (&l.ty, &r.ty, name) {
                    (Ty::Timestamp, Ty::Timestamp, op::SUBSTRACT) => Ty::Duration,
                    _ => l.ty,
                };
                out(ty, add([l.cost, r.cost, 1]))
            }
            (op::NEGATE, None, [arg]) => {
                let arg = self.expr(arg);
                out(arg.ty, add([arg.cost, 1]))
            }
            _ => self.access(id, c),
        }
    }

    /// Indexing and optional selection, else a library function.
    fn access(&mut self, id: u64, c: &CallExpr) -> Out {
        let name = c.func_name.as_str();
        match (name, c.target.as_deref(), c.args.as_slice()) {
            (op::INDEX, None, [container, index]) => {
                let (container, index) = (self.expr(container), self.expr(index));
                out(
                    container.ty.index_elem(),
                    add([container.cost, index.cost, 1]),
                )
            }
            (op::OPT_INDEX, None, [container, index]) => {
                let (container, index) = (self.expr(container), self.expr(index));
                let elem = match container.ty {
                    Ty::Optional(inner) => inner.index_elem(),
                    other => other.index_elem(),
                };
                out(
                    Ty::Optional(Box::new(elem)),
                    add([container.cost, index.cost, 1]),
                )
            }
            (op::OPT_SELECT, None, [operand, field]) => {
                let operand = self.expr(operand);
                let inner = match operand.ty {
                    Ty::Optional(inner) => *inner,
                    other => other,
                };
                let ty = match string_literal(field) {
                    Some(f) => self.field(id, &inner, f).0,
                    None => Ty::dyn_(),
                };
                out(Ty::Optional(Box::new(ty)), add([operand.cost, 1]))
            }
            _ => self.function(id, name, c.target.as_deref(), &c.args),
        }
    }

    /// `optional.of(x)`, `sets.contains(a, b)`: a call on a target that spells
    /// a namespace (and is no variable) calls the namespaced function.
    fn namespaced(&mut self, c: &CallExpr) -> Option<String> {
        let Expr::Ident(ns) = &c.target.as_deref()?.expr else {
            return None;
        };
        if !functions::is_namespace(ns) || self.scopes.iter().any(|(n, _)| n == ns) {
            return None;
        }
        Some(format!("{ns}.{}", c.func_name))
    }

    fn function(
        &mut self,
        id: u64,
        name: &str,
        target: Option<&IdedExpr>,
        args: &[IdedExpr],
    ) -> Out {
        let target_out = target.map(|t| self.expr(t));
        let arg_outs: Vec<Out> = args
            .iter()
            .map(|a| {
                self.in_format = name == "format" && matches!(a.expr, Expr::List(_));
                self.expr(a)
            })
            .collect();
        let mut cost = add(target_out
            .iter()
            .chain(&arg_outs)
            .map(|o| o.cost)
            .collect::<Vec<_>>());
        let known = if target.is_some() {
            functions::is_member(name)
        } else {
            functions::is_global(name)
        };
        if !known {
            self.error(
                id,
                format!("undeclared reference to '{name}' (in container '')"),
            );
            return out(Ty::dyn_(), cost);
        }
        self.validate_literals(name, args);
        let arg_tys: Vec<Ty> = arg_outs.into_iter().map(|a| a.ty).collect();
        let (ty, call_cost) = functions::call(name, target_out.as_ref().map(|t| &t.ty), &arg_tys);
        cost = cost.saturating_add(call_cost);
        out(ty, cost)
    }

    /// cel-go's literal validators: a constant regex, duration or timestamp
    /// argument that can never evaluate is a compilation error.
    fn validate_literals(&mut self, name: &str, args: &[IdedExpr]) {
        let Some(first) = args.first() else { return };
        let Some(literal) = string_literal(first) else {
            return;
        };
        let valid = match name {
            "matches" => regex::Regex::new(literal).is_ok(),
            "duration" => crate::values::parse_go_duration(literal, false).is_some(),
            "timestamp" => chrono::DateTime::parse_from_rfc3339(literal).is_ok(),
            _ => true,
        };
        if !valid {
            self.error(first.id, format!("invalid {name} argument"));
        }
    }
}

fn out_add(l: Ty, r: Ty, cost: u64) -> Out {
    match (l, r) {
        (Ty::List(a, n), Ty::List(b, m)) => out(
            Ty::join(Ty::List(a, n), Ty::List(b, m)).with_size(n.saturating_add(m)),
            add([cost, 1]),
        ),
        (Ty::String(n), Ty::String(m)) => {
            let size = n.saturating_add(m);
            out(
                Ty::String(size),
                add([cost, (size as f64 * STRING_TRAVERSAL).ceil() as u64]),
            )
        }
        (Ty::Duration, Ty::Timestamp) | (Ty::Timestamp, Ty::Duration) => {
            out(Ty::Timestamp, add([cost, 1]))
        }
        (l, _) => out(l, add([cost, 1])),
    }
}
