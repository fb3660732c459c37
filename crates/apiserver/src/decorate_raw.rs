//! The watch cache's decoration (see [`crate::decorate`]) without building a JSON tree:
//! the object is read as borrowed raw members, only the members that selectors need are
//! parsed, and the bytes are re-assembled with `metadata.resourceVersion` spliced in.
//! Returns `None` for anything it cannot read that way (escaped member names, duplicate
//! members, no metadata object); the caller then takes the tree path, which is the
//! reference this one is tested against.

use std::collections::BTreeMap;
use std::fmt;

use bytes::Bytes;
use cairn_store::cache::Decorated;
use cairn_store::Revision;
use serde::de::{Deserialize, Deserializer, MapAccess, Visitor};
use serde_json::value::RawValue;
use serde_json::Value;

use crate::object_fields::{resource_for_key, OWNER_UIDS_FIELD, UID_FIELD};
use crate::objects::field_leaf_string;

/// A JSON object's members in document order, names and values borrowed.
struct RawObject<'a>(Vec<(&'a str, &'a RawValue)>);

impl<'de> Deserialize<'de> for RawObject<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Members;
        impl<'de> Visitor<'de> for Members {
            type Value = RawObject<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut members = Vec::with_capacity(map.size_hint().unwrap_or(8));
                while let Some(member) = map.next_entry::<&'de str, &'de RawValue>()? {
                    members.push(member);
                }
                Ok(RawObject(members))
            }
        }
        d.deserialize_map(Members)
    }
}

impl<'a> RawObject<'a> {
    fn parse(raw: &'a RawValue) -> Option<Self> {
        serde_json::from_str(raw.get()).ok()
    }

    /// The member's value; the last one wins, as when parsing into a tree.
    fn get(&self, name: &str) -> Option<&'a RawValue> {
        self.0
            .iter()
            .rev()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| *v)
    }

    fn has_duplicates(&self) -> bool {
        let names = &self.0;
        names
            .iter()
            .enumerate()
            .any(|(i, (n, _))| names[..i].iter().any(|(m, _)| m == n))
    }
}

/// See the module docs.
pub fn decorate(key: &str, value: &[u8], mod_revision: Revision) -> Option<Decorated> {
    let top: RawObject = serde_json::from_slice(value).ok()?;
    let meta = RawObject::parse(top.get("metadata")?)?;
    if top.has_duplicates() || meta.has_duplicates() {
        return None;
    }
    let labels = labels(&meta)?;
    let mut fields = BTreeMap::new();
    for (field, name) in [
        ("metadata.name", "name"),
        ("metadata.namespace", "namespace"),
        (UID_FIELD, "uid"),
    ] {
        if let Some(v) = meta.get(name).and_then(|raw| leaf(field, raw)) {
            fields.insert(field.to_string(), v);
        }
    }
    if let Some(r) = resource_for_key(key) {
        for f in r.field_selectors {
            if let Some(v) = selector_field(&top, f) {
                fields.insert((*f).to_string(), v);
            }
        }
    }
    if let Some(uids) = owner_uids(&meta)? {
        fields.insert(OWNER_UIDS_FIELD.to_string(), uids);
    }
    let bytes = assemble(&top, &meta, &mod_revision.to_string(), value.len());
    Some(Decorated {
        bytes: Bytes::from(bytes),
        labels,
        fields,
    })
}

/// String-valued labels; `None` when `labels` is not readable as raw members.
fn labels(meta: &RawObject) -> Option<BTreeMap<String, String>> {
    let mut out = BTreeMap::new();
    let Some(raw) = meta.get("labels") else {
        return Some(out);
    };
    if !raw.get().starts_with('{') {
        return Some(out);
    }
    for (k, v) in RawObject::parse(raw)?.0 {
        if v.get().starts_with('"') {
            out.insert(k.to_string(), serde_json::from_str(v.get()).ok()?);
        }
    }
    Some(out)
}

/// The owners' UIDs joined by commas: `Some(None)` when there are none, `None` when
/// `ownerReferences` is not readable here.
fn owner_uids(meta: &RawObject) -> Option<Option<String>> {
    let Some(raw) = meta.get("ownerReferences") else {
        return Some(None);
    };
    if !raw.get().starts_with('[') {
        return Some(None);
    }
    let mut uids = Vec::new();
    for owner in serde_json::from_str::<Vec<&RawValue>>(raw.get()).ok()? {
        if !owner.get().starts_with('{') {
            continue;
        }
        if let Some(uid) = RawObject::parse(owner)?.get("uid") {
            if uid.get().starts_with('"') {
                uids.push(serde_json::from_str::<String>(uid.get()).ok()?);
            }
        }
    }
    Some((!uids.is_empty()).then(|| uids.join(",")))
}

/// A selectable field (`spec.nodeName`, `reason`, `source`) as a string.
fn selector_field(top: &RawObject, path: &str) -> Option<String> {
    let mut parts = path.split('.');
    let mut raw = top.get(parts.next()?)?;
    for part in parts {
        if !raw.get().starts_with('{') {
            return None;
        }
        raw = RawObject::parse(raw)?.get(part)?;
    }
    leaf(path, raw)
}

