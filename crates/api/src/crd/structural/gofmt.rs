//! Values and field errors printed as Go prints them: field paths (`a.b[c][0]`),
//! `strconv.Quote`, `%v` of floats, `%#v` of decoded JSON, `encoding/json`, and the bad
//! value of a `field.Error` (apimachinery 1.33's `ErrorBody`).

use std::fmt::Write as _;

use serde_json::Value;

use crate::status::Cause;

/// `path.name` (a field path's `Child`); `name` alone at the root.
pub(crate) fn child(path: &str, name: &str) -> String {
    if path.is_empty() {
        name.to_string()
    } else {
        format!("{path}.{name}")
    }
}

/// `path[k]` (a field path's `Key`).
pub(crate) fn key(path: &str, k: &str) -> String {
    format!("{path}[{k}]")
}

/// `path[i]` (a field path's `Index`).
pub(crate) fn index(path: &str, i: usize) -> String {
    format!("{path}[{i}]")
}

/// A JSON number as Go's decoder (`k8s.io/apimachinery/pkg/util/json`) holds it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Num {
    Int(i64),
    Float(f64),
}

impl Num {
    pub(crate) fn of(v: &Value) -> Option<Num> {
        let n = v.as_number()?;
        match n.as_i64() {
            Some(i) => Some(Num::Int(i)),
            None => n.as_f64().map(Num::Float),
        }
    }
}

/// `strconv.Quote`.
pub(crate) fn quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{7}' => out.push_str("\\a"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{b}' => out.push_str("\\v"),
            c if printable(c) => out.push(c),
            c if (c as u32) < 0x80 => {
                let _ = write!(out, "\\x{:02x}", c as u32);
            }
            c if (c as u32) < 0x10000 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => {
                let _ = write!(out, "\\U{:08x}", c as u32);
            }
        }
    }
    out.push('"');
    out
}

/// An approximation of Go's `unicode.IsPrint`: graphic characters and the ASCII space.
fn printable(c: char) -> bool {
    if c == ' ' {
        return true;
    }
    let u = c as u32;
    let format_char = matches!(u, 0xAD | 0x600..=0x605 | 0x61C | 0x6DD | 0x70F | 0x180E
        | 0x200B..=0x200F | 0x202A..=0x202E | 0x2060..=0x206F | 0xFEFF | 0xFFF9..=0xFFFB);
    let private = matches!(u, 0xE000..=0xF8FF | 0xF0000..=0x10FFFF);
    !(c.is_control() || c.is_whitespace() || format_char || private)
}

/// Shortest round-trip digits and decimal exponent of a finite, non-zero float:
/// `(digits, dp)` with value = 0.digits × 10^dp.
fn shortest_digits(f: f64) -> (String, i32) {
    let sci = format!("{:e}", f.abs());
    let (mant, exp) = sci.split_once('e').unwrap_or((sci.as_str(), "0"));
    let digits: String = mant.chars().filter(char::is_ascii_digit).collect();
    let exp: i32 = exp.parse().unwrap_or(0);
    (digits, exp + 1)
}

/// `d.ddde±dd`, as strconv's `%e` writes shortest digits.
fn exp_form(neg: bool, digits: &str, dp: i32) -> String {
    let mut out = String::new();
    if neg {
        out.push('-');
    }
    let (first, rest) = digits.split_at(digits.len().min(1));
    out.push_str(if first.is_empty() { "0" } else { first });
    if !rest.is_empty() {
        out.push('.');
        out.push_str(rest);
    }
    let exp = dp - 1;
    let sign = if exp < 0 { '-' } else { '+' };
    let _ = write!(out, "e{sign}{:02}", exp.abs());
    out
}

