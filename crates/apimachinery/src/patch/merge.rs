//! JSON merge patch (RFC 7386).

use super::*;

/// Applies a JSON merge patch (RFC 7386) to `target`.
///
/// Objects merge recursively, `null` removes a member, anything else (arrays
/// included) replaces. A non-object patch replaces the whole target. Key order is
/// preserved; new members are appended in patch order. Implemented without recursion.
pub fn merge_patch(target: &Value, patch: &Value) -> Value {
    let mut out = target.clone();
    let mut stack: Vec<(&mut Value, &Value)> = vec![(&mut out, patch)];
    while let Some((t, p)) = stack.pop() {
        let Value::Object(pm) = p else {
            *t = p.clone();
            continue;
        };
        if !t.is_object() {
            *t = Value::Object(Map::new());
        }
        let Value::Object(tm) = t else {
            continue;
        };
        for (k, pv) in pm {
            match pv {
                Value::Null => {
                    tm.shift_remove(k);
                }
                Value::Object(_) => {
                    if !tm.contains_key(k) {
                        tm.insert(k.clone(), Value::Object(Map::new()));
                    }
                }
                other => {
                    tm.insert(k.clone(), other.clone());
                }
            }
        }
        for (k, tv) in tm.iter_mut() {
            if let Some(pv @ Value::Object(_)) = pm.get(k) {
                stack.push((tv, pv));
            }
        }
    }
    out
}
