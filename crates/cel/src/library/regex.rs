//! Kubernetes' regex library: `find` and `findAll` on strings.

use super::fail;
use cel::common::types::{CelInt, CelList, CelString};
use cel::common::value::Val;
use cel::{DeclarationError, Env, ExecutionError};

pub(super) fn register(env: &mut Env) -> Result<(), DeclarationError> {
    cel::add_member_overload!(env, fn find: (CelString, CelString) -> Result<CelString>, id = "string_find_string")?;
    cel::add_member_overload!(env, fn find_all: (CelString, CelString) -> Result<CelList>, id = "string_find_all_string")?;
    cel::add_member_overload!(env, fn find_all_n: (CelString, CelString, CelInt) -> Result<CelList>, name = "findAll", id = "string_find_all_string_int")?;
    Ok(())
}

fn compile(function: &str, pattern: &str) -> Result<regex::Regex, ExecutionError> {
    regex::Regex::new(pattern).map_err(|e| fail(function, format!("Illegal regex: {e}")))
}

/// The first match, or the empty string.
fn find(s: &CelString<'_>, pattern: &CelString<'_>) -> Result<CelString<'static>, ExecutionError> {
    let re = compile("find", pattern.inner())?;
    Ok(re
        .find(s.inner())
        .map_or_else(String::new, |m| m.as_str().to_owned())
        .into())
}

fn find_all(
    s: &CelString<'_>,
    pattern: &CelString<'_>,
) -> Result<CelList<'static>, ExecutionError> {
    find_all_n(s, pattern, &CelInt::from(-1))
}

/// At most `n` matches; all of them when `n` is negative.
fn find_all_n(
    s: &CelString<'_>,
    pattern: &CelString<'_>,
    n: &CelInt,
) -> Result<CelList<'static>, ExecutionError> {
    let re = compile("findAll", pattern.inner())?;
    let limit = usize::try_from(*n.inner()).unwrap_or(usize::MAX);
    let found: Vec<Box<dyn Val>> = re
        .find_iter(s.inner())
        .take(limit)
        .map(|m| Box::new(CelString::from(m.as_str().to_owned())) as Box<dyn Val>)
        .collect();
    Ok(CelList::from(found))
}
