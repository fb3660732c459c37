//! A schema node as apiextensions' `JSONSchemaProps` holds it, read from JSON.
//!
//! Reading is lenient: a keyword of the wrong JSON type reads as absent, and (when a sink
//! is given) is reported, as the CRD's decoding would have refused it. Nesting deeper than
//! [`MAX_DEPTH`] is cut off (and reported) so hostile input cannot exhaust the stack.

use serde_json::{Map, Value};

use super::gofmt::{index, invalid, key};
use crate::status::Cause;

/// How deep schemas (and the objects they describe) are followed.
pub(crate) const MAX_DEPTH: usize = 100;

/// `additionalProperties`: a boolean or a schema.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum AdditionalProperties {
    Bool(bool),
    Schema(Box<Schema>),
}

impl AdditionalProperties {
    /// The schema values of the map must match, if one is given.
    pub(crate) fn schema(&self) -> Option<&Schema> {
        match self {
            AdditionalProperties::Schema(s) => Some(s),
            AdditionalProperties::Bool(_) => None,
        }
    }
}

/// `items`: one schema, or (not structural) an array of them.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Items {
    Schema(Box<Schema>),
    Array(Vec<Schema>),
}

/// Keywords Kubernetes rejects in CRD schemas, by presence.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Unsupported {
    pub id: String,
    pub schema: String,
    pub reference: Option<String>,
    pub pattern_properties: bool,
    pub definitions: bool,
    pub dependencies: bool,
    pub additional_items: bool,
}

/// One schema node. Empty strings and `false` stand for absent, as Go's zero values do.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Schema {
    pub ty: String,
    pub format: String,
    pub title: String,
    pub description: String,
    pub nullable: bool,
    /// `Some(Value::Null)` for `default: null` (present, but no default value).
    pub default: Option<Value>,
    pub example: Option<Value>,
    pub external_docs: bool,
    pub maximum: Option<f64>,
    pub exclusive_maximum: bool,
    pub minimum: Option<f64>,
    pub exclusive_minimum: bool,
    pub max_length: Option<i64>,
    pub min_length: Option<i64>,
    pub pattern: String,
    pub max_items: Option<i64>,
    pub min_items: Option<i64>,
    pub unique_items: bool,
    pub multiple_of: Option<f64>,
    pub enum_values: Vec<Value>,
    pub max_properties: Option<i64>,
    pub min_properties: Option<i64>,
    pub required: Vec<String>,
    /// In the schema's order.
    pub properties: Vec<(String, Schema)>,
    pub additional_properties: Option<AdditionalProperties>,
    pub items: Option<Items>,
    pub all_of: Vec<Schema>,
    pub any_of: Vec<Schema>,
    pub one_of: Vec<Schema>,
    pub not: Option<Box<Schema>>,
    pub preserve_unknown_fields: Option<bool>,
    pub embedded_resource: bool,
    pub int_or_string: bool,
    pub list_type: Option<String>,
    pub list_map_keys: Vec<String>,
    pub map_type: Option<String>,
    /// The number of `x-kubernetes-validations` rules.
    pub validations: usize,
    pub unsupported: Unsupported,
}

impl Schema {
    /// Reads a schema, ignoring what is malformed.
    pub(crate) fn lenient(value: &Value) -> Schema {
        Reader { errs: None }.node(value, "", 0)
    }

    /// Reads a schema, reporting what is malformed under `path`.
    pub(crate) fn parse(value: &Value, path: &str, errs: &mut Vec<Cause>) -> Schema {
        Reader { errs: Some(errs) }.node(value, path, 0)
    }

    /// The schema of property `name`.
    pub(crate) fn prop(&self, name: &str) -> Option<&Schema> {
        self.properties
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, s)| s)
    }

    /// The single `items` schema, if there is one.
    pub(crate) fn items_schema(&self) -> Option<&Schema> {
        match &self.items {
            Some(Items::Schema(s)) => Some(s),
            _ => None,
        }
    }

    /// `x-kubernetes-preserve-unknown-fields: true`.
    pub(crate) fn preserves(&self) -> bool {
        self.preserve_unknown_fields == Some(true)
    }

    /// The default value, unless absent or `null` (which Kubernetes treats as no default).
    pub(crate) fn default_value(&self) -> Option<&Value> {
        self.default.as_ref().filter(|d| !d.is_null())
    }
}

struct Reader<'e> {
    errs: Option<&'e mut Vec<Cause>>,
}

