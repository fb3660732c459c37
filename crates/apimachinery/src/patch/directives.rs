//! Strategic merge patch: directives, value classes, merge-key order.

use super::*;

pub(super) const DIRECTIVE_MARKER: &str = "$patch";
pub(super) const DELETE_DIRECTIVE: &str = "delete";
pub(super) const REPLACE_DIRECTIVE: &str = "replace";
pub(super) const MERGE_DIRECTIVE: &str = "merge";
pub(super) const RETAIN_KEYS_DIRECTIVE: &str = "$retainKeys";
pub(super) const DELETE_FROM_PRIMITIVE_LIST_PREFIX: &str = "$deleteFromPrimitiveList";
pub(super) const SET_ELEMENT_ORDER_PREFIX: &str = "$setElementOrder";

pub(super) fn is_directive_key(k: &str) -> bool {
    k == DIRECTIVE_MARKER
        || k == RETAIN_KEYS_DIRECTIVE
        || k.starts_with(SET_ELEMENT_ORDER_PREFIX)
        || k.starts_with(DELETE_FROM_PRIMITIVE_LIST_PREFIX)
}

/// A patch value that lands in the result without being merged (its key is new,
/// or its type differs from the original's): like Kubernetes, drop `null` members
/// (`discardNullValuesFromPatch`) and objects carrying `$patch` (`removeDirectives`),
/// and drop the other directive keys, which Kubernetes' typed decoding drops.
/// `None`: the value itself is a directive object and the key must go.
pub(super) fn sanitize_inserted(v: Value) -> Option<Value> {
    match v {
        Value::Object(m) => {
            if m.get(DIRECTIVE_MARKER).is_some_and(|d| !d.is_null()) {
                return None;
            }
            let mut out = Map::new();
            for (k, v) in m {
                if v.is_null() || is_directive_key(&k) {
                    continue;
                }
                if let Some(v) = sanitize_inserted(v) {
                    out.insert(k, v);
                }
            }
            Some(Value::Object(out))
        }
        Value::Array(a) => Some(Value::Array(
            a.into_iter().filter_map(sanitize_inserted).collect(),
        )),
        other => Some(other),
    }
}

/// A patch value taken as-is by Kubernetes (replaced list, `$patch: replace` map,
/// appended list item): drop directive keys and `null` members, as Kubernetes'
/// conversion of the result to a typed object does.
pub(super) fn strip_directives(v: Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(strip_directives_map(m)),
        Value::Array(a) => Value::Array(a.into_iter().map(strip_directives).collect()),
        other => other,
    }
}

pub(super) fn strip_directives_map(m: Map<String, Value>) -> Map<String, Value> {
    m.into_iter()
        .filter(|(k, v)| !v.is_null() && !is_directive_key(k))
        .map(|(k, v)| (k, strip_directives(v)))
        .collect()
}

/// The JSON type of a value as Go's `reflect.TypeOf` sees the decoded value
/// (integers decode to int64, other numbers to float64).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Class {
    Null,
    Bool,
    Int,
    Float,
    String,
    Array,
    Object,
}

pub(super) fn class(v: &Value) -> Class {
    match v {
        Value::Null => Class::Null,
        Value::Bool(_) => Class::Bool,
        Value::Number(n) if n.is_i64() => Class::Int,
        Value::Number(_) => Class::Float,
        Value::String(_) => Class::String,
        Value::Array(_) => Class::Array,
        Value::Object(_) => Class::Object,
    }
}

/// A hashable rendering of a value such that equal values (`serde_json` equality,
/// which is Go's `==` for the scalars Kubernetes compares) render equally.
pub(super) fn key_repr(v: &Value) -> String {
    let mut out = String::new();
    write_key_repr(v, &mut out);
    out
}

pub(super) fn write_key_repr(v: &Value, out: &mut String) {
    match v {
        Value::Null => out.push('z'),
        Value::Bool(b) => out.push(if *b { 'T' } else { 'F' }),
        Value::Number(n) => {
            if let Some(f) = n.as_f64().filter(|_| n.is_f64()) {
                if f == 0.0 {
                    out.push_str("f0");
                } else {
                    let _ = write!(out, "f{n}");
                }
            } else {
                let _ = write!(out, "i{n}");
            }
        }
        Value::String(s) => {
            let _ = write!(out, "s{}:{s}", s.len());
        }
        Value::Array(a) => {
            out.push('[');
            for x in a {
                write_key_repr(x, out);
                out.push(',');
            }
            out.push(']');
        }
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort_unstable();
            out.push('{');
            for k in keys {
                let _ = write!(out, "{}:{k}=", k.len());
                if let Some(x) = m.get(k) {
                    write_key_repr(x, out);
                }
                out.push(',');
            }
            out.push('}');
        }
    }
}

/// Positions of items in an "order" list, looked up by merge-key value (lists of
/// objects) or by value (lists of scalars): Kubernetes' `index()`, in O(1).
pub(super) struct OrderIndex {
    pub(super) first: HashMap<String, usize>,
    /// Why the list fails Kubernetes' `validateMergeKeyInLists`, if it does.
    pub(super) invalid: Option<String>,
}

impl OrderIndex {
    pub(super) fn build(list: &[Value], merge_key: &str, is_map: bool) -> Self {
        let mut first = HashMap::with_capacity(list.len());
        let mut invalid = None;
        for (i, item) in list.iter().enumerate() {
            let probe = if is_map {
                match item {
                    Value::Object(m) => match m.get(merge_key) {
                        Some(v) => Some(v),
                        None => {
                            invalid.get_or_insert_with(|| no_merge_key_msg(m, merge_key));
                            None
                        }
                    },
                    other => {
                        invalid.get_or_insert_with(|| {
                            format!("expected an object, but received a {}", type_name(other))
                        });
                        None
                    }
                }
            } else {
                Some(item)
            };
            if let Some(v) = probe {
                first.entry(key_repr(v)).or_insert(i);
            }
        }
        OrderIndex { first, invalid }
    }

    pub(super) fn index_of(&self, item: &Value, merge_key: &str, is_map: bool) -> Option<usize> {
        let probe = if is_map {
            item.as_object()?.get(merge_key)?
        } else {
            item
        };
        self.first.get(&key_repr(probe)).copied()
    }
}

pub(super) fn no_merge_key_msg(m: &Map<String, Value>, merge_key: &str) -> String {
    format!(
        "map: {} does not contain declared merge key: {merge_key}",
        render(&Value::Object(m.clone()))
    )
}
