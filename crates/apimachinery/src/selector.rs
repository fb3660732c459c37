//! Label and field selectors, parsed and matched like Kubernetes
//! (`k8s.io/apimachinery/pkg/labels` and `k8s.io/apimachinery/pkg/fields`).
//!
//! * [`LabelSelector`] parses the query-string syntax of `labels.Parse`
//!   (`a=b`, `a==b`, `a!=b`, `a in (x,y)`, `a notin (x)`, `a`, `!a`, `a>1`, `a<1`, comma = AND)
//!   and converts a `metav1.LabelSelector` JSON object ([`LabelSelector::from_label_selector_json`]).
//! * [`FieldSelector`] parses the `fields.ParseSelector` syntax (`k=v`, `k==v`, `k!=v`,
//!   comma = AND, `\,` `\=` `\\` escapes in values).
//!
//! Nothing here panics, whatever the input.

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::fmt;
use std::str::FromStr;

use serde_json::Value;

/// Maximum length of a label value and of the name part of a label key.
const LABEL_VALUE_MAX_LEN: usize = 63;
/// Maximum length of the optional DNS-1123 subdomain prefix of a label key.
const DNS1123_SUBDOMAIN_MAX_LEN: usize = 253;

const QUALIFIED_NAME_ERR_MSG: &str = "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";
const QUALIFIED_NAME_FMT: &str = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]";
const LABEL_VALUE_ERR_MSG: &str = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";
const LABEL_VALUE_FMT: &str = "(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?";
const DNS1123_SUBDOMAIN_ERR_MSG: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character";
const DNS1123_SUBDOMAIN_FMT: &str =
    "[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*";

/// Errors from parsing or building label and field selectors.
///
/// The messages follow the Kubernetes wording so clients see familiar errors.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SelectorError {
    /// A requirement of a label selector could not be parsed or is invalid
    /// (bad key, bad value, wrong operator or value count).
    #[error("unable to parse requirement: {0}")]
    Requirement(String),
    /// The label selector string is malformed between requirements.
    #[error("{0}")]
    Syntax(String),
    /// A requirement built directly (not parsed) is invalid.
    #[error("{0}")]
    InvalidRequirement(String),
    /// A `metav1.LabelSelector` JSON object is malformed.
    #[error("invalid label selector at {path}: {message}")]
    LabelSelectorJson {
        /// Where in the JSON object the problem is (e.g. `matchExpressions[0].operator`).
        path: String,
        /// What is wrong there.
        message: String,
    },
    /// A field selector term has no `=`, `==` or `!=` operator.
    #[error("invalid selector: '{selector}'; can't understand '{term}'")]
    FieldTerm {
        /// The whole selector.
        selector: String,
        /// The term that failed.
        term: String,
    },
    /// A field selector value has an unknown backslash escape (or ends in a lone backslash).
    #[error("invalid field selector: invalid escape sequence: {0}")]
    InvalidEscape(String),
    /// A field selector value contains an unescaped `,` or `=`.
    #[error("invalid field selector: unescaped character in value: {0:?}")]
    UnescapedChar(char),
}

// ---------------------------------------------------------------------------
// Validation (k8s.io/apimachinery/pkg/util/validation)
// ---------------------------------------------------------------------------

