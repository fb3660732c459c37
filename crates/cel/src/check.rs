//! A small type checker, in place of cel-go's: cel-rust only parses. It
//! reports what makes upstream refuse a rule at CRD creation, in cel-go's
//! words: undeclared variables and functions, fields a schema does not
//! declare, field selection on scalars, invalid regex/duration/timestamp
//! literals, mixed-type list literals. Types it cannot tell (`dyn`,
//! int-or-string, what most functions return) pass. Along the way it
//! estimates the expression's worst-case cost the way cel-go's estimator does
//! (see [`crate::cost`]).

use crate::decl::DeclKind;
use crate::functions::{self, STRING_TRAVERSAL};
use crate::ty::Ty;
use cel::common::ast::{
    operators as op, ComprehensionExpr, EntryExpr, Expr, IdedExpr, LiteralValue, SelectExpr,
    SourceInfo,
};
use std::collections::BTreeSet;

/// Names that evaluate to type values, as in `type(x) == string`.
const TYPE_NAMES: &[&str] = &[
    "bool",
    "bytes",
    "double",
    "int",
    "list",
    "map",
    "null_type",
    "string",
    "type",
    "uint",
];

pub(crate) struct Analysis {
    pub(crate) ty: Ty,
    /// cel-go's estimated maximum cost.
    pub(crate) cost: u64,
    /// cel-go-formatted issues (`ERROR: <input>:1:6: ...` with the snippet).
    pub(crate) errors: Vec<String>,
    /// The variables of `vars` the expression references.
    pub(crate) used: BTreeSet<String>,
}

/// Checks `expr` (parsed from `source`) with the variables `vars` in scope.
pub(crate) fn analyze(
    expr: &IdedExpr,
    source: &str,
    info: &SourceInfo,
    vars: &[(&str, Ty)],
) -> Analysis {
    let mut a = Analyzer {
        source,
        info,
        scopes: vars
            .iter()
            .map(|(n, t)| ((*n).to_owned(), t.clone()))
            .collect(),
        globals: vars.len(),
        errors: Vec::new(),
        used: BTreeSet::new(),
        in_format: false,
    };
    let out = a.expr(expr);
    Analysis {
        ty: out.ty,
        cost: out.cost,
        errors: a.errors,
        used: a.used,
    }
}

struct Out {
    ty: Ty,
    cost: u64,
}

fn out(ty: Ty, cost: u64) -> Out {
    Out { ty, cost }
}

struct Analyzer<'a> {
    source: &'a str,
    info: &'a SourceInfo,
    scopes: Vec<(String, Ty)>,
    globals: usize,
    errors: Vec<String>,
    used: BTreeSet<String>,
    /// The list literal being analyzed is an argument of `format` (or nested
    /// in one), which cel-go lets mix types.
    in_format: bool,
}

