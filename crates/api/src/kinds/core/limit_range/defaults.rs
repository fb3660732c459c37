//! LimitRange defaulting (upstream `SetDefaults_LimitRangeItem`): for `Container` items, a
//! missing default limit is the max, a missing default request the default limit, else
//! the min.

use serde_json::{Map, Value};

pub(super) fn default_limit_range(o: &mut Map<String, Value>) {
    let Some(items) = o
        .get_mut("spec")
        .and_then(|s| s.get_mut("limits"))
        .and_then(Value::as_array_mut)
    else {
        return;
    };
    for item in items.iter_mut().filter_map(Value::as_object_mut) {
        if item.get("type").and_then(Value::as_str) != Some("Container") {
            continue;
        }
        let map = |item: &Map<String, Value>, key: &str| {
            item.get(key)
                .and_then(Value::as_object)
                .cloned()
                .unwrap_or_default()
        };
        let (max, min) = (map(item, "max"), map(item, "min"));
        let mut default = map(item, "default");
        for (k, v) in &max {
            default.entry(k.clone()).or_insert_with(|| v.clone());
        }
        let mut request = map(item, "defaultRequest");
        for (k, v) in default.iter().chain(min.iter()) {
            request.entry(k.clone()).or_insert_with(|| v.clone());
        }
        if !default.is_empty() {
            item.insert("default".into(), Value::Object(default));
        }
        if !request.is_empty() {
            item.insert("defaultRequest".into(), Value::Object(request));
        }
    }
}
