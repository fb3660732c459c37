//! GET `/apis/metrics.k8s.io/v1beta1/nodes[/NAME]`, `/pods` and
//! `/namespaces/NS/pods[/NAME]`: NodeMetrics and PodMetrics as metrics-server answers,
//! with the Node's or Pod's labels, filtered by the request's selectors over them.

use axum::response::Response;
use cairn_api::status::Status;
use cairn_resourcemetrics::{cpu_quantity, memory_quantity, PodUsage, Usage};
use serde_json::{json, Map, Value};

use super::{GROUP, VERSION};
use crate::request::Query;
use crate::selectors::Selectors;
use crate::state::ApiState;

/// What a path asks for.
enum Target<'a> {
    Nodes(Option<&'a str>),
    Pods(Option<&'a str>, Option<&'a str>),
}

fn target(path: &str) -> Option<Target<'_>> {
    let rest = path
        .strip_prefix("/apis/")?
        .strip_prefix(GROUP)?
        .strip_prefix('/')?;
    let rest = rest.strip_prefix(VERSION)?.strip_prefix('/')?;
    let parts: Vec<&str> = rest.split('/').collect();
    Some(match parts.as_slice() {
        ["nodes"] => Target::Nodes(None),
        ["nodes", name] => Target::Nodes(Some(name)),
        ["pods"] => Target::Pods(None, None),
        ["namespaces", ns, "pods"] => Target::Pods(Some(ns), None),
        ["namespaces", ns, "pods", name] => Target::Pods(Some(ns), Some(name)),
        _ => return None,
    })
}

/// The answer for a metrics path (GET only); `None` for any other path.
pub fn serve(state: &ApiState, path: &str, query: Option<&str>) -> Option<Response> {
    let target = target(path)?;
    let query = Query::parse(query);
    let answer = match target {
        Target::Nodes(name) => nodes(state, name, &query),
        Target::Pods(ns, name) => pods(state, ns, name, &query),
    };
    Some(match answer {
        Ok(body) => crate::handlers::json_value_response(&body),
        Err(status) => crate::handlers::status_response(&status),
    })
}

fn nodes(state: &ApiState, name: Option<&str>, query: &Query) -> Result<Value, Status> {
    let r = core(state, "nodes")?;
    let selectors = Selectors::from_query(r, query)?;
    let usage = state.resource_metrics.store().nodes();
    let now = now();
    let mut items = Vec::new();
    for (node, u) in usage
        .iter()
        .filter(|(n, _)| name.is_none_or(|want| n == want))
    {
        let Some(object) = state.cache.get(&r.key(None, node)) else {
            continue;
        };
        if !selectors.matches(&object) {
            continue;
        }
        let meta = json!({"name": node, "creationTimestamp": now, "labels": object.labels});
        let mut item = header("NodeMetrics", meta, u.at, u.window);
        item.insert("usage".into(), usage_json(u));
        items.push(Value::Object(item));
    }
    one_or_list(items, name, "NodeMetricsList", "nodes")
}

fn pods(
    state: &ApiState,
    ns: Option<&str>,
    name: Option<&str>,
    query: &Query,
) -> Result<Value, Status> {
    let r = core(state, "pods")?;
    let selectors = Selectors::from_query(r, query)?;
    let usage = state.resource_metrics.store().pods();
    let now = now();
    let mut items = Vec::new();
    for ((pod_ns, pod), u) in &usage {
        if ns.is_some_and(|ns| ns != pod_ns) || name.is_some_and(|n| n != pod) {
            continue;
        }
        let Some(object) = state.cache.get(&r.key(Some(pod_ns), pod)) else {
            continue;
        };
        if !selectors.matches(&object) {
            continue;
        }
        let meta = json!({"name": pod, "namespace": pod_ns, "creationTimestamp": now, "labels": object.labels});
        items.push(Value::Object(pod_item(meta, u)));
    }
    one_or_list(items, name, "PodMetricsList", "pods")
}

fn pod_item(meta: Value, u: &PodUsage) -> Map<String, Value> {
    let mut item = header("PodMetrics", meta, u.at, u.window);
    let containers: Vec<Value> = u
        .containers
        .iter()
        .map(|(name, c)| json!({"name": name, "usage": usage_json(c)}))
        .collect();
    item.insert("containers".into(), Value::Array(containers));
    item
}