impl Analyzer<'_> {
    fn expr(&mut self, e: &IdedExpr) -> Out {
        match &e.expr {
            Expr::Unspecified => out(Ty::dyn_(), 0),
            Expr::Literal(l) => out(literal(l), 0),
            Expr::Ident(name) => out(self.ident(e.id, name), 1),
            Expr::Select(s) => self.select(e.id, s),
            Expr::Call(c) => self.call(e.id, c),
            Expr::List(l) => self.list(&l.elements),
            Expr::Map(m) => {
                let mut cost: u64 = 30;
                for entry in &m.entries {
                    cost = cost.saturating_add(self.entry(&entry.expr));
                }
                out(
                    Ty::Map(
                        Box::new(Ty::dyn_()),
                        Box::new(Ty::dyn_()),
                        m.entries.len() as u64,
                    ),
                    cost,
                )
            }
            Expr::Struct(s) => {
                self.error(
                    e.id,
                    format!(
                        "undeclared reference to '{}' (in container '')",
                        s.type_name
                    ),
                );
                let cost = add(s
                    .entries
                    .iter()
                    .map(|entry| self.entry(&entry.expr))
                    .collect::<Vec<_>>());
                out(Ty::dyn_(), cost.saturating_add(40))
            }
            Expr::Comprehension(c) => self.comprehension(c),
        }
    }

    fn entry(&mut self, e: &EntryExpr) -> u64 {
        match e {
            EntryExpr::MapEntry(m) => add([self.expr(&m.key).cost, self.expr(&m.value).cost]),
            EntryExpr::StructField(f) => self.expr(&f.value).cost,
        }
    }

    fn lookup(&mut self, name: &str) -> Option<Ty> {
        let pos = self.scopes.iter().rposition(|(n, _)| n == name)?;
        if pos < self.globals {
            self.used.insert(name.to_owned());
        }
        Some(self.scopes[pos].1.clone())
    }

    fn ident(&mut self, id: u64, name: &str) -> Ty {
        if let Some(ty) = self.lookup(name) {
            return ty;
        }
        if TYPE_NAMES.contains(&name) {
            return Ty::Type;
        }
        self.error(
            id,
            format!("undeclared reference to '{name}' (in container '')"),
        );
        Ty::dyn_()
    }

    fn select(&mut self, id: u64, s: &SelectExpr) -> Out {
        let operand = self.expr(&s.operand);
        let (ty, cost) = self.field(id, &operand.ty, &s.field);
        if s.test {
            // Kubernetes turns off the cost of presence tests.
            out(Ty::Bool, operand.cost)
        } else {
            out(ty, operand.cost.saturating_add(cost))
        }
    }

    /// The type of `field` on a value of type `ty`, and the select's cost.
    fn field(&mut self, id: u64, ty: &Ty, field: &str) -> (Ty, u64) {
        match ty {
            Ty::Object(decl) => match &decl.kind {
                DeclKind::Object(fields) => match fields.get(field) {
                    Some(f) => (Ty::from_decl(&f.decl), 1),
                    None => {
                        self.error(id, format!("undefined field '{field}'"));
                        (Ty::dyn_(), 1)
                    }
                },
                _ => (Ty::dyn_(), 1),
            },
            Ty::Map(_, v, _) => ((**v).clone(), 1),
            Ty::Dyn(_) => (Ty::dyn_(), 0),
            other => {
                self.error(
                    id,
                    format!("type '{}' does not support field selection", other.name()),
                );
                (Ty::dyn_(), 0)
            }
        }
    }

    fn list(&mut self, elements: &[IdedExpr]) -> Out {
        let mut cost: u64 = 10;
        let mut elem: Option<Ty> = None;
        let in_format = std::mem::take(&mut self.in_format);
        let mut mismatch_reported = in_format;
        for e in elements {
            self.in_format = in_format && matches!(e.expr, Expr::List(_));
            let o = self.expr(e);
            cost = cost.saturating_add(o.cost);
            elem = Some(match elem {
                None => o.ty,
                Some(prev) => {
                    if !mismatch_reported
                        && is_scalar(&prev)
                        && is_scalar(&o.ty)
                        && prev.name() != o.ty.name()
                    {
                        // cel-go's homogeneous aggregate literal validator.
                        self.error(
                            e.id,
                            format!(
                                "expected type '{}' but found '{}'",
                                prev.name(),
                                o.ty.name()
                            ),
                        );
                        mismatch_reported = true;
                    }
                    Ty::join(prev, o.ty)
                }
            });
        }
        let elem = elem.unwrap_or_else(Ty::dyn_);
        out(Ty::List(Box::new(elem), elements.len() as u64), cost)
    }

    fn comprehension(&mut self, c: &ComprehensionExpr) -> Out {
        let range = self.expr(&c.iter_range);
        let init = self.expr(&c.accu_init);
        let items = range.ty.size();
        let (first, second) = match (&c.iter_var2, &range.ty) {
            (None, ty) => (ty.iter_elem(), None),
            (Some(_), Ty::List(e, _)) => (Ty::Int, Some((**e).clone())),
            (Some(_), Ty::Map(k, v, _)) => ((**k).clone(), Some((**v).clone())),
            (Some(_), _) => (Ty::dyn_(), Some(Ty::dyn_())),
        };
        self.scopes.push((c.accu_var.clone(), init.ty.clone()));
        let scope_len = self.scopes.len();
        self.scopes.push((c.iter_var.clone(), first));
        if let (Some(name), Some(ty)) = (&c.iter_var2, second) {
            self.scopes.push((name.clone(), ty));
        }
        let cond = self.expr(&c.loop_cond);
        let step = self.expr(&c.loop_step);
        self.scopes.truncate(scope_len);
        // `map` and `filter` accumulate a list: what the step builds tells its
        // element type better than the empty literal it starts from.
        if let (Ty::List(..), Ty::List(..)) = (&init.ty, &step.ty) {
            if let Some(accu) = self.scopes.last_mut() {
                accu.1 = step.ty.clone();
            }
        }
        let result = self.expr(&c.result);
        self.scopes.pop();
        let ty = match result.ty {
            list @ Ty::List(..) => list.with_size(items),
            other => other,
        };
        let loop_cost = items.saturating_mul(cond.cost.saturating_add(step.cost));
        out(ty, add([range.cost, init.cost, result.cost, loop_cost]))
    }

    /// Reports `message` at the position of expression `id`, as cel-go does.
    fn error(&mut self, id: u64, message: String) {
        let offset = self
            .info
            .offset_for(id)
            .map_or(0, |(start, _)| start as usize);
        self.errors
            .push(format_issue(self.source, offset, &message));
    }
}

