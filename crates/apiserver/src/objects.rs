//! Small helpers over JSON objects: metadata access and timestamps.

use serde_json::{Map, Value};

pub fn now_rfc3339() -> String {
    chrono::Utc::now().format("%Y-%m-%dT%H:%M:%SZ").to_string()
}

pub fn rfc3339_at(t: chrono::DateTime<chrono::Utc>) -> String {
    t.format("%Y-%m-%dT%H:%M:%SZ").to_string()
}

/// `obj.metadata`, created if missing or not an object (the object too, if it is not one).
pub fn metadata_mut(obj: &mut Value) -> &mut Map<String, Value> {
    if !obj.is_object() {
        *obj = Value::Object(Map::new());
    }
    let Value::Object(map) = obj else {
        unreachable!("made an object above")
    };
    let meta = map
        .entry("metadata")
        .or_insert_with(|| Value::Object(Map::new()));
    if !meta.is_object() {
        *meta = Value::Object(Map::new());
    }
    let Value::Object(meta) = meta else {
        unreachable!("made an object above")
    };
    meta
}

pub fn meta_str<'a>(obj: &'a Value, field: &str) -> Option<&'a str> {
    obj.get("metadata")?.get(field)?.as_str()
}

pub fn name_of(obj: &Value) -> &str {
    meta_str(obj, "name").unwrap_or("")
}

pub fn set_meta(obj: &mut Value, field: &str, value: Value) {
    metadata_mut(obj).insert(field.to_string(), value);
}

pub fn remove_meta(obj: &mut Value, field: &str) {
    metadata_mut(obj).remove(field);
}

pub fn finalizers(obj: &Value) -> Vec<String> {
    obj.get("metadata")
        .and_then(|m| m.get("finalizers"))
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|f| f.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

pub fn has_deletion_timestamp(obj: &Value) -> bool {
    meta_str(obj, "deletionTimestamp").is_some()
}

/// Everything but `metadata` and `status`: what a generation bump looks at.
pub fn spec_of(obj: &Value) -> Value {
    match obj {
        Value::Object(m) => Value::Object(
            m.iter()
                .filter(|(k, _)| {
                    !matches!(k.as_str(), "metadata" | "status" | "apiVersion" | "kind")
                })
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
        ),
        other => other.clone(),
    }
}

/// Value at a dotted path (`spec.nodeName`), as the string a field selector compares with.
pub fn field_string(obj: &Value, path: &str) -> Option<String> {
    let mut cur = obj;
    for part in path.split('.') {
        cur = cur.get(part)?;
    }
    field_leaf_string(path, cur)
}

/// A selectable field's value as the string selectors compare with.
pub fn field_leaf_string(path: &str, leaf: &Value) -> Option<String> {
    match leaf {
        Value::String(s) => Some(s.clone()),
        Value::Bool(b) => Some(b.to_string()),
        Value::Number(n) => Some(n.to_string()),
        Value::Object(m) if path == "source" => m
            .get("component")
            .and_then(Value::as_str)
            .map(str::to_string),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn metadata_helpers() {
        let mut v = json!("not an object");
        set_meta(&mut v, "name", json!("a"));
        assert_eq!(name_of(&v), "a");
        let pod = json!({"metadata": {"finalizers": ["x", 3]}, "spec": {"nodeName": "n1", "hostNetwork": true}, "status": {}});
        assert_eq!(finalizers(&pod), vec!["x".to_string()]);
        assert_eq!(field_string(&pod, "spec.nodeName").as_deref(), Some("n1"));
        assert_eq!(
            field_string(&pod, "spec.hostNetwork").as_deref(),
            Some("true")
        );
        assert_eq!(
            spec_of(&pod),
            json!({"spec": {"nodeName": "n1", "hostNetwork": true}})
        );
    }
}
