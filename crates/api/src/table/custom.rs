//! Tables of custom resources: `Name`, then the CRD version's `additionalPrinterColumns`
//! (or `Age` when it has none), as apiextensions-apiserver's table convertor builds them.
//! Each column's JSONPath is evaluated against the object; its first result becomes the
//! cell, typed by the column's `type` (`date` as an age, a mismatched type as `null`).

use chrono::{DateTime, Utc};
use serde_json::{json, Map, Value};

use super::{age, get_str, DESC_CREATION, DESC_NAME};
use crate::jsonpath::JsonPath;

pub(crate) fn default_columns() -> Vec<Value> {
    vec![
        json!({"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp", "description": DESC_CREATION}),
    ]
}

/// The Table of custom resources whose CRD version has `printer_columns`.
pub fn custom_table(printer_columns: &[Value], objects: &[Value], now: DateTime<Utc>) -> Value {
    let columns = if printer_columns.is_empty() {
        default_columns()
    } else {
        printer_columns.to_vec()
    };
    let paths: Vec<Option<JsonPath>> = columns
        .iter()
        .map(|c| JsonPath::parse(c["jsonPath"].as_str().unwrap_or("")).ok())
        .collect();
    let mut definitions = vec![
        json!({"name": "Name", "type": "string", "format": "name", "description": DESC_NAME, "priority": 0}),
    ];
    definitions.extend(columns.iter().map(|c| {
        json!({
            "name": c["name"].as_str().unwrap_or(""),
            "type": c["type"].as_str().unwrap_or("string"),
            "format": c["format"].as_str().unwrap_or(""),
            "description": c["description"].as_str().unwrap_or(""),
            "priority": c["priority"].as_i64().unwrap_or(0),
        })
    }));
    let rows: Vec<Value> = objects
        .iter()
        .map(|obj| {
            let mut cells = vec![json!(get_str(obj, &["metadata", "name"]))];
            for (column, path) in columns.iter().zip(&paths) {
                let found = path.as_ref().and_then(|p| p.find(obj).into_iter().next());
                cells.push(cell(column["type"].as_str().unwrap_or(""), found, now));
            }
            let metadata = obj.get("metadata").cloned().unwrap_or_else(|| json!({}));
            let mut row = Map::new();
            row.insert("cells".into(), Value::Array(cells));
            row.insert(
                "object".into(),
                json!({"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": metadata}),
            );
            Value::Object(row)
        })
        .collect();
    json!({"kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": {},
        "columnDefinitions": definitions, "rows": rows})
}

/// One cell (upstream `cellForJSONValue`; strings print any value as JSONPath prints it).
pub(crate) fn cell(column_type: &str, value: Option<&Value>, now: DateTime<Utc>) -> Value {
    let Some(value) = value.filter(|v| !v.is_null()) else {
        return Value::Null;
    };
    match (column_type, value) {
        ("integer", Value::Number(n)) => n
            .as_i64()
            .or_else(|| n.as_f64().map(|f| f as i64))
            .map_or(Value::Null, Value::from),
        ("number", Value::Number(n)) => n.as_f64().map_or(Value::Null, Value::from),
        ("boolean", Value::Bool(b)) => Value::Bool(*b),
        ("date", Value::String(_)) => match age(Some(value), now) {
            a if a == "<unknown>" => json!("<invalid>"),
            a => json!(a),
        },
        ("string", Value::String(s)) => json!(s),
        ("string", other) => json!(other.to_string()),
        _ => Value::Null,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_and_cells() {
        let columns = vec![
            json!({"name": "Ready", "type": "string", "jsonPath": ".status.conditions[?(@.type==\"Ready\")].status"}),
            json!({"name": "Replicas", "type": "integer", "jsonPath": ".spec.replicas", "priority": 1}),
            json!({"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}),
            json!({"name": "Wrong", "type": "integer", "jsonPath": ".spec.name"}),
        ];
        let now = Utc::now();
        let created = (now - chrono::Duration::minutes(5)).to_rfc3339();
        let obj = json!({"metadata": {"name": "w", "creationTimestamp": created},
            "spec": {"replicas": 3, "name": "x"}, "status": {"conditions": [{"type": "Ready", "status": "True"}]}});
        let t = custom_table(&columns, &[obj, json!("garbage")], now);
        assert_eq!(t["columnDefinitions"][0]["name"], "Name");
        assert_eq!(t["columnDefinitions"][2]["priority"], 1);
        assert_eq!(t["rows"][0]["cells"], json!(["w", "True", 3, "5m", null]));
        assert_eq!(t["rows"][1]["cells"], json!(["", null, null, null, null]));
        let plain = custom_table(
            &[],
            &[json!({"metadata": {"name": "a", "creationTimestamp": "bad"}})],
            now,
        );
        assert_eq!(plain["columnDefinitions"][1]["name"], "Age");
        assert_eq!(plain["rows"][0]["cells"], json!(["a", "<invalid>"]));
    }
}
