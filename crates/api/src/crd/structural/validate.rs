//! kube-openapi's `SchemaValidator` (as in Kubernetes 1.33), and apiextensions'
//! translation of its results into field errors (`kubeOpenAPIResultToFieldErrors`).
//!
//! Every schema node runs the same validators in the same order as upstream (type,
//! allOf/anyOf/oneOf/not, string, format, number, array, enum, object), keeps upstream's
//! match counts (which pick the reported branch of a failed `anyOf`/`oneOf`), and words its
//! errors as kube-openapi does: `spec.count in body should be less than or equal to 10`.

use serde_json::{Map, Value};

use super::formats;
use super::gofmt::{self, quote, Num};
use super::pattern;
use super::schema::{AdditionalProperties, Items, Schema, MAX_DEPTH};
use crate::status::Cause;

/// What the field path of an error without a name is (Go's nil `*field.Path`).
pub(crate) const NIL_PATH: &str = "<nil>";

/// Whose conversion of the schema the validator sees.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Mode {
    /// A custom resource: `ConvertJSONSchemaProps` (int-or-string typed `integer,string`,
    /// unsupported formats stripped).
    Resource,
    /// A default value: the structural schema's `ToKubeOpenAPI` (as written).
    Default,
}

/// kube-openapi's error codes, as far as apiextensions tells them apart.
#[derive(Debug, Clone, PartialEq)]
enum Code {
    InvalidType,
    Required,
    Enum(Vec<Value>),
    TooLong(i64),
    TooMany(i64),
    Other,
    /// Not a `*errors.Validation`: reported at the validation's root path.
    Composite,
}

#[derive(Debug, Clone, PartialEq)]
struct OErr {
    name: String,
    code: Code,
    value: Option<Value>,
    msg: String,
}

/// A `validate.Result`: errors (unique by message) and the match count.
#[derive(Debug, Default)]
struct Res {
    errs: Vec<OErr>,
    matches: usize,
}

impl Res {
    fn one(err: OErr) -> Res {
        Res {
            errs: vec![err],
            matches: 0,
        }
    }

    fn ok() -> Res {
        Res {
            errs: Vec::new(),
            matches: 1,
        }
    }

    fn add(&mut self, err: OErr) {
        if !self.errs.iter().any(|e| e.msg == err.msg) {
            self.errs.push(err);
        }
    }

    fn merge(&mut self, other: Res) {
        for e in other.errs {
            self.add(e);
        }
        self.matches += other.matches;
    }

    fn valid(&self) -> bool {
        self.errs.is_empty()
    }
}

fn verr(name: &str, code: Code, value: Option<Value>, msg: String) -> OErr {
    OErr {
        name: name.to_string(),
        code,
        value,
        msg,
    }
}

fn composite(msg: String) -> OErr {
    verr("", Code::Composite, None, msg)
}

/// `errors.InvalidType` with a string value (`... must be of type integer: "string"`).
fn invalid_type(path: &str, type_name: &str, value: &str) -> OErr {
    let msg = format!(
        "{path} in body must be of type {type_name}: {}",
        quote(value)
    );
    verr(path, Code::InvalidType, Some(Value::from(value)), msg)
}

/// Validates `data` against `schema`, reporting errors under `prefix` (`None` for a
/// custom resource, whose errors are rooted at the object).
pub(crate) fn validate_value(
    schema: &Schema,
    data: &Value,
    prefix: Option<&str>,
    mode: Mode,
    root_metadata_only: bool,
) -> Vec<Cause> {
    let v = Validator {
        mode,
        root_metadata_only,
    };
    let res = v.node(schema, data, "", 0);
    res.errs.iter().map(|e| to_cause(e, prefix)).collect()
}

fn to_cause(e: &OErr, prefix: Option<&str>) -> Cause {
    let root = prefix.unwrap_or(NIL_PATH);
    let name = e.name.strip_prefix('.').unwrap_or(&e.name);
    let field = match prefix {
        _ if e.name.is_empty() || e.name == "." => root.to_string(),
        Some(p) => gofmt::child(p, name),
        None => name.to_string(),
    };
    let value = e.value.clone().unwrap_or_else(|| Value::from(""));
    match &e.code {
        Code::Composite => gofmt::invalid_str(root, "", &e.msg),
        Code::Required => gofmt::required(&field, ""),
        Code::Enum(values) => {
            let valid: Vec<String> = values
                .iter()
                .map(|v| v.as_str().map_or_else(|| gofmt::json(v), str::to_string))
                .collect();
            gofmt::not_supported(&field, e.value.as_ref().unwrap_or(&Value::Null), &valid)
        }
        Code::TooLong(max) => gofmt::too_long(&field, *max),
        Code::TooMany(max) => {
            let actual = e.value.as_ref().and_then(Value::as_i64).unwrap_or(-1);
            gofmt::too_many(&field, actual, *max)
        }
        Code::InvalidType => gofmt::type_invalid(&field, &value, &e.msg),
        Code::Other => gofmt::invalid(&field, &value, &e.msg),
    }
}

