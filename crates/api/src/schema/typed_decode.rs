//! The typed round trip of a body: deserialized into its k8s-openapi type through a
//! Deserializer over the JSON that tracks the path it is at (for upstream's error
//! messages and unknown fields), canonicalises quantities, and drops the empty optional
//! structs Go would omit; then serialized back.

use super::*;

pub(crate) fn roundtrip<T>(
    kind: &str,
    version: &str,
    obj: &Value,
) -> Result<Normalized, SchemaError>
where
    T: serde::de::DeserializeOwned + Serialize,
{
    let ctx = Ctx::default();
    let root = Rc::new(Path::Root);
    let de = De {
        value: obj,
        path: root,
        ctx: &ctx,
        struct_name: "",
        optional: false,
    };
    let typed = T::deserialize(de).map_err(|e| e.into_schema_error(kind, version))?;
    let mut value = serde_json::to_value(&typed).map_err(|e| SchemaError {
        kind: kind.to_string(),
        version: version.to_string(),
        message: e.to_string(),
        field: None,
    })?;
    for path in ctx.empty_optional.borrow().iter().rev() {
        remove_empty_at(&mut value, path);
    }
    let unknown_fields = ctx.unknown.borrow().clone();
    Ok(Normalized {
        value,
        unknown_fields,
    })
}

// ---------------------------------------------------------------------------------------------
// Path tracking

#[derive(Debug)]
enum Path<'a> {
    Root,
    /// A field of a struct.
    Field(Rc<Path<'a>>, &'a str),
    /// A key of a map.
    Key(Rc<Path<'a>>, &'a str),
    Index(Rc<Path<'a>>, usize),
}

/// One step of an owned path (kept for the empty collections to drop after serialisation).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Seg {
    Key(String),
    Index(usize),
}

impl Path<'_> {
    fn segments(&self) -> Vec<Seg> {
        let mut out = Vec::new();
        let mut cur = self;
        loop {
            match cur {
                Path::Root => break,
                Path::Field(p, k) | Path::Key(p, k) => {
                    out.push(Seg::Key((*k).to_string()));
                    cur = p;
                }
                Path::Index(p, i) => {
                    out.push(Seg::Index(*i));
                    cur = p;
                }
            }
        }
        out.reverse();
        out
    }

    /// `.spec.containers[0].image`, as sigs.k8s.io/json names unknown fields.
    fn json_path(&self) -> String {
        let mut out = String::new();
        for seg in self.segments() {
            match seg {
                Seg::Key(k) => {
                    out.push('.');
                    out.push_str(&k);
                }
                Seg::Index(i) => out.push_str(&format!("[{i}]")),
            }
        }
        out
    }

    /// `spec.containers.image`: Go's encoding/json names only struct fields, no indexes or keys.
    fn go_path(&self) -> String {
        let mut parts = Vec::new();
        let mut cur = self;
        loop {
            match cur {
                Path::Root => break,
                Path::Field(p, k) => {
                    parts.push(*k);
                    cur = p;
                }
                Path::Key(p, _) | Path::Index(p, _) => cur = p,
            }
        }
        parts.reverse();
        parts.join(".")
    }
}

#[derive(Default)]
struct Ctx {
    unknown: RefCell<Vec<String>>,
    empty_optional: RefCell<Vec<Vec<Seg>>>,
}

