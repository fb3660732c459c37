//! The "simple JSONPath" of CRD printer columns (`.status.conditions[?(@.type=="Ready")].status`):
//! field steps (`.a`, `['a.b']`), indexes (`[0]`, `[-1]`), wildcards (`[*]`, `.*`) and
//! equality filters (`[?(@.a.b=="x")]`, `!=`, numbers and booleans too), as Kubernetes'
//! `util/jsonpath` evaluates them. Surrounding `{` `}` are accepted.

use serde_json::Value;

/// A path that does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid JSONPath {path:?}: {reason}")]
pub struct JsonPathError {
    pub path: String,
    pub reason: String,
}

#[derive(Debug, Clone, PartialEq)]
enum Step {
    Field(String),
    Index(i64),
    All,
    Filter {
        path: Vec<Step>,
        equal: bool,
        value: Value,
    },
}

/// A parsed path.
#[derive(Debug, Clone, PartialEq)]
pub struct JsonPath {
    steps: Vec<Step>,
}

impl JsonPath {
    pub fn parse(path: &str) -> Result<JsonPath, JsonPathError> {
        let error = |reason: &str| JsonPathError {
            path: path.to_string(),
            reason: reason.to_string(),
        };
        let inner = path.trim();
        let inner = inner
            .strip_prefix('{')
            .and_then(|p| p.strip_suffix('}'))
            .unwrap_or(inner);
        let inner = inner.strip_prefix('$').unwrap_or(inner);
        let steps = parse_steps(inner).map_err(|r| error(&r))?;
        Ok(JsonPath { steps })
    }

    /// Every value the path finds in `obj`, in document order.
    pub fn find<'a>(&self, obj: &'a Value) -> Vec<&'a Value> {
        walk(&self.steps, obj)
    }
}

fn walk<'a>(steps: &[Step], obj: &'a Value) -> Vec<&'a Value> {
    let mut current = vec![obj];
    for step in steps {
        let mut next = Vec::new();
        for v in current {
            match step {
                Step::Field(name) => next.extend(v.get(name.as_str())),
                Step::Index(i) => {
                    if let Some(items) = v.as_array() {
                        let idx = if *i < 0 { items.len() as i64 + i } else { *i };
                        next.extend(usize::try_from(idx).ok().and_then(|i| items.get(i)));
                    }
                }
                Step::All => match v {
                    Value::Array(items) => next.extend(items.iter()),
                    Value::Object(m) => next.extend(m.values()),
                    _ => {}
                },
                Step::Filter { path, equal, value } => {
                    for item in v.as_array().into_iter().flatten() {
                        let found = walk(path, item);
                        let matches = found.first().is_some_and(|f| loosely_equal(f, value));
                        if matches == *equal && (!found.is_empty() || !*equal) {
                            next.push(item);
                        }
                    }
                }
            }
        }
        current = next;
    }
    current
}

/// Numbers compare by value (`1` equals `1.0`), everything else exactly.
fn loosely_equal(a: &Value, b: &Value) -> bool {
    match (a.as_f64(), b.as_f64()) {
        (Some(x), Some(y)) => x == y,
        _ => a == b,
    }
}

fn parse_steps(mut rest: &str) -> Result<Vec<Step>, String> {
    let mut steps = Vec::new();
    while !rest.is_empty() {
        if let Some(r) = rest.strip_prefix('.') {
            let end = r.find(['.', '[']).unwrap_or(r.len());
            let name = &r[..end];
            match name {
                "" => return Err("empty field name".into()),
                "*" => steps.push(Step::All),
                _ => steps.push(Step::Field(name.to_string())),
            }
            rest = &r[end..];
        } else if let Some(r) = rest.strip_prefix('[') {
            let end = closing_bracket(r).ok_or("unterminated [")?;
            steps.push(parse_bracket(r[..end].trim())?);
            rest = &r[end + 1..];
        } else {
            return Err(format!(
                "unexpected {:?}",
                rest.chars().next().unwrap_or(' ')
            ));
        }
    }
    Ok(steps)
}

