//! Pruning (apiextensions' `pruning.PruneWithOptions`) and defaulting
//! (`defaulting.PruneNonNullableNullsWithoutDefaults` then `defaulting.Default`).

use serde_json::{Map, Value};

use super::schema::{Schema, MAX_DEPTH};

const META_FIELDS: [&str; 3] = ["apiVersion", "kind", "metadata"];

fn is_meta(k: &str) -> bool {
    META_FIELDS.contains(&k)
}

/// Removes unknown fields from `x`; with `track`, records their paths (`spec.foo`,
/// `spec.items[0].bar`) in `paths`. `root` treats `s` as a resource (its `apiVersion`,
/// `kind` and `metadata` are left alone), as upstream does for the object and defaults.
pub(crate) fn prune_value(x: &mut Value, s: Option<&Schema>, root: bool, paths: &mut Vec<String>) {
    let mut p = Pruner {
        parent: String::new(),
        paths,
    };
    p.prune(x, s, root, 0);
}

struct Pruner<'p> {
    parent: String,
    paths: &'p mut Vec<String>,
}

impl Pruner<'_> {
    fn with_key<F: FnOnce(&mut Self)>(&mut self, k: &str, f: F) {
        let len = self.parent.len();
        if !self.parent.is_empty() {
            self.parent.push('.');
        }
        self.parent.push_str(k);
        f(self);
        self.parent.truncate(len);
    }

    fn with_index<F: FnOnce(&mut Self)>(&mut self, i: usize, f: F) {
        let len = self.parent.len();
        self.parent.push_str(&format!("[{i}]"));
        f(self);
        self.parent.truncate(len);
    }

    fn record(&mut self, k: &str) {
        let path = if self.parent.is_empty() {
            k.to_string()
        } else {
            format!("{}.{k}", self.parent)
        };
        self.paths.push(path);
    }

    fn prune(&mut self, x: &mut Value, s: Option<&Schema>, root: bool, depth: usize) {
        if depth > MAX_DEPTH {
            return;
        }
        if let Some(s) = s.filter(|s| s.preserves()) {
            return self.skip_prune(x, s, root, depth);
        }
        match x {
            Value::Object(m) => match s {
                None => {
                    for k in m.keys() {
                        self.record(k);
                    }
                    m.clear();
                }
                Some(s) => self.prune_object(m, s, root, depth),
            },
            Value::Array(items) => {
                let is = s.and_then(Schema::items_schema);
                for (i, v) in items.iter_mut().enumerate() {
                    self.with_index(i, |p| p.prune(v, is, false, depth + 1));
                }
            }
            _ => {}
        }
    }

    fn prune_object(&mut self, m: &mut Map<String, Value>, s: &Schema, root: bool, depth: usize) {
        let embedded = root || s.embedded_resource;
        let mut unknown = Vec::new();
        for (k, v) in m.iter_mut() {
            if embedded && is_meta(k) {
                continue;
            }
            if let Some(p) = s.prop(k) {
                self.with_key(k, |me| me.prune(v, Some(p), false, depth + 1));
            } else if let Some(ap) = &s.additional_properties {
                self.with_key(k, |me| me.prune(v, ap.schema(), false, depth + 1));
            } else {
                if !is_meta(k) || !self.parent.is_empty() {
                    self.record(k);
                }
                unknown.push(k.clone());
            }
        }
        if !unknown.is_empty() {
            m.retain(|k, _| !unknown.contains(k));
        }
    }

    /// Below `x-kubernetes-preserve-unknown-fields`: unknown fields stay, but declared
    /// ones are pruned by their own schemas.
    fn skip_prune(&mut self, x: &mut Value, s: &Schema, root: bool, depth: usize) {
        match x {
            Value::Object(m) => {
                let embedded = root || s.embedded_resource;
                for (k, v) in m.iter_mut() {
                    if embedded && is_meta(k) {
                        continue;
                    }
                    if let Some(p) = s.prop(k) {
                        self.with_key(k, |me| me.prune(v, Some(p), false, depth + 1));
                    } else if let Some(ap) = &s.additional_properties {
                        self.with_key(k, |me| me.prune(v, ap.schema(), false, depth + 1));
                    }
                }
            }
            Value::Array(items) => {
                let Some(is) = s.items_schema() else { return };
                for (i, v) in items.iter_mut().enumerate() {
                    self.with_index(i, |p| p.skip_prune(v, is, false, depth + 1));
                }
            }
            _ => {}
        }
    }
}

fn non_nullable_null(x: &Value, s: Option<&Schema>) -> bool {
    x.is_null() && s.is_some_and(|s| !s.nullable)
}

/// The schema of field `k` of an object described by `s`.
fn field_schema<'s>(s: Option<&'s Schema>, k: &str) -> Option<&'s Schema> {
    let s = s?;
    s.prop(k)
        .or_else(|| s.additional_properties.as_ref().and_then(|a| a.schema()))
}

/// Drops `null`s the schema does not allow and has no default for.
pub(crate) fn prune_non_nullable_nulls(x: &mut Value, s: Option<&Schema>, depth: usize) {
    if depth > MAX_DEPTH {
        return;
    }
    match x {
        Value::Object(m) => {
            m.retain(|k, v| {
                let fs = field_schema(s, k);
                !(non_nullable_null(v, fs) && fs.is_some_and(|f| f.default_value().is_none()))
            });
            for (k, v) in m.iter_mut() {
                prune_non_nullable_nulls(v, field_schema(s, k), depth + 1);
            }
        }
        Value::Array(items) => {
            let is = s.and_then(Schema::items_schema);
            for v in items {
                prune_non_nullable_nulls(v, is, depth + 1);
            }
        }
        _ => {}
    }
}

/// Fills defaults where fields are absent, or `null` but not nullable.
pub(crate) fn default_value(x: &mut Value, s: Option<&Schema>, depth: usize) {
    let Some(s) = s.filter(|_| depth <= MAX_DEPTH) else {
        return;
    };
    match x {
        Value::Object(m) => {
            for (k, prop) in &s.properties {
                let Some(d) = prop.default_value() else {
                    continue;
                };
                let missing = m.get(k).is_none_or(|v| non_nullable_null(v, Some(prop)));
                if missing {
                    m.insert(k.clone(), d.clone());
                }
            }
            let aps = s.additional_properties.as_ref().and_then(|a| a.schema());
            for (k, v) in m.iter_mut() {
                if let Some(p) = s.prop(k) {
                    default_value(v, Some(p), depth + 1);
                } else if s.additional_properties.is_some() {
                    if non_nullable_null(v, aps) {
                        *v = aps
                            .and_then(Schema::default_value)
                            .cloned()
                            .unwrap_or(Value::Null);
                    }
                    default_value(v, aps, depth + 1);
                }
            }
        }
        Value::Array(items) => {
            let is = s.items_schema();
            for v in items {
                if non_nullable_null(v, is) {
                    *v = is
                        .and_then(Schema::default_value)
                        .cloned()
                        .unwrap_or(Value::Null);
                }
                default_value(v, is, depth + 1);
            }
        }
        _ => {}
    }
}