/// Costs add up without overflowing: a worst case past `u64::MAX` is as
/// refused as one at it.
pub(crate) fn add(costs: impl IntoIterator<Item = u64>) -> u64 {
    costs.into_iter().fold(0, u64::saturating_add)
}

fn literal(l: &LiteralValue) -> Ty {
    match l {
        LiteralValue::Boolean(_) => Ty::Bool,
        LiteralValue::Bytes(b) => Ty::Bytes(b.inner().len() as u64),
        LiteralValue::Double(_) => Ty::Double,
        LiteralValue::Int(_) => Ty::Int,
        LiteralValue::Null => Ty::Null,
        LiteralValue::String(s) => Ty::String(s.inner().chars().count() as u64),
        LiteralValue::UInt(_) => Ty::Uint,
    }
}

fn is_scalar(t: &Ty) -> bool {
    matches!(
        t,
        Ty::Bool | Ty::Int | Ty::Uint | Ty::Double | Ty::String(_) | Ty::Bytes(_) | Ty::Null
    )
}

/// A string literal argument, for the literal validators.
fn string_literal(e: &IdedExpr) -> Option<&str> {
    match &e.expr {
        Expr::Literal(LiteralValue::String(s)) => Some(s.inner()),
        _ => None,
    }
}

/// `ERROR: <input>:<line>:<col>: <message>` and the source line with a caret
/// under the column, as cel-go prints an issue. `offset` counts characters.
pub(crate) fn format_issue(source: &str, offset: usize, message: &str) -> String {
    let (mut line, mut col, mut line_start) = (1, 0, 0);
    for (i, c) in source.chars().enumerate() {
        if i >= offset {
            break;
        }
        if c == '\n' {
            line += 1;
            col = 0;
            line_start = i + 1;
        } else {
            col += 1;
        }
    }
    let text: String = source
        .chars()
        .skip(line_start)
        .take_while(|c| *c != '\n')
        .collect();
    let text = text.replace('\t', " ");
    format!(
        "ERROR: <input>:{line}:{}: {message}\n | {text}\n | {}^",
        col + 1,
        ".".repeat(col)
    )
}

mod call;