fn header(
    kind: &str,
    meta: Value,
    at: chrono::DateTime<chrono::Utc>,
    window: chrono::Duration,
) -> Map<String, Value> {
    let timestamp = at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    let mut item = Map::new();
    item.insert("kind".into(), json!(kind));
    item.insert("apiVersion".into(), json!(format!("{GROUP}/{VERSION}")));
    item.insert("metadata".into(), meta);
    item.insert("timestamp".into(), json!(timestamp));
    item.insert("window".into(), json!(go_duration(window)));
    item
}

fn usage_json(u: &Usage) -> Value {
    json!({"cpu": cpu_quantity(u.cpu_nano_cores), "memory": memory_quantity(u.memory_bytes)})
}

/// A GET of one object: it, or metrics-server's NotFound (`nodemetrics.metrics.k8s.io
/// "x" not found`); a list otherwise.
fn one_or_list(
    mut items: Vec<Value>,
    name: Option<&str>,
    list_kind: &str,
    plural: &str,
) -> Result<Value, Status> {
    match name {
        Some(name) if items.is_empty() => {
            let singular = list_kind.trim_end_matches("List").to_lowercase();
            let resource = format!("{singular}.{GROUP}");
            Err(Status::not_found(&resource, name).with_details(GROUP, plural, name))
        }
        Some(_) => Ok(items.swap_remove(0)),
        None => Ok(json!({
            "kind": list_kind,
            "apiVersion": format!("{GROUP}/{VERSION}"),
            "metadata": {},
            "items": items,
        })),
    }
}

fn core(
    state: &ApiState,
    plural: &str,
) -> Result<&'static cairn_api::registry::ResourceInfo, Status> {
    state
        .find_resource("", "v1", plural)
        .ok_or_else(|| Status::internal(format!("the core {plural} resource is not served")))
}

fn now() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

/// Go's `time.Duration.String()` (what a `metav1.Duration` serializes as): `15.002s`,
/// `1m0s`, `1h2m3s`.
fn go_duration(d: chrono::Duration) -> String {
    let nanos = d.num_nanoseconds().unwrap_or(i64::MAX).max(0);
    let (hours, rest) = (nanos / 3_600_000_000_000, nanos % 3_600_000_000_000);
    let (minutes, rest) = (rest / 60_000_000_000, rest % 60_000_000_000);
    let seconds = format!("{}.{:09}", rest / 1_000_000_000, rest % 1_000_000_000);
    let seconds = seconds.trim_end_matches('0').trim_end_matches('.');
    match (hours, minutes) {
        (0, 0) => format!("{seconds}s"),
        (0, m) => format!("{m}m{seconds}s"),
        (h, m) => format!("{h}h{m}m{seconds}s"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_print_as_go_prints_them() {
        assert_eq!(
            go_duration(chrono::Duration::milliseconds(15_002)),
            "15.002s"
        );
        assert_eq!(go_duration(chrono::Duration::seconds(60)), "1m0s");
        assert_eq!(go_duration(chrono::Duration::seconds(3723)), "1h2m3s");
        assert_eq!(go_duration(chrono::Duration::zero()), "0s");
    }

    #[test]
    fn paths() {
        let t = |p| {
            target(p).map(|t| match t {
                Target::Nodes(n) => format!("nodes {n:?}"),
                Target::Pods(ns, n) => format!("pods {ns:?} {n:?}"),
            })
        };
        assert_eq!(
            t("/apis/metrics.k8s.io/v1beta1/nodes").as_deref(),
            Some("nodes None")
        );
        assert_eq!(
            t("/apis/metrics.k8s.io/v1beta1/namespaces/a/pods/b").as_deref(),
            Some("pods Some(\"a\") Some(\"b\")")
        );
        assert_eq!(
            t("/apis/metrics.k8s.io/v1beta1/pods").as_deref(),
            Some("pods None None")
        );
        assert!(t("/apis/metrics.k8s.io/v1/nodes").is_none());
        assert!(t("/api/v1/nodes").is_none());
    }
}
