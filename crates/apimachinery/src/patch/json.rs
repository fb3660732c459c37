//! JSON patch (RFC 6902).

use super::*;

/// Parses an RFC 6901 JSON pointer into unescaped reference tokens.
pub(super) fn parse_pointer(p: &str) -> Result<Vec<String>, String> {
    if p.is_empty() {
        return Ok(Vec::new());
    }
    let Some(rest) = p.strip_prefix('/') else {
        return Err(format!(
            "JSON pointer {p:?} must be empty or start with '/'"
        ));
    };
    rest.split('/')
        .map(|tok| {
            let mut out = String::with_capacity(tok.len());
            let mut chars = tok.chars();
            while let Some(c) = chars.next() {
                if c == '~' {
                    match chars.next() {
                        Some('0') => out.push('~'),
                        Some('1') => out.push('/'),
                        _ => {
                            return Err(format!(
                                "JSON pointer {p:?} has an invalid escape ('~' must be followed by '0' or '1')"
                            ))
                        }
                    }
                } else {
                    out.push(c);
                }
            }
            Ok(out)
        })
        .collect()
}

/// An RFC 6902 array index: `0` or a digit string without leading zeros.
pub(super) fn parse_index(tok: &str) -> Result<usize, String> {
    let valid = !tok.is_empty()
        && tok.bytes().all(|b| b.is_ascii_digit())
        && (tok == "0" || !tok.starts_with('0'));
    if !valid {
        return Err(format!("{tok:?} is not a valid array index"));
    }
    tok.parse::<usize>()
        .map_err(|_| format!("array index {tok} is too large"))
}

pub(super) fn resolve_mut<'a>(
    doc: &'a mut Value,
    tokens: &[String],
) -> Result<&'a mut Value, String> {
    let mut cur = doc;
    for (i, tok) in tokens.iter().enumerate() {
        cur = match cur {
            Value::Object(m) => m
                .get_mut(tok)
                .ok_or_else(|| format!("member {tok:?} not found (at token {i})"))?,
            Value::Array(a) => {
                if tok == "-" {
                    return Err("'-' refers past the end of the array".to_string());
                }
                let idx = parse_index(tok)?;
                let len = a.len();
                a.get_mut(idx)
                    .ok_or_else(|| format!("index {idx} is out of bounds (array length {len})"))?
            }
            other => {
                return Err(format!(
                    "cannot reference {tok:?} inside a {}",
                    type_name(other)
                ))
            }
        };
    }
    Ok(cur)
}

pub(super) fn resolve<'a>(doc: &'a Value, tokens: &[String]) -> Result<&'a Value, String> {
    let mut cur = doc;
    for (i, tok) in tokens.iter().enumerate() {
        cur = match cur {
            Value::Object(m) => m
                .get(tok)
                .ok_or_else(|| format!("member {tok:?} not found (at token {i})"))?,
            Value::Array(a) => {
                if tok == "-" {
                    return Err("'-' refers past the end of the array".to_string());
                }
                let idx = parse_index(tok)?;
                a.get(idx).ok_or_else(|| {
                    format!("index {idx} is out of bounds (array length {})", a.len())
                })?
            }
            other => {
                return Err(format!(
                    "cannot reference {tok:?} inside a {}",
                    type_name(other)
                ))
            }
        };
    }
    Ok(cur)
}

pub(super) fn json_add(doc: &mut Value, tokens: &[String], value: Value) -> Result<(), String> {
    if tokens.len() + depth_of(&value) > MAX_DEPTH {
        return Err(format!(
            "the result would be nested more than {MAX_DEPTH} levels deep"
        ));
    }
    let Some((last, parent_tokens)) = tokens.split_last() else {
        *doc = value;
        return Ok(());
    };
    match resolve_mut(doc, parent_tokens)? {
        Value::Object(m) => {
            m.insert(last.clone(), value);
            Ok(())
        }
        Value::Array(a) => {
            if last == "-" {
                a.push(value);
                return Ok(());
            }
            let idx = parse_index(last)?;
            if idx > a.len() {
                return Err(format!(
                    "index {idx} is out of bounds (array length {})",
                    a.len()
                ));
            }
            a.insert(idx, value);
            Ok(())
        }
        other => Err(format!("cannot add {last:?} to a {}", type_name(other))),
    }
}

pub(super) fn json_remove(doc: &mut Value, tokens: &[String]) -> Result<Value, String> {
    let Some((last, parent_tokens)) = tokens.split_last() else {
        return Err("cannot remove the whole document".to_string());
    };
    match resolve_mut(doc, parent_tokens)? {
        Value::Object(m) => m
            .shift_remove(last)
            .ok_or_else(|| format!("member {last:?} not found")),
        Value::Array(a) => {
            if last == "-" {
                return Err("'-' refers past the end of the array".to_string());
            }
            let idx = parse_index(last)?;
            if idx >= a.len() {
                return Err(format!(
                    "index {idx} is out of bounds (array length {})",
                    a.len()
                ));
            }
            Ok(a.remove(idx))
        }
        other => Err(format!(
            "cannot remove {last:?} from a {}",
            type_name(other)
        )),
    }
}