fn regex_error(msg: &str, fmt_: &str, examples: &[&str]) -> String {
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

fn max_len_error(n: usize) -> String {
    format!("must be no more than {n} characters")
}

/// `^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$`
fn is_qualified_name_part(s: &str) -> bool {
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
fn is_dns1123_subdomain_syntax(s: &str) -> bool {
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
fn qualified_name_errors(value: &str) -> Vec<String> {
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
fn label_value_errors(value: &str) -> Vec<String> {
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
fn quote(s: &str) -> String {
    format!("{s:?}")
}

fn field_invalid(path: &str, value: &str, errs: &[String]) -> String {
    format!(
        "{path}: Invalid value: {}: {}",
        quote(value),
        errs.join("; ")
    )
}

fn field_invalid_list(path: &str, values: &[String], detail: &str) -> String {
    let rendered: Vec<String> = values.iter().map(|v| quote(v)).collect();
    format!(
        "{path}: Invalid value: []string{{{}}}: {detail}",
        rendered.join(", ")
    )
}

/// Joins field errors like Kubernetes' `ErrorList.ToAggregate().Error()`.
fn aggregate(errs: Vec<String>) -> Option<String> {
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
fn parse_go_int(s: &str) -> Option<i64> {
    let digits = s.strip_prefix(['+', '-']).unwrap_or(s);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse::<i64>().ok()
}

// ---------------------------------------------------------------------------
// Label selector
// ---------------------------------------------------------------------------

/// The operator of one label selector requirement.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Operator {
    /// `key=value`
    Equals,
    /// `key==value`
    DoubleEquals,
    /// `key!=value` (also true when the label is absent)
    NotEquals,
    /// `key in (v1,v2)`
    In,
    /// `key notin (v1,v2)` (also true when the label is absent)
    NotIn,
    /// `key`
    Exists,
    /// `!key`
    DoesNotExist,
    /// `key>N` (integer comparison; false if absent or not an integer)
    GreaterThan,
    /// `key<N` (integer comparison; false if absent or not an integer)
    LessThan,
}

impl Operator {
    fn as_str(self) -> &'static str {
        match self {
            Operator::Equals => "=",
            Operator::DoubleEquals => "==",
            Operator::NotEquals => "!=",
            Operator::In => "in",
            Operator::NotIn => "notin",
            Operator::Exists => "exists",
            Operator::DoesNotExist => "!",
            Operator::GreaterThan => "gt",
            Operator::LessThan => "lt",
        }
    }
}

impl fmt::Display for Operator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One requirement of a label selector: a key, an operator and its values.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Requirement {
    key: String,
    operator: Operator,
    values: Vec<String>,
}

impl Requirement {
    /// Builds and validates a requirement like Kubernetes `labels.NewRequirement`:
    /// the key must be a valid label key, every value a valid label value,
    /// `in`/`notin` need at least one value, `=`/`==`/`!=`/`>`/`<` exactly one
    /// (an integer for `>`/`<`), and `exists`/`!` none.
    pub fn new(
        key: impl Into<String>,
        operator: Operator,
        values: Vec<String>,
    ) -> Result<Self, SelectorError> {
        let key = key.into();
        match Self::validate(&key, operator, &values) {
            Some(msg) => Err(SelectorError::InvalidRequirement(msg)),
            None => Ok(Requirement {
                key,
                operator,
                values,
            }),
        }
    }

    fn validate(key: &str, operator: Operator, values: &[String]) -> Option<String> {
        let mut errs = Vec::new();
        let key_errs = qualified_name_errors(key);
        if !key_errs.is_empty() {
            errs.push(field_invalid("key", key, &key_errs));
        }
        match operator {
            Operator::In | Operator::NotIn => {
                if values.is_empty() {
                    errs.push(field_invalid_list(
                        "values",
                        values,
                        "for 'in', 'notin' operators, values set can't be empty",
                    ));
                }
            }
            Operator::Equals | Operator::DoubleEquals | Operator::NotEquals => {
                if values.len() != 1 {
                    errs.push(field_invalid_list(
                        "values",
                        values,
                        "exact-match compatibility requires one single value",
                    ));
                }
            }
            Operator::Exists | Operator::DoesNotExist => {
                if !values.is_empty() {
                    errs.push(field_invalid_list(
                        "values",
                        values,
                        "values set must be empty for exists and does not exist",
                    ));
                }
            }
            Operator::GreaterThan | Operator::LessThan => {
                if values.len() != 1 {
                    errs.push(field_invalid_list(
                        "values",
                        values,
                        "for 'Gt', 'Lt' operators, exactly one value is required",
                    ));
                }
                for (i, v) in values.iter().enumerate() {
                    if parse_go_int(v).is_none() {
                        errs.push(field_invalid(
                            &format!("values[{i}]"),
                            v,
                            &[
                                "for 'Gt', 'Lt' operators, the value must be an integer"
                                    .to_string(),
                            ],
                        ));
                    }
                }
            }
        }
        for (i, v) in values.iter().enumerate() {
            let v_errs = label_value_errors(v);
            if !v_errs.is_empty() {
                errs.push(field_invalid(&format!("values[{i}][{key}]"), v, &v_errs));
            }
        }
        aggregate(errs)
    }

    /// The label key.
    pub fn key(&self) -> &str {
        &self.key
    }

    /// The operator.
    pub fn operator(&self) -> Operator {
        self.operator
    }

    /// The values (sorted and de-duplicated when parsed from a string).
    pub fn values(&self) -> &[String] {
        &self.values
    }

    /// Whether the labels satisfy this requirement (Kubernetes `Requirement.Matches`).
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        let has = |v: &str| self.values.iter().any(|x| x == v);
        match self.operator {
            Operator::In | Operator::Equals | Operator::DoubleEquals => {
                labels.get(&self.key).is_some_and(|v| has(v))
            }
            Operator::NotIn | Operator::NotEquals => labels.get(&self.key).is_none_or(|v| !has(v)),
            Operator::Exists => labels.contains_key(&self.key),
            Operator::DoesNotExist => !labels.contains_key(&self.key),
            Operator::GreaterThan | Operator::LessThan => {
                let Some(label) = labels.get(&self.key).and_then(|v| parse_go_int(v)) else {
                    return false;
                };
                let [want] = self.values.as_slice() else {
                    return false;
                };
                let Some(want) = parse_go_int(want) else {
                    return false;
                };
                if self.operator == Operator::GreaterThan {
                    label > want
                } else {
                    label < want
                }
            }
        }
    }
}

impl fmt::Display for Requirement {
    /// Renders like Kubernetes `Requirement.String()` (values sorted).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.operator == Operator::DoesNotExist {
            f.write_str("!")?;
        }
        f.write_str(&self.key)?;
        let op = match self.operator {
            Operator::Exists | Operator::DoesNotExist => return Ok(()),
            Operator::Equals => "=",
            Operator::DoubleEquals => "==",
            Operator::NotEquals => "!=",
            Operator::In => " in ",
            Operator::NotIn => " notin ",
            Operator::GreaterThan => ">",
            Operator::LessThan => "<",
        };
        f.write_str(op)?;
        let set = matches!(self.operator, Operator::In | Operator::NotIn);
        if set {
            f.write_str("(")?;
        }
        let mut values: Vec<&str> = self.values.iter().map(String::as_str).collect();
        values.sort_unstable();
        f.write_str(&values.join(","))?;
        if set {
            f.write_str(")")?;
        }
        Ok(())
    }
}

/// A parsed label selector: the AND of its [`Requirement`]s.
///
/// The empty selector (`""`, or `LabelSelector::default()`) matches everything;
/// [`LabelSelector::nothing`] matches nothing (what a `null` `metav1.LabelSelector` means).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct LabelSelector {
    requirements: Vec<Requirement>,
    nothing: bool,
}

impl LabelSelector {
    /// A selector that matches every label set.
    pub fn everything() -> Self {
        Self::default()
    }

    /// A selector that matches no label set (Kubernetes `labels.Nothing()`).
    pub fn nothing() -> Self {
        LabelSelector {
            requirements: Vec::new(),
            nothing: true,
        }
    }

    /// Parses the string form, exactly like Kubernetes `labels.Parse`.
    pub fn parse(s: &str) -> Result<Self, SelectorError> {
        let mut requirements = Parser::new(s).parse()?;
        requirements.sort_by(|a, b| a.key.cmp(&b.key));
        Ok(LabelSelector {
            requirements,
            nothing: false,
        })
    }

    /// Builds a selector from requirements (sorted by key, like Kubernetes).
    pub fn from_requirements(mut requirements: Vec<Requirement>) -> Self {
        requirements.sort_by(|a, b| a.key.cmp(&b.key));
        LabelSelector {
            requirements,
            nothing: false,
        }
    }