/// `ddd.ddd`, as strconv's `%f` writes shortest digits.
fn plain_form(neg: bool, digits: &str, dp: i32) -> String {
    let mut out = String::new();
    if neg {
        out.push('-');
    }
    let nd = digits.len() as i32;
    if dp <= 0 {
        out.push_str("0.");
        out.push_str(&"0".repeat((-dp) as usize));
        out.push_str(digits);
    } else if dp >= nd {
        out.push_str(digits);
        out.push_str(&"0".repeat((dp - nd) as usize));
    } else {
        out.push_str(&digits[..dp as usize]);
        out.push('.');
        out.push_str(&digits[dp as usize..]);
    }
    out
}

fn special_float(f: f64) -> Option<String> {
    if f.is_nan() {
        Some("NaN".to_string())
    } else if f.is_infinite() {
        Some(if f > 0.0 { "+Inf" } else { "-Inf" }.to_string())
    } else if f == 0.0 {
        Some(if f.is_sign_negative() { "-0" } else { "0" }.to_string())
    } else {
        None
    }
}

/// A float as Go's `%v` prints it (`%g` with the shortest digits: `10`, `0.5`, `1e+06`).
pub(crate) fn float(f: f64) -> String {
    if let Some(s) = special_float(f) {
        return s;
    }
    let (digits, dp) = shortest_digits(f);
    let exp = dp - 1;
    if !(-4..6).contains(&exp) {
        exp_form(f < 0.0, &digits, dp)
    } else {
        plain_form(f < 0.0, &digits, dp)
    }
}

/// A float as `encoding/json` writes it (`1e+21`, `1e-7`, `0.5`).
fn json_float(f: f64) -> String {
    if let Some(s) = special_float(f) {
        return if f == 0.0 { "0".to_string() } else { s };
    }
    let (digits, dp) = shortest_digits(f);
    let abs = f.abs();
    if !(1e-6..1e21).contains(&abs) {
        exp_form(f < 0.0, &digits, dp).replace("e-0", "e-")
    } else {
        plain_form(f < 0.0, &digits, dp)
    }
}

/// A number as `%v` prints the Go value it decodes to (`int64` or `float64`).
pub(crate) fn number(n: Num) -> String {
    match n {
        Num::Int(i) => i.to_string(),
        Num::Float(f) => float(f),
    }
}

/// `%#v` of a decoded JSON value held in an `interface{}`.
pub(crate) fn sharp_v(v: &Value) -> String {
    match v {
        Value::Null => "interface {}(nil)".to_string(),
        Value::Bool(b) => b.to_string(),
        Value::Number(_) => Num::of(v).map(number).unwrap_or_default(),
        Value::String(s) => quote(s),
        Value::Array(a) => {
            let items: Vec<String> = a.iter().map(sharp_v).collect();
            format!("[]interface {{}}{{{}}}", items.join(", "))
        }
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            let items: Vec<String> = keys
                .iter()
                .map(|k| format!("{}:{}", quote(k), sharp_v(&m[k.as_str()])))
                .collect();
            format!("map[string]interface {{}}{{{}}}", items.join(", "))
        }
    }
}

/// `%#v` of a `[]string`.
pub(crate) fn sharp_v_strings(items: &[String]) -> String {
    let quoted: Vec<String> = items.iter().map(|s| quote(s)).collect();
    format!("[]string{{{}}}", quoted.join(", "))
}

fn json_string(s: &str, out: &mut String) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '<' | '>' | '&' | '\u{2028}' | '\u{2029}' => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

/// `encoding/json.Marshal` of a decoded JSON value (sorted keys, HTML-safe strings).
pub(crate) fn json(v: &Value) -> String {
    let mut out = String::new();
    json_into(v, &mut out);
    out
}

fn json_into(v: &Value, out: &mut String) {
    match v {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(_) => match Num::of(v) {
            Some(Num::Int(i)) => out.push_str(&i.to_string()),
            Some(Num::Float(f)) => out.push_str(&json_float(f)),
            None => out.push('0'),
        },
        Value::String(s) => json_string(s, out),
        Value::Array(a) => {
            out.push('[');
            for (i, x) in a.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                json_into(x, out);
            }
            out.push(']');
        }
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            out.push('{');
            for (i, k) in keys.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                json_string(k, out);
                out.push(':');
                json_into(&m[k.as_str()], out);
            }
            out.push('}');
        }
    }
}

