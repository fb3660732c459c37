//! The API server's own Prometheus metrics on `GET /metrics` (upstream's names and
//! labels): `apiserver_request_total` and `apiserver_request_duration_seconds` per
//! verb/group/version/resource/subresource/scope, `apiserver_watch_events_total` per
//! kind, `apiserver_storage_objects` per resource (counted from the watch cache at
//! scrape time), and the store's latency as `etcd_request_duration_seconds`. Components
//! running in the same process (scheduler, controllers) add their registries, so one
//! scrape of `:6443/metrics` covers `cairn-control`.

use std::sync::Arc;
use std::time::Duration;

use parking_lot::RwLock;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

use crate::authz::RequestInfo;

/// The OpenMetrics text format's content type (what `prometheus-client` writes).
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// Upstream's buckets for `apiserver_request_duration_seconds`.
const REQUEST_BUCKETS: &[f64] = &[
    0.005, 0.025, 0.05, 0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 1.25, 1.5, 2.0, 3.0, 4.0, 5.0, 6.0, 8.0,
    10.0, 15.0, 20.0, 30.0, 45.0, 60.0,
];

/// Upstream's buckets for `etcd_request_duration_seconds`.
const STORE_BUCKETS: &[f64] = &[
    0.005, 0.025, 0.05, 0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 1.25, 1.5, 2.0, 3.0, 4.0, 5.0, 6.0, 8.0,
    10.0, 15.0, 20.0, 30.0, 45.0, 60.0,
];

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RequestLabels {
    verb: String,
    dry_run: String,
    group: String,
    version: String,
    resource: String,
    subresource: String,
    scope: String,
    component: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CodedRequestLabels {
    #[prometheus(flatten)]
    request: RequestLabels,
    code: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct KindLabels {
    group: String,
    version: String,
    kind: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ResourceLabel {
    resource: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StoreLabels {
    operation: String,
    r#type: String,
}

fn histogram(buckets: &'static [f64]) -> impl Fn() -> Histogram + Clone {
    move || Histogram::new(buckets.iter().copied())
}

type Histograms<L> = Family<L, Histogram, fn() -> Histogram>;

/// The server's metrics and the registries of its in-process neighbours.
pub struct ServerMetrics {
    own: Registry,
    neighbours: RwLock<Vec<Registry>>,
    requests: Family<CodedRequestLabels, Counter>,
    durations: Histograms<RequestLabels>,
    watch_events: Family<KindLabels, Counter>,
    objects: Family<ResourceLabel, Gauge>,
    store: Histograms<StoreLabels>,
}

impl Default for ServerMetrics {
    fn default() -> Self {
        ServerMetrics::new()
    }
}

fn request_histogram() -> Histogram {
    histogram(REQUEST_BUCKETS)()
}

fn store_histogram() -> Histogram {
    histogram(STORE_BUCKETS)()
}

impl ServerMetrics {
    pub fn new() -> ServerMetrics {
        let mut own = Registry::default();
        let requests = Family::<CodedRequestLabels, Counter>::default();
        own.register(
            "apiserver_request",
            "Counter of apiserver requests broken out for each verb, dry run value, group, version, resource, scope, component, and HTTP response code.",
            requests.clone(),
        );
        let durations: Histograms<RequestLabels> = Family::new_with_constructor(request_histogram);
        own.register(
            "apiserver_request_duration_seconds",
            "Response latency distribution in seconds for each verb, dry run value, group, version, resource, subresource, scope and component.",
            durations.clone(),
        );
        let watch_events = Family::<KindLabels, Counter>::default();
        own.register(
            "apiserver_watch_events",
            "Number of events sent in watch clients",
            watch_events.clone(),
        );
        let objects = Family::<ResourceLabel, Gauge>::default();
        own.register(
            "apiserver_storage_objects",
            "Number of stored objects at the time of last check split by kind.",
            objects.clone(),
        );
        let store: Histograms<StoreLabels> = Family::new_with_constructor(store_histogram);
        own.register(
            "etcd_request_duration_seconds",
            "Store request latency in seconds for each operation and object type (cairn's store; etcd's name).",
            store.clone(),
        );
        ServerMetrics {
            own,
            neighbours: RwLock::new(Vec::new()),
            requests,
            durations,
            watch_events,
            objects,
            store,
        }
    }

    /// Serves `registry` beside the server's own (an in-process component's).
    pub fn add(&self, registry: Registry) {
        self.neighbours.write().push(registry);
    }

    /// Records one finished resource request.
    pub fn request(
        &self,
        info: &RequestInfo,
        apply: bool,
        dry_run: bool,
        code: u16,
        took: Duration,
    ) {
        if !info.resource_request {
            return;
        }
        let request = request_labels(info, apply, dry_run);
        self.durations
            .get_or_create(&request)
            .observe(took.as_secs_f64());
        let coded = CodedRequestLabels {
            request,
            code: code.to_string(),
        };
        self.requests.get_or_create(&coded).inc();
    }

    /// The counter one watch adds its sent events to (looked up once per watch).
    pub fn watch_events(&self, group: &str, version: &str, kind: &str) -> Counter {
        let labels = KindLabels {
            group: group.to_string(),
            version: version.to_string(),
            kind: kind.to_string(),
        };
        self.watch_events.get_or_create(&labels).clone()
    }

    /// Records one store operation on `resource`.
    pub fn store_request(&self, operation: &str, resource: &str, took: Duration) {
        let labels = StoreLabels {
            operation: operation.to_string(),
            r#type: resource.to_string(),
        };
        self.store
            .get_or_create(&labels)
            .observe(took.as_secs_f64());
    }

    /// The exposition, with `objects` (resource → count) as `apiserver_storage_objects`.
    pub fn encode(&self, objects: &[(String, usize)]) -> Result<String, std::fmt::Error> {
        for (resource, count) in objects {
            let label = ResourceLabel {
                resource: resource.clone(),
            };
            self.objects
                .get_or_create(&label)
                .set(i64::try_from(*count).unwrap_or(i64::MAX));
        }
        let mut out = String::new();
        prometheus_client::encoding::text::encode_registry(&mut out, &self.own)?;
        for registry in self.neighbours.read().iter() {
            prometheus_client::encoding::text::encode_registry(&mut out, registry)?;
        }
        prometheus_client::encoding::text::encode_eof(&mut out)?;
        Ok(out)
    }
}

/// Upstream's verb in metrics: the HTTP-ish verb, LIST and WATCH for collections,
/// APPLY for server-side apply, CONNECT for streaming subresources.
fn metric_verb(info: &RequestInfo, apply: bool) -> &'static str {
    let connect = matches!(
        info.subresource.as_str(),
        "exec" | "attach" | "portforward" | "proxy"
    );
    match info.verb.as_str() {
        _ if connect => "CONNECT",
        "get" => "GET",
        "list" => "LIST",
        "watch" => "WATCH",
        "create" => "POST",
        "update" => "PUT",
        "patch" if apply => "APPLY",
        "patch" => "PATCH",
        "delete" => "DELETE",
        "deletecollection" => "DELETECOLLECTION",
        _ => "OTHER",
    }
}

fn request_labels(info: &RequestInfo, apply: bool, dry_run: bool) -> RequestLabels {
    let scope = if !info.name.is_empty() {
        "resource"
    } else if !info.namespace.is_empty() {
        "namespace"
    } else {
        "cluster"
    };
    RequestLabels {
        verb: metric_verb(info, apply).to_string(),
        dry_run: if dry_run { "All" } else { "" }.to_string(),
        group: info.api_group.clone(),
        version: info.api_version.clone(),
        resource: info.resource.clone(),
        subresource: info.subresource.clone(),
        scope: scope.to_string(),
        component: "apiserver".to_string(),
    }
}

/// The group resource a store key (`/registry/<group>/<plural>/…`, group `core` for
/// the core group) belongs to, as upstream's metrics name it: `pods`,
/// `deployments.apps`.
pub fn key_resource(key: &str) -> String {
    let mut parts = key.trim_start_matches('/').split('/').skip(1);
    match (parts.next(), parts.next()) {
        (Some("core"), Some(plural)) => plural.to_string(),
        (Some(group), Some(plural)) => format!("{plural}.{group}"),
        _ => String::new(),
    }
}

/// A shareable handle.
pub type SharedMetrics = Arc<ServerMetrics>;

#[cfg(test)]
mod tests {
    use super::*;
    use http::Method;

    #[test]
    fn requests_are_counted_with_upstreams_labels() {
        let m = ServerMetrics::new();
        let list = RequestInfo::new(&Method::GET, "/api/v1/namespaces/a/pods", None);
        m.request(&list, false, false, 200, Duration::from_millis(3));
        let watch = RequestInfo::new(&Method::GET, "/apis/apps/v1/deployments", Some("watch=1"));
        m.request(&watch, false, false, 200, Duration::from_millis(1));
        let exec = RequestInfo::new(&Method::POST, "/api/v1/namespaces/a/pods/p/exec", None);
        m.request(&exec, false, false, 101, Duration::from_millis(1));
        m.request(
            &RequestInfo::new(&Method::GET, "/healthz", None),
            false,
            false,
            200,
            Duration::ZERO,
        );
        m.store_request("get", "pods", Duration::from_millis(1));
        let text = m.encode(&[("pods".into(), 3)]).expect("encodes");
        assert!(
            text.contains(r#"etcd_request_duration_seconds_count{operation="get",type="pods"} 1"#),
            "{text}"
        );
        assert!(text.contains(r#"apiserver_request_total{verb="LIST",dry_run="",group="",version="v1",resource="pods",subresource="",scope="namespace",component="apiserver",code="200"} 1"#), "{text}");
        assert!(
            text.contains(r#"verb="WATCH""#) && text.contains(r#"verb="CONNECT""#),
            "{text}"
        );
        assert!(
            text.contains(r#"apiserver_storage_objects{resource="pods"} 3"#),
            "{text}"
        );
        assert!(
            !text.contains("healthz"),
            "non-resource requests are not counted"
        );
        assert!(text.ends_with("# EOF\n"));
    }

    #[test]
    fn neighbours_are_served_too() {
        let m = ServerMetrics::new();
        let mut other = Registry::default();
        let c = Counter::<u64>::default();
        other.register("scheduler_schedule_attempts", "Attempts", c.clone());
        c.inc();
        m.add(other);
        let text = m.encode(&[]).expect("encodes");
        assert!(
            text.contains("scheduler_schedule_attempts_total 1"),
            "{text}"
        );
        assert_eq!(text.matches("# EOF").count(), 1);
    }

    #[test]
    fn store_keys_name_their_resource() {
        assert_eq!(key_resource("/registry/core/pods/default/web"), "pods");
        assert_eq!(
            key_resource("/registry/apps/deployments/a/b"),
            "deployments.apps"
        );
        assert_eq!(key_resource(""), "");
    }
}
