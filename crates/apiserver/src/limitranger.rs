//! The LimitRanger admission plugin: a new pod's containers get the default limits and
//! requests of the namespace's LimitRanges (`Container` items), recorded in the
//! `kubernetes.io/limit-ranger` annotation; then every item's min, max and max
//! limit/request ratio are enforced per Container, per Pod (summed) and per
//! PersistentVolumeClaim (`requests.storage`), refusing with 403 in upstream's words.

use cairn_api::registry;
use cairn_api::status::Status;
use cairn_apimachinery::quantity;
use cairn_store::cache::WatchCache;
use serde_json::{json, Map, Value};

const ANNOTATION: &str = "kubernetes.io/limit-ranger";

/// The LimitRange items of `ns`.
fn items(cache: &WatchCache, ns: &str) -> Vec<Map<String, Value>> {
    let Some(r) = registry::find("", "v1", "limitranges") else {
        return Vec::new();
    };
    let (objects, _) = cache.list(&r.list_prefix(Some(ns)));
    objects
        .iter()
        .filter_map(|o| serde_json::from_slice::<Value>(&o.bytes).ok())
        .flat_map(|lr| {
            lr.pointer("/spec/limits")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default()
        })
        .filter_map(|v| v.as_object().cloned())
        .collect()
}

fn nanos(v: &Value) -> Option<i128> {
    match v {
        Value::String(s) => quantity::nanos(s),
        Value::Number(n) => quantity::nanos(&n.to_string()),
        _ => None,
    }
}

fn text(v: &Value) -> String {
    v.as_str().map_or_else(|| v.to_string(), str::to_string)
}

/// Admits a pod: defaults, then limits. `Err` is the 403 to answer.
pub fn admit_pod(cache: &WatchCache, pod: &mut Value, name: &str) -> Result<(), Status> {
    let ns = pod
        .pointer("/metadata/namespace")
        .and_then(Value::as_str)
        .unwrap_or("default")
        .to_string();
    let items = items(cache, &ns);
    if items.is_empty() {
        return Ok(());
    }
    apply_defaults(&items, pod);
    let mut errors = Vec::new();
    for item in &items {
        match item.get("type").and_then(Value::as_str) {
            Some("Container") => check_containers(item, pod, &mut errors),
            Some("Pod") => check_pod(item, pod, &mut errors),
            _ => {}
        }
    }
    forbid("pods", name, errors)
}

/// Admits a claim against `PersistentVolumeClaim` items.
pub fn admit_claim(cache: &WatchCache, pvc: &Value, name: &str) -> Result<(), Status> {
    let ns = pvc
        .pointer("/metadata/namespace")
        .and_then(Value::as_str)
        .unwrap_or("default");
    let resources = pvc.pointer("/spec/resources").cloned().unwrap_or(json!({}));
    let mut errors = Vec::new();
    for item in items(cache, ns)
        .iter()
        .filter(|i| i["type"] == "PersistentVolumeClaim")
    {
        check(item, &resources, "PersistentVolumeClaim", &mut errors);
    }
    forbid("persistentvolumeclaims", name, errors)
}

fn forbid(resource: &str, name: &str, errors: Vec<String>) -> Result<(), Status> {
    match errors.as_slice() {
        [] => Ok(()),
        [one] => Err(Status::forbidden(format!(
            "{resource} \"{name}\" is forbidden: {one}"
        ))),
        many => Err(Status::forbidden(format!(
            "{resource} \"{name}\" is forbidden: [{}]",
            many.join(", ")
        ))),
    }
}

/// Every container, with what the annotation calls it (`container`, `init container`).
fn containers_mut(pod: &mut Value) -> Vec<(&'static str, &mut Map<String, Value>)> {
    let Some(spec) = pod.get_mut("spec").and_then(Value::as_object_mut) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for (key, list) in spec.iter_mut() {
        let kind = match key.as_str() {
            "containers" => "container",
            "initContainers" => "init container",
            _ => continue,
        };
        let each = list
            .as_array_mut()
            .into_iter()
            .flatten()
            .filter_map(Value::as_object_mut);
        out.extend(each.map(|c| (kind, c)));
    }
    out
}

