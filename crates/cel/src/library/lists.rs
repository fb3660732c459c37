//! Kubernetes' list library (`isSorted`, `sum`, `min`, `max`, `indexOf`,
//! `lastIndexOf` on lists) and the sets extension (`sets.contains`,
//! `sets.equivalent`, `sets.intersects`).

use super::fail;
use cel::common::types::{CelBool, CelInt, DYN_TYPE, LIST_TYPE};
use cel::common::value::{CowVal, Val};
use cel::{DeclarationError, Env, ExecutionError};
use std::cmp::Ordering;

type Args<'b, 'v> = Vec<CowVal<'b, 'v>>;
type Ret<'b, 'v> = Result<CowVal<'b, 'v>, ExecutionError>;

pub(super) fn register(env: &mut Env) -> Result<(), DeclarationError> {
    env.add_member_overload("isSorted", "list_is_sorted", LIST_TYPE, vec![], is_sorted)?;
    env.add_member_overload("sum", "list_sum", LIST_TYPE, vec![], sum)?;
    env.add_member_overload("min", "list_min", LIST_TYPE, vec![], min)?;
    env.add_member_overload("max", "list_max", LIST_TYPE, vec![], max)?;
    env.add_member_overload(
        "indexOf",
        "list_index_of",
        LIST_TYPE,
        vec![DYN_TYPE],
        index_of,
    )?;
    env.add_member_overload(
        "lastIndexOf",
        "list_last_index_of",
        LIST_TYPE,
        vec![DYN_TYPE],
        last_index_of,
    )?;
    env.add_overload(
        "sets.contains",
        "list_sets_contains_list",
        vec![LIST_TYPE, LIST_TYPE],
        sets_contains,
    )?;
    env.add_overload(
        "sets.equivalent",
        "list_sets_equivalent_list",
        vec![LIST_TYPE, LIST_TYPE],
        sets_equivalent,
    )?;
    env.add_overload(
        "sets.intersects",
        "list_sets_intersects_list",
        vec![LIST_TYPE, LIST_TYPE],
        sets_intersects,
    )?;
    Ok(())
}

/// The elements of the list argument `i`.
fn elements<'a, 'v>(
    args: &'a [CowVal<'_, 'v>],
    i: usize,
    function: &str,
) -> Result<Vec<&'a (dyn Val + 'v)>, ExecutionError> {
    let iterable = args
        .get(i)
        .and_then(|a| a.as_iterable())
        .ok_or_else(|| fail(function, "no such overload"))?;
    let mut items = Vec::new();
    let mut iter = iterable.iter();
    while let Some(item) = iter.next() {
        items.push(item);
    }
    Ok(items)
}

fn compare(a: &dyn Val, b: &dyn Val, function: &str) -> Result<Ordering, ExecutionError> {
    a.as_comparer()
        .ok_or_else(|| fail(function, "no such overload"))?
        .compare(b)
}

fn owned<'b, 'v>(v: impl Val + 'v) -> Ret<'b, 'v> {
    Ok(CowVal::Owned(Box::new(v)))
}

fn is_sorted<'b, 'v>(args: Args<'b, 'v>) -> Ret<'b, 'v> {
    let items = elements(&args, 0, "isSorted")?;
    for pair in items.windows(2) {
        if compare(pair[0], pair[1], "isSorted")? == Ordering::Greater {
            return owned(CelBool::from(false));
        }
    }
    owned(CelBool::from(true))
}

fn sum<'b, 'v>(args: Args<'b, 'v>) -> Ret<'b, 'v> {
    let items = elements(&args, 0, "sum")?;
    let mut acc: Box<dyn Val + 'v> = Box::new(CelInt::from(0));
    for (i, item) in items.into_iter().enumerate() {
        acc = if i == 0 {
            item.clone_as_boxed()
        } else {
            let adder = acc
                .as_adder()
                .ok_or_else(|| fail("sum", "no such overload"))?;
            adder.add(item)?.into_owned()
        };
    }
    Ok(CowVal::Owned(acc))
}

/// The element `prefer` picks over every other, or the error upstream raises
/// for an empty list.
fn extreme<'b, 'v>(args: Args<'b, 'v>, function: &str, prefer: Ordering) -> Ret<'b, 'v> {
    let items = elements(&args, 0, function)?;
    let mut best: Option<&(dyn Val + 'v)> = None;
    for item in items {
        best = Some(match best {
            Some(b) if compare(item, b, function)? != prefer => b,
            _ => item,
        });
    }
    best.map(|b| CowVal::Owned(b.clone_as_boxed()))
        .ok_or_else(|| fail(function, format!("{function} called on empty list")))
}

fn min<'b, 'v>(args: Args<'b, 'v>) -> Ret<'b, 'v> {
    extreme(args, "min", Ordering::Less)
}

fn max<'b, 'v>(args: Args<'b, 'v>) -> Ret<'b, 'v> {
    extreme(args, "max", Ordering::Greater)
}

fn position<'b, 'v>(args: Args<'b, 'v>, function: &str, last: bool) -> Ret<'b, 'v> {
    let items = elements(&args, 0, function)?;
    let needle = args
        .get(1)
        .ok_or_else(|| ExecutionError::invalid_argument_count(2, args.len()))?;
    let found = if last {
        items.iter().rposition(|i| i.equals(needle.as_ref()))
    } else {
        items.iter().position(|i| i.equals(needle.as_ref()))
    };
    owned(CelInt::from(found.map_or(-1, |i| i as i64)))
}

fn index_of<'b, 'v>(args: Args<'b, 'v>) -> Ret<'b, 'v> {
    position(args, "indexOf", false)
}

fn last_index_of<'b, 'v>(args: Args<'b, 'v>) -> Ret<'b, 'v> {
    position(args, "lastIndexOf", true)
}

fn includes_all(haystack: &[&dyn Val], needles: &[&dyn Val]) -> bool {
    needles
        .iter()
        .all(|n| haystack.iter().any(|h| h.equals(*n)))
}

fn sets_contains<'b, 'v>(args: Args<'b, 'v>) -> Ret<'b, 'v> {
    let (a, b) = (
        elements(&args, 0, "sets.contains")?,
        elements(&args, 1, "sets.contains")?,
    );
    owned(CelBool::from(includes_all(&a, &b)))
}

fn sets_equivalent<'b, 'v>(args: Args<'b, 'v>) -> Ret<'b, 'v> {
    let (a, b) = (
        elements(&args, 0, "sets.equivalent")?,
        elements(&args, 1, "sets.equivalent")?,
    );
    owned(CelBool::from(includes_all(&a, &b) && includes_all(&b, &a)))
}

fn sets_intersects<'b, 'v>(args: Args<'b, 'v>) -> Ret<'b, 'v> {
    let (a, b) = (
        elements(&args, 0, "sets.intersects")?,
        elements(&args, 1, "sets.intersects")?,
    );
    owned(CelBool::from(
        b.iter().any(|n| a.iter().any(|h| h.equals(*n))),
    ))
}