fn remove_empty_at(value: &mut Value, path: &[Seg]) {
    let Some((last, parents)) = path.split_last() else {
        return;
    };
    let mut cur = value;
    for seg in parents {
        let next = match (seg, cur) {
            (Seg::Key(k), Value::Object(m)) => m.get_mut(k),
            (Seg::Index(i), Value::Array(a)) => a.get_mut(*i),
            _ => None,
        };
        match next {
            Some(v) => cur = v,
            None => return,
        }
    }
    if let (Seg::Key(k), Value::Object(m)) = (last, cur) {
        let empty = match m.get(k) {
            Some(Value::Array(a)) => a.is_empty(),
            Some(Value::Object(o)) => o.is_empty(),
            _ => false,
        };
        if empty {
            m.remove(k);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Errors

#[derive(Debug)]
struct DeError {
    kind: ErrKind,
    /// Set by the innermost deserializer that sees the error: Go-style path, struct and JSON type.
    located: Option<Located>,
}

#[derive(Debug)]
enum ErrKind {
    /// A JSON value of the wrong type (or an out-of-range number) for the Go/Rust type.
    Mismatch {
        expected: String,
    },
    Custom(String),
}

#[derive(Debug)]
struct Located {
    go_path: String,
    dotted: String,
    struct_name: &'static str,
    json_kind: String,
}

impl fmt::Display for DeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message())
    }
}

impl std::error::Error for DeError {}

impl de::Error for DeError {
    fn custom<T: fmt::Display>(msg: T) -> Self {
        DeError {
            kind: ErrKind::Custom(msg.to_string()),
            located: None,
        }
    }

    fn invalid_type(_unexp: de::Unexpected<'_>, exp: &dyn de::Expected) -> Self {
        DeError {
            kind: ErrKind::Mismatch {
                expected: exp.to_string(),
            },
            located: None,
        }
    }

    fn invalid_value(unexp: de::Unexpected<'_>, exp: &dyn de::Expected) -> Self {
        match unexp {
            // Integers out of range for the field's type: Go words these as a type mismatch.
            de::Unexpected::Signed(_) | de::Unexpected::Unsigned(_) | de::Unexpected::Float(_) => {
                DeError {
                    kind: ErrKind::Mismatch {
                        expected: exp.to_string(),
                    },
                    located: None,
                }
            }
            de::Unexpected::Str(s) => {
                DeError::custom(format!("invalid value {s:?}: expected {exp}"))
            }
            other => DeError::custom(format!("invalid value {other}: expected {exp}")),
        }
    }
}

impl DeError {
    fn message(&self) -> String {
        match (&self.kind, &self.located) {
            (ErrKind::Mismatch { expected }, Some(loc)) => {
                let go_type = go_type_name(expected);
                if loc.go_path.is_empty() {
                    format!(
                        "json: cannot unmarshal {} into Go value of type {go_type}",
                        loc.json_kind
                    )
                } else {
                    let owner = if loc.struct_name.is_empty() {
                        String::new()
                    } else {
                        format!("{}.", loc.struct_name)
                    };
                    format!(
                        "json: cannot unmarshal {} into Go struct field {owner}{} of type {go_type}",
                        loc.json_kind, loc.go_path
                    )
                }
            }
            (ErrKind::Mismatch { expected }, None) => {
                format!(
                    "json: cannot unmarshal value into Go value of type {}",
                    go_type_name(expected)
                )
            }
            (ErrKind::Custom(msg), _) => msg.clone(),
        }
    }

    fn into_schema_error(self, kind: &str, version: &str) -> SchemaError {
        let field = self
            .located
            .as_ref()
            .map(|l| l.dotted.clone())
            .filter(|s| !s.is_empty());
        SchemaError {
            kind: kind.to_string(),
            version: version.to_string(),
            message: self.message(),
            field,
        }
    }
}

/// The base64 crate's errors in Go's words (`illegal base64 data at input byte 4`).
fn go_base64_error(msg: &str, text: &str) -> Option<String> {
    if !(msg.starts_with("Invalid symbol")
        || msg.starts_with("Invalid padding")
        || msg.starts_with("Invalid input length")
        || msg.starts_with("Invalid last symbol"))
    {
        return None;
    }
    let offset = msg
        .split("offset ")
        .nth(1)
        .and_then(|rest| rest.trim_end_matches('.').parse::<usize>().ok())
        .unwrap_or(text.len());
    Some(format!("illegal base64 data at input byte {offset}"))
}