/// Fills missing limits and requests from `Container` items' defaults.
fn apply_defaults(items: &[Map<String, Value>], pod: &mut Value) {
    let mut notes = Vec::new();
    for (kind, c) in containers_mut(pod) {
        let name = c
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        let resources = c.entry("resources").or_insert_with(|| json!({}));
        for item in items.iter().filter(|i| i["type"] == "Container") {
            for (section, from) in [("requests", "defaultRequest"), ("limits", "default")] {
                let mut set = Vec::new();
                for (k, v) in item
                    .get(from)
                    .and_then(Value::as_object)
                    .into_iter()
                    .flatten()
                {
                    if resources.get(section).and_then(|s| s.get(k)).is_none() {
                        if !resources[section].is_object() {
                            resources[section] = json!({});
                        }
                        resources[section][k] = v.clone();
                        set.push(k.clone());
                    }
                }
                if !set.is_empty() {
                    let what = if section == "limits" {
                        "limit"
                    } else {
                        "request"
                    };
                    notes.push(format!("{} {what} for {kind} {name}", set.join(", ")));
                }
            }
        }
    }
    if !notes.is_empty() {
        let meta = &mut pod["metadata"];
        if !meta["annotations"].is_object() {
            meta["annotations"] = json!({});
        }
        meta["annotations"][ANNOTATION] =
            json!(format!("LimitRanger plugin set: {}", notes.join("; ")));
    }
}

fn check_containers(item: &Map<String, Value>, pod: &Value, errors: &mut Vec<String>) {
    let spec = &pod["spec"];
    for list in ["initContainers", "containers"] {
        for c in spec[list].as_array().into_iter().flatten() {
            check(item, &c["resources"], "Container", errors);
        }
    }
}

/// A Pod item checks the containers' sums (each init container alone at most).
fn check_pod(item: &Map<String, Value>, pod: &Value, errors: &mut Vec<String>) {
    let spec = &pod["spec"];
    let mut totals = json!({"requests": {}, "limits": {}});
    for section in ["requests", "limits"] {
        let mut sums: std::collections::BTreeMap<String, i128> = Default::default();
        for c in spec["containers"].as_array().into_iter().flatten() {
            for (k, v) in c["resources"][section].as_object().into_iter().flatten() {
                *sums.entry(k.clone()).or_default() += nanos(v).unwrap_or(0);
            }
        }
        for c in spec["initContainers"].as_array().into_iter().flatten() {
            for (k, v) in c["resources"][section].as_object().into_iter().flatten() {
                let n = nanos(v).unwrap_or(0);
                let e = sums.entry(k.clone()).or_default();
                *e = (*e).max(n);
            }
        }
        for (k, n) in sums {
            totals[section][k] = json!(format_nanos(n));
        }
    }
    check(item, &totals, "Pod", errors);
}

/// A value in nano-units as a quantity (whole units, else milli-units, else nano).
fn format_nanos(n: i128) -> String {
    if n % 1_000_000_000 == 0 {
        (n / 1_000_000_000).to_string()
    } else if n % 1_000_000 == 0 {
        format!("{}m", n / 1_000_000)
    } else {
        format!("{n}n")
    }
}

/// min/max/ratio of one item against `resources` (`requests` and `limits`).
fn check(item: &Map<String, Value>, resources: &Value, limit_type: &str, errors: &mut Vec<String>) {
    let get = |section: &str, k: &str| {
        resources
            .get(section)
            .and_then(|s| s.get(k))
            .filter(|v| !v.is_null())
    };
    for (k, min) in item
        .get("min")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
    {
        match get("requests", k) {
            None => errors.push(format!(
                "minimum {k} usage per {limit_type} is {}.  No request is specified",
                text(min)
            )),
            Some(req) if nanos(req) < nanos(min) => errors.push(format!(
                "minimum {k} usage per {limit_type} is {}, but request is {}",
                text(min),
                text(req)
            )),
            Some(_) => {}
        }
    }
    // A claim's bound is on its request; a container's and a pod's on their limits.
    let (section, what) = if limit_type == "PersistentVolumeClaim" {
        ("requests", "request")
    } else {
        ("limits", "limit")
    };
    for (k, max) in item
        .get("max")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
    {
        match get(section, k) {
            None => errors.push(format!(
                "maximum {k} usage per {limit_type} is {}.  No {what} is specified",
                text(max)
            )),
            Some(lim) if nanos(lim) > nanos(max) => errors.push(format!(
                "maximum {k} usage per {limit_type} is {}, but {what} is {}",
                text(max),
                text(lim)
            )),
            Some(_) => {}
        }
    }
    for (k, ratio) in item
        .get("maxLimitRequestRatio")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
    {
        let (req, lim) = (
            get("requests", k).and_then(nanos),
            get("limits", k).and_then(nanos),
        );
        match (req, lim) {
            (None | Some(0), _) => errors.push(format!("{k} max limit to request ratio per {limit_type} is {}, but no request is specified or request is 0", text(ratio))),
            (_, None) => errors.push(format!("{k} max limit to request ratio per {limit_type} is {}, but no limit is specified", text(ratio))),
            (Some(req), Some(lim)) => {
                let observed = lim as f64 / req as f64;
                if nanos(ratio).is_some_and(|r| observed > r as f64 / 1e9) {
                    errors.push(format!("{k} max limit to request ratio per {limit_type} is {}, but provided ratio is {observed:.6}", text(ratio)));
                }
            }
        }
    }
}
