//! Errors, in the words upstream uses: cel-go's runtime error strings, and
//! `field.Error` bodies (`Invalid value: ...`, `Forbidden: ...`) for rules a
//! CRD cannot have.

use crate::path::FieldPath;
use crate::RuleError;
use cel::ExecutionError;

/// Why an expression does not compile.
#[derive(Debug, thiserror::Error)]
pub(crate) enum CompileError {
    /// cel-go-formatted issues, one per line group.
    #[error("{0}")]
    Issues(String),
    /// The expression's type is known and is not the one required.
    #[error("wrong result type")]
    WrongType,
    /// The shared environment could not be built (a bug, not bad input).
    #[error("{0}")]
    Environment(String),
}

/// Why an evaluation failed, printed as cel-go prints it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum EvalError {
    #[error("operation cancelled: actual cost limit exceeded")]
    CostLimit,
    /// A runtime type mismatch (int-or-string and `dyn` values escape the
    /// type checker); upstream singles these out by this prefix.
    #[error("no such overload")]
    NoSuchOverload,
    #[error("{0}")]
    Other(String),
}

impl From<ExecutionError> for EvalError {
    fn from(e: ExecutionError) -> Self {
        match e {
            ExecutionError::NoSuchKey(key) => EvalError::Other(format!("no such key: {key}")),
            ExecutionError::IndexOutOfBounds(index) => {
                EvalError::Other(format!("index out of bounds: {}", plain(&index)))
            }
            ExecutionError::DivisionByZero(_) => EvalError::Other("division by zero".into()),
            ExecutionError::RemainderByZero(_) => EvalError::Other("modulus by zero".into()),
            ExecutionError::Overflow(..) => EvalError::Other("integer overflow".into()),
            ExecutionError::UndeclaredReference(name) => {
                EvalError::Other(format!("no such attribute(s): {name}"))
            }
            ExecutionError::FunctionError { message, .. }
                if message == crate::cost::COST_EXCEEDED =>
            {
                EvalError::CostLimit
            }
            ExecutionError::FunctionError { message, .. } => EvalError::Other(message),
            ExecutionError::DuplicateKey(_) | ExecutionError::InternalError(_) => {
                EvalError::Other(e.to_string())
            }
            _ => EvalError::NoSuchOverload,
        }
    }
}

/// A value as cel-go prints it in an error.
fn plain(v: &cel::Value) -> String {
    match v {
        cel::Value::Int(i) => i.to_string(),
        cel::Value::UInt(u) => u.to_string(),
        cel::Value::Float(f) => f.to_string(),
        cel::Value::String(s) => s.to_string(),
        other => format!("{other:?}"),
    }
}

/// cel-rust prints issues as cel-go does, but without the space before the
/// snippet's `|`.
pub(crate) fn cel_go_issues(cel_rust: &str) -> String {
    cel_rust.replace("\n| ", "\n | ")
}

/// Go's `%q` for a string: what `Invalid value: "..."` shows.
pub(crate) fn go_quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            '\u{7}' => out.push_str("\\a"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\u{b}' => out.push_str("\\v"),
            c if (c as u32) < 0x20 || c == '\u{7f}' => {
                out.push_str(&format!("\\x{:02x}", c as u32))
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// `encoding/json`'s rendering of a value: like serde_json's, but with `<`,
/// `>`, `&`, U+2028 and U+2029 escaped.
pub(crate) fn go_json(v: &serde_json::Value) -> String {
    serde_json::to_string(v)
        .unwrap_or_default()
        .replace('<', "\\u003c")
        .replace('>', "\\u003e")
        .replace('&', "\\u0026")
        .replace('\u{2028}', "\\u2028")
        .replace('\u{2029}', "\\u2029")
}

pub(crate) fn invalid(field: &FieldPath, value: &str, detail: &str) -> RuleError {
    RuleError {
        field: field.render(),
        message: format!("Invalid value: {value}: {detail}"),
    }
}

pub(crate) fn required(field: &FieldPath, detail: &str) -> RuleError {
    RuleError {
        field: field.render(),
        message: format!("Required value: {detail}"),
    }
}

pub(crate) fn forbidden(field: &FieldPath, detail: &str) -> RuleError {
    RuleError {
        field: field.render(),
        message: format!("Forbidden: {detail}"),
    }
}

pub(crate) fn not_supported(field: &FieldPath, value: &str, supported: &[&str]) -> RuleError {
    let list: Vec<String> = supported.iter().map(|s| go_quote(s)).collect();
    RuleError {
        field: field.render(),
        message: format!(
            "Unsupported value: {}: supported values: {}",
            go_quote(value),
            list.join(", ")
        ),
    }
}
