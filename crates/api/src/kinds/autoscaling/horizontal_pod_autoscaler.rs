//! HorizontalPodAutoscaler (autoscaling): what cairn does that is specific to it.

use crate::kinds::prelude::*;

pub const STRATEGY_V1: Strategy = Strategy {
    default: Some(default_v1),
    validate: Some(validate_hpa),
    columns: Some(columns),
    row: Some(row),
    normalize: roundtrip::<k8s_openapi::api::autoscaling::v1::HorizontalPodAutoscaler>,
    ..Strategy::NONE
};

const METRIC_TYPES: &[&str] = &[
    "ContainerResource",
    "External",
    "Object",
    "Pods",
    "Resource",
];

/// HorizontalPodAutoscaler, in its stored autoscaling/v2 shape.
fn validate_hpa(o: &Map<String, Value>, errs: &mut Vec<Cause>) {
    let empty = Map::new();
    let spec = obj(o, "spec").unwrap_or(&empty);
    let min = int(spec, "minReplicas");
    let max = int(spec, "maxReplicas").unwrap_or(0);
    if let Some(min) = min.filter(|m| *m < 1) {
        errs.push(Cause::invalid_value(
            "spec.minReplicas",
            &Value::from(min),
            "must be greater than or equal to 1",
        ));
    }
    if max < 1 {
        errs.push(Cause::invalid_value(
            "spec.maxReplicas",
            &Value::from(max),
            "must be greater than 0",
        ));
    }
    if min.is_some_and(|min| max < min) {
        errs.push(Cause::invalid_value(
            "spec.maxReplicas",
            &Value::from(max),
            "must be greater than or equal to `minReplicas`",
        ));
    }
    let target = obj(spec, "scaleTargetRef").unwrap_or(&empty);
    for key in ["kind", "name"] {
        let v = s(target, key);
        if v.is_empty() {
            errs.push(Cause::required(format!("spec.scaleTargetRef.{key}")));
        }
        for msg in is_path_segment_name(v) {
            errs.push(Cause::invalid(
                format!("spec.scaleTargetRef.{key}"),
                v,
                &msg,
            ));
        }
    }
    for (i, m) in objs(spec, "metrics") {
        validate_metric(m, &format!("spec.metrics[{i}]"), errs);
    }
}

fn validate_metric(m: &Map<String, Value>, p: &str, errs: &mut Vec<Cause>) {
    let kind = s(m, "type");
    if kind.is_empty() {
        errs.push(Cause::required_detail(
            format!("{p}.type"),
            "must specify a metric source type",
        ));
        return;
    }
    if !METRIC_TYPES.contains(&kind) {
        errs.push(Cause::not_supported(
            format!("{p}.type"),
            kind,
            METRIC_TYPES,
        ));
        return;
    }
    let source_key = {
        let mut k = kind.to_string();
        k[..1].make_ascii_lowercase();
        k
    };
    let Some(source) = obj(m, &source_key) else {
        errs.push(Cause::required_detail(
            format!("{p}.{source_key}"),
            &format!("must populate information for the given metric source (only allowed when type is {kind})"),
        ));
        return;
    };
    let sp = format!("{p}.{source_key}");
    if matches!(kind, "Resource" | "ContainerResource") && s(source, "name").is_empty() {
        errs.push(Cause::required(format!("{sp}.name")));
    }
    match obj(source, "target") {
        Some(t) => validate_metric_target(t, &format!("{sp}.target"), errs),
        None => errs.push(Cause::required(format!("{sp}.target"))),
    }
}

fn validate_metric_target(t: &Map<String, Value>, p: &str, errs: &mut Vec<Cause>) {
    let (kind, key) = match s(t, "type") {
        "Utilization" => ("Utilization", "averageUtilization"),
        "Value" => ("Value", "value"),
        "AverageValue" => ("AverageValue", "averageValue"),
        "" => {
            return errs.push(Cause::required_detail(
                format!("{p}.type"),
                "must specify a metric target type",
            ))
        }
        other => {
            return errs.push(Cause::not_supported(
                format!("{p}.type"),
                other,
                &["AverageValue", "Utilization", "Value"],
            ))
        }
    };
    if field(t, key).is_none() {
        errs.push(Cause::required_detail(
            format!("{p}.{key}"),
            &format!("must set {key} when the target type is {kind}"),
        ));
    }
    if let Some(u) = int(t, "averageUtilization").filter(|u| *u <= 0) {
        errs.push(Cause::invalid_value(
            format!("{p}.averageUtilization"),
            &Value::from(u),
            "must be greater than 0",
        ));
    }
}

pub const STRATEGY_V2: Strategy = Strategy {
    default: Some(default_v2),
    validate: Some(validate_hpa),
    columns: Some(columns),
    row: Some(row),
    normalize: roundtrip::<k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler>,
    ..Strategy::NONE
};

fn default_v1(o: &mut Map<String, Value>) {
    default_hpa("v1", o)
}

fn default_v2(o: &mut Map<String, Value>) {
    default_hpa("v2", o)
}