    /// Converts a `metav1.LabelSelector` JSON object (`matchLabels`, `matchExpressions`
    /// with operators `In`, `NotIn`, `Exists`, `DoesNotExist`), like Kubernetes
    /// `metav1.LabelSelectorAsSelector`.
    ///
    /// An empty object (`{}`, or no labels and no expressions) matches **everything**;
    /// `null` matches **nothing** ([`LabelSelector::nothing`]). A caller holding an
    /// `Option<&Value>` for an absent field should decide which of the two it means:
    /// `opt.map_or(Ok(LabelSelector::nothing()), LabelSelector::from_label_selector_json)`
    /// for "a missing selector selects nothing" (as Kubernetes does for a nil pointer).
    pub fn from_label_selector_json(v: &Value) -> Result<LabelSelector, SelectorError> {
        let json_err = |path: &str, message: String| SelectorError::LabelSelectorJson {
            path: path.to_string(),
            message,
        };
        let obj = match v {
            Value::Null => return Ok(LabelSelector::nothing()),
            Value::Object(o) => o,
            other => {
                return Err(json_err(
                    "<root>",
                    format!("expected an object, got {}", type_name(other)),
                ))
            }
        };
        let mut requirements = Vec::new();
        match obj.get("matchLabels") {
            None | Some(Value::Null) => {}
            Some(Value::Object(labels)) => {
                for (k, val) in labels {
                    let Value::String(val) = val else {
                        return Err(json_err(
                            &format!("matchLabels[{k}]"),
                            format!("expected a string, got {}", type_name(val)),
                        ));
                    };
                    requirements.push(Requirement::new(
                        k.clone(),
                        Operator::Equals,
                        vec![val.clone()],
                    )?);
                }
            }
            Some(other) => {
                return Err(json_err(
                    "matchLabels",
                    format!("expected an object, got {}", type_name(other)),
                ))
            }
        }
        match obj.get("matchExpressions") {
            None | Some(Value::Null) => {}
            Some(Value::Array(exprs)) => {
                for (i, expr) in exprs.iter().enumerate() {
                    let path = format!("matchExpressions[{i}]");
                    let Value::Object(expr) = expr else {
                        return Err(json_err(
                            &path,
                            format!("expected an object, got {}", type_name(expr)),
                        ));
                    };
                    let key = match expr.get("key") {
                        Some(Value::String(k)) => k.clone(),
                        None | Some(Value::Null) => String::new(),
                        Some(other) => {
                            return Err(json_err(
                                &format!("{path}.key"),
                                format!("expected a string, got {}", type_name(other)),
                            ))
                        }
                    };
                    let op_str = match expr.get("operator") {
                        Some(Value::String(o)) => o.as_str(),
                        None | Some(Value::Null) => "",
                        Some(other) => {
                            return Err(json_err(
                                &format!("{path}.operator"),
                                format!("expected a string, got {}", type_name(other)),
                            ))
                        }
                    };
                    let op = match op_str {
                        "In" => Operator::In,
                        "NotIn" => Operator::NotIn,
                        "Exists" => Operator::Exists,
                        "DoesNotExist" => Operator::DoesNotExist,
                        other => {
                            return Err(json_err(
                                &format!("{path}.operator"),
                                format!("{other:?} is not a valid label selector operator"),
                            ))
                        }
                    };
                    let mut values = Vec::new();
                    match expr.get("values") {
                        None | Some(Value::Null) => {}
                        Some(Value::Array(vals)) => {
                            for (j, val) in vals.iter().enumerate() {
                                let Value::String(val) = val else {
                                    return Err(json_err(
                                        &format!("{path}.values[{j}]"),
                                        format!("expected a string, got {}", type_name(val)),
                                    ));
                                };
                                values.push(val.clone());
                            }
                        }
                        Some(other) => {
                            return Err(json_err(
                                &format!("{path}.values"),
                                format!("expected an array, got {}", type_name(other)),
                            ))
                        }
                    }
                    requirements.push(Requirement::new(key, op, values)?);
                }
            }
            Some(other) => {
                return Err(json_err(
                    "matchExpressions",
                    format!("expected an array, got {}", type_name(other)),
                ))
            }
        }
        Ok(LabelSelector::from_requirements(requirements))
    }

    /// The requirements, sorted by key.
    pub fn requirements(&self) -> &[Requirement] {
        &self.requirements
    }

    /// Whether this selector restricts nothing (matches every label set).
    /// [`LabelSelector::nothing`] is not empty.
    pub fn is_empty(&self) -> bool {
        !self.nothing && self.requirements.is_empty()
    }

    /// Whether this is [`LabelSelector::nothing`].
    pub fn is_nothing(&self) -> bool {
        self.nothing
    }

    /// Whether the labels satisfy every requirement.
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        !self.nothing && self.requirements.iter().all(|r| r.matches(labels))
    }

    /// If the selector requires `label` to have one exact value (`=`, `==` or a
    /// one-value `in`), that value (Kubernetes `RequiresExactMatch`).
    pub fn requires_exact_match(&self, label: &str) -> Option<&str> {
        let r = self.requirements.iter().find(|r| r.key == label)?;
        match (r.operator, r.values.as_slice()) {
            (Operator::Equals | Operator::DoubleEquals | Operator::In, [v]) => Some(v),
            _ => None,
        }
    }
}

impl FromStr for LabelSelector {
    type Err = SelectorError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        LabelSelector::parse(s)
    }
}

impl fmt::Display for LabelSelector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, r) in self.requirements.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{r}")?;
        }
        Ok(())
    }
}

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// Converts a `metav1.LabelSelector` JSON object; see
/// [`LabelSelector::from_label_selector_json`] (`{}` matches everything, `null` nothing).
pub fn from_label_selector_json(v: &Value) -> Result<LabelSelector, SelectorError> {
    LabelSelector::from_label_selector_json(v)
}

// --- lexer, a byte-for-byte port of the Kubernetes one -------------------------

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Token {
    EndOfString,
    ClosedPar,
    Comma,
    DoesNotExist,
    DoubleEquals,
    Equals,
    GreaterThan,
    Identifier,
    In,
    LessThan,
    NotEquals,
    NotIn,
    OpenPar,
}

