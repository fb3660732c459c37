//! Conversion between the shapes of a resource served in more than one version, as
//! kube-apiserver converts through its internal types: `autoscaling/v1` ↔ `autoscaling/v2`
//! HorizontalPodAutoscalers, core `v1` ↔ `events.k8s.io/v1` Events, and the versions of a
//! custom resource whose CRD converts with strategy `None` (only `apiVersion` changes). Objects are stored
//! in one shape ([`crate::registry::storage_of`]) and converted on the way in and out.
//!
//! What the older HPA shape cannot hold is kept in annotations, under upstream's keys, so
//! that a read-modify-write through `autoscaling/v1` loses nothing: metrics other than CPU
//! utilisation, `behavior`, and status conditions and current metrics. (Upstream writes them
//! in the v2beta1-era `autoscaling/v1` MetricSpec shape; here they keep the v2 shape.)

use serde_json::{json, Map, Value};

use crate::registry::ResourceInfo;

/// Upstream's annotation keys for what autoscaling/v1 has no field for.
pub const HPA_METRICS_ANNOTATION: &str = "autoscaling.alpha.kubernetes.io/metrics";
pub const HPA_BEHAVIOR_ANNOTATION: &str = "autoscaling.alpha.kubernetes.io/behavior";
pub const HPA_CONDITIONS_ANNOTATION: &str = "autoscaling.alpha.kubernetes.io/conditions";
pub const HPA_CURRENT_METRICS_ANNOTATION: &str = "autoscaling.alpha.kubernetes.io/current-metrics";

/// An object that cannot be converted between the two shapes.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("converting {kind} from {from} to {to}: {reason}")]
pub struct ConversionError {
    pub kind: String,
    pub from: String,
    pub to: String,
    pub reason: String,
}

/// `obj` (in whatever shape its `apiVersion` says) in the shape of `to`. Objects already in
/// that shape, and kinds without a second shape, come back unchanged.
pub fn convert(obj: &Value, to: &ResourceInfo) -> Result<Value, ConversionError> {
    let from = obj.get("apiVersion").and_then(Value::as_str).unwrap_or("");
    let target = to.api_version();
    if from == target {
        return Ok(obj.clone());
    }
    let error = |reason: &str| ConversionError {
        kind: to.kind.to_string(),
        from: from.to_string(),
        to: target.clone(),
        reason: reason.to_string(),
    };
    let mut out = match (to.kind, from, target.as_str()) {
        ("HorizontalPodAutoscaler", "autoscaling/v1", "autoscaling/v2") => hpa_v1_to_v2(obj),
        ("HorizontalPodAutoscaler", "autoscaling/v2", "autoscaling/v1") => hpa_v2_to_v1(obj),
        ("Event", "v1", "events.k8s.io/v1") => rename_fields(obj, EVENT_FIELDS, false),
        ("Event", "events.k8s.io/v1", "v1") => rename_fields(obj, EVENT_FIELDS, true),
        // Versions of one group with the same fields (custom resources with conversion
        // strategy `None`): only apiVersion changes.
        _ if same_group(from, &target)
            && obj.get("kind").and_then(Value::as_str) == Some(to.kind) =>
        {
            obj.clone()
        }
        _ => return Err(error("no conversion between these versions")),
    };
    if !out.is_object() {
        return Err(error("the object is not a JSON object"));
    }
    out["apiVersion"] = json!(target);
    out["kind"] = json!(to.kind);
    Ok(out)
}

fn same_group(a: &str, b: &str) -> bool {
    match (a.rsplit_once('/'), b.rsplit_once('/')) {
        (Some((ga, _)), Some((gb, _))) => ga == gb,
        _ => false,
    }
}

/// Core v1 Event field → events.k8s.io/v1 Event field (upstream's events/v1 conversion).
const EVENT_FIELDS: &[(&str, &str)] = &[
    ("involvedObject", "regarding"),
    ("message", "note"),
    ("source", "deprecatedSource"),
    ("firstTimestamp", "deprecatedFirstTimestamp"),
    ("lastTimestamp", "deprecatedLastTimestamp"),
    ("count", "deprecatedCount"),
    ("reportingComponent", "reportingController"),
];

fn rename_fields(obj: &Value, pairs: &[(&str, &str)], backwards: bool) -> Value {
    let Some(m) = obj.as_object() else {
        return obj.clone();
    };
    let mut out = Map::new();
    for (k, v) in m {
        let renamed = pairs.iter().find_map(|(a, b)| {
            let (from, to) = if backwards { (b, a) } else { (a, b) };
            (*from == k.as_str()).then_some(*to)
        });
        out.insert(renamed.unwrap_or(k).to_string(), v.clone());
    }
    Value::Object(out)
}

fn cpu_utilization_metric(percent: &Value) -> Value {
    json!({"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": percent}}})
}