fn columns() -> Vec<Col> {
    vec![
        NAME,
        col("Reference", "string", "scaleTargetRef points to the target resource to scale, and is used to the pods for which metrics should be collected, as well as to actually change the replica count."),
        col("Targets", "string", "metrics contains the specifications for which to use to calculate the desired replica count (the maximum replica count across all metrics will be used).  The desired replica count is calculated multiplying the ratio between the target value and the current value by the current number of pods.  Ergo, metrics used must decrease as the pod count is increased, and vice-versa.  See the individual metric source types for more information about how each type of metric must respond. If not set, the default metric will be set to 80% average CPU utilization."),
        col("MinPods", "string", "minReplicas is the lower limit for the number of replicas to which the autoscaler can scale down.  It defaults to 1 pod.  minReplicas is allowed to be 0 if the alpha feature gate HPAScaleToZero is enabled and at least one Object or External metric is configured.  Scaling is active as long as at least one metric value is available."),
        col("MaxPods", "integer", "maxReplicas is the upper limit for the number of replicas to which the autoscaler can scale up. It cannot be less that minReplicas."),
        col("Replicas", "integer", "currentReplicas is current number of replicas of pods managed by this autoscaler, as last seen by the autoscaler."),
        AGE,
    ]
}

fn row(obj: &Value, name: Value, created: &str, _now: DateTime<Utc>) -> Vec<Value> {
    hpa_row(obj, name, created)
}

/// `minReplicas: 1`; in v2 a CPU target of 80% when no metric is given and, when a
/// `behavior` is given, its missing scale-up and scale-down rules as upstream fills them.
fn default_hpa(version: &str, o: &mut Map<String, Value>) {
    let Some(spec) = o.get_mut("spec").and_then(Value::as_object_mut) else {
        return;
    };
    set_default(spec, "minReplicas", json!(1));
    if version != "v2" {
        return;
    }
    if spec
        .get("metrics")
        .and_then(Value::as_array)
        .is_none_or(Vec::is_empty)
    {
        spec.insert(
            "metrics".into(),
            json!([{"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 80}}}]),
        );
    }
    if let Some(behavior) = spec.get_mut("behavior").and_then(Value::as_object_mut) {
        default_scaling_rules(behavior, "scaleUp", 0, &[("Percent", 100), ("Pods", 4)]);
        default_scaling_rules(behavior, "scaleDown", 300, &[("Percent", 100)]);
    }
}

fn default_scaling_rules(
    behavior: &mut Map<String, Value>,
    direction: &str,
    window: i64,
    policies: &[(&str, i64)],
) {
    set_default(behavior, direction, json!({}));
    let Some(rules) = behavior.get_mut(direction).and_then(Value::as_object_mut) else {
        return;
    };
    if is_unset(rules.get("stabilizationWindowSeconds")) {
        rules.insert("stabilizationWindowSeconds".into(), json!(window));
    }
    set_default_str(rules, "selectPolicy", "Max");
    if is_unset(rules.get("policies")) {
        let list: Vec<Value> = policies
            .iter()
            .map(|(kind, value)| json!({"type": kind, "value": value, "periodSeconds": 15}))
            .collect();
        rules.insert("policies".into(), Value::Array(list));
    }
}

fn hpa_row(obj: &Value, name: Value, created: &str) -> Vec<Value> {
    let reference = format!(
        "{}/{}",
        get_str(obj, &["spec", "scaleTargetRef", "kind"]),
        get_str(obj, &["spec", "scaleTargetRef", "name"])
    );
    let min = get(obj, &["spec", "minReplicas"])
        .and_then(Value::as_i64)
        .map_or("<unset>".to_string(), |m| m.to_string());
    vec![
        name,
        json!(reference),
        json!(hpa_targets(obj)),
        json!(min),
        json!(get_int(obj, &["spec", "maxReplicas"])),
        json!(get_int(obj, &["status", "currentReplicas"])),
        json!(created),
    ]
}

/// `cpu: 20%/80%, memory: <unknown>/60%` (upstream `formatHPAMetrics`: at most two, then
/// `+ N more...`).
fn hpa_targets(obj: &Value) -> String {
    let specs = get_arr(obj, &["spec", "metrics"]);
    if specs.is_empty() {
        return "<none>".to_string();
    }
    let current = get_arr(obj, &["status", "currentMetrics"]);
    let mut parts: Vec<String> = Vec::new();
    for (i, m) in specs.iter().enumerate() {
        let kind = get_str(m, &["type"]);
        let source = match kind {
            "Resource" => "resource",
            "ContainerResource" => "containerResource",
            "Pods" => "pods",
            "Object" => "object",
            "External" => "external",
            _ => "",
        };
        let target = get(m, &[source, "target"]);
        let cur = current.get(i).and_then(|c| get(c, &[source, "current"]));
        let pick = |v: Option<&Value>| -> Option<String> {
            let v = v?;
            if let Some(u) = get(v, &["averageUtilization"]) {
                return Some(format!("{u}%"));
            }
            [get_str(v, &["averageValue"]), get_str(v, &["value"])]
                .into_iter()
                .find(|s| !s.is_empty())
                .map(str::to_string)
        };
        let target_text = pick(target).unwrap_or_else(|| "<unknown>".to_string());
        let current_text = pick(cur).unwrap_or_else(|| "<unknown>".to_string());
        let label = match kind {
            "Resource" | "ContainerResource" => format!("{}: ", get_str(m, &[source, "name"])),
            "Pods" | "Object" | "External" => {
                format!("{}: ", get_str(m, &[source, "metric", "name"]))
            }
            _ => String::new(),
        };
        parts.push(format!("{label}{current_text}/{target_text}"));
    }
    let more = parts.len().saturating_sub(2);
    parts.truncate(2);
    let mut out = parts.join(", ");
    if more > 0 {
        out.push_str(&format!(" + {more} more..."));
    }
    out
}
