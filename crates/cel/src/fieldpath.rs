//! A rule's `fieldPath` (`.spec.ports['http'].port`): checked against the
//! schema and normalized to the field path violations report, as upstream's
//! `ValidFieldPath` does.

use crate::decl::{additional_properties, properties};
use crate::path::FieldPath;
use serde_json::Value;

/// The path `json_path` names in `schema`, rendered relative to the rule's
/// location (`ports[http].port`), or `None` if it names no field.
pub(crate) fn normalize(json_path: &str, schema: &Value) -> Option<String> {
    let tokens = tokenize(json_path);
    let mut tokens = tokens.iter().map(String::as_str);
    let mut schema = schema;
    let mut path = FieldPath::root();
    while let Some(token) = tokens.next() {
        let name = match token {
            "[" => {
                let quoted = tokens.next()?;
                let inner = quoted.strip_prefix('\'')?.strip_suffix('\'')?;
                let name = unescape_single_quoted(inner)?;
                if tokens.next()? != "]" {
                    return None;
                }
                name
            }
            "." => tokens.next()?.to_owned(),
            _ => return None,
        };
        if let Some(props) = properties(schema) {
            schema = props.get(&name)?;
            path = path.child(&name);
        } else if let Some(values) = additional_properties(schema) {
            schema = values;
            path = path.key(&name);
        } else {
            return None;
        }
    }
    Some(path.render())
}

/// `.`, `[` and `]` as tokens of their own; single-quoted strings whole.
fn tokenize(s: &str) -> Vec<String> {
    let mut tokens = Vec::new();
    let mut current = String::new();
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\'' if current.is_empty() => {
                current.push(c);
                let mut prev = c;
                for next in chars.by_ref() {
                    current.push(next);
                    if next == '\'' && prev != '\\' {
                        break;
                    }
                    prev = next;
                }
                tokens.push(std::mem::take(&mut current));
            }
            '.' | '[' | ']' => {
                if !current.is_empty() {
                    tokens.push(std::mem::take(&mut current));
                }
                tokens.push(c.to_string());
            }
            c => current.push(c),
        }
    }
    if !current.is_empty() {
        tokens.push(current);
    }
    tokens
}

fn unescape_single_quoted(s: &str) -> Option<String> {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        out.push(match chars.next()? {
            'a' => '\u{7}',
            'b' => '\u{8}',
            'f' => '\u{c}',
            'n' => '\n',
            'r' => '\r',
            't' => '\t',
            'v' => '\u{b}',
            '\'' => '\'',
            '\\' => '\\',
            _ => return None,
        });
    }
    Some(out)
}