/// Go's name for the type serde expected (`i32` → `int32`, `PodSpec` → `v1.PodSpec`).
fn go_type_name(expected: &str) -> String {
    match expected {
        "i8" | "i16" | "i32" | "i64" | "u8" | "u16" | "u32" | "u64" | "f32" | "f64" => {
            let (head, bits) = expected.split_at(1);
            match head {
                "i" => format!("int{bits}"),
                "u" => format!("uint{bits}"),
                _ => format!("float{bits}"),
            }
        }
        "a 32-bit integer" => "int32".to_string(),
        "a string" | "string" | "a borrowed string" | "a base64-encoded string" => {
            "string".to_string()
        }
        "a boolean" => "bool".to_string(),
        "a sequence" => "array".to_string(),
        "a map" => "map[string]string".to_string(),
        "IntOrString" => "intstr.IntOrString".to_string(),
        "Quantity" => "resource.Quantity".to_string(),
        "a timestamp string" | "Time" => "v1.Time".to_string(),
        "MicroTime" => "v1.MicroTime".to_string(),
        other if other.starts_with(|c: char| c.is_ascii_uppercase()) => format!("v1.{other}"),
        other => other.to_string(),
    }
}

fn json_kind(value: &Value, expected: &str) -> String {
    match value {
        Value::Null => "null".to_string(),
        Value::Bool(_) => "bool".to_string(),
        // Go names the number when it cannot fit the integer type it was meant for.
        Value::Number(n) if is_integer_type(expected) => format!("number {n}"),
        Value::Number(_) => "number".to_string(),
        Value::String(_) => "string".to_string(),
        Value::Array(_) => "array".to_string(),
        Value::Object(_) => "object".to_string(),
    }
}

fn is_integer_type(expected: &str) -> bool {
    matches!(
        expected,
        "i8" | "i16" | "i32" | "i64" | "u8" | "u16" | "u32" | "u64" | "a 32-bit integer"
    )
}

// ---------------------------------------------------------------------------------------------
// The deserializer

struct De<'a> {
    value: &'a Value,
    path: Rc<Path<'a>>,
    ctx: &'a Ctx,
    /// The struct whose field this value is (Go names it in type errors).
    struct_name: &'static str,
    /// Reached through `Option`: an empty list or map here is dropped after serialisation.
    optional: bool,
}

impl<'a> De<'a> {
    fn child(&self, value: &'a Value, path: Path<'a>, struct_name: &'static str) -> De<'a> {
        De {
            value,
            path: Rc::new(path),
            ctx: self.ctx,
            struct_name,
            optional: false,
        }
    }

    fn locate(&self, mut err: DeError) -> DeError {
        if err.located.is_none() {
            if let (ErrKind::Custom(msg), Value::String(text)) = (&err.kind, self.value) {
                if let Some(go) = go_base64_error(msg, text) {
                    err.kind = ErrKind::Custom(go);
                }
            }
            let expected = match &err.kind {
                ErrKind::Mismatch { expected } => expected.as_str(),
                ErrKind::Custom(_) => "",
            };
            err.located = Some(Located {
                go_path: self.path.go_path(),
                dotted: self.path.json_path().trim_start_matches('.').to_string(),
                struct_name: self.struct_name,
                json_kind: json_kind(self.value, expected),
            });
        }
        err
    }

    fn record_empty_optional(&self) {
        // metav1.FieldsV1 is a struct holding raw JSON behind a pointer: Go's omitempty
        // keeps an empty one as `{}`, and kubectl's client-side-apply upgrade check
        // dereferences it (a managedFields entry without it crashes kubectl apply).
        if matches!(*self.path, Path::Field(_, "fieldsV1")) {
            return;
        }
        if self.optional {
            self.ctx
                .empty_optional
                .borrow_mut()
                .push(self.path.segments());
        }
    }

    /// Visit by the JSON type of the value, like serde_json's own `Value` deserializer.
    fn visit_any<V: Visitor<'a>>(self, visitor: V) -> Result<V::Value, DeError> {
        match self.value {
            Value::Null => visitor.visit_unit(),
            Value::Bool(b) => visitor.visit_bool(*b),
            Value::Number(n) => {
                if let Some(u) = n.as_u64() {
                    visitor.visit_u64(u)
                } else if let Some(i) = n.as_i64() {
                    visitor.visit_i64(i)
                } else {
                    visitor.visit_f64(n.as_f64().unwrap_or(0.0))
                }
            }
            Value::String(s) => visitor.visit_borrowed_str(s),
            Value::Array(_) => self.visit_array(visitor),
            Value::Object(_) => self.visit_object(visitor, None),
        }
    }

