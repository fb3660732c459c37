//! Cost limits. cel-rust has neither a cost estimator nor a cost tracker, so
//! this crate brings both, approximately:
//!
//! * statically, [`crate::check`] estimates a rule's worst-case cost from the
//!   schema's `maxItems`/`maxProperties`/`maxLength` (else the request-size
//!   bound), following cel-go's cost model for comprehensions, string
//!   functions and `in`; the schema walk multiplies it by how many times the
//!   rule can run and compares it with upstream's limits;
//! * at runtime, every comprehension range is wrapped in a call that charges
//!   `1 + size × (nodes of the loop body)` units to a per-evaluation meter,
//!   and every evaluation is charged its node count. An evaluation stops
//!   with upstream's "actual cost limit exceeded" error past
//!   [`PER_CALL_LIMIT`]; a whole `validate` call past [`RUNTIME_BUDGET`].

use cel::common::ast::{CallExpr, EntryExpr, Expr, IdedExpr, LiteralValue};
use cel::common::types::{CelInt, DYN_TYPE, INT_TYPE};
use cel::common::value::CowVal;
use cel::{DeclarationError, Env, ExecutionError};
use std::cell::RefCell;

/// Upstream's per-expression runtime limit (`celconfig.PerCallLimit`).
pub(crate) const PER_CALL_LIMIT: u64 = 1_000_000;
/// Upstream's runtime budget for all rules of one object
/// (`celconfig.RuntimeCELCostBudget`).
pub(crate) const RUNTIME_BUDGET: u64 = 10_000_000;
/// Upstream's static limit for one rule times its cardinality
/// (`StaticEstimatedCostLimit`).
pub(crate) const STATIC_RULE_LIMIT: u64 = 10_000_000;
/// Upstream's static limit for all rules of a CRD (`StaticEstimatedCRDCostLimit`).
pub(crate) const STATIC_CRD_LIMIT: u64 = 100_000_000;
/// cel-go's error when an evaluation exceeds its limit; upstream matches on it.
pub(crate) const COST_EXCEEDED: &str = "operation cancelled: actual cost limit exceeded";

/// The function wrapped around comprehension ranges. Not an identifier, so no
/// expression can call it by name.
const COST_RANGE: &str = "@cost_range";

struct Meter {
    limit: u64,
    used: u64,
    exceeded: bool,
}

thread_local! {
    // Overloads are plain `fn`s: the meter of the evaluation running on this
    // thread is how they reach it.
    static METER: RefCell<Option<Meter>> = const { RefCell::new(None) };
}

/// What an evaluation cost.
pub(crate) struct Usage {
    pub(crate) used: u64,
    /// The limit was crossed at some point, even if the expression then
    /// recovered from the error (`error || true` is `true` in CEL).
    pub(crate) exceeded: bool,
}

/// Runs `f` with a meter of `limit` units that starts at `start` used.
pub(crate) fn metered<T>(limit: u64, start: u64, f: impl FnOnce() -> T) -> (T, Usage) {
    let meter = Meter {
        limit,
        used: start,
        exceeded: start > limit,
    };
    let previous = METER.with(|m| m.replace(Some(meter)));
    let out = f();
    let meter = METER.with(|m| m.replace(previous));
    let usage = meter.map_or(
        Usage {
            used: start,
            exceeded: false,
        },
        |m| Usage {
            used: m.used,
            exceeded: m.exceeded,
        },
    );
    (out, usage)
}

fn charge(units: u64) -> Result<(), ExecutionError> {
    METER.with(|m| {
        let mut m = m.borrow_mut();
        let Some(meter) = m.as_mut() else {
            return Ok(());
        };
        meter.used = meter.used.saturating_add(units);
        if meter.used > meter.limit {
            meter.exceeded = true;
            return Err(ExecutionError::function_error(COST_RANGE, COST_EXCEEDED));
        }
        Ok(())
    })
}

/// `@cost_range(range, per_item)`: charges the iterations, hands `range` back.
fn cost_range<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let mut args = args.into_iter();
    let (Some(range), Some(per_item)) = (args.next(), args.next()) else {
        return Err(ExecutionError::invalid_argument_count(2, 0));
    };
    let per_item = per_item
        .downcast_ref::<CelInt>()
        .map_or(1, |i| *i.inner())
        .max(1) as u64;
    let items = range.as_sizer().map_or(0, |s| *s.size().inner()).max(0) as u64;
    charge(1 + items.saturating_mul(per_item))?;
    Ok(range)
}

pub(crate) fn register(env: &mut Env) -> Result<(), DeclarationError> {
    env.add_overload(
        COST_RANGE,
        "@cost_range_dyn_int",
        vec![DYN_TYPE, INT_TYPE],
        cost_range,
    )
}

/// Wraps every comprehension range of `e` in `@cost_range`, and returns the
/// node count of `e` outside loop bodies: what one evaluation costs before
/// its comprehensions charge their iterations.
pub(crate) fn instrument(e: &mut IdedExpr) -> u64 {
    match &mut e.expr {
        Expr::Unspecified | Expr::Literal(_) => 0,
        Expr::Ident(_) => 1,
        Expr::Select(s) => 1 + instrument(&mut s.operand),
        Expr::Call(c) => {
            let target = c.target.as_deref_mut().map_or(0, instrument);
            1 + target + c.args.iter_mut().map(instrument).sum::<u64>()
        }
        Expr::List(l) => 1 + l.elements.iter_mut().map(instrument).sum::<u64>(),
        Expr::Map(m) => {
            1 + m
                .entries
                .iter_mut()
                .map(|e| instrument_entry(&mut e.expr))
                .sum::<u64>()
        }
        Expr::Struct(s) => {
            1 + s
                .entries
                .iter_mut()
                .map(|e| instrument_entry(&mut e.expr))
                .sum::<u64>()
        }
        Expr::Comprehension(c) => {
            let body = instrument(&mut c.loop_cond) + instrument(&mut c.loop_step);
            let outside = instrument(&mut c.iter_range)
                + instrument(&mut c.accu_init)
                + instrument(&mut c.result);
            let range = std::mem::take(&mut c.iter_range);
            let id = range.id;
            let per_item = IdedExpr {
                id,
                expr: Expr::Literal(LiteralValue::Int(CelInt::from(body.max(1) as i64))),
            };
            c.iter_range = IdedExpr {
                id,
                expr: Expr::Call(CallExpr {
                    func_name: COST_RANGE.to_owned(),
                    target: None,
                    args: vec![range, per_item],
                }),
            };
            1 + outside
        }
    }
}

fn instrument_entry(e: &mut EntryExpr) -> u64 {
    match e {
        EntryExpr::MapEntry(m) => instrument(&mut m.key) + instrument(&mut m.value),
        EntryExpr::StructField(f) => instrument(&mut f.value),
    }
}

/// Upstream's `getCostErrorMessage`.
pub(crate) fn exceeds_budget(cost_name: &str, cost: u64, limit: u64) -> String {
    let factor = cost as f64 / limit as f64;
    let factor = if factor > 100.0 {
        "more than 100x".to_owned()
    } else if factor < 1.5 {
        format!("{factor:.6}x")
    } else {
        format!("{factor:.1}x")
    };
    format!(
        "{cost_name} exceeds budget by factor of {factor} (try simplifying the rule, or adding \
         maxItems, maxProperties, and maxLength where arrays, maps, and strings are declared)"
    )
}
