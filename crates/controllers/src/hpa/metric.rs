//! One entry of an HPA's `spec.metrics` evaluated against the scale target's pods and
//! their usage from the resource metrics API (no IO): upstream's
//! `computeStatusForResourceMetric` and `computeStatusForContainerResourceMetric` with
//! the resource metrics client's pod sums and the replica calculator, in upstream's
//! words for every failure (they become Events and the ScalingActive condition).

use std::collections::BTreeMap;

use cairn_semantics::quantity;
use k8s_openapi::api::autoscaling::v2::{
    ContainerResourceMetricStatus, MetricSpec, MetricStatus, MetricTarget, MetricValueStatus,
    ResourceMetricStatus,
};
use k8s_openapi::api::core::v1::{Container, Pod};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::jiff::{SignedDuration, Timestamp};

use super::calculator::{self, Input, PodInfo, PodMetric, Target, Tunables};

/// One pod's entry of `metrics.k8s.io` PodMetrics.
#[derive(Debug, Clone, PartialEq)]
pub struct PodUsage {
    pub pod: String,
    pub timestamp: Timestamp,
    pub window: SignedDuration,
    /// `(container, resource → milli-units)`.
    pub containers: Vec<(String, BTreeMap<String, i64>)>,
}

/// What every metric of one sync reads.
#[derive(Debug, Clone, Copy)]
pub struct Facts<'a> {
    /// The target's `spec.replicas` (its Scale).
    pub current: i32,
    /// The pods the Scale's selector selects.
    pub pods: &'a [Pod],
    /// The selected pods' PodMetrics, or why the list failed.
    pub usage: &'a Result<Vec<PodUsage>, String>,
    pub now: Timestamp,
}

/// A metric's replica proposal.
#[derive(Debug, Clone, PartialEq)]
pub struct Proposal {
    pub replicas: i32,
    /// How upstream names the metric in conditions and Events.
    pub name: String,
    pub status: MetricStatus,
}

/// Why a metric gave no proposal: the Event and ScalingActive reason and the error.
#[derive(Debug, Clone, PartialEq)]
pub struct Failure {
    pub reason: &'static str,
    pub error: String,
}

/// The metric source's parts cairn evaluates: resource, container, target, and the
/// reason its failures carry.
struct Source<'a> {
    resource: &'a str,
    container: Option<&'a str>,
    target: &'a MetricTarget,
    reason: &'static str,
}

fn source(spec: &MetricSpec) -> Result<Source<'_>, Failure> {
    let unsupported = |reason, what: &str| Failure {
        reason,
        error: format!(
            "unable to get {what} metric: no {what} metrics API is served \
             (cairn serves only metrics.k8s.io)"
        ),
    };
    match spec.type_.as_str() {
        "Resource" => match &spec.resource {
            Some(r) => Ok(Source {
                resource: &r.name,
                container: None,
                target: &r.target,
                reason: "FailedGetResourceMetric",
            }),
            None => Err(invalid(spec)),
        },
        "ContainerResource" => match &spec.container_resource {
            Some(r) => Ok(Source {
                resource: &r.name,
                container: Some(&r.container),
                target: &r.target,
                reason: "FailedGetContainerResourceMetric",
            }),
            None => Err(invalid(spec)),
        },
        "Pods" => Err(unsupported("FailedGetPodsMetric", "custom")),
        "Object" => Err(unsupported("FailedGetObjectMetric", "custom")),
        "External" => Err(unsupported("FailedGetExternalMetric", "external")),
        _ => Err(invalid(spec)),
    }
}

fn invalid(spec: &MetricSpec) -> Failure {
    Failure {
        reason: "InvalidMetricSourceType",
        error: format!("unknown metric source type {:?}", spec.type_),
    }
}

/// The replicas one metric asks for.
pub fn evaluate(spec: &MetricSpec, facts: &Facts<'_>, t: &Tunables) -> Result<Proposal, Failure> {
    let src = source(spec)?;
    let fail = |error: String| Failure {
        reason: src.reason,
        error,
    };
    let (target, what) = match (&src.target.average_utilization, &src.target.average_value) {
        (Some(percent), _) => (Target::Utilization(*percent), "utilization"),
        (None, Some(value)) => {
            let milli = quantity::milli(value).map_err(|e| fail(e.to_string()))?;
            (Target::AverageValue(milli), "usage")
        }
        (None, None) => {
            return Err(fail(format!(
                "failed to get {} {}: invalid resource metric source: neither a utilization \
                 target nor a value target was set",
                src.resource,
                if src.container.is_some() {
                    "container metric"
                } else {
                    "utilization"
                }
            )))
        }
    };
    let wrap = |e: String| fail(format!("failed to get {} {what}: {e}", src.resource));
    let metrics = pod_metrics(facts.usage, src.resource, src.container).map_err(|e| {
        wrap(format!(
            "unable to get metrics for resource {}: {e}",
            src.resource
        ))
    })?;
    let pods: Vec<PodInfo> = facts
        .pods
        .iter()
        .map(|p| pod_info(p, src.resource, src.container))
        .collect();
    let input = Input {
        current: facts.current,
        pods: &pods,
        metrics: &metrics,
        target,
        resource: src.resource,
    };
    let rec = calculator::replicas(input, t, facts.now).map_err(|e| wrap(e.to_string()))?;
    Ok(Proposal {
        replicas: rec.replicas,
        name: metric_name(&src, target),
        status: status(&src, rec.utilization, rec.average_milli),
    })
}