/// The index of the `]` closing a bracket, skipping quoted strings.
fn closing_bracket(s: &str) -> Option<usize> {
    let mut quote: Option<char> = None;
    for (i, c) in s.char_indices() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), _) => {}
            (None, '\'' | '"') => quote = Some(c),
            (None, ']') => return Some(i),
            _ => {}
        }
    }
    None
}

fn parse_bracket(inner: &str) -> Result<Step, String> {
    if inner == "*" {
        return Ok(Step::All);
    }
    if let Some(filter) = inner.strip_prefix("?(").and_then(|f| f.strip_suffix(')')) {
        return parse_filter(filter.trim());
    }
    if let Some(name) = unquote(inner) {
        return Ok(Step::Field(name.to_string()));
    }
    inner
        .parse::<i64>()
        .map(Step::Index)
        .map_err(|_| format!("unsupported subscript [{inner}]"))
}

fn unquote(s: &str) -> Option<&str> {
    ['\'', '"']
        .iter()
        .find_map(|q| s.strip_prefix(*q).and_then(|x| x.strip_suffix(*q)))
}

fn parse_filter(filter: &str) -> Result<Step, String> {
    let (left, right, equal) = if let Some((l, r)) = filter.split_once("==") {
        (l, r, true)
    } else if let Some((l, r)) = filter.split_once("!=") {
        (l, r, false)
    } else {
        return Err(format!("unsupported filter {filter:?}: only == and != are"));
    };
    let left = left
        .trim()
        .strip_prefix('@')
        .ok_or("a filter starts with @")?;
    let path = parse_steps(left)?;
    let right = right.trim();
    let value = match unquote(right) {
        Some(s) => Value::String(s.to_string()),
        None => serde_json::from_str(right).map_err(|_| format!("bad filter value {right}"))?,
    };
    Ok(Step::Filter { path, equal, value })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn find(path: &str, obj: &Value) -> Vec<Value> {
        JsonPath::parse(path)
            .unwrap()
            .find(obj)
            .into_iter()
            .cloned()
            .collect()
    }

    #[test]
    fn printer_column_paths() {
        let obj = json!({"spec": {"secretName": "tls", "replicas": 3},
            "metadata": {"annotations": {"a.b/c": "x"}},
            "status": {"addresses": [{"value": "1.2.3.4"}, {"value": "5.6.7.8"}],
                "conditions": [{"type": "Accepted", "status": "True"}, {"type": "Ready", "status": "False", "message": "no"}]}});
        assert_eq!(find(".spec.secretName", &obj), [json!("tls")]);
        assert_eq!(find("{.spec.replicas}", &obj), [json!(3)]);
        assert_eq!(
            find(".status.addresses[*].value", &obj),
            [json!("1.2.3.4"), json!("5.6.7.8")]
        );
        assert_eq!(
            find(".status.addresses[-1].value", &obj),
            [json!("5.6.7.8")]
        );
        assert_eq!(
            find(r#".status.conditions[?(@.type=="Ready")].status"#, &obj),
            [json!("False")]
        );
        assert_eq!(
            find(".status.conditions[?(@.type!='Ready')].type", &obj),
            [json!("Accepted")]
        );
        assert_eq!(find(".metadata.annotations['a.b/c']", &obj), [json!("x")]);
        assert!(find(".spec.missing.deeper", &obj).is_empty());
        assert!(find(".spec.replicas[0]", &obj).is_empty());
    }

    #[test]
    fn bad_paths_are_errors() {
        for bad in [
            "spec",
            ".spec[",
            ".a..b",
            ".a[?(@.x>1)]",
            ".a[x]",
            ".a[?(b==1)]",
        ] {
            assert!(JsonPath::parse(bad).is_err(), "{bad}");
        }
    }
}
