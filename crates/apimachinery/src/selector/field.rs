//! Field selectors (`fields.ParseSelector`): terms, escapes, matching.

use super::*;

/// The operator of a field selector term.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Op {
    /// `field=value` or `field==value`
    Equals,
    /// `field!=value`
    NotEquals,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct FieldTerm {
    field: String,
    op: Op,
    value: String,
}

/// A parsed field selector: the AND of `field=value` / `field!=value` terms.
///
/// Terms are kept in the order Kubernetes keeps them (sorted by their raw text).
/// The empty selector matches everything.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct FieldSelector {
    terms: Vec<FieldTerm>,
}

impl FieldSelector {
    /// Parses the string form exactly like Kubernetes `fields.ParseSelector`.
    pub fn parse(selector: &str) -> Result<Self, SelectorError> {
        let mut parts = split_terms(selector);
        parts.sort_unstable();
        let mut terms = Vec::new();
        for part in parts {
            if part.is_empty() {
                continue;
            }
            let Some((lhs, op, rhs)) = split_term(part) else {
                return Err(SelectorError::FieldTerm {
                    selector: selector.to_string(),
                    term: part.to_string(),
                });
            };
            terms.push(FieldTerm {
                field: lhs.to_string(),
                op,
                value: unescape_field_value(rhs)?,
            });
        }
        Ok(FieldSelector { terms })
    }

    /// Every term as `(field, operator, unescaped value)`, so a server can reject
    /// fields it does not support.
    pub fn requirements(&self) -> impl Iterator<Item = (&str, Op, &str)> {
        self.terms
            .iter()
            .map(|t| (t.field.as_str(), t.op, t.value.as_str()))
    }

    /// Whether the selector has no terms (matches everything).
    pub fn is_empty(&self) -> bool {
        self.terms.is_empty()
    }

    /// Whether the object's field set satisfies every term. A field missing from
    /// `fields` counts as the empty string, as in Kubernetes field sets.
    pub fn matches(&self, fields: &BTreeMap<String, String>) -> bool {
        self.terms.iter().all(|t| {
            let actual = fields.get(&t.field).map_or("", String::as_str);
            match t.op {
                Op::Equals => actual == t.value,
                Op::NotEquals => actual != t.value,
            }
        })
    }

    /// The value a `field=value` (or `==`) term requires for `field`, if any
    /// (Kubernetes `RequiresExactMatch`), e.g. to find `metadata.name=X`.
    pub fn single_value(&self, field: &str) -> Option<&str> {
        self.terms
            .iter()
            .find(|t| t.field == field && t.op == Op::Equals)
            .map(|t| t.value.as_str())
    }
}

impl FromStr for FieldSelector {
    type Err = SelectorError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        FieldSelector::parse(s)
    }
}

impl fmt::Display for FieldSelector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, t) in self.terms.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            let op = match t.op {
                Op::Equals => "=",
                Op::NotEquals => "!=",
            };
            write!(f, "{}{op}{}", t.field, escape_field_value(&t.value))?;
        }
        Ok(())
    }
}

/// Escapes `\`, `,` and `=` in a field selector value (Kubernetes `fields.EscapeValue`).
pub fn escape_field_value(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if matches!(c, '\\' | ',' | '=') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// Undoes [`escape_field_value`]; unknown escapes and unescaped `,`/`=` are errors
/// (Kubernetes `fields.UnescapeValue`).
pub fn unescape_field_value(s: &str) -> Result<String, SelectorError> {
    let mut out = String::with_capacity(s.len());
    let mut in_slash = false;
    for c in s.chars() {
        if in_slash {
            match c {
                '\\' | ',' | '=' => out.push(c),
                other => return Err(SelectorError::InvalidEscape(format!("\\{other}"))),
            }
            in_slash = false;
            continue;
        }
        match c {
            '\\' => in_slash = true,
            ',' | '=' => return Err(SelectorError::UnescapedChar(c)),
            other => out.push(other),
        }
    }
    if in_slash {
        return Err(SelectorError::InvalidEscape("\\".to_string()));
    }
    Ok(out)
}

/// Splits on commas not preceded by an escaping backslash (the backslash is kept).
pub(super) fn split_terms(s: &str) -> Vec<&str> {
    if s.is_empty() {
        return Vec::new();
    }
    let mut terms = Vec::new();
    let mut start = 0;
    let mut in_slash = false;
    for (i, c) in s.char_indices() {
        if in_slash {
            in_slash = false;
        } else if c == '\\' {
            in_slash = true;
        } else if c == ',' {
            terms.push(s.get(start..i).unwrap_or(""));
            start = i + 1;
        }
    }
    terms.push(s.get(start..).unwrap_or(""));
    terms
}

/// Splits a term at the first `!=`, `==` or `=` (no escaping on the left side).
pub(super) fn split_term(term: &str) -> Option<(&str, Op, &str)> {
    for (i, _) in term.char_indices() {
        let rest = term.get(i..).unwrap_or("");
        for (tok, op) in [("!=", Op::NotEquals), ("==", Op::Equals), ("=", Op::Equals)] {
            if let Some(rhs) = rest.strip_prefix(tok) {
                return Some((term.get(..i).unwrap_or(""), op, rhs));
            }
        }
    }
    None
}