/// A bad value as a `field.Error` prints it: `null` and strings quoted, numbers and
/// booleans bare, maps and slices as `%#v`.
pub(crate) fn bad_value(v: &Value) -> String {
    match v {
        Value::Null => quote("null"),
        Value::Bool(b) => b.to_string(),
        Value::Number(_) => Num::of(v).map(number).unwrap_or_default(),
        Value::String(s) => quote(s),
        Value::Array(_) | Value::Object(_) => sharp_v(v),
    }
}

fn with_detail(head: String, detail: &str) -> String {
    if detail.is_empty() {
        head
    } else {
        format!("{head}: {detail}")
    }
}

fn cause(reason: &'static str, field: &str, message: String) -> Cause {
    Cause {
        reason,
        field: field.to_string(),
        message,
    }
}

/// `field.Invalid` with the bad value pre-rendered.
pub(crate) fn invalid_repr(field: &str, repr: &str, detail: &str) -> Cause {
    let message = with_detail(format!("Invalid value: {repr}"), detail);
    cause("FieldValueInvalid", field, message)
}

/// `field.Invalid`.
pub(crate) fn invalid(field: &str, value: &Value, detail: &str) -> Cause {
    invalid_repr(field, &bad_value(value), detail)
}

/// `field.Invalid` of a string value.
pub(crate) fn invalid_str(field: &str, value: &str, detail: &str) -> Cause {
    invalid_repr(field, &quote(value), detail)
}

/// `field.TypeInvalid`.
pub(crate) fn type_invalid(field: &str, value: &Value, detail: &str) -> Cause {
    let message = with_detail(format!("Invalid value: {}", bad_value(value)), detail);
    cause("FieldValueTypeInvalid", field, message)
}

/// `field.NotSupported`.
pub(crate) fn not_supported(field: &str, value: &Value, valid: &[String]) -> Cause {
    let detail = if valid.is_empty() {
        String::new()
    } else {
        let quoted: Vec<String> = valid.iter().map(|v| quote(v)).collect();
        format!("supported values: {}", quoted.join(", "))
    };
    let message = with_detail(format!("Unsupported value: {}", bad_value(value)), &detail);
    cause("FieldValueNotSupported", field, message)
}

/// `field.Duplicate`.
pub(crate) fn duplicate(field: &str, value: &Value) -> Cause {
    let message = format!("Duplicate value: {}", bad_value(value));
    cause("FieldValueDuplicate", field, message)
}

/// `field.Required` with a detail.
pub(crate) fn required(field: &str, detail: &str) -> Cause {
    cause(
        "FieldValueRequired",
        field,
        with_detail("Required value".into(), detail),
    )
}

/// `field.Forbidden`.
pub(crate) fn forbidden(field: &str, detail: &str) -> Cause {
    cause(
        "FieldValueForbidden",
        field,
        with_detail("Forbidden".into(), detail),
    )
}

/// `field.TooLong` (1.33: `may not be more than N bytes`).
pub(crate) fn too_long(field: &str, max: i64) -> Cause {
    let detail = if max >= 0 {
        format!("may not be more than {max} bytes")
    } else {
        "value is too long".to_string()
    };
    cause("FieldValueTooLong", field, format!("Too long: {detail}"))
}

/// `field.TooMany` (1.33: `must have at most N items`).
pub(crate) fn too_many(field: &str, actual: i64, max: i64) -> Cause {
    let detail = if max >= 0 {
        format!("must have at most {max} items")
    } else {
        "has too many items".to_string()
    };
    let head = if actual >= 0 {
        format!("Too many: {actual}")
    } else {
        "Too many".to_string()
    };
    cause("FieldValueTooMany", field, format!("{head}: {detail}"))
}