    fn visit_array<V: Visitor<'a>>(self, visitor: V) -> Result<V::Value, DeError> {
        let items: &'a [Value] = match self.value {
            Value::Array(a) => a,
            _ => &[],
        };
        if items.is_empty() {
            self.record_empty_optional();
        }
        let mut access = ArrAccess {
            items: items.iter().enumerate(),
            parent: &self,
            len: items.len(),
        };
        let out = visitor.visit_seq(&mut access)?;
        if access.items.next().is_some() {
            return Err(de::Error::invalid_length(
                access.len,
                &"fewer elements in array",
            ));
        }
        Ok(out)
    }

    fn visit_object<V: Visitor<'a>>(
        self,
        visitor: V,
        fields: Option<(&'static str, &'static [&'static str])>,
    ) -> Result<V::Value, DeError> {
        static EMPTY: std::sync::OnceLock<Map<String, Value>> = std::sync::OnceLock::new();
        let map: &'a Map<String, Value> = match self.value {
            Value::Object(m) => m,
            _ => EMPTY.get_or_init(Map::new),
        };
        if map.is_empty() && fields.is_none() {
            self.record_empty_optional();
        }
        let mut access = ObjAccess {
            iter: map.iter(),
            pending: None,
            parent: &self,
            fields,
        };
        visitor.visit_map(&mut access)
    }
}

struct ArrAccess<'p, 'a> {
    items: std::iter::Enumerate<std::slice::Iter<'a, Value>>,
    parent: &'p De<'a>,
    len: usize,
}

impl<'a> SeqAccess<'a> for ArrAccess<'_, 'a> {
    type Error = DeError;

    fn next_element_seed<T: DeserializeSeed<'a>>(
        &mut self,
        seed: T,
    ) -> Result<Option<T::Value>, DeError> {
        match self.items.next() {
            Some((i, v)) => {
                let child = self.parent.child(
                    v,
                    Path::Index(self.parent.path.clone(), i),
                    self.parent.struct_name,
                );
                seed.deserialize(child).map(Some)
            }
            None => Ok(None),
        }
    }

    fn size_hint(&self) -> Option<usize> {
        Some(self.len)
    }
}

struct ObjAccess<'p, 'a> {
    iter: serde_json::map::Iter<'a>,
    pending: Option<(&'a String, &'a Value)>,
    parent: &'p De<'a>,
    /// `Some((struct name, known fields))` when decoding a struct, `None` for a map.
    fields: Option<(&'static str, &'static [&'static str])>,
}

impl<'a> MapAccess<'a> for ObjAccess<'_, 'a> {
    type Error = DeError;

    fn next_key_seed<K: DeserializeSeed<'a>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, DeError> {
        let Some((k, v)) = self.iter.next() else {
            return Ok(None);
        };
        if let Some((_, fields)) = self.fields {
            if !v.is_null() && !fields.contains(&k.as_str()) {
                let path = Path::Field(self.parent.path.clone(), k);
                self.parent.ctx.unknown.borrow_mut().push(path.json_path());
            }
        }
        self.pending = Some((k, v));
        let key: de::value::BorrowedStrDeserializer<'a, DeError> =
            de::value::BorrowedStrDeserializer::new(k);
        seed.deserialize(key).map(Some)
    }

    fn next_value_seed<V: DeserializeSeed<'a>>(&mut self, seed: V) -> Result<V::Value, DeError> {
        let Some((k, v)) = self.pending.take() else {
            return Err(de::Error::custom("map value requested before its key"));
        };
        let child = match self.fields {
            Some((name, _)) => self
                .parent
                .child(v, Path::Field(self.parent.path.clone(), k), name),
            None => self.parent.child(
                v,
                Path::Key(self.parent.path.clone(), k),
                self.parent.struct_name,
            ),
        };
        seed.deserialize(child)
    }
}

