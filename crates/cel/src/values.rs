//! JSON to CEL values, shaped by the schema the way upstream's
//! `UnstructuredToVal` shapes them: objects with `properties` expose only
//! their declared fields, under escaped names; maps keep their keys; numbers
//! follow the declared type; `format: duration`, `date`, `date-time` and
//! `byte` strings become durations, timestamps and bytes.

use crate::decl::{Decl, DeclKind, ListType};
use crate::escape::escape;
use crate::unordered::UnorderedList;
use base64::Engine;
use cel::common::types::{
    CelBool, CelBytes, CelDouble, CelDuration, CelInt, CelList, CelMap, CelMapKey, CelNull,
    CelString, CelTimestamp,
};
use cel::common::value::Val;
use serde_json::{Map, Number, Value};
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use crate::decl::Field;

/// `json` as a CEL value of declaration `decl`. Data that does not match the
/// declaration (which schema validation reports separately) is converted
/// as plain JSON, so rules still see it.
pub(crate) fn to_val<'v>(json: &'v Value, decl: &Decl) -> Box<dyn Val + 'v> {
    match (&decl.kind, json) {
        (_, Value::Null) => Box::new(CelNull),
        (DeclKind::Object(fields), Value::Object(obj)) => object(fields, obj),
        (DeclKind::Map(elem), Value::Object(obj)) => {
            let entries = obj
                .iter()
                .map(|(k, v)| (CelMapKey::from(k.as_str()), to_val(v, elem)));
            Box::new(CelMap::from(entries.collect::<HashMap<_, _>>()))
        }
        (DeclKind::List(elem), Value::Array(items)) => list(decl, elem, items),
        (DeclKind::Int, Value::Number(n)) => integer(n),
        (DeclKind::Double, Value::Number(n)) => {
            Box::new(CelDouble::from(n.as_f64().unwrap_or(f64::NAN)))
        }
        (DeclKind::Duration, Value::String(s)) => match parse_go_duration(s, true) {
            Some(d) => Box::new(CelDuration::from(d)),
            None => generic(json),
        },
        (DeclKind::Timestamp, Value::String(s)) => match parse_timestamp(s) {
            Some(t) => Box::new(CelTimestamp::from(t)),
            None => generic(json),
        },
        (DeclKind::Bytes, Value::String(s)) => {
            match base64::engine::general_purpose::STANDARD.decode(s) {
                Ok(bytes) => Box::new(CelBytes::from(bytes)),
                Err(_) => generic(json),
            }
        }
        _ => generic(json),
    }
}

/// A list; `set` and `map` lists compare regardless of order.
fn list<'v>(decl: &Decl, elem: &Decl, items: &'v [Value]) -> Box<dyn Val + 'v> {
    let list = CelList::from(items.iter().map(|i| to_val(i, elem)).collect::<Vec<_>>());
    match &decl.list_type {
        ListType::Atomic => Box::new(list),
        ListType::Set => Box::new(UnorderedList::new(list, Arc::from(Vec::new()))),
        ListType::Map(keys) => {
            let escaped: Vec<String> = keys
                .iter()
                .map(|k| escape(k).unwrap_or_else(|| k.clone()))
                .collect();
            Box::new(UnorderedList::new(list, Arc::from(escaped)))
        }
    }
}

fn object<'v>(fields: &BTreeMap<String, Field>, obj: &'v Map<String, Value>) -> Box<dyn Val + 'v> {
    let mut entries: HashMap<CelMapKey<'v>, Box<dyn Val + 'v>> =
        HashMap::with_capacity(fields.len());
    for (escaped, field) in fields {
        if let Some(value) = obj.get(&field.json_name) {
            entries.insert(CelMapKey::from(escaped.clone()), to_val(value, &field.decl));
        }
    }
    Box::new(CelMap::from(entries))
}

/// Integers are int64; a whole number written as `2.0` is still one.
fn integer<'v>(n: &Number) -> Box<dyn Val + 'v> {
    if let Some(i) = n.as_i64() {
        return Box::new(CelInt::from(i));
    }
    match n.as_f64() {
        Some(f) if f.fract() == 0.0 && f >= i64::MIN as f64 && f < i64::MAX as f64 => {
            Box::new(CelInt::from(f as i64))
        }
        other => Box::new(CelDouble::from(other.unwrap_or(f64::NAN))),
    }
}

/// JSON without a schema (admission-policy variables, `dyn` data): objects
/// are maps with their own keys.
pub(crate) fn generic<'v>(json: &'v Value) -> Box<dyn Val + 'v> {
    match json {
        Value::Null => Box::new(CelNull),
        Value::Bool(b) => Box::new(CelBool::from(*b)),
        Value::Number(n) => match n.as_i64() {
            Some(i) => Box::new(CelInt::from(i)),
            None => Box::new(CelDouble::from(n.as_f64().unwrap_or(f64::NAN))),
        },
        Value::String(s) => Box::new(CelString::from(s.as_str())),
        Value::Array(items) => {
            Box::new(CelList::from(items.iter().map(generic).collect::<Vec<_>>()))
        }
        Value::Object(obj) => {
            let entries = obj
                .iter()
                .map(|(k, v)| (CelMapKey::from(k.as_str()), generic(v)));
            Box::new(CelMap::from(entries.collect::<HashMap<_, _>>()))
        }
    }
}

/// A `date-time` (RFC 3339) or `date` (midnight UTC) string.
fn parse_timestamp(s: &str) -> Option<chrono::DateTime<chrono::FixedOffset>> {
    if let Ok(t) = chrono::DateTime::parse_from_rfc3339(s) {
        return Some(t);
    }
    let date = chrono::NaiveDate::parse_from_str(s, "%Y-%m-%d").ok()?;
    Some(date.and_hms_opt(0, 0, 0)?.and_utc().fixed_offset())
}

/// Go's `time.ParseDuration` (`1h30m`, `1.5s`, `-300ms`, `0`), which CEL's
/// `duration()` follows; `days_and_weeks` adds the `d` and `w` units
/// go-openapi's `strfmt.ParseDuration` accepts for `format: duration`.
pub(crate) fn parse_go_duration(s: &str, days_and_weeks: bool) -> Option<chrono::Duration> {
    let (negative, mut rest) = match s.as_bytes().first()? {
        b'-' => (true, &s[1..]),
        b'+' => (false, &s[1..]),
        _ => (false, s),
    };
    if rest == "0" {
        return Some(chrono::Duration::zero());
    }
    if rest.is_empty() {
        return None;
    }
    let mut nanos: f64 = 0.0;
    while !rest.is_empty() {
        let number_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let number = &rest[..number_len];
        if number.is_empty() || number == "." {
            return None;
        }
        let value: f64 = number.parse().ok()?;
        rest = &rest[number_len..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let unit = &rest[..unit_len];
        if !days_and_weeks && (unit == "d" || unit == "w") {
            return None;
        }
        nanos += value * unit_nanos(unit)?;
        rest = &rest[unit_len..];
    }
    if nanos > i64::MAX as f64 {
        return None;
    }
    let d = chrono::Duration::nanoseconds(nanos.round() as i64);
    Some(if negative { -d } else { d })
}

fn unit_nanos(unit: &str) -> Option<f64> {
    Some(match unit {
        "ns" => 1.0,
        "us" | "µs" | "μs" => 1e3,
        "ms" => 1e6,
        "s" => 1e9,
        "m" => 60e9,
        "h" => 3600e9,
        "d" => 86400e9,
        "w" => 7.0 * 86400e9,
        _ => return None,
    })
}