impl Reader<'_> {
    fn report(&mut self, field: String, value: &Value, expected: &str) {
        if let Some(errs) = self.errs.as_deref_mut() {
            errs.push(invalid(&field, value, &format!("must be {expected}")));
        }
    }

    fn node(&mut self, value: &Value, path: &str, depth: usize) -> Schema {
        let mut s = Schema::default();
        let Some(m) = value.as_object() else {
            self.report(path.to_string(), value, "an object");
            return s;
        };
        if depth > MAX_DEPTH {
            if let Some(errs) = self.errs.as_deref_mut() {
                let detail = format!("must not be nested more than {MAX_DEPTH} levels deep");
                errs.push(super::gofmt::forbidden(path, &detail));
            }
            return s;
        }
        for (k, v) in m {
            let field = super::gofmt::child(path, k);
            if !self.scalar(&mut s, k, v, &field) {
                self.nested(&mut s, k, v, &field, depth);
            }
        }
        s
    }

    /// Reads scalar keywords; false when `k` is not one.
    fn scalar(&mut self, s: &mut Schema, k: &str, v: &Value, field: &str) -> bool {
        match k {
            "type" => s.ty = self.string(v, field),
            "format" => s.format = self.string(v, field),
            "title" => s.title = self.string(v, field),
            "description" => s.description = self.string(v, field),
            "pattern" => s.pattern = self.string(v, field),
            "id" => s.unsupported.id = self.string(v, field),
            "$schema" => s.unsupported.schema = self.string(v, field),
            "$ref" => s.unsupported.reference = Some(self.string(v, field)),
            "nullable" => s.nullable = self.boolean(v, field),
            "exclusiveMaximum" => s.exclusive_maximum = self.boolean(v, field),
            "exclusiveMinimum" => s.exclusive_minimum = self.boolean(v, field),
            "uniqueItems" => s.unique_items = self.boolean(v, field),
            "x-kubernetes-embedded-resource" => s.embedded_resource = self.boolean(v, field),
            "x-kubernetes-int-or-string" => s.int_or_string = self.boolean(v, field),
            "x-kubernetes-preserve-unknown-fields" => {
                s.preserve_unknown_fields = self.opt_boolean(v, field)
            }
            "maximum" => s.maximum = self.number(v, field),
            "minimum" => s.minimum = self.number(v, field),
            "multipleOf" => s.multiple_of = self.number(v, field),
            "maxLength" => s.max_length = self.integer(v, field),
            "minLength" => s.min_length = self.integer(v, field),
            "maxItems" => s.max_items = self.integer(v, field),
            "minItems" => s.min_items = self.integer(v, field),
            "maxProperties" => s.max_properties = self.integer(v, field),
            "minProperties" => s.min_properties = self.integer(v, field),
            "x-kubernetes-list-type" => s.list_type = self.opt_string(v, field),
            "x-kubernetes-map-type" => s.map_type = self.opt_string(v, field),
            "required" => s.required = self.strings(v, field),
            "x-kubernetes-list-map-keys" => s.list_map_keys = self.strings(v, field),
            "default" => s.default = Some(v.clone()),
            "example" => s.example = Some(v.clone()).filter(|v| !v.is_null()),
            _ => return self.presence(s, k, v, field),
        }
        true
    }

    /// Keywords whose presence (not content) matters; false when `k` is not one.
    fn presence(&mut self, s: &mut Schema, k: &str, v: &Value, field: &str) -> bool {
        match k {
            "enum" => s.enum_values = self.array(v, field).cloned().unwrap_or_default(),
            "x-kubernetes-validations" => s.validations = self.array(v, field).map_or(0, Vec::len),
            "externalDocs" => s.external_docs = self.object(v, field).is_some(),
            "patternProperties" => {
                s.unsupported.pattern_properties =
                    self.object(v, field).is_some_and(|m| !m.is_empty())
            }
            "definitions" => {
                s.unsupported.definitions = self.object(v, field).is_some_and(|m| !m.is_empty())
            }
            "dependencies" => s.unsupported.dependencies = self.object(v, field).is_some(),
            "additionalItems" => s.unsupported.additional_items = !v.is_null(),
            _ => return false,
        }
        true
    }

    fn object<'v>(&mut self, v: &'v Value, field: &str) -> Option<&'v Map<String, Value>> {
        match v {
            Value::Object(m) => Some(m),
            Value::Null => None,
            _ => {
                self.report(field.to_string(), v, "an object");
                None
            }
        }
    }

    fn nested(&mut self, s: &mut Schema, k: &str, v: &Value, field: &str, depth: usize) {
        let d = depth + 1;
        match k {
            "properties" => s.properties = self.properties(v, field, d),
            "additionalProperties" => s.additional_properties = self.schema_or_bool(v, field, d),
            "items" => s.items = self.items(v, field, d),
            "allOf" => s.all_of = self.schemas(v, field, d),
            "anyOf" => s.any_of = self.schemas(v, field, d),
            "oneOf" => s.one_of = self.schemas(v, field, d),
            "not" if !v.is_null() => s.not = Some(Box::new(self.node(v, field, d))),
            _ => {} // unknown keywords are dropped, as decoding JSONSchemaProps does
        }
    }

    fn properties(&mut self, v: &Value, field: &str, depth: usize) -> Vec<(String, Schema)> {
        match v {
            Value::Object(m) => m
                .iter()
                .map(|(k, p)| (k.clone(), self.node(p, &key(field, k), depth)))
                .collect(),
            Value::Null => Vec::new(),
            _ => {
                self.report(field.to_string(), v, "an object");
                Vec::new()
            }
        }
    }

    fn schema_or_bool(
        &mut self,
        v: &Value,
        field: &str,
        depth: usize,
    ) -> Option<AdditionalProperties> {
        match v {
            Value::Bool(b) => Some(AdditionalProperties::Bool(*b)),
            Value::Object(_) => Some(AdditionalProperties::Schema(Box::new(
                self.node(v, field, depth),
            ))),
            Value::Null => None,
            _ => {
                self.report(field.to_string(), v, "an object or a boolean");
                None
            }
        }
    }

    fn items(&mut self, v: &Value, field: &str, depth: usize) -> Option<Items> {
        match v {
            Value::Object(_) => Some(Items::Schema(Box::new(self.node(v, field, depth)))),
            Value::Array(a) if a.is_empty() => None,
            Value::Array(_) => Some(Items::Array(self.schemas(v, field, depth))),
            Value::Null => None,
            _ => {
                self.report(field.to_string(), v, "an object or an array");
                None
            }
        }
    }

    fn schemas(&mut self, v: &Value, field: &str, depth: usize) -> Vec<Schema> {
        let Some(a) = self.array(v, field) else {
            return Vec::new();
        };
        a.iter()
            .enumerate()
            .map(|(i, x)| self.node(x, &index(field, i), depth))
            .collect()
    }

    fn array<'v>(&mut self, v: &'v Value, field: &str) -> Option<&'v Vec<Value>> {
        match v {
            Value::Array(a) => Some(a),
            Value::Null => None,
            _ => {
                self.report(field.to_string(), v, "an array");
                None
            }
        }
    }

    fn strings(&mut self, v: &Value, field: &str) -> Vec<String> {
        let Some(a) = self.array(v, field) else {
            return Vec::new();
        };
        let mut out = Vec::new();
        for (i, x) in a.iter().enumerate() {
            match x.as_str() {
                Some(s) => out.push(s.to_string()),
                None => self.report(index(field, i), x, "a string"),
            }
        }
        out
    }

    fn opt_string(&mut self, v: &Value, field: &str) -> Option<String> {
        match v {
            Value::String(s) => Some(s.clone()),
            Value::Null => None,
            _ => {
                self.report(field.to_string(), v, "a string");
                None
            }
        }
    }

    fn string(&mut self, v: &Value, field: &str) -> String {
        self.opt_string(v, field).unwrap_or_default()
    }

    fn opt_boolean(&mut self, v: &Value, field: &str) -> Option<bool> {
        match v {
            Value::Bool(b) => Some(*b),
            Value::Null => None,
            _ => {
                self.report(field.to_string(), v, "a boolean");
                None
            }
        }
    }

    fn boolean(&mut self, v: &Value, field: &str) -> bool {
        self.opt_boolean(v, field).unwrap_or(false)
    }

    fn number(&mut self, v: &Value, field: &str) -> Option<f64> {
        match v {
            Value::Number(n) => n.as_f64(),
            Value::Null => None,
            _ => {
                self.report(field.to_string(), v, "a number");
                None
            }
        }
    }

    fn integer(&mut self, v: &Value, field: &str) -> Option<i64> {
        match v {
            Value::Number(n) if n.as_i64().is_some() => n.as_i64(),
            Value::Null => None,
            _ => {
                self.report(field.to_string(), v, "an integer");
                None
            }
        }
    }
}