struct Validator {
    mode: Mode,
    root_metadata_only: bool,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Kind {
    Str,
    Num,
    Array,
    Object,
    Other,
}

fn kind_of(v: &Value) -> Kind {
    match v {
        Value::String(_) => Kind::Str,
        Value::Number(_) => Kind::Num,
        Value::Array(_) => Kind::Array,
        Value::Object(_) => Kind::Object,
        _ => Kind::Other,
    }
}

impl Validator {
    fn types<'s>(&self, s: &'s Schema) -> Vec<&'s str> {
        if self.mode == Mode::Resource && s.int_or_string {
            vec!["integer", "string"]
        } else if s.ty.is_empty() {
            Vec::new()
        } else {
            vec![s.ty.as_str()]
        }
    }

    fn format<'s>(&self, s: &'s Schema) -> &'s str {
        match self.mode {
            Mode::Resource if !formats::known(&s.format) => "",
            _ => &s.format,
        }
    }

    /// `SchemaValidator.Validate`.
    fn node(&self, s: &Schema, data: &Value, path: &str, depth: usize) -> Res {
        let mut r = Res::default();
        if depth > MAX_DEPTH {
            return r;
        }
        if data.is_null() {
            r.merge(self.type_check(s, data, path));
            r.merge(enum_check(s, data, path));
            return r;
        }
        let run = |r: &mut Res, res: Res| {
            r.merge(res);
            r.matches += 1;
        };
        if !self.types(s).is_empty() || !self.format(s).is_empty() {
            run(&mut r, self.type_check(s, data, path));
        }
        run(&mut r, self.composition(s, data, path, depth));
        if let Value::String(text) = data {
            run(&mut r, string_check(s, text, path));
            if formats::known(self.format(s)) {
                run(&mut r, format_check(self.format(s), text, path));
            }
        }
        if let Some(n) = Num::of(data) {
            run(&mut r, number_check(s, n, path));
        }
        if let Value::Array(items) = data {
            run(&mut r, self.slice(s, items, path, depth));
        }
        run(&mut r, enum_check(s, data, path));
        if let Value::Object(m) = data {
            run(&mut r, self.object(s, m, path, depth));
        }
        r.matches += 1;
        r
    }

    /// kube-openapi's `typeValidator`.
    fn type_check(&self, s: &Schema, data: &Value, path: &str) -> Res {
        let types = self.types(s);
        let format = self.format(s);
        let joined = types.join(",");
        if data.is_null() {
            if !types.is_empty() && !types.contains(&"null") && !s.nullable {
                return Res::one(invalid_type(path, &joined, "null"));
            }
            return Res::ok();
        }
        let (sch_type, data_format) = match (data, Num::of(data)) {
            (_, Some(Num::Int(_))) => ("integer", "int64"),
            (_, Some(Num::Float(_))) => ("number", "float64"),
            (Value::Bool(_), _) => ("boolean", ""),
            (Value::String(_), _) => ("string", ""),
            (Value::Array(_), _) => ("array", ""),
            _ => ("object", ""),
        };
        let float_int = matches!(Num::of(data), Some(Num::Float(f)) if is_json_integer(f))
            && types.contains(&"integer");
        let int_float = sch_type == "integer" && types.contains(&"number");
        let kind = kind_of(data);
        let textual = matches!(kind, Kind::Str | Kind::Array);
        let matched = types.contains(&sch_type) || float_int || int_float;
        if !(textual || format.is_empty() || matched || data_format == format) {
            return Res::one(invalid_type(path, format, data_format));
        }
        let numeric = types.contains(&"number") || types.contains(&"integer");
        if !numeric && !format.is_empty() && textual {
            return Res::ok();
        }
        if !matched {
            return Res::one(invalid_type(path, &joined, sch_type));
        }
        Res::ok()
    }

    /// kube-openapi's `schemaPropsValidator`: anyOf, oneOf, allOf and not.
    fn composition(&self, s: &Schema, data: &Value, path: &str, depth: usize) -> Res {
        let mut main = Res::default();
        let sub = |x: &Schema| self.node(x, data, path, depth + 1);
        if !s.any_of.is_empty() {
            any_of(&s.any_of, &sub, path, &mut main);
        }
        if !s.one_of.is_empty() {
            one_of(&s.one_of, &sub, path, &mut main);
        }
        if !s.all_of.is_empty() {
            let mut validated = 0;
            for x in &s.all_of {
                let r = sub(x);
                validated += usize::from(r.valid());
                main.merge(r);
            }
            if validated != s.all_of.len() {
                let extra = if validated == 0 {
                    ". None validated"
                } else {
                    ""
                };
                main.add(composite(format!(
                    "{} must validate all the schemas (allOf){extra}",
                    quote(path)
                )));
            }
        }
        if let Some(not) = &s.not {
            if sub(not).valid() {
                main.add(composite(format!(
                    "{} must not validate the schema (not)",
                    quote(path)
                )));
            }
        }
        main.matches += 1;
        main
    }

    /// kube-openapi's `schemaSliceValidator`.
    fn slice(&self, s: &Schema, items: &[Value], path: &str, depth: usize) -> Res {
        let mut r = Res::default();
        match &s.items {
            Some(Items::Schema(is)) => {
                for (i, x) in items.iter().enumerate() {
                    r.merge(self.node(is, x, &format!("{path}[{i}]"), depth + 1));
                }
            }
            Some(Items::Array(schemas)) => {
                for (i, (is, x)) in schemas.iter().zip(items).enumerate() {
                    r.merge(self.node(is, x, &format!("{path}[{i}]"), depth + 1));
                }
            }
            None => {}
        }
        let size = items.len() as i64;
        if let Some(min) = s.min_items.filter(|m| size < *m) {
            let msg = format!("{path} in body should have at least {min} items");
            r.add(verr(path, Code::Other, Some(Value::from(size)), msg));
        }
        if let Some(max) = s.max_items.filter(|m| size > *m) {
            let msg = format!("{path} in body should have at most {max} items");
            r.add(verr(path, Code::TooMany(max), Some(Value::from(size)), msg));
        }
        if s.unique_items && has_duplicates(items) {
            let msg = format!("{path} in body shouldn't contain duplicates");
            r.add(verr(path, Code::Other, None, msg));
        }
        r.matches += 1;
        r
    }

    /// kube-openapi's `objectValidator`.
    fn object(&self, s: &Schema, m: &Map<String, Value>, path: &str, depth: usize) -> Res {
        let mut r = Res::default();
        let n = m.len() as i64;
        if let Some(min) = s.min_properties.filter(|x| n < *x) {
            let msg = format!("{path} in body should have at least {min} properties");
            r.add(verr(path, Code::Other, Some(Value::from(n)), msg));
        }
        if let Some(max) = s.max_properties.filter(|x| n > *x) {
            let msg = format!("{path} in body should have at most {max} properties");
            r.add(verr(path, Code::TooMany(max), Some(Value::from(n)), msg));
        }
        match &s.additional_properties {
            Some(AdditionalProperties::Bool(false)) => {
                for k in m.keys().filter(|k| s.prop(k).is_none()) {
                    let msg = format!("{path}.{k} in body is a forbidden property");
                    r.add(verr(path, Code::Other, Some(Value::from(k.as_str())), msg));
                }
            }
            Some(AdditionalProperties::Schema(ap)) => {
                for (k, v) in m.iter().filter(|(k, _)| s.prop(k).is_none()) {
                    r.merge(self.node(ap, v, &format!("{path}.{k}"), depth + 1));
                }
            }
            _ => {}
        }
        for (name, ps) in &s.properties {
            let Some(v) = m.get(name) else { continue };
            if self.root_metadata_only && depth == 0 && name == "metadata" {
                r.merge(self.metadata_names(ps, v, depth));
            } else {
                r.merge(self.node(ps, v, &gofmt::child(path, name), depth + 1));
            }
        }
        for k in s.required.iter().filter(|k| !m.contains_key(k.as_str())) {
            let name = format!("{path}.{k}");
            let msg = format!("{name} in body is required");
            r.add(verr(&name, Code::Required, None, msg));
        }
        r
    }

    /// The root `metadata` is the server's; only a schema's restrictions of `name` and
    /// `generateName` (the only ones a CRD may make) are checked.
    fn metadata_names(&self, ms: &Schema, v: &Value, depth: usize) -> Res {
        let mut r = Res::default();
        for field in ["name", "generateName"] {
            if let (Some(fs), Some(x)) = (ms.prop(field), v.get(field)) {
                r.merge(self.node(fs, x, &format!("metadata.{field}"), depth + 2));
            }
        }
        r
    }
}