/// The averageUtilization of a v2 metric (spec `target` or status `current`) that is CPU
/// utilisation, if `m` is one.
fn cpu_utilization(m: &Value, field: &str) -> Option<Value> {
    let is_cpu = m.get("type").and_then(Value::as_str) == Some("Resource")
        && m.pointer("/resource/name").and_then(Value::as_str) == Some("cpu");
    let value = m.pointer(&format!("/resource/{field}/averageUtilization"))?;
    is_cpu.then(|| value.clone())
}

fn take_annotation(obj: &mut Value, key: &str) -> Option<Value> {
    let annotations = obj
        .pointer_mut("/metadata/annotations")
        .and_then(Value::as_object_mut)?;
    let raw = annotations.remove(key)?;
    if annotations.is_empty() {
        if let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
            meta.remove("annotations");
        }
    }
    serde_json::from_str(raw.as_str()?).ok()
}

fn put_annotation(obj: &mut Value, key: &str, value: &Value) {
    if !obj.get("metadata").is_some_and(Value::is_object) {
        obj["metadata"] = json!({});
    }
    if !obj["metadata"]
        .get("annotations")
        .is_some_and(Value::is_object)
    {
        obj["metadata"]["annotations"] = json!({});
    }
    obj["metadata"]["annotations"][key] = json!(value.to_string());
}

fn hpa_v1_to_v2(obj: &Value) -> Value {
    let mut out = obj.clone();
    let extra_metrics = take_annotation(&mut out, HPA_METRICS_ANNOTATION);
    let behavior = take_annotation(&mut out, HPA_BEHAVIOR_ANNOTATION);
    let conditions = take_annotation(&mut out, HPA_CONDITIONS_ANNOTATION);
    let current_metrics = take_annotation(&mut out, HPA_CURRENT_METRICS_ANNOTATION);
    if let Some(spec) = out.get_mut("spec").and_then(Value::as_object_mut) {
        let mut metrics: Vec<Value> = Vec::new();
        if let Some(percent) = spec.remove("targetCPUUtilizationPercentage") {
            metrics.push(cpu_utilization_metric(&percent));
        }
        if let Some(Value::Array(more)) = extra_metrics {
            metrics.extend(more);
        }
        if !metrics.is_empty() {
            spec.insert("metrics".into(), Value::Array(metrics));
        }
        if let Some(b) = behavior {
            spec.insert("behavior".into(), b);
        }
    }
    if let Some(status) = out.get_mut("status").and_then(Value::as_object_mut) {
        let mut current: Vec<Value> = Vec::new();
        if let Some(percent) = status.remove("currentCPUUtilizationPercentage") {
            current.push(json!({"type": "Resource", "resource": {"name": "cpu", "current": {"averageUtilization": percent}}}));
        }
        if let Some(Value::Array(more)) = current_metrics {
            current.extend(more);
        }
        if !current.is_empty() {
            status.insert("currentMetrics".into(), Value::Array(current));
        }
        if let Some(c) = conditions {
            status.insert("conditions".into(), c);
        }
    }
    out
}

fn hpa_v2_to_v1(obj: &Value) -> Value {
    let mut out = obj.clone();
    let mut annotations: Vec<(&str, Value)> = Vec::new();
    if let Some(spec) = out.get_mut("spec").and_then(Value::as_object_mut) {
        let metrics = match spec.remove("metrics") {
            Some(Value::Array(m)) => m,
            _ => Vec::new(),
        };
        let (cpu, others) = split_cpu(metrics, "target");
        if let Some(percent) = cpu {
            spec.insert("targetCPUUtilizationPercentage".into(), percent);
        }
        if !others.is_empty() {
            annotations.push((HPA_METRICS_ANNOTATION, Value::Array(others)));
        }
        if let Some(b) = spec.remove("behavior") {
            annotations.push((HPA_BEHAVIOR_ANNOTATION, b));
        }
    }
    if let Some(status) = out.get_mut("status").and_then(Value::as_object_mut) {
        let metrics = match status.remove("currentMetrics") {
            Some(Value::Array(m)) => m,
            _ => Vec::new(),
        };
        let (cpu, others) = split_cpu(metrics, "current");
        if let Some(percent) = cpu {
            status.insert("currentCPUUtilizationPercentage".into(), percent);
        }
        if !others.is_empty() {
            annotations.push((HPA_CURRENT_METRICS_ANNOTATION, Value::Array(others)));
        }
        if let Some(c) = status.remove("conditions") {
            annotations.push((HPA_CONDITIONS_ANNOTATION, c));
        }
    }
    for (key, value) in annotations {
        put_annotation(&mut out, key, &value);
    }
    out
}

/// The first CPU-utilisation metric's percentage, and every other metric.
fn split_cpu(metrics: Vec<Value>, field: &str) -> (Option<Value>, Vec<Value>) {
    let mut cpu = None;
    let mut others = Vec::new();
    for m in metrics {
        match cpu_utilization(&m, field) {
            Some(p) if cpu.is_none() => cpu = Some(p),
            _ => others.push(m),
        }
    }
    (cpu, others)
}

#[cfg(test)]
mod tests;