/// JSON equality as RFC 6902 `test` defines it: numbers compare by value.
pub(super) fn json_equal(a: &Value, b: &Value) -> bool {
    let mut stack = vec![(a, b)];
    while let Some((a, b)) = stack.pop() {
        let same = match (a, b) {
            (Value::Number(x), Value::Number(y)) => {
                if let (Some(x), Some(y)) = (x.as_i64(), y.as_i64()) {
                    x == y
                } else if let (Some(x), Some(y)) = (x.as_u64(), y.as_u64()) {
                    x == y
                } else if x.is_f64() || y.is_f64() {
                    x.as_f64() == y.as_f64()
                } else {
                    false
                }
            }
            (Value::Array(x), Value::Array(y)) => {
                if x.len() != y.len() {
                    false
                } else {
                    stack.extend(x.iter().zip(y.iter()));
                    true
                }
            }
            (Value::Object(x), Value::Object(y)) => {
                if x.len() != y.len() {
                    false
                } else {
                    let mut ok = true;
                    for (k, xv) in x {
                        match y.get(k) {
                            Some(yv) => stack.push((xv, yv)),
                            None => {
                                ok = false;
                                break;
                            }
                        }
                    }
                    ok
                }
            }
            (x, y) => x == y,
        };
        if !same {
            return false;
        }
    }
    true
}

/// Applies a JSON patch (RFC 6902) to `target`.
///
/// `patch` must be an array of operations (`add`, `remove`, `replace`, `move`,
/// `copy`, `test`) with RFC 6901 pointers (`~0`, `~1` escapes, `-` to append).
/// The operations apply in order and the patch is atomic: any failure returns an
/// error and no result.
pub fn json_patch(target: &Value, patch: &Value) -> Result<Value, PatchError> {
    let Value::Array(ops) = patch else {
        return Err(PatchError::JsonPatchNotArray(type_name(patch)));
    };
    if ops.len() > MAX_JSON_PATCH_OPERATIONS {
        return Err(PatchError::TooManyOperations(ops.len()));
    }
    check_depth(target, "the document to patch")?;
    let mut doc = target.clone();
    let mut copied = 0usize;
    for (index, op) in ops.iter().enumerate() {
        apply_op(&mut doc, index, op, &mut copied)?;
    }
    Ok(doc)
}

/// Applies operation `index` of a patch to `doc`; `copied` counts the values `copy` has
/// copied so far.
fn apply_op(
    doc: &mut Value,
    index: usize,
    op: &Value,
    copied: &mut usize,
) -> Result<(), PatchError> {
    let invalid = |message: String| PatchError::InvalidOperation { index, message };
    let Value::Object(obj) = op else {
        return Err(invalid(format!(
            "an operation must be an object, got {}",
            type_name(op)
        )));
    };
    let str_member = |name: &str| -> Result<&str, PatchError> {
        match obj.get(name) {
            Some(Value::String(s)) => Ok(s.as_str()),
            Some(other) => Err(invalid(format!(
                "member {name:?} must be a string, got {}",
                type_name(other)
            ))),
            None => Err(invalid(format!("member {name:?} is missing"))),
        }
    };
    let op_name = str_member("op")?;
    let path = str_member("path")?;
    let tokens = parse_pointer(path).map_err(invalid)?;
    let value_member = || {
        obj.get("value")
            .ok_or_else(|| invalid(format!("{op_name:?} needs a \"value\" member")))
    };
    let failed = |message: String| PatchError::OperationFailed {
        index,
        op: op_name.to_string(),
        path: path.to_string(),
        message,
    };
    match op_name {
        "add" => json_add(doc, &tokens, value_member()?.clone()).map_err(failed),
        "remove" => json_remove(doc, &tokens).map(drop).map_err(failed),
        "replace" => {
            let value = value_member()?;
            if tokens.len() + depth_of(value) > MAX_DEPTH {
                return Err(failed(format!(
                    "the result would be nested more than {MAX_DEPTH} levels deep"
                )));
            }
            *resolve_mut(doc, &tokens).map_err(failed)? = value.clone();
            Ok(())
        }
        "move" => {
            let from = str_member("from")?;
            let from_tokens = parse_pointer(from).map_err(invalid)?;
            op_move(doc, from, &from_tokens, &tokens).map_err(failed)
        }
        "copy" => {
            let from = str_member("from")?;
            let from_tokens = parse_pointer(from).map_err(invalid)?;
            op_copy(doc, from, &from_tokens, &tokens, copied).map_err(failed)
        }
        "test" => {
            let actual = resolve(doc, &tokens).map_err(failed)?;
            if !json_equal(actual, value_member()?) {
                return Err(PatchError::TestFailed {
                    index,
                    path: path.to_string(),
                });
            }
            Ok(())
        }
        other => Err(invalid(format!(
            "unknown op {other:?} (expected add, remove, replace, move, copy or test)"
        ))),
    }
}

fn op_move(
    doc: &mut Value,
    from: &str,
    from_tokens: &[String],
    to: &[String],
) -> Result<(), String> {
    if from_tokens == to {
        return resolve(doc, from_tokens).map(drop);
    }
    if to.len() > from_tokens.len() && to.starts_with(from_tokens) {
        return Err(format!("cannot move {from:?} into one of its own children"));
    }
    let value = json_remove(doc, from_tokens).map_err(|m| format!("from {from:?}: {m}"))?;
    json_add(doc, to, value)
}

fn op_copy(
    doc: &mut Value,
    from: &str,
    from_tokens: &[String],
    to: &[String],
    copied: &mut usize,
) -> Result<(), String> {
    let value = resolve(doc, from_tokens).map_err(|m| format!("from {from:?}: {m}"))?;
    *copied = copied.saturating_add(node_count(value));
    if *copied > MAX_JSON_PATCH_COPIED_VALUES {
        return Err(format!(
            "the patch copies more than {MAX_JSON_PATCH_COPIED_VALUES} values in total"
        ));
    }
    let value = value.clone();
    json_add(doc, to, value)
}