fn any_of(schemas: &[Schema], sub: &dyn Fn(&Schema) -> Res, path: &str, main: &mut Res) {
    let mut best: Option<Res> = None;
    let mut first_success: Option<Res> = None;
    for x in schemas {
        let r = sub(x);
        if r.valid() {
            best = None;
            first_success = Some(r);
            break;
        }
        if best.as_ref().is_none_or(|b| r.matches > b.matches) {
            best = Some(r);
        }
    }
    if first_success.is_none() {
        main.add(composite(format!(
            "{} must validate at least one schema (anyOf)",
            quote(path)
        )));
    }
    if let Some(b) = best.or(first_success) {
        main.merge(b);
    }
}

fn one_of(schemas: &[Schema], sub: &dyn Fn(&Schema) -> Res, path: &str, main: &mut Res) {
    let mut best: Option<Res> = None;
    let mut first_success: Option<Res> = None;
    let mut validated = 0;
    for x in schemas {
        let r = sub(x);
        if r.valid() {
            validated += 1;
            best = None;
            if first_success.is_none() {
                first_success = Some(r);
            }
            continue;
        }
        if validated == 0 && best.as_ref().is_none_or(|b| r.matches > b.matches) {
            best = Some(r);
        }
    }
    if validated == 1 {
        if let Some(ok) = first_success {
            main.merge(ok);
        }
        return;
    }
    let extra = if validated == 0 {
        "Found none valid".to_string()
    } else {
        format!("Found {validated} valid alternatives")
    };
    main.add(composite(format!(
        "{} must validate one and only one schema (oneOf). {extra}",
        quote(path)
    )));
    if let Some(b) = best {
        main.merge(b);
    }
}

