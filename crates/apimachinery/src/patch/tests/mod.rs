use super::*;
use serde_json::json;

fn smp(original: Value, patch: Value, kind: &str) -> Value {
    strategic_merge_patch(&original, &patch, kind)
        .unwrap_or_else(|e| panic!("strategic merge patch failed: {e}"))
}

fn smp_err(original: Value, patch: Value, kind: &str) -> String {
    match strategic_merge_patch(&original, &patch, kind) {
        Ok(v) => panic!("expected an error, got {v}"),
        Err(e) => e.to_string(),
    }
}

fn keys(v: &Value) -> Vec<&str> {
    v.as_object()
        .map(|m| m.keys().map(String::as_str).collect())
        .unwrap_or_default()
}

fn wrap(key: &str, v: Value) -> Value {
    let mut m = Map::new();
    m.insert(key.to_string(), v);
    Value::Object(m)
}

mod merge_and_json_patch;
mod strategic_merge_patch;
mod upstream_cases;