#[derive(Clone, Copy)]
enum Zero {
    Bool,
    Int,
    Float,
    Str,
}

/// Visit the zero value of a Go type: what `encoding/json` leaves for `null`.
fn visit_zero<'a, V: Visitor<'a>>(visitor: V, zero: Zero) -> Result<V::Value, DeError> {
    match zero {
        Zero::Bool => visitor.visit_bool(false),
        Zero::Int => visitor.visit_u64(0),
        Zero::Float => visitor.visit_f64(0.0),
        Zero::Str => visitor.visit_str(""),
    }
}

macro_rules! scalar_methods {
    ($($method:ident => $zero:expr),* $(,)?) => {
        $(
            fn $method<V: Visitor<'a>>(self, visitor: V) -> Result<V::Value, DeError> {
                if self.value.is_null() {
                    return visit_zero(visitor, $zero).map_err(|e| self.locate(e));
                }
                let me = self.shallow();
                self.visit_any(visitor).map_err(|e| me.locate(e))
            }
        )*
    };
}

impl<'a> de::Deserializer<'a> for De<'a> {
    type Error = DeError;

    fn deserialize_any<V: Visitor<'a>>(self, visitor: V) -> Result<V::Value, DeError> {
        let me = self.shallow();
        self.visit_any(visitor).map_err(|e| me.locate(e))
    }

    scalar_methods! {
        deserialize_bool => Zero::Bool,
        deserialize_i8 => Zero::Int,
        deserialize_i16 => Zero::Int,
        deserialize_i32 => Zero::Int,
        deserialize_i64 => Zero::Int,
        deserialize_u8 => Zero::Int,
        deserialize_u16 => Zero::Int,
        deserialize_u32 => Zero::Int,
        deserialize_u64 => Zero::Int,
        deserialize_f32 => Zero::Float,
        deserialize_f64 => Zero::Float,
        deserialize_char => Zero::Str,
        deserialize_str => Zero::Str,
        deserialize_string => Zero::Str,
    }

    fn deserialize_bytes<V: Visitor<'a>>(self, visitor: V) -> Result<V::Value, DeError> {
        self.deserialize_str(visitor)
    }

    fn deserialize_byte_buf<V: Visitor<'a>>(self, visitor: V) -> Result<V::Value, DeError> {
        self.deserialize_str(visitor)
    }

    fn deserialize_option<V: Visitor<'a>>(self, visitor: V) -> Result<V::Value, DeError> {
        if self.value.is_null() {
            return visitor.visit_none();
        }
        let me = self.shallow();
        let inner = De {
            optional: true,
            ..self
        };
        visitor.visit_some(inner).map_err(|e| me.locate(e))
    }

    fn deserialize_unit<V: Visitor<'a>>(self, visitor: V) -> Result<V::Value, DeError> {
        let me = self.shallow();
        match self.value {
            Value::Null => visitor.visit_unit(),
            _ => self.visit_any(visitor),
        }
        .map_err(|e| me.locate(e))
    }

    fn deserialize_unit_struct<V: Visitor<'a>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value, DeError> {
        self.deserialize_unit(visitor)
    }

    fn deserialize_newtype_struct<V: Visitor<'a>>(
        self,
        name: &'static str,
        visitor: V,
    ) -> Result<V::Value, DeError> {
        let me = self.shallow();
        if name == "Quantity" {
            let text = match self.value {
                Value::String(s) => s.trim().to_string(),
                Value::Number(n) => n.to_string(),
                // Go leaves the zero quantity for null.
                Value::Null => "0".to_string(),
                _ => {
                    let e: DeError =
                        de::Error::invalid_type(de::Unexpected::Other("value"), &"Quantity");
                    return Err(me.locate(e));
                }
            };
            let canonical =
                quantity::canonical(&text).map_err(|msg| me.locate(de::Error::custom(msg)))?;
            let de: de::value::StringDeserializer<DeError> = canonical.into_deserializer();
            return visitor.visit_newtype_struct(de).map_err(|e| me.locate(e));
        }
        let result = visitor.visit_newtype_struct(self);
        result.map_err(|mut e| {
            // Go reports an unparsable time with the layout it tried.
            if let (ErrKind::Custom(msg), Value::String(text)) = (&e.kind, me.value) {
                let layout = match name {
                    "Time" => Some("2006-01-02T15:04:05Z07:00"),
                    "MicroTime" => Some("2006-01-02T15:04:05.000000Z07:00"),
                    _ => None,
                };
                if let Some(layout) = layout {
                    e.kind = ErrKind::Custom(format!("parsing time {text:?} as {layout:?}: {msg}"));
                }
            }
            me.locate(e)
        })
    }

    fn deserialize_seq<V: Visitor<'a>>(self, visitor: V) -> Result<V::Value, DeError> {
        let me = self.shallow();
        match self.value {
            Value::Array(_) | Value::Null => self.visit_array(visitor),
            _ => self.visit_any(visitor),
        }
        .map_err(|e| me.locate(e))
    }

    fn deserialize_tuple<V: Visitor<'a>>(
        self,
        _len: usize,
        visitor: V,
    ) -> Result<V::Value, DeError> {
        self.deserialize_seq(visitor)
    }

    fn deserialize_tuple_struct<V: Visitor<'a>>(
        self,
        _name: &'static str,
        _len: usize,
        visitor: V,
    ) -> Result<V::Value, DeError> {
        self.deserialize_seq(visitor)
    }

    fn deserialize_map<V: Visitor<'a>>(self, visitor: V) -> Result<V::Value, DeError> {
        let me = self.shallow();
        match self.value {
            Value::Object(_) | Value::Null => self.visit_object(visitor, None),
            _ => self.visit_any(visitor),
        }
        .map_err(|e| me.locate(e))
    }

    fn deserialize_struct<V: Visitor<'a>>(
        self,
        name: &'static str,
        fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, DeError> {
        let me = self.shallow();
        match self.value {
            Value::Object(_) | Value::Null => self.visit_object(visitor, Some((name, fields))),
            _ => Err(DeError {
                kind: ErrKind::Mismatch {
                    expected: name.to_string(),
                },
                located: None,
            }),
        }
        .map_err(|e| me.locate(e))
    }

    fn deserialize_enum<V: Visitor<'a>>(
        self,
        _name: &'static str,
        _variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, DeError> {
        let me = self.shallow();
        match self.value {
            Value::String(s) => {
                let de: de::value::BorrowedStrDeserializer<'a, DeError> =
                    de::value::BorrowedStrDeserializer::new(s);
                visitor.visit_enum(de)
            }
            _ => Err(de::Error::custom("expected a string for an enumeration")),
        }
        .map_err(|e| me.locate(e))
    }

    fn deserialize_identifier<V: Visitor<'a>>(self, visitor: V) -> Result<V::Value, DeError> {
        self.deserialize_str(visitor)
    }

    fn deserialize_ignored_any<V: Visitor<'a>>(self, visitor: V) -> Result<V::Value, DeError> {
        visitor.visit_unit()
    }
}

impl<'a> De<'a> {
    /// A copy for locating errors after `self` has been moved into a visitor.
    fn shallow(&self) -> De<'a> {
        De {
            value: self.value,
            path: self.path.clone(),
            ctx: self.ctx,
            struct_name: self.struct_name,
            optional: self.optional,
        }
    }
}