/// kube-openapi's `stringValidator`: the first of maxLength, minLength, pattern to fail.
fn string_check(s: &Schema, text: &str, path: &str) -> Res {
    let len = text.chars().count() as i64;
    let value = || Some(Value::from(text));
    if let Some(max) = s.max_length.filter(|m| len > *m) {
        let msg = format!("{path} in body should be at most {max} chars long");
        return Res::one(verr(path, Code::TooLong(max), value(), msg));
    }
    if let Some(min) = s.min_length.filter(|m| len < *m) {
        let msg = format!("{path} in body should be at least {min} chars long");
        return Res::one(verr(path, Code::Other, value(), msg));
    }
    if !s.pattern.is_empty() {
        let failed = match pattern::compile(&s.pattern) {
            Ok(re) if re.is_match(text) => None,
            Ok(_) => Some(s.pattern.clone()),
            Err(e) => Some(format!("{}, but pattern is invalid: {e}", s.pattern)),
        };
        if let Some(p) = failed {
            let msg = format!("{path} in body should match '{p}'");
            return Res::one(verr(path, Code::Other, value(), msg));
        }
    }
    Res::default()
}

/// kube-openapi's `formatValidator` (`FormatOf`).
fn format_check(format: &str, text: &str, path: &str) -> Res {
    if formats::validates(format, text) {
        return Res::default();
    }
    Res::one(invalid_type(path, format, text))
}

/// Go's `int64(f)` on amd64: truncation, and `math.MinInt64` when out of range.
fn go_int64(f: f64) -> i64 {
    if f.is_nan() || !(-9.223_372_036_854_776e18..9.223_372_036_854_776e18).contains(&f) {
        i64::MIN
    } else {
        f as i64
    }
}

/// go-openapi/swag's `IsFloat64AJSONInteger` (v0.23): integral, within ±(2^53 - 1), up
/// to a relative error of 1e-9.
pub(crate) fn is_json_integer(f: f64) -> bool {
    const MAX: f64 = 9_007_199_254_740_991.0;
    if !f.is_finite() || !(-MAX..=MAX).contains(&f) {
        return false;
    }
    // Go's uint64(f) on amd64 wraps negative values through int64.
    let g = if f >= 0.0 {
        f.trunc()
    } else {
        (f.trunc() as i64) as u64 as f64
    };
    let diff = (f - g).abs();
    if f == g || f == (go_int64(f) as f64) {
        return true;
    }
    if f == 0.0 || g == 0.0 || diff < f64::from_bits(1) {
        return diff < 1e-9 * f64::from_bits(1);
    }
    diff / (f.abs() + g.abs()).min(f64::MAX) < 1e-9
}

fn number_err(path: &str, data: Num, msg: String) -> OErr {
    let value = match data {
        Num::Int(i) => Value::from(i),
        Num::Float(f) => Value::from(f),
    };
    verr(path, Code::Other, Some(value), msg)
}