fn leaf(path: &str, raw: &RawValue) -> Option<String> {
    let v: Value = serde_json::from_str(raw.get()).ok()?;
    field_leaf_string(path, &v)
}

/// The object's bytes with `metadata.resourceVersion` set: replaced where it was, or
/// appended as the last member of `metadata` (where a tree insert puts it).
fn assemble(top: &RawObject, meta: &RawObject, rv: &str, size: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(size + rv.len() + 24);
    out.push(b'{');
    for (i, (name, value)) in top.0.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        push_name(&mut out, name);
        if *name == "metadata" {
            push_metadata(&mut out, meta, rv);
        } else {
            out.extend_from_slice(value.get().as_bytes());
        }
    }
    out.push(b'}');
    out
}

fn push_metadata(out: &mut Vec<u8>, meta: &RawObject, rv: &str) {
    out.push(b'{');
    let mut replaced = false;
    for (i, (name, value)) in meta.0.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        push_name(out, name);
        if *name == "resourceVersion" {
            push_string(out, rv);
            replaced = true;
        } else {
            out.extend_from_slice(value.get().as_bytes());
        }
    }
    if !replaced {
        if !meta.0.is_empty() {
            out.push(b',');
        }
        push_name(out, "resourceVersion");
        push_string(out, rv);
    }
    out.push(b'}');
}

/// A member name that was borrowed from the input, so it holds nothing to escape.
fn push_name(out: &mut Vec<u8>, name: &str) {
    push_string(out, name);
    out.push(b':');
}

/// `s` is a member name borrowed from the input or a decimal revision: nothing to escape.
fn push_string(out: &mut Vec<u8>, s: &str) {
    out.push(b'"');
    out.extend_from_slice(s.as_bytes());
    out.push(b'"');
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decorate::decorate_tree;

    const CASES: &[(&str, &str)] = &[
        (
            "/registry/core/pods/ns/a",
            r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"a","namespace":"ns","uid":"u1","labels":{"app":"web","n":3,"é":"ü"},"ownerReferences":[{"uid":"o1"},{"uid":"o2"},{"kind":"x"},7]},"spec":{"nodeName":"n1","hostNetwork":true,"restartPolicy":"Always"},"status":{"phase":"Running","podIP":"10.0.0.1"}}"#,
        ),
        (
            "/registry/core/pods/ns/b",
            r#"{"metadata":{"name":"b","resourceVersion":"7","labels":null},"spec":{"nodeName":null},"status":"weird"}"#,
        ),
        (
            "/registry/core/pods/ns/c",
            r#"{"metadata":{},"spec":[1,2]}"#,
        ),
        (
            "/registry/core/nodes/n1",
            r#"{"kind":"Node","metadata":{"name":"n1","ownerReferences":{"uid":"x"}},"spec":{"unschedulable":false}}"#,
        ),
        (
            "/registry/core/events/ns/e",
            r#"{"kind":"Event","metadata":{"name":"e.1","namespace":"ns"},"involvedObject":{"kind":"Pod","name":"a","uid":"u"},"reason":"Scheduled","source":{"component":"default-scheduler"},"count":2}"#,
        ),
        (
            "/registry/core/services/ns/s",
            r#"{ "metadata" : { "name" : "s" } , "spec" : { "clusterIP" : "10.96.0.10", "type": "ClusterIP" } , "n": 1.5e3 }"#,
        ),
        (
            "/registry/core/pods/ns/esc",
            r#"{"metadata":{"name":"a\"b","labels":{"k":"v\u00e9"}},"spec":{"nodeName":"n\n1"}}"#,
        ),
    ];

    fn tree_value(d: &Decorated) -> Value {
        serde_json::from_slice(&d.bytes).unwrap()
    }

    #[test]
    fn raw_path_agrees_with_the_tree_path() {
        for (key, json) in CASES {
            let raw = decorate(key, json.as_bytes(), 42).unwrap_or_else(|| panic!("{json}"));
            let tree = decorate_tree(key, json.as_bytes(), 42).unwrap();
            assert_eq!(raw.labels, tree.labels, "{json}");
            assert_eq!(raw.fields, tree.fields, "{json}");
            assert_eq!(tree_value(&raw), tree_value(&tree), "{json}");
        }
    }

    #[test]
    fn compact_input_gives_the_same_bytes() {
        for (key, json) in CASES {
            let compact =
                serde_json::to_vec(&serde_json::from_str::<Value>(json).unwrap()).unwrap();
            let raw = decorate(key, &compact, 9).unwrap();
            let tree = decorate_tree(key, &compact, 9).unwrap();
            assert_eq!(raw.bytes, tree.bytes, "{json}");
        }
    }

    #[test]
    fn unreadable_shapes_fall_back() {
        for json in [
            r#"{"kind":"Pod"}"#,
            r#"{"metadata":null}"#,
            r#"{"metadata":{"name":"a","name":"b"}}"#,
            r#"{"metadata":{"n\u0061me":"a"}}"#,
            r#"{"metadata":{"labels":{"a\"b":"c"}}}"#,
            r#"[1]"#,
            r#"{"#,
        ] {
            assert!(
                decorate("/registry/core/pods/ns/x", json.as_bytes(), 1).is_none(),
                "{json}"
            );
        }
    }
}
