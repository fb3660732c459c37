//! A selector's requirement errors in upstream's words; the key and value checks are
//! the crate's `validation` module.

use super::*;

/// Kubernetes `validation.IsQualifiedName`: the problems with a label key, empty if valid.
pub(super) fn qualified_name_errors(value: &str) -> Vec<String> {
    crate::validation::is_qualified_name(value)
}

/// Kubernetes `validation.IsValidLabelValue`: the problems with a label value, empty if valid.
pub(super) fn label_value_errors(value: &str) -> Vec<String> {
    crate::validation::is_valid_label_value(value)
}

pub(super) fn quote(s: &str) -> String {
    format!("{s:?}")
}

pub(super) fn field_invalid(path: &str, value: &str, errs: &[String]) -> String {
    format!(
        "{path}: Invalid value: {}: {}",
        quote(value),
        errs.join("; ")
    )
}

pub(super) fn field_invalid_list(path: &str, values: &[String], detail: &str) -> String {
    let rendered: Vec<String> = values.iter().map(|v| quote(v)).collect();
    format!(
        "{path}: Invalid value: []string{{{}}}: {detail}",
        rendered.join(", ")
    )
}

/// Joins field errors like Kubernetes' `ErrorList.ToAggregate().Error()`.
pub(super) fn aggregate(errs: Vec<String>) -> Option<String> {
    let mut seen = HashSet::new();
    let mut uniq: Vec<String> = Vec::new();
    for e in errs {
        if seen.insert(e.clone()) {
            uniq.push(e);
        }
    }
    match uniq.len() {
        0 => None,
        1 => uniq.pop(),
        _ => Some(format!("[{}]", uniq.join(", "))),
    }
}

/// Go `strconv.ParseInt(s, 10, 64)`.
pub(super) fn parse_go_int(s: &str) -> Option<i64> {
    let digits = s.strip_prefix(['+', '-']).unwrap_or(s);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse::<i64>().ok()
}