fn metric_name(src: &Source<'_>, target: Target) -> String {
    let kind = match src.container {
        Some(_) => "container resource",
        None => "resource",
    };
    match target {
        Target::Utilization(_) => {
            format!(
                "{} {kind} utilization (percentage of request)",
                src.resource
            )
        }
        Target::AverageValue(_) => format!("{} {kind}", src.resource),
    }
}

fn status(src: &Source<'_>, utilization: Option<i32>, average_milli: i64) -> MetricStatus {
    let current = MetricValueStatus {
        average_utilization: utilization,
        average_value: Some(Quantity(quantity::print_milli(average_milli))),
        value: None,
    };
    match src.container {
        None => MetricStatus {
            type_: "Resource".into(),
            resource: Some(ResourceMetricStatus {
                name: src.resource.to_string(),
                current,
            }),
            ..Default::default()
        },
        Some(container) => MetricStatus {
            type_: "ContainerResource".into(),
            container_resource: Some(ContainerResourceMetricStatus {
                container: container.to_string(),
                name: src.resource.to_string(),
                current,
            }),
            ..Default::default()
        },
    }
}

/// Each pod's usage of `resource`: the sum over its containers (a pod with a container
/// lacking it is left out), or the one named container's.
fn pod_metrics(
    usage: &Result<Vec<PodUsage>, String>,
    resource: &str,
    container: Option<&str>,
) -> Result<BTreeMap<String, PodMetric>, String> {
    let items = usage
        .as_ref()
        .map_err(|e| format!("unable to fetch metrics from resource metrics API: {e}"))?;
    if items.is_empty() {
        return Err("no metrics returned from resource metrics API".into());
    }
    let mut out = BTreeMap::new();
    for item in items {
        let chosen: Vec<_> = item
            .containers
            .iter()
            .filter(|(name, _)| container.is_none_or(|c| c == name))
            .collect();
        if let (Some(c), true) = (container, chosen.is_empty()) {
            return Err(format!(
                "failed to get container metrics: container {c} not present in metrics for pod {}",
                item.pod
            ));
        }
        let values: Option<Vec<i64>> = chosen
            .iter()
            .map(|(_, u)| u.get(resource).copied())
            .collect();
        if let Some(values) = values.filter(|v| !v.is_empty()) {
            let metric = PodMetric {
                value_milli: values.iter().sum(),
                timestamp: item.timestamp,
                window: item.window,
            };
            out.insert(item.pod.clone(), metric);
        }
    }
    Ok(out)
}

/// What the calculator reads of a pod.
fn pod_info(pod: &Pod, resource: &str, container: Option<&str>) -> PodInfo {
    let status = pod.status.as_ref();
    let phase = status.and_then(|s| s.phase.as_deref()).unwrap_or("");
    let ready = status
        .and_then(|s| s.conditions.as_ref())
        .and_then(|c| c.iter().find(|c| c.type_ == "Ready"))
        .and_then(|c| Some((c.status == "True", c.last_transition_time.as_ref()?.0)));
    PodInfo {
        name: pod.metadata.name.clone().unwrap_or_default(),
        pending: phase == "Pending",
        ignored: pod.metadata.deletion_timestamp.is_some() || phase == "Failed",
        ready,
        start_time: status.and_then(|s| s.start_time.as_ref()).map(|t| t.0),
        request_milli: request_milli(pod, resource, container),
    }
}

/// The pod's request of `resource` over its containers and sidecars (restartable init
/// containers), or the one named container; else the container without one.
fn request_milli(pod: &Pod, resource: &str, container: Option<&str>) -> Result<i64, String> {
    let Some(spec) = pod.spec.as_ref() else {
        return Ok(0);
    };
    let sidecars = spec
        .init_containers
        .iter()
        .flatten()
        .filter(|c| c.restart_policy.as_deref() == Some("Always"));
    let mut sum = 0i64;
    for c in spec.containers.iter().chain(sidecars) {
        if container.is_some_and(|name| name != c.name) {
            continue;
        }
        sum = sum.saturating_add(container_request(c, resource).ok_or_else(|| c.name.clone())?);
    }
    Ok(sum)
}

fn container_request(c: &Container, resource: &str) -> Option<i64> {
    let q = c.resources.as_ref()?.requests.as_ref()?.get(resource)?;
    quantity::milli(q).ok()
}
