//! `meta.k8s.io/v1` Tables, as Kubernetes' printers (pkg/printers/internalversion) build them
//! for `kubectl get`: the same columns, in the same order, with the same cell values.
//!
//! Like the API server, rows always carry the `-o wide` cells (priority 1 columns); kubectl
//! hides them unless asked. AGE and the other "… ago" cells are computed here from `now`
//! with Kubernetes' `duration.HumanDuration`.

use std::collections::{BTreeMap, BTreeSet};

use chrono::{DateTime, Utc};
use serde_json::{json, Map, Value};

use crate::registry::ResourceInfo;

pub(crate) mod column;
pub(crate) mod custom;
pub(crate) mod format;
pub(crate) mod rows;
pub(crate) mod storage_quota;
pub(crate) mod workloads;

pub use custom::custom_table;
use format::*;

/// What a row's `object` holds (`includeObject` query parameter).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum IncludeObject {
    None,
    /// `PartialObjectMetadata` with the object's metadata: the default.
    #[default]
    Metadata,
    Object,
}

/// Table options of a request (`meta.k8s.io/v1` `TableOptions`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TableOptions {
    /// Leave out `columnDefinitions` (watch events after the first).
    pub no_headers: bool,
    pub include_object: IncludeObject,
}

/// The Table of `objects` (all of `resource`'s kind), with headers and metadata-only objects.
/// The server fills `metadata.resourceVersion`/`continue`.
pub fn table(resource: &ResourceInfo, objects: &[Value], now: DateTime<Utc>) -> Value {
    table_with_options(resource, objects, now, TableOptions::default())
}

/// [`table`] with explicit options.
pub fn table_with_options(
    resource: &ResourceInfo,
    objects: &[Value],
    now: DateTime<Utc>,
    options: TableOptions,
) -> Value {
    let rows: Vec<Value> = objects
        .iter()
        .map(|obj| {
            let (cells, conditions) = row_cells(resource, obj, now);
            let mut row = Map::new();
            row.insert("cells".into(), Value::Array(cells));
            if !conditions.is_empty() {
                row.insert("conditions".into(), Value::Array(conditions));
            }
            match options.include_object {
                IncludeObject::None => {}
                IncludeObject::Metadata => {
                    let metadata = obj.get("metadata").cloned().unwrap_or_else(|| json!({}));
                    row.insert(
                        "object".into(),
                        json!({"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": metadata}),
                    );
                }
                IncludeObject::Object => {
                    row.insert("object".into(), obj.clone());
                }
            }
            Value::Object(row)
        })
        .collect();
    let mut out = Map::new();
    out.insert("kind".into(), json!("Table"));
    out.insert("apiVersion".into(), json!("meta.k8s.io/v1"));
    out.insert("metadata".into(), json!({}));
    if !options.no_headers {
        out.insert(
            "columnDefinitions".into(),
            Value::Array(column_definitions(resource)),
        );
    }
    out.insert("rows".into(), Value::Array(rows));
    Value::Object(out)
}

// ---------------------------------------------------------------------------------------------
// Column definitions

pub use column::Col;

pub(crate) const fn col(name: &'static str, ty: &'static str, description: &'static str) -> Col {
    Col {
        name,
        ty,
        format: "",
        description,
        priority: 0,
    }
}

pub(crate) const fn wide(name: &'static str, ty: &'static str, description: &'static str) -> Col {
    Col {
        name,
        ty,
        format: "",
        description,
        priority: 1,
    }
}

pub(crate) const NAME: Col = Col {
    name: "Name",
    ty: "string",
    format: "name",
    description: DESC_NAME,
    priority: 0,
};
pub(crate) const AGE: Col = col("Age", "string", DESC_CREATION);

pub(crate) const DESC_NAME: &str = "Name must be unique within a namespace. Is required when creating resources, although some resources may allow a client to request the generation of an appropriate name automatically. Name is primarily intended for creation idempotence and configuration definition. Cannot be updated. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names";
pub(crate) const DESC_CREATION: &str = "CreationTimestamp is a timestamp representing the server time when this object was created. It is not guaranteed to be set in happens-before order across separate operations. Clients may not set this value. It is represented in RFC3339 form and is in UTC.\n\nPopulated by the system. Read-only. Null for lists. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata";
pub(crate) const DESC_CONTAINERS: &str = "Names of each container in the template.";
pub(crate) const DESC_IMAGES: &str = "Images referenced by each container in the template.";

pub(crate) fn columns(resource: &ResourceInfo) -> Vec<Col> {
    match resource.strategy.columns {
        Some(columns) => columns(),
        None => vec![
            NAME,
            Col {
                name: "Created At",
                ty: "date",
                ..AGE
            },
        ],
    }
}

pub(crate) const DESC_NODE_ADDRESSES: &str = "List of addresses reachable to the node. Queried from cloud provider, if available. More info: https://kubernetes.io/docs/reference/node/node-status/#addresses Note: This field is declared as mergeable, but the merge key is not sufficiently unique, which can cause data corruption when it is merged. Callers should instead use a full-replacement patch. See https://pr.k8s.io/79391 for an example. Consumers should assume that addresses can change during the lifetime of a Node. However, there are some exceptions where this may not be possible, such as Pods that inherit a Node's address in its own status or consumers of the downward API (status.hostIP).";