fn literal_token(s: &str) -> Option<Token> {
    Some(match s {
        ")" => Token::ClosedPar,
        "," => Token::Comma,
        "!" => Token::DoesNotExist,
        "==" => Token::DoubleEquals,
        "=" => Token::Equals,
        ">" => Token::GreaterThan,
        "in" => Token::In,
        "<" => Token::LessThan,
        "!=" => Token::NotEquals,
        "notin" => Token::NotIn,
        "(" => Token::OpenPar,
        _ => return None,
    })
}

fn is_whitespace(ch: u8) -> bool {
    matches!(ch, b' ' | b'\t' | b'\r' | b'\n')
}

fn is_special_symbol(ch: u8) -> bool {
    matches!(ch, b'=' | b'!' | b'(' | b')' | b',' | b'>' | b'<')
}

struct Lexer<'a> {
    s: &'a str,
    pos: usize,
}

impl<'a> Lexer<'a> {
    /// The next byte, or 0 at the end (a NUL byte in the input also reads as 0, as in Go).
    fn read(&mut self) -> u8 {
        match self.s.as_bytes().get(self.pos) {
            Some(&b) => {
                self.pos += 1;
                b
            }
            None => 0,
        }
    }

    fn unread(&mut self) {
        self.pos = self.pos.saturating_sub(1);
    }

