//! `duration(string)` as cel-go parses it (Go's `time.ParseDuration`):
//! cel-rust's parser ignores trailing characters (`1hx` is an hour) and
//! knows no `µs`. Calls of `duration` are pointed at this overload when an
//! expression is compiled.

use super::fail;
use crate::values::parse_go_duration;
use cel::common::ast::{EntryExpr, Expr, IdedExpr};
use cel::common::types::{CelDuration, CelString, DYN_TYPE};
use cel::common::value::CowVal;
use cel::{DeclarationError, Env, ExecutionError};

/// Not an identifier: only the rewrite below can call it.
const GO_DURATION: &str = "@duration";

pub(super) fn register(env: &mut Env) -> Result<(), DeclarationError> {
    env.add_overload(GO_DURATION, "@duration_dyn", vec![DYN_TYPE], go_duration)
}

fn go_duration<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let Some(arg) = args.into_iter().next() else {
        return Err(ExecutionError::invalid_argument_count(1, 0));
    };
    if arg.downcast_ref::<CelDuration>().is_some() {
        return Ok(arg);
    }
    let Some(s) = arg.downcast_ref::<CelString>() else {
        return Err(ExecutionError::no_such_overload(
            "duration",
            vec![arg.get_type().name().to_owned()],
        ));
    };
    match parse_go_duration(s.inner(), false) {
        Some(d) => Ok(CowVal::owned(CelDuration::from(d))),
        None => Err(fail(
            "duration",
            format!(
                "time: invalid duration {}",
                crate::error::go_quote(s.inner())
            ),
        )),
    }
}

/// Points every one-argument `duration(...)` call of `e` at Go's parser.
pub(crate) fn use_go_durations(e: &mut IdedExpr) {
    match &mut e.expr {
        Expr::Call(c) => {
            if c.target.is_none() && c.func_name == "duration" && c.args.len() == 1 {
                c.func_name = GO_DURATION.to_owned();
            }
            c.target.iter_mut().for_each(|t| use_go_durations(t));
            c.args.iter_mut().for_each(use_go_durations);
        }
        Expr::Select(s) => use_go_durations(&mut s.operand),
        Expr::List(l) => l.elements.iter_mut().for_each(use_go_durations),
        Expr::Map(m) => m
            .entries
            .iter_mut()
            .for_each(|entry| match &mut entry.expr {
                EntryExpr::MapEntry(m) => {
                    use_go_durations(&mut m.key);
                    use_go_durations(&mut m.value);
                }
                EntryExpr::StructField(f) => use_go_durations(&mut f.value),
            }),
        Expr::Struct(s) => s
            .entries
            .iter_mut()
            .for_each(|entry| match &mut entry.expr {
                EntryExpr::MapEntry(m) => use_go_durations(&mut m.value),
                EntryExpr::StructField(f) => use_go_durations(&mut f.value),
            }),
        Expr::Comprehension(c) => {
            for part in [
                &mut c.iter_range,
                &mut c.accu_init,
                &mut c.loop_cond,
                &mut c.loop_step,
                &mut c.result,
            ] {
                use_go_durations(part);
            }
        }
        Expr::Unspecified | Expr::Ident(_) | Expr::Literal(_) => {}
    }
}
