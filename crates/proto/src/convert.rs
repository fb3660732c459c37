//! Building blocks of the generated converters: how scalars, lists, maps and the special
//! apimachinery types (Time, MicroTime, Quantity, IntOrString, FieldsV1) become JSON.

use std::collections::BTreeMap;

use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine as _;
use chrono::{DateTime, Datelike as _, Utc};
use k8s_pb::apimachinery::pkg::api::resource::Quantity;
use k8s_pb::apimachinery::pkg::apis::meta::v1::{FieldsV1, MicroTime, Time};
use k8s_pb::apimachinery::pkg::util::intstr::IntOrString;
use serde_json::{Map, Number, Value};

use crate::error::ProtoError;
use crate::path::Path;
use crate::unknown;

/// Converts one message; `Ok(None)` means "omit the field" (Go's zero time).
pub(crate) type Conv<T> = fn(T, &Path<'_>) -> Result<Option<Value>, ProtoError>;

pub(crate) fn invalid(path: &Path<'_>, reason: impl Into<String>) -> ProtoError {
    ProtoError::InvalidField {
        path: path.render(),
        reason: reason.into(),
    }
}

/// Decodes `raw` as `T`, rejects protobuf fields unknown to `T`'s schema, converts it.
pub(crate) fn root<T: prost::Message + Default>(
    raw: &[u8],
    kind: &'static str,
    schema: usize,
    conv: Conv<T>,
) -> Result<Map<String, Value>, ProtoError> {
    let msg = T::decode(raw).map_err(|source| ProtoError::Decode {
        message: kind,
        source,
    })?;
    let path = Path::root();
    unknown::check(raw, schema, &path, 0)?;
    match conv(msg, &path)? {
        Some(Value::Object(map)) => Ok(map),
        _ => Ok(Map::new()),
    }
}

/// A protobuf scalar: its Go zero value and its JSON form.
pub(crate) trait Scalar: Default {
    fn is_zero(&self) -> bool;
    fn into_json(self, path: &Path<'_>) -> Result<Value, ProtoError>;
}

impl Scalar for String {
    fn is_zero(&self) -> bool {
        self.is_empty()
    }
    fn into_json(self, _: &Path<'_>) -> Result<Value, ProtoError> {
        Ok(Value::String(self))
    }
}

impl Scalar for bool {
    fn is_zero(&self) -> bool {
        !*self
    }
    fn into_json(self, _: &Path<'_>) -> Result<Value, ProtoError> {
        Ok(Value::Bool(self))
    }
}

impl Scalar for i32 {
    fn is_zero(&self) -> bool {
        *self == 0
    }
    fn into_json(self, _: &Path<'_>) -> Result<Value, ProtoError> {
        Ok(Value::from(self))
    }
}

impl Scalar for i64 {
    fn is_zero(&self) -> bool {
        *self == 0
    }
    fn into_json(self, _: &Path<'_>) -> Result<Value, ProtoError> {
        Ok(Value::from(self))
    }
}

impl Scalar for f64 {
    fn is_zero(&self) -> bool {
        *self == 0.0
    }
    fn into_json(self, path: &Path<'_>) -> Result<Value, ProtoError> {
        Number::from_f64(self)
            .map(Value::Number)
            .ok_or_else(|| invalid(path, format!("{self} has no JSON representation")))
    }
}

/// Go `[]byte` is written as standard base64.
impl Scalar for Vec<u8> {
    fn is_zero(&self) -> bool {
        self.is_empty()
    }
    fn into_json(self, _: &Path<'_>) -> Result<Value, ProtoError> {
        Ok(Value::String(BASE64.encode(self)))
    }
}

/// Go pointer field: written whenever it is set, zero included.
pub(crate) fn pointer<T: Scalar>(
    out: &mut Map<String, Value>,
    key: &'static str,
    value: Option<T>,
    path: &Path<'_>,
) -> Result<(), ProtoError> {
    if let Some(v) = value {
        out.insert(key.to_owned(), v.into_json(&path.field(key))?);
    }
    Ok(())
}

/// Go value field tagged `omitempty`: written when set and not zero.
pub(crate) fn omitempty<T: Scalar>(
    out: &mut Map<String, Value>,
    key: &'static str,
    value: Option<T>,
    path: &Path<'_>,
) -> Result<(), ProtoError> {
    match value {
        Some(v) if !v.is_zero() => pointer(out, key, Some(v), path),
        _ => Ok(()),
    }
}

/// Go value field without `omitempty`: always written, zero when absent.
pub(crate) fn required<T: Scalar>(
    out: &mut Map<String, Value>,
    key: &'static str,
    value: Option<T>,
    path: &Path<'_>,
) -> Result<(), ProtoError> {
    pointer(out, key, Some(value.unwrap_or_default()), path)
}

/// Repeated scalar: written when non-empty.
pub(crate) fn scalars<T: Scalar>(
    out: &mut Map<String, Value>,
    key: &'static str,
    values: Vec<T>,
    path: &Path<'_>,
) -> Result<(), ProtoError> {
    if values.is_empty() {
        return Ok(());
    }
    let base = path.field(key);
    let mut list = Vec::with_capacity(values.len());
    for (i, v) in values.into_iter().enumerate() {
        list.push(v.into_json(&base.index(i))?);
    }
    out.insert(key.to_owned(), Value::Array(list));
    Ok(())
}

/// `map<string, string>`: written when non-empty.
pub(crate) fn string_map(
    out: &mut Map<String, Value>,
    key: &'static str,
    map: BTreeMap<String, String>,
) {
    if !map.is_empty() {
        let obj = map
            .into_iter()
            .map(|(k, v)| (k, Value::String(v)))
            .collect();
        out.insert(key.to_owned(), Value::Object(obj));
    }
}

/// `map<string, bytes>` (Secret.data, ConfigMap.binaryData): base64 values.
pub(crate) fn bytes_map(
    out: &mut Map<String, Value>,
    key: &'static str,
    map: BTreeMap<String, Vec<u8>>,
) {
    if !map.is_empty() {
        let obj = map
            .into_iter()
            .map(|(k, v)| (k, Value::String(BASE64.encode(v))))
            .collect();
        out.insert(key.to_owned(), Value::Object(obj));
    }
}

/// `map<string, Message>` (e.g. ResourceList = map of Quantity): written when non-empty.
pub(crate) fn message_map<T>(
    out: &mut Map<String, Value>,
    key: &'static str,
    map: BTreeMap<String, T>,
    path: &Path<'_>,
    conv: Conv<T>,
) -> Result<(), ProtoError> {
    if map.is_empty() {
        return Ok(());
    }
    let base = path.field(key);
    let mut obj = Map::new();
    for (k, v) in map {
        let value = conv(v, &base.key(&k))?.unwrap_or(Value::Null);
        obj.insert(k, value);
    }
    out.insert(key.to_owned(), Value::Object(obj));
    Ok(())
}

/// Optional message: written when present (an empty message becomes `{}`).
pub(crate) fn message<T>(
    out: &mut Map<String, Value>,
    key: &'static str,
    value: Option<T>,
    path: &Path<'_>,
    conv: Conv<T>,
) -> Result<(), ProtoError> {
    if let Some(v) = value {
        if let Some(json) = conv(v, &path.field(key))? {
            out.insert(key.to_owned(), json);
        }
    }
    Ok(())
}

/// Repeated message: written when non-empty.
pub(crate) fn messages<T>(
    out: &mut Map<String, Value>,
    key: &'static str,
    values: Vec<T>,
    path: &Path<'_>,
    conv: Conv<T>,
) -> Result<(), ProtoError> {
    if values.is_empty() {
        return Ok(());
    }
    let base = path.field(key);
    let mut list = Vec::with_capacity(values.len());
    for (i, v) in values.into_iter().enumerate() {
        list.push(conv(v, &base.index(i))?.unwrap_or(Value::Null));
    }
    out.insert(key.to_owned(), Value::Array(list));
    Ok(())
}

/// Go `json:",inline"` embedded struct: its fields are merged into the parent object.
pub(crate) fn inline<T>(
    out: &mut Map<String, Value>,
    value: Option<T>,
    path: &Path<'_>,
    conv: Conv<T>,
) -> Result<(), ProtoError> {
    if let Some(v) = value {
        match conv(v, path)? {
            Some(Value::Object(fields)) => out.extend(fields),
            None => {}
            Some(_) => return Err(invalid(path, "inlined message is not an object")),
        }
    }
    Ok(())
}

/// metav1.Time: RFC 3339 in UTC with whole seconds (Go's `Time.MarshalJSON`); an empty
/// message is Go's zero time (JSON `null`) and is omitted.
pub(crate) fn special_time(m: Time, path: &Path<'_>) -> Result<Option<Value>, ProtoError> {
    let Time { seconds, nanos } = m;
    timestamp(seconds, nanos, path, "%Y-%m-%dT%H:%M:%SZ")
}

/// metav1.MicroTime: RFC 3339 in UTC with exactly 6 fractional digits.
pub(crate) fn special_micro_time(
    m: MicroTime,
    path: &Path<'_>,
) -> Result<Option<Value>, ProtoError> {
    let MicroTime { seconds, nanos } = m;
    timestamp(seconds, nanos, path, "%Y-%m-%dT%H:%M:%S%.6fZ")
}

fn timestamp(
    seconds: Option<i64>,
    nanos: Option<i32>,
    path: &Path<'_>,
    format: &str,
) -> Result<Option<Value>, ProtoError> {
    if seconds.is_none() && nanos.is_none() {
        // Go marshals the zero time as an empty message.
        return Ok(None);
    }
    let nanos = i64::from(nanos.unwrap_or(0));
    // Like Go's time.Unix: nanoseconds outside [0, 1e9) carry into the seconds.
    let secs = seconds
        .unwrap_or(0)
        .checked_add(nanos.div_euclid(1_000_000_000))
        .ok_or_else(|| invalid(path, "timestamp out of range"))?;
    let sub = u32::try_from(nanos.rem_euclid(1_000_000_000))
        .map_err(|_| invalid(path, "timestamp out of range"))?;
    let time: DateTime<Utc> = DateTime::from_timestamp(secs, sub)
        .ok_or_else(|| invalid(path, format!("timestamp {secs}s is out of range")))?;
    if !(0..=9999).contains(&time.year()) {
        return Err(invalid(
            path,
            format!("year {} is outside of range [0,9999]", time.year()),
        ));
    }
    Ok(Some(Value::String(time.format(format).to_string())))
}

/// resource.Quantity: its canonical string, as client-go put it on the wire.
pub(crate) fn special_quantity(m: Quantity, path: &Path<'_>) -> Result<Option<Value>, ProtoError> {
    let Quantity { string } = m;
    match string {
        // Go decodes a Quantity message without its string as the zero quantity
        None => Ok(Some(Value::String("0".to_owned()))),
        Some(s) if s.is_empty() => Err(invalid(path, "quantity is an empty string")),
        Some(s) => Ok(Some(Value::String(s))),
    }
}

/// intstr.IntOrString: type 0 -> JSON number, type 1 -> JSON string.
pub(crate) fn special_int_or_string(
    m: IntOrString,
    path: &Path<'_>,
) -> Result<Option<Value>, ProtoError> {
    let IntOrString {
        r#type,
        int_val,
        str_val,
    } = m;
    match r#type.unwrap_or(0) {
        0 => Ok(Some(Value::from(int_val.unwrap_or(0)))),
        1 => Ok(Some(Value::String(str_val.unwrap_or_default()))),
        other => Err(invalid(
            path,
            format!("IntOrString has unknown type {other} (expected 0 for int or 1 for string)"),
        )),
    }
}

/// certificates/v1 ExtraValue: a Go `[]string`, so a JSON array of its items.
pub(crate) fn special_extra_value(
    m: k8s_pb::api::certificates::v1::ExtraValue,
    _path: &Path<'_>,
) -> Result<Option<Value>, ProtoError> {
    let k8s_pb::api::certificates::v1::ExtraValue { items } = m;
    Ok(Some(Value::Array(
        items.into_iter().map(Value::String).collect(),
    )))
}

/// authentication/v1 ExtraValue (TokenReview's user): a Go `[]string`.
pub(crate) fn special_authentication_extra_value(
    m: k8s_pb::api::authentication::v1::ExtraValue,
    _path: &Path<'_>,
) -> Result<Option<Value>, ProtoError> {
    Ok(Some(Value::Array(
        m.items.into_iter().map(Value::String).collect(),
    )))
}

/// authorization/v1 ExtraValue (SubjectAccessReview's user): a Go `[]string`.
pub(crate) fn special_authorization_extra_value(
    m: k8s_pb::api::authorization::v1::ExtraValue,
    _path: &Path<'_>,
) -> Result<Option<Value>, ProtoError> {
    Ok(Some(Value::Array(
        m.items.into_iter().map(Value::String).collect(),
    )))
}

/// metav1.FieldsV1: raw JSON, embedded as is.
pub(crate) fn special_fields_v1(m: FieldsV1, path: &Path<'_>) -> Result<Option<Value>, ProtoError> {
    let FieldsV1 { raw } = m;
    match raw {
        None => Ok(None),
        Some(raw) => serde_json::from_slice(&raw)
            .map(Some)
            .map_err(|e| invalid(path, format!("fieldsV1 is not valid JSON: {e}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn time(seconds: Option<i64>, nanos: Option<i32>) -> Result<Option<Value>, ProtoError> {
        special_time(Time { seconds, nanos }, &Path::root())
    }

    #[test]
    fn times() {
        assert_eq!(time(None, None).unwrap(), None);
        assert_eq!(
            time(Some(1_704_164_645), Some(999_999_999)).unwrap(),
            Some(Value::from("2024-01-02T03:04:05Z"))
        );
        assert_eq!(
            time(Some(0), None).unwrap(),
            Some(Value::from("1970-01-01T00:00:00Z"))
        );
        assert_eq!(
            time(Some(10), Some(-1)).unwrap(),
            Some(Value::from("1970-01-01T00:00:09Z"))
        );
        assert!(time(Some(i64::MAX), Some(i32::MAX)).is_err());
        assert!(time(Some(i64::MIN), Some(i32::MIN)).is_err());
        assert!(time(Some(253_402_300_800), None).is_err()); // year 10000
        let micro = special_micro_time(
            MicroTime {
                seconds: Some(1_704_164_645),
                nanos: Some(123_456_789),
            },
            &Path::root(),
        )
        .unwrap();
        assert_eq!(micro, Some(Value::from("2024-01-02T03:04:05.123456Z")));
        let micro = special_micro_time(
            MicroTime {
                seconds: Some(1_704_164_645),
                nanos: None,
            },
            &Path::root(),
        )
        .unwrap();
        assert_eq!(micro, Some(Value::from("2024-01-02T03:04:05.000000Z")));
    }

    #[test]
    fn int_or_string() {
        let conv = |t, i, s: Option<&str>| {
            special_int_or_string(
                IntOrString {
                    r#type: t,
                    int_val: i,
                    str_val: s.map(str::to_owned),
                },
                &Path::root(),
            )
        };
        assert_eq!(
            conv(Some(0), Some(8080), Some("")).unwrap(),
            Some(Value::from(8080))
        );
        assert_eq!(conv(None, None, None).unwrap(), Some(Value::from(0)));
        assert_eq!(
            conv(Some(1), Some(0), Some("http")).unwrap(),
            Some(Value::from("http"))
        );
        assert!(conv(Some(7), None, None).is_err());
    }

    #[test]
    fn quantity_and_fields() {
        let q = |s: Option<&str>| {
            special_quantity(
                Quantity {
                    string: s.map(str::to_owned),
                },
                &Path::root(),
            )
        };
        assert_eq!(q(Some("500m")).unwrap(), Some(Value::from("500m")));
        assert_eq!(q(None).unwrap(), Some(Value::from("0")));
        assert!(q(Some("")).is_err());
        let f = special_fields_v1(
            FieldsV1 {
                raw: Some(br#"{"f:metadata":{}}"#.to_vec()),
            },
            &Path::root(),
        )
        .unwrap();
        assert_eq!(f, Some(serde_json::json!({"f:metadata": {}})));
        assert!(special_fields_v1(
            FieldsV1 {
                raw: Some(b"{nope".to_vec())
            },
            &Path::root()
        )
        .is_err());
        assert_eq!(
            Scalar::into_json(f64::NAN, &Path::root()).map_err(|e| e.to_string()),
            Err("invalid value in field .: NaN has no JSON representation".to_owned())
        );
    }
}