    fn text(&self, start: usize, end: usize) -> &'a str {
        self.s.get(start..end).unwrap_or("")
    }

    fn scan_id_or_keyword(&mut self) -> (Token, &'a str) {
        let start = self.pos;
        let mut end;
        loop {
            end = self.pos;
            let ch = self.read();
            if ch == 0 {
                break;
            }
            if is_special_symbol(ch) || is_whitespace(ch) {
                self.unread();
                break;
            }
        }
        let lit = self.text(start, end);
        match literal_token(lit) {
            Some(t) => (t, lit),
            None => (Token::Identifier, lit),
        }
    }

    fn scan_special_symbol(&mut self) -> (Token, &'a str) {
        let start = self.pos;
        let mut last: Option<(Token, &'a str)> = None;
        loop {
            let ch = self.read();
            if ch == 0 {
                break;
            }
            if !is_special_symbol(ch) {
                self.unread();
                break;
            }
            let buf = self.text(start, self.pos);
            if let Some(t) = literal_token(buf) {
                last = Some((t, buf));
            } else if last.is_some() {
                self.unread();
                break;
            }
        }
        // Every special symbol is a token on its own, so `last` is always set here.
        last.unwrap_or((Token::EndOfString, ""))
    }

    fn lex(&mut self) -> (Token, &'a str) {
        let mut ch = self.read();
        while is_whitespace(ch) {
            ch = self.read();
        }
        if ch == 0 {
            return (Token::EndOfString, "");
        }
        self.unread();
        if is_special_symbol(ch) {
            self.scan_special_symbol()
        } else {
            self.scan_id_or_keyword()
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Context {
    KeyAndOperator,
    Values,
}

struct Parser<'a> {
    items: Vec<(Token, &'a str)>,
    position: usize,
}

impl<'a> Parser<'a> {
    fn new(s: &'a str) -> Self {
        let mut lexer = Lexer { s, pos: 0 };
        let mut items = Vec::new();
        loop {
            let item = lexer.lex();
            items.push(item);
            if item.0 == Token::EndOfString {
                break;
            }
        }
        Parser { items, position: 0 }
    }

    fn item(&self, pos: usize, ctx: Context) -> (Token, &'a str) {
        let (tok, lit) = self
            .items
            .get(pos)
            .copied()
            .unwrap_or((Token::EndOfString, ""));
        if ctx == Context::Values && matches!(tok, Token::In | Token::NotIn) {
            return (Token::Identifier, lit);
        }
        (tok, lit)
    }

    fn lookahead(&self, ctx: Context) -> (Token, &'a str) {
        self.item(self.position, ctx)
    }

    fn consume(&mut self, ctx: Context) -> (Token, &'a str) {
        let it = self.item(self.position, ctx);
        if self.position < self.items.len() {
            self.position += 1;
        }
        it
    }

    fn parse(&mut self) -> Result<Vec<Requirement>, SelectorError> {
        let mut requirements = Vec::new();
        loop {
            let (tok, lit) = self.lookahead(Context::Values);
            match tok {
                Token::Identifier | Token::DoesNotExist => {
                    let r = self
                        .parse_requirement()
                        .map_err(SelectorError::Requirement)?;
                    requirements.push(r);
                    let (t, l) = self.consume(Context::Values);
                    match t {
                        Token::EndOfString => return Ok(requirements),
                        Token::Comma => {
                            let (t2, l2) = self.lookahead(Context::Values);
                            if t2 != Token::Identifier && t2 != Token::DoesNotExist {
                                return Err(SelectorError::Syntax(format!(
                                    "found '{l2}', expected: identifier after ','"
                                )));
                            }
                        }
                        _ => {
                            return Err(SelectorError::Syntax(format!(
                                "found '{l}', expected: ',' or 'end of string'"
                            )))
                        }
                    }
                }
                Token::EndOfString => return Ok(requirements),
                _ => {
                    return Err(SelectorError::Syntax(format!(
                        "found '{lit}', expected: !, identifier, or 'end of string'"
                    )))
                }
            }
        }
    }

    fn parse_requirement(&mut self) -> Result<Requirement, String> {
        let (key, op) = self.parse_key_and_infer_operator()?;
        if let Some(op @ (Operator::Exists | Operator::DoesNotExist)) = op {
            return build_requirement(key, op, Vec::new());
        }
        let op = self.parse_operator()?;
        let values = match op {
            Operator::In | Operator::NotIn => self.parse_values()?,
            _ => self.parse_exact_value()?,
        };
        build_requirement(key, op, values)
    }

    fn parse_key_and_infer_operator(&mut self) -> Result<(&'a str, Option<Operator>), String> {
        let mut op = None;
        let (mut tok, mut lit) = self.consume(Context::Values);
        if tok == Token::DoesNotExist {
            op = Some(Operator::DoesNotExist);
            (tok, lit) = self.consume(Context::Values);
        }
        if tok != Token::Identifier {
            return Err(format!("found '{lit}', expected: identifier"));
        }
        let errs = qualified_name_errors(lit);
        if !errs.is_empty() {
            return Err(field_invalid("<nil>", lit, &errs));
        }
        let (t, _) = self.lookahead(Context::Values);
        if (t == Token::EndOfString || t == Token::Comma) && op != Some(Operator::DoesNotExist) {
            op = Some(Operator::Exists);
        }
        Ok((lit, op))
    }

    fn parse_operator(&mut self) -> Result<Operator, String> {
        let (tok, lit) = self.consume(Context::KeyAndOperator);
        Ok(match tok {
            Token::In => Operator::In,
            Token::Equals => Operator::Equals,
            Token::DoubleEquals => Operator::DoubleEquals,
            Token::GreaterThan => Operator::GreaterThan,
            Token::LessThan => Operator::LessThan,
            Token::NotIn => Operator::NotIn,
            Token::NotEquals => Operator::NotEquals,
            _ => {
                return Err(format!(
                    "found '{lit}', expected: in, notin, =, ==, !=, gt, lt"
                ))
            }
        })
    }

    fn parse_values(&mut self) -> Result<Vec<String>, String> {
        let (tok, lit) = self.consume(Context::Values);
        if tok != Token::OpenPar {
            return Err(format!("found '{lit}' expected: '('"));
        }
        let (tok, lit) = self.lookahead(Context::Values);
        match tok {
            Token::Identifier | Token::Comma => {
                let set = self.parse_identifiers_list()?;
                let (tok, _) = self.consume(Context::Values);
                if tok != Token::ClosedPar {
                    return Err(format!("found '{lit}', expected: ')'"));
                }
                Ok(set)
            }
            Token::ClosedPar => {
                self.consume(Context::Values);
                Ok(vec![String::new()])
            }
            _ => Err(format!("found '{lit}', expected: ',', ')' or identifier")),
        }
    }

    /// A (possibly empty) list of comma-separated (possibly empty) identifiers,
    /// returned sorted and de-duplicated like a Go `sets.String`.
    fn parse_identifiers_list(&mut self) -> Result<Vec<String>, String> {
        let mut set: BTreeSet<String> = BTreeSet::new();
        fn insert(set: &mut BTreeSet<String>, v: &str) {
            if !set.contains(v) {
                set.insert(v.to_string());
            }
        }
        loop {
            let (tok, lit) = self.consume(Context::Values);
            match tok {
                Token::Identifier => {
                    insert(&mut set, lit);
                    let (tok2, lit2) = self.lookahead(Context::Values);
                    match tok2 {
                        Token::Comma => continue,
                        Token::ClosedPar => return Ok(set.into_iter().collect()),
                        _ => return Err(format!("found '{lit2}', expected: ',' or ')'")),
                    }
                }
                Token::Comma => {
                    if set.is_empty() {
                        insert(&mut set, "");
                    }
                    let (tok2, _) = self.lookahead(Context::Values);
                    if tok2 == Token::ClosedPar {
                        insert(&mut set, "");
                        return Ok(set.into_iter().collect());
                    }
                    if tok2 == Token::Comma {
                        self.consume(Context::Values);
                        insert(&mut set, "");
                    }
                }
                _ => return Err(format!("found '{lit}', expected: ',', or identifier")),
            }
        }
    }

    fn parse_exact_value(&mut self) -> Result<Vec<String>, String> {
        let (tok, _) = self.lookahead(Context::Values);
        if tok == Token::EndOfString || tok == Token::Comma {
            return Ok(vec![String::new()]);
        }
        let (tok, lit) = self.consume(Context::Values);
        if tok == Token::Identifier {
            return Ok(vec![lit.to_string()]);
        }
        Err(format!("found '{lit}', expected: identifier"))
    }
}

fn build_requirement(key: &str, op: Operator, values: Vec<String>) -> Result<Requirement, String> {
    match Requirement::validate(key, op, &values) {
        Some(msg) => Err(msg),
        None => Ok(Requirement {
            key: key.to_string(),
            operator: op,
            values,
        }),
    }
}

// ---------------------------------------------------------------------------
// Field selector
// ---------------------------------------------------------------------------

/// The operator of a field selector term.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Op {
    /// `field=value` or `field==value`
    Equals,
    /// `field!=value`
    NotEquals,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct FieldTerm {
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
fn split_terms(s: &str) -> Vec<&str> {
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
fn split_term(term: &str) -> Option<(&str, Op, &str)> {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn sel(s: &str) -> LabelSelector {
        LabelSelector::parse(s).unwrap_or_else(|e| panic!("parse {s:?}: {e}"))
    }

    #[test]
    fn parses_all_operators() {
        let cases = [
            ("x=a", "x=a"),
            ("x==a", "x==a"),
            ("x!=a", "x!=a"),
            ("x in (a,b)", "x in (a,b)"),
            ("x notin (b,a)", "x notin (a,b)"),
            ("x", "x"),
            ("!x", "!x"),
            ("x>1", "x>1"),
            ("x<10", "x<10"),
            ("  x = a ,  y  ", "x=a,y"),
            ("\tx\n=\ra", "x=a"),
            ("z=1,a=2", "a=2,z=1"),
            ("x=", "x="),
            ("x=,y=b", "x=,y=b"),
            ("x in (in)", "x in (in)"),
            ("x in (notin,in)", "x in (in,notin)"),
            ("x in (a,,b)", "x in (,a,b)"),
            ("x in ()", "x in ()"),
            ("x in (,)", "x in ()"),
            ("x in (a,)", "x in (,a)"),
            ("example.com/app=web", "example.com/app=web"),
            (
                "x in (foo,,baz),y,z notin ()",
                "x in (,baz,foo),y,z notin ()",
            ),
            ("", ""),
            ("   ", ""),
        ];
        for (input, want) in cases {
            assert_eq!(sel(input).to_string(), want, "input {input:?}");
        }
    }

    #[test]
    fn operators_are_recognised() {
        let s = sel("a=1,b==2,c!=3,d in (4),e notin (5),f,!g,h>6,i<7");
        let ops: Vec<Operator> = s.requirements().iter().map(|r| r.operator()).collect();
        assert_eq!(
            ops,
            vec![
                Operator::Equals,
                Operator::DoubleEquals,
                Operator::NotEquals,
                Operator::In,
                Operator::NotIn,
                Operator::Exists,
                Operator::DoesNotExist,
                Operator::GreaterThan,
                Operator::LessThan
            ]
        );
        assert_eq!(s.requirements()[3].values(), ["4".to_string()]);
    }

    #[test]
    fn matching() {
        let l = labels(&[("app", "web"), ("tier", "front"), ("n", "5")]);
        let yes = [
            "",
            "app=web",
            "app==web",
            "app!=db",
            "missing!=x",
            "app in (db,web)",
            "app notin (db)",
            "missing notin (db)",
            "app",
            "!missing",
            "n>4",
            "n<6",
            "app=web,tier=front",
        ];
        let no = [
            "app=db",
            "missing=x",
            "app!=web",
            "app in (db)",
            "missing in (db)",
            "app notin (web)",
            "missing",
            "!app",
            "n>5",
            "n<5",
            "app>1",
            "missing>1",
            "app=web,tier=back",
            "missing=",
        ];
        for s in yes {
            assert!(sel(s).matches(&l), "{s:?} should match");
        }
        for s in no {
            assert!(!sel(s).matches(&l), "{s:?} should not match");
        }
        assert!(sel("x=").matches(&labels(&[("x", "")])));
    }

    #[test]
    fn is_empty_and_nothing() {
        assert!(sel("").is_empty());
        assert!(!sel("a").is_empty());
        assert!(LabelSelector::everything().matches(&labels(&[])));
        let nothing = LabelSelector::nothing();
        assert!(!nothing.is_empty());
        assert!(!nothing.matches(&labels(&[])));
        assert!(!nothing.matches(&labels(&[("a", "b")])));
    }

    #[test]
    fn requires_exact_match() {
        let s = sel("a=1,b in (2),c in (3,4),d!=5");
        assert_eq!(s.requires_exact_match("a"), Some("1"));
        assert_eq!(s.requires_exact_match("b"), Some("2"));
        assert_eq!(s.requires_exact_match("c"), None);
        assert_eq!(s.requires_exact_match("d"), None);
        assert_eq!(s.requires_exact_match("e"), None);
    }

    #[test]
    fn syntax_errors() {
        let cases = [
            ("x=a,", "found '', expected: identifier after ','"),
            (
                ",x=a",
                "found ',', expected: !, identifier, or 'end of string'",
            ),
            ("x=a b", "found 'b', expected: ',' or 'end of string'"),
            (
                "x in a",
                "unable to parse requirement: found 'a' expected: '('",
            ),
            (
                "x (a)",
                "unable to parse requirement: found '(', expected: in, notin, =, ==, !=, gt, lt",
            ),
            (
                "x in (a b)",
                "unable to parse requirement: found 'b', expected: ',' or ')'",
            ),
            (
                "x in (a",
                "unable to parse requirement: found '', expected: ',' or ')'",
            ),
            (
                "x=(a)",
                "unable to parse requirement: found '(', expected: identifier",
            ),
            (
                "!=a",
                "found '!=', expected: !, identifier, or 'end of string'",
            ),
            (
                "!",
                "unable to parse requirement: found '', expected: identifier",
            ),
            ("!x=a", "found '=', expected: ',' or 'end of string'"),
            (
                "x in (=)",
                "unable to parse requirement: found '=', expected: ',', ')' or identifier",
            ),
        ];
        for (input, want) in cases {
            let err = LabelSelector::parse(input).expect_err(input);
            assert_eq!(err.to_string(), want, "input {input:?}");
        }
    }

    #[test]
    fn key_and_value_validation_errors() {
        let err = LabelSelector::parse("a b=c").expect_err("space");
        assert_eq!(
            err.to_string(),
            "unable to parse requirement: found 'b', expected: in, notin, =, ==, !=, gt, lt"
        );

        let err = LabelSelector::parse("-bad=c").expect_err("bad key");
        let msg = err.to_string();
        assert!(msg.starts_with("unable to parse requirement: <nil>: Invalid value: \"-bad\": name part must consist of alphanumeric characters"), "{msg}");

        let long = "k".repeat(64);
        let msg = LabelSelector::parse(&long).expect_err("long").to_string();
        assert!(
            msg.contains("name part must be no more than 63 characters"),
            "{msg}"
        );
        assert!(LabelSelector::parse(&"k".repeat(63)).is_ok());

        let msg = LabelSelector::parse("Example.com/a")
            .expect_err("prefix")
            .to_string();
        assert!(
            msg.contains("prefix part a lowercase RFC 1123 subdomain"),
            "{msg}"
        );
        let msg = LabelSelector::parse("/a")
            .expect_err("empty prefix")
            .to_string();
        assert!(msg.contains("prefix part must be non-empty"), "{msg}");
        let msg = LabelSelector::parse("a/b/c")
            .expect_err("two slashes")
            .to_string();
        assert!(msg.contains("a qualified name must consist of"), "{msg}");
        let msg = LabelSelector::parse("a/")
            .expect_err("empty name")
            .to_string();
        assert!(msg.contains("name part must be non-empty"), "{msg}");

        let msg = LabelSelector::parse("a=-x")
            .expect_err("bad value")
            .to_string();
        assert_eq!(
            msg,
            "unable to parse requirement: values[0][a]: Invalid value: \"-x\": a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"
        );
        let msg = LabelSelector::parse(&format!("a={}", "v".repeat(64)))
            .expect_err("long value")
            .to_string();
        assert!(msg.contains("must be no more than 63 characters"), "{msg}");
        let msg = LabelSelector::parse("a in (ok,b@d)")
            .expect_err("bad in value")
            .to_string();
        assert!(
            msg.contains("values[0][a]: Invalid value: \"b@d\""),
            "{msg}"
        );

        let msg = LabelSelector::parse("a>b")
            .expect_err("gt non-int")
            .to_string();
        assert!(
            msg.contains("for 'Gt', 'Lt' operators, the value must be an integer"),
            "{msg}"
        );
        let msg = LabelSelector::parse("a>")
            .expect_err("gt empty")
            .to_string();
        assert!(msg.contains("the value must be an integer"), "{msg}");
        assert!(LabelSelector::parse("key.with-dash.ok/Na.me_1=V-al.u_e").is_ok());
        // Underscores and capitals are fine in the name, not in the DNS prefix.
        assert!(LabelSelector::parse("under_score.io/a").is_err());
        assert!(LabelSelector::parse(&format!("{}/a", "p".repeat(254))).is_err());
        assert!(LabelSelector::parse(&format!("{}/a", "p".repeat(253))).is_ok());
        assert!(LabelSelector::parse("é=a").is_err());
    }

    #[test]
    fn nul_byte_ends_input_like_go() {
        // Kubernetes reads a NUL as end of input where a token starts, and as a
        // (consumed) terminator inside a token.
        assert_eq!(sel("a \0,b=c").to_string(), "a");
        assert_eq!(sel("\0garbage!").to_string(), "");
        assert_eq!(sel("a\0,b=c").to_string(), "a,b=c");
        assert_eq!(sel("a,\0b").to_string(), "a,b");
        assert!(LabelSelector::parse("a, \0b").is_err());
    }

    #[test]
    fn gt_lt_integer_semantics() {
        let l = labels(&[("n", "-3"), ("m", "notanint")]);
        assert!(sel("n<0").matches(&l));
        assert!(!sel("n>0").matches(&l));
        assert!(!sel("m>0").matches(&l));
        assert!(!sel("m<0").matches(&l));
        let big = labels(&[("n", "99999999999999999999")]);
        assert!(
            !sel("n>1").matches(&big),
            "overflowing label value is not an integer"
        );
    }

    #[test]
    fn metav1_label_selector_json() {
        let v = serde_json::json!({
            "matchLabels": {"app": "web"},
            "matchExpressions": [
                {"key": "tier", "operator": "In", "values": ["front", "edge"]},
                {"key": "env", "operator": "NotIn", "values": ["prod"]},
                {"key": "team", "operator": "Exists"},
                {"key": "legacy", "operator": "DoesNotExist", "values": []}
            ]
        });
        let s = LabelSelector::from_label_selector_json(&v).expect("valid");
        assert_eq!(
            s.to_string(),
            "app=web,env notin (prod),!legacy,team,tier in (edge,front)"
        );
        assert!(s.matches(&labels(&[("app", "web"), ("tier", "edge"), ("team", "x")])));
        assert!(!s.matches(&labels(&[("app", "web"), ("tier", "edge")])));
        assert!(!s.matches(&labels(&[
            ("app", "web"),
            ("tier", "edge"),
            ("team", "x"),
            ("env", "prod")
        ])));

        let empty = LabelSelector::from_label_selector_json(&serde_json::json!({})).expect("{}");
        assert!(empty.is_empty());
        assert!(empty.matches(&labels(&[("any", "thing")])));
        let empty2 = LabelSelector::from_label_selector_json(
            &serde_json::json!({"matchLabels": {}, "matchExpressions": []}),
        )
        .expect("empty lists");
        assert!(empty2.matches(&labels(&[])));

        let null = LabelSelector::from_label_selector_json(&Value::Null).expect("null");
        assert!(!null.matches(&labels(&[])));
        assert!(null.is_nothing());
    }

    #[test]
    fn metav1_label_selector_json_errors() {
        let bad = [
            (serde_json::json!([]), "expected an object"),
            (serde_json::json!({"matchLabels": []}), "matchLabels"),
            (
                serde_json::json!({"matchLabels": {"a": 1}}),
                "matchLabels[a]",
            ),
            (
                serde_json::json!({"matchExpressions": [{"key": "a", "operator": "Equals", "values": ["b"]}]}),
                "\"Equals\" is not a valid label selector operator",
            ),
            (
                serde_json::json!({"matchExpressions": [{"key": "a", "operator": "In", "values": []}]}),
                "for 'in', 'notin' operators, values set can't be empty",
            ),
            (
                serde_json::json!({"matchExpressions": [{"key": "a", "operator": "Exists", "values": ["x"]}]}),
                "values set must be empty for exists and does not exist",
            ),
            (
                serde_json::json!({"matchExpressions": [{"key": "a", "operator": "In", "values": [1]}]}),
                "matchExpressions[0].values[0]",
            ),
            (
                serde_json::json!({"matchExpressions": [{"key": "b@d", "operator": "Exists"}]}),
                "key: Invalid value: \"b@d\"",
            ),
            (
                serde_json::json!({"matchLabels": {"a": "b c"}}),
                "values[0][a]: Invalid value: \"b c\"",
            ),
            (
                serde_json::json!({"matchExpressions": {}}),
                "matchExpressions",
            ),
        ];
        for (v, want) in bad {
            let err = LabelSelector::from_label_selector_json(&v).expect_err(&v.to_string());
            assert!(err.to_string().contains(want), "{v}: {err}");
        }
    }

    #[test]
    fn requirement_new_validates() {
        assert!(Requirement::new("a", Operator::Equals, vec![]).is_err());
        assert!(Requirement::new("a", Operator::Equals, vec!["x".into(), "y".into()]).is_err());
        assert!(Requirement::new("a", Operator::GreaterThan, vec!["1".into()]).is_ok());
        let err = Requirement::new("", Operator::In, vec![]).expect_err("two errors");
        let msg = err.to_string();
        assert!(
            msg.starts_with('[') && msg.contains("values set can't be empty"),
            "{msg}"
        );
    }

    #[test]
    fn field_selector_basic() {
        let f: FieldSelector = "metadata.name=foo,status.phase!=Running"
            .parse()
            .expect("parse");
        let reqs: Vec<_> = f.requirements().collect();
        assert_eq!(
            reqs,
            vec![
                ("metadata.name", Op::Equals, "foo"),
                ("status.phase", Op::NotEquals, "Running")
            ]
        );
        assert_eq!(f.single_value("metadata.name"), Some("foo"));
        assert_eq!(f.single_value("status.phase"), None);
        assert_eq!(f.single_value("spec.nodeName"), None);

        let mut fields = BTreeMap::new();
        fields.insert("metadata.name".to_string(), "foo".to_string());
        fields.insert("status.phase".to_string(), "Pending".to_string());
        assert!(f.matches(&fields));
        fields.insert("status.phase".to_string(), "Running".to_string());
        assert!(!f.matches(&fields));

        let d: FieldSelector = "a==b".parse().expect("==");
        assert_eq!(d.single_value("a"), Some("b"));
        assert_eq!(d.to_string(), "a=b");
    }

    #[test]
    fn field_selector_missing_field_is_empty_string() {
        let fields = BTreeMap::new();
        assert!(FieldSelector::parse("spec.nodeName=")
            .expect("p")
            .matches(&fields));
        assert!(!FieldSelector::parse("spec.nodeName=n1")
            .expect("p")
            .matches(&fields));
        assert!(FieldSelector::parse("spec.nodeName!=n1")
            .expect("p")
            .matches(&fields));
        assert!(!FieldSelector::parse("spec.nodeName!=")
            .expect("p")
            .matches(&fields));
        assert!(FieldSelector::parse("").expect("p").matches(&fields));
        assert!(FieldSelector::parse("").expect("p").is_empty());
        assert!(FieldSelector::parse(",,").expect("p").is_empty());
    }

    #[test]
    fn field_selector_escaping() {
        let f = FieldSelector::parse(r"a=x\,y\=z\\w,b=c").expect("parse");
        let reqs: Vec<_> = f.requirements().collect();
        assert_eq!(
            reqs,
            vec![("a", Op::Equals, r"x,y=z\w"), ("b", Op::Equals, "c")]
        );
        assert_eq!(f.to_string(), r"a=x\,y\=z\\w,b=c");
        assert_eq!(escape_field_value(r"a,b=c\d"), r"a\,b\=c\\d");
        assert_eq!(
            unescape_field_value(&escape_field_value("x=,\\y")).expect("roundtrip"),
            "x=,\\y"
        );

        assert_eq!(
            FieldSelector::parse(r"a=b\c")
                .expect_err("bad escape")
                .to_string(),
            r"invalid field selector: invalid escape sequence: \c"
        );
        assert_eq!(
            FieldSelector::parse(r"a=b\")
                .expect_err("trailing")
                .to_string(),
            r"invalid field selector: invalid escape sequence: \"
        );
        assert_eq!(
            FieldSelector::parse("a=b=c")
                .expect_err("unescaped")
                .to_string(),
            "invalid field selector: unescaped character in value: '='"
        );
        assert_eq!(
            FieldSelector::parse("a=b,c")
                .expect_err("no op")
                .to_string(),
            "invalid selector: 'a=b,c'; can't understand 'c'"
        );
    }

    #[test]
    fn field_selector_operator_split_and_order() {
        // The first operator occurrence wins; `!=` and `==` are checked before `=`.
        let f = FieldSelector::parse("a!==b").expect_err("'=b' has unescaped =");
        assert!(matches!(f, SelectorError::UnescapedChar('=')));
        let f = FieldSelector::parse("x!=y").expect("parse");
        assert_eq!(f.requirements().next(), Some(("x", Op::NotEquals, "y")));
        let f = FieldSelector::parse("a=1,a=2").expect("parse");
        assert_eq!(f.single_value("a"), Some("1"));
        assert!(!f.matches(&[("a".to_string(), "1".to_string())].into_iter().collect()));
        // Terms are sorted by their raw text, like Kubernetes.
        let f = FieldSelector::parse("z=1,b=2").expect("parse");
        assert_eq!(f.to_string(), "b=2,z=1");
        // Whitespace is significant in field selectors.
        let f = FieldSelector::parse(" a = b").expect("parse");
        assert_eq!(f.requirements().next(), Some((" a ", Op::Equals, " b")));
        // Escaped comma in the key side is kept verbatim in the key.
        let f = FieldSelector::parse(r"a\,b=c").expect("parse");
        assert_eq!(f.requirements().next(), Some((r"a\,b", Op::Equals, "c")));
    }

    #[test]
    fn large_selectors_parse_in_linear_time() {
        let values: Vec<String> = (0..50_000).map(|i| format!("v{i}")).collect();
        let s = sel(&format!("k in ({})", values.join(",")));
        assert_eq!(s.requirements()[0].values().len(), 50_000);
        assert!(s.matches(&labels(&[("k", "v49999")])));
        let bad: Vec<String> = (0..20_000).map(|i| format!("-{i}")).collect();
        let err = LabelSelector::parse(&format!("k in ({})", bad.join(","))).expect_err("bad");
        assert!(err.to_string().contains("values[19999][k]"));
        let f = FieldSelector::parse(&vec!["a=b"; 50_000].join(",")).expect("field");
        assert_eq!(f.requirements().count(), 50_000);
        assert!(from_label_selector_json(&Value::Null)
            .expect("null")
            .is_nothing());
    }

    #[test]
    fn selectors_never_panic_on_odd_input() {
        let inputs = [
            "(",
            ")",
            "!",
            "!!",
            "=",
            "==",
            "!=",
            "<",
            ">",
            "in",
            "notin",
            "a in",
            "a notin (",
            "a in (,,,",
            "é",
            "a=é",
            "\u{0}",
            "a,\u{0}",
            "a in (b,\u{0}",
            "x=\u{0}y",
            "!\u{0}",
            "a\u{0}",
            "((((",
            "a in (b))",
            "a>>1",
            "a<=1",
            "a=>1",
            "a===b",
        ];
        for i in inputs {
            let _ = LabelSelector::parse(i);
            let _ = FieldSelector::parse(i);
        }
    }
}
