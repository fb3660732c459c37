//! Label keys and values as upstream validates them, in its words.

use super::*;

/// Maximum length of a label value and of the name part of a label key.
pub(super) const LABEL_VALUE_MAX_LEN: usize = 63;
/// Maximum length of the optional DNS-1123 subdomain prefix of a label key.
pub(super) const DNS1123_SUBDOMAIN_MAX_LEN: usize = 253;

pub(super) const QUALIFIED_NAME_ERR_MSG: &str = "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";
pub(super) const QUALIFIED_NAME_FMT: &str = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]";
pub(super) const LABEL_VALUE_ERR_MSG: &str = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";
pub(super) const LABEL_VALUE_FMT: &str = "(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?";
pub(super) const DNS1123_SUBDOMAIN_ERR_MSG: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character";
pub(super) const DNS1123_SUBDOMAIN_FMT: &str =
    "[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*";

pub(super) fn regex_error(msg: &str, fmt_: &str, examples: &[&str]) -> String {
    let mut out = String::from(msg);
    if examples.is_empty() {
        out.push_str(" (regex used for validation is '");
        out.push_str(fmt_);
        out.push_str("')");
        return out;
    }
    out.push_str(" (e.g. ");
    for (i, e) in examples.iter().enumerate() {
        if i > 0 {
            out.push_str(" or ");
        }
        out.push('\'');
        out.push_str(e);
        out.push_str("', ");
    }
    out.push_str("regex used for validation is '");
    out.push_str(fmt_);
    out.push_str("')");
    out
}

pub(super) fn max_len_error(n: usize) -> String {
    format!("must be no more than {n} characters")
}

/// `^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$`
pub(super) fn is_qualified_name_part(s: &str) -> bool {
    let b = s.as_bytes();
    match (b.first(), b.last()) {
        (Some(f), Some(l)) => {
            f.is_ascii_alphanumeric()
                && l.is_ascii_alphanumeric()
                && b.iter()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
        }
        _ => false,
    }
}

/// `^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
pub(super) fn is_dns1123_subdomain_syntax(s: &str) -> bool {
    !s.is_empty()
        && s.split('.').all(|label| {
            let b = label.as_bytes();
            let lower_alnum = |c: &u8| c.is_ascii_lowercase() || c.is_ascii_digit();
            match (b.first(), b.last()) {
                (Some(f), Some(l)) => {
                    lower_alnum(f)
                        && lower_alnum(l)
                        && b.iter().all(|c| lower_alnum(c) || *c == b'-')
                }
                _ => false,
            }
        })
}

/// Kubernetes `validation.IsQualifiedName`: the problems with a label key, empty if valid.
pub(super) fn qualified_name_errors(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    let parts: Vec<&str> = value.split('/').collect();
    let name = match parts.as_slice() {
        [name] => *name,
        [prefix, name] => {
            if prefix.is_empty() {
                errs.push("prefix part must be non-empty".to_string());
            } else {
                if prefix.len() > DNS1123_SUBDOMAIN_MAX_LEN {
                    errs.push(format!(
                        "prefix part {}",
                        max_len_error(DNS1123_SUBDOMAIN_MAX_LEN)
                    ));
                }
                if !is_dns1123_subdomain_syntax(prefix) {
                    errs.push(format!(
                        "prefix part {}",
                        regex_error(
                            DNS1123_SUBDOMAIN_ERR_MSG,
                            DNS1123_SUBDOMAIN_FMT,
                            &["example.com"]
                        )
                    ));
                }
            }
            *name
        }
        _ => {
            errs.push(format!(
                "a qualified name {} with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')",
                regex_error(
                    QUALIFIED_NAME_ERR_MSG,
                    QUALIFIED_NAME_FMT,
                    &["MyName", "my.name", "123-abc"]
                )
            ));
            return errs;
        }
    };
    if name.is_empty() {
        errs.push("name part must be non-empty".to_string());
    } else if name.len() > LABEL_VALUE_MAX_LEN {
        errs.push(format!("name part {}", max_len_error(LABEL_VALUE_MAX_LEN)));
    }
    if !is_qualified_name_part(name) {
        errs.push(format!(
            "name part {}",
            regex_error(
                QUALIFIED_NAME_ERR_MSG,
                QUALIFIED_NAME_FMT,
                &["MyName", "my.name", "123-abc"]
            )
        ));
    }
    errs
}

/// Kubernetes `validation.IsValidLabelValue`: the problems with a label value, empty if valid.
pub(super) fn label_value_errors(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > LABEL_VALUE_MAX_LEN {
        errs.push(max_len_error(LABEL_VALUE_MAX_LEN));
    }
    if !value.is_empty() && !is_qualified_name_part(value) {
        errs.push(regex_error(
            LABEL_VALUE_ERR_MSG,
            LABEL_VALUE_FMT,
            &["MyValue", "my_value", "12345"],
        ));
    }
    errs
}

/// Whether `key` is a valid label key (`[prefix/]name`).
pub fn is_valid_label_key(key: &str) -> bool {
    qualified_name_errors(key).is_empty()
}

/// Whether `value` is a valid label value (may be empty).
pub fn is_valid_label_value(value: &str) -> bool {
    label_value_errors(value).is_empty()
}

/// A Go-`%q`-like rendering of a string for error messages.
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