/// The `columnDefinitions` of `resource`'s Table.
pub fn column_definitions(resource: &ResourceInfo) -> Vec<Value> {
    columns(resource)
        .into_iter()
        .map(|c| {
            json!({"name": c.name, "type": c.ty, "format": c.format, "description": c.description, "priority": c.priority})
        })
        .collect()
}

// ---------------------------------------------------------------------------------------------
// Durations and timestamps

/// Kubernetes' `duration.HumanDuration`: `45s`, `3m2s`, `65m`, `3h10m`, `2d3h`, `400d`, `3y2d`.
pub fn human_duration(d: chrono::Duration) -> String {
    let seconds = d.num_seconds();
    if seconds < -1 {
        return "<invalid>".to_string();
    } else if seconds < 0 {
        return "0s".to_string();
    } else if seconds < 60 * 2 {
        return format!("{seconds}s");
    }
    let minutes = d.num_minutes();
    if minutes < 10 {
        let s = seconds % 60;
        if s == 0 {
            return format!("{minutes}m");
        }
        return format!("{minutes}m{s}s");
    } else if minutes < 60 * 3 {
        return format!("{minutes}m");
    }
    let hours = d.num_hours();
    if hours < 8 {
        let m = minutes % 60;
        if m == 0 {
            return format!("{hours}h");
        }
        format!("{hours}h{m}m")
    } else if hours < 48 {
        format!("{hours}h")
    } else if hours < 24 * 8 {
        let h = hours % 24;
        if h == 0 {
            return format!("{}d", hours / 24);
        }
        format!("{}d{h}h", hours / 24)
    } else if hours < 24 * 365 * 2 {
        format!("{}d", hours / 24)
    } else if hours < 24 * 365 * 8 {
        let dy = (hours / 24) % 365;
        if dy == 0 {
            return format!("{}y", hours / 24 / 365);
        }
        format!("{}y{dy}d", hours / 24 / 365)
    } else {
        format!("{}y", hours / 24 / 365)
    }
}

pub(crate) fn parse_time(v: Option<&Value>) -> Option<DateTime<Utc>> {
    let t = DateTime::parse_from_rfc3339(v?.as_str()?)
        .ok()?
        .with_timezone(&Utc);
    // Go's zero time prints as unknown too.
    (t.timestamp() != ZERO_TIME).then_some(t)
}

/// `0001-01-01T00:00:00Z`, Go's zero `time.Time`.
pub(crate) const ZERO_TIME: i64 = -62_135_596_800;

/// `translateTimestampSince`: the age of a timestamp, `<unknown>` when missing or invalid.
pub fn age(timestamp: Option<&Value>, now: DateTime<Utc>) -> String {
    match parse_time(timestamp) {
        Some(t) => human_duration(now - t),
        None => "<unknown>".to_string(),
    }
}

// ---------------------------------------------------------------------------------------------
// Accessors: wrong types read as absent

pub(crate) fn get<'a>(v: &'a Value, path: &[&str]) -> Option<&'a Value> {
    let mut cur = v;
    for k in path {
        cur = cur.get(k)?;
    }
    (!cur.is_null()).then_some(cur)
}

pub(crate) fn get_str<'a>(v: &'a Value, path: &[&str]) -> &'a str {
    get(v, path).and_then(Value::as_str).unwrap_or("")
}

pub(crate) fn get_int(v: &Value, path: &[&str]) -> i64 {
    get(v, path).and_then(Value::as_i64).unwrap_or(0)
}

pub(crate) fn get_arr<'a>(v: &'a Value, path: &[&str]) -> &'a [Value] {
    get(v, path)
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice)
}

pub(crate) fn obj_len(v: &Value, path: &[&str]) -> i64 {
    get(v, path)
        .and_then(Value::as_object)
        .map_or(0, |m| m.len() as i64)
}

pub(crate) fn or_none(s: &str) -> String {
    if s.is_empty() {
        "<none>".to_string()
    } else {
        s.to_string()
    }
}

// ---------------------------------------------------------------------------------------------
// Rows

pub(crate) fn row_cells(
    resource: &ResourceInfo,
    obj: &Value,
    now: DateTime<Utc>,
) -> (Vec<Value>, Vec<Value>) {
    let name = json!(get_str(obj, &["metadata", "name"]));
    let created = age(get(obj, &["metadata", "creationTimestamp"]), now);
    if let Some(row) = resource.strategy.row {
        let conditions = resource
            .strategy
            .row_conditions
            .map_or_else(Vec::new, |c| c(obj));
        return (row(obj, name, &created, now), conditions);
    }
    {
        let created_at = parse_time(get(obj, &["metadata", "creationTimestamp"]))
            .map(|t| t.format("%Y-%m-%dT%H:%M:%SZ").to_string())
            .unwrap_or_else(|| "0001-01-01T00:00:00Z".to_string());
        (vec![name, json!(created_at)], Vec::new())
    }
}

#[cfg(test)]
mod tests;