/// kube-openapi's `numberValidator`: multipleOf, minimum, maximum (in that order), on
/// integers with the bounds truncated to integers as upstream does.
fn number_check(s: &Schema, n: Num, path: &str) -> Res {
    let mut r = Res::default();
    if let Some(factor) = s.multiple_of {
        if let Some(e) = multiple_of(n, factor, path) {
            r.add(e);
        }
    }
    if let Some(min) = s.minimum {
        let (fails, bound) = match n {
            Num::Int(v) => {
                let m = go_int64(min);
                (v < m || (s.exclusive_minimum && v == m), m.to_string())
            }
            Num::Float(v) => (
                v < min || (s.exclusive_minimum && v == min),
                gofmt::float(min),
            ),
        };
        if fails {
            let op = if s.exclusive_minimum {
                "greater than"
            } else {
                "greater than or equal to"
            };
            r.add(number_err(
                path,
                n,
                format!("{path} in body should be {op} {bound}"),
            ));
        }
    }
    if let Some(max) = s.maximum {
        let (fails, bound) = match n {
            Num::Int(v) => {
                let m = go_int64(max);
                (v > m || (s.exclusive_maximum && v == m), m.to_string())
            }
            Num::Float(v) => (
                v > max || (s.exclusive_maximum && v == max),
                gofmt::float(max),
            ),
        };
        if fails {
            let op = if s.exclusive_maximum {
                "less than"
            } else {
                "less than or equal to"
            };
            r.add(number_err(
                path,
                n,
                format!("{path} in body should be {op} {bound}"),
            ));
        }
    }
    r.matches += 1;
    r
}

fn multiple_of(n: Num, factor: f64, path: &str) -> Option<OErr> {
    let positive = |repr: String, value: Value| {
        let msg = format!("factor MultipleOf declared for {path} must be positive: {repr}");
        verr(path, Code::Other, Some(value), msg)
    };
    match n {
        Num::Int(v) => {
            let f = go_int64(factor);
            if f <= 0 {
                return Some(positive(f.to_string(), Value::from(f)));
            }
            (v % f != 0).then(|| {
                number_err(
                    path,
                    n,
                    format!("{path} in body should be a multiple of {f}"),
                )
            })
        }
        Num::Float(v) => {
            if factor <= 0.0 {
                return Some(positive(gofmt::float(factor), Value::from(factor)));
            }
            let mult = if factor < 1.0 {
                1.0 / factor * v
            } else {
                v / factor
            };
            (!is_json_integer(mult)).then(|| {
                let f = gofmt::float(factor);
                number_err(
                    path,
                    n,
                    format!("{path} in body should be a multiple of {f}"),
                )
            })
        }
    }
}

/// Whether a Go-decoded `data` equals enum member `e` after Go's reflect conversion of
/// `data` to `e`'s type (so `1.0` matches `1`, and `1.5` matches `1` too, as upstream).
fn enum_eq(data: &Value, e: &Value) -> bool {
    match (data, e) {
        (Value::Null, _) | (_, Value::Null) => false,
        (Value::Number(_), Value::Number(_)) => match (Num::of(data), Num::of(e)) {
            (Some(Num::Int(a)), Some(Num::Int(b))) => a == b,
            (Some(Num::Int(a)), Some(Num::Float(b))) => a as f64 == b,
            (Some(Num::Float(a)), Some(Num::Int(b))) => go_int64(a) == b,
            (Some(Num::Float(a)), Some(Num::Float(b))) => a == b,
            _ => false,
        },
        (Value::Number(_), Value::String(s)) => match Num::of(data) {
            Some(Num::Int(a)) => {
                let c = u32::try_from(a).ok().and_then(char::from_u32);
                c.unwrap_or('\u{fffd}').to_string() == *s
            }
            _ => false,
        },
        (Value::String(a), Value::String(b)) => a == b,
        (Value::Bool(a), Value::Bool(b)) => a == b,
        (Value::Object(_), Value::Object(_)) | (Value::Array(_), Value::Array(_)) => data == e,
        _ => false,
    }
}

/// kube-openapi's `basicCommonValidator` (enum).
fn enum_check(s: &Schema, data: &Value, path: &str) -> Res {
    if s.enum_values.is_empty() || s.enum_values.iter().any(|e| enum_eq(data, e)) {
        return Res::default();
    }
    let listed: Vec<String> = s.enum_values.iter().map(gofmt::json).collect();
    let msg = format!("{path} in body should be one of [{}]", listed.join(" "));
    let code = Code::Enum(s.enum_values.clone());
    Res::one(verr(path, code, Some(data.clone()), msg))
}

fn has_duplicates(items: &[Value]) -> bool {
    items
        .iter()
        .enumerate()
        .any(|(i, x)| items[..i].iter().any(|y| y == x))
}
