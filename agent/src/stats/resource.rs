//! `/metrics/resource`: the kubelet's resource metrics (what metrics-server scrapes), with
//! upstream's names, labels and help, each sample at the time its pass read it. Pure.

use std::time::UNIX_EPOCH;

use cairn_stats::exposition::{Exposition, Kind};
use cairn_stats::history::Timed;
use cairn_stats::Collector;

use super::{ContainerTarget, PodTarget};

const NS: f64 = 1e9;

pub fn resource_metrics(pods: &[PodTarget], collector: &Collector) -> String {
    let mut out = Exposition::new();
    node(&mut out, collector);
    containers(&mut out, pods, collector);
    pod_totals(&mut out, pods, collector);
    out.family(
        "resource_scrape_error",
        "[STABLE] 1 if there was an error while getting container metrics, 0 otherwise",
        Kind::Gauge,
    );
    // Readings come from the last passes; a scrape itself cannot fail half-way.
    out.sample("resource_scrape_error", &[], 0.0, None);
    out.finish()
}

fn node(out: &mut Exposition, collector: &Collector) {
    let Some(node) = collector.node() else { return };
    let (s, at) = (&node.sample, Some(node.time));
    if let Some(ns) = s.cpu_usage_ns {
        let name = "node_cpu_usage_seconds_total";
        out.family(
            name,
            "[STABLE] Cumulative cpu time consumed by the node in core-seconds",
            Kind::Counter,
        );
        out.sample(name, &[], ns as f64 / NS, at);
    }
    if let Some((total, available)) = s.memory_total_bytes.zip(s.memory_available_bytes) {
        let name = "node_memory_working_set_bytes";
        out.family(
            name,
            "[STABLE] Current working set of the node in bytes",
            Kind::Gauge,
        );
        out.sample(name, &[], total.saturating_sub(available) as f64, at);
    }
}

/// A container family: name, help, kind and the value of one container's reading.
type ContainerFamily = (
    &'static str,
    &'static str,
    Kind,
    fn(&ContainerTarget, &Timed) -> Option<f64>,
);
/// A pod family: name, help, kind and the value of the pod cgroup's reading.
type PodFamily = (&'static str, &'static str, Kind, fn(&Timed) -> Option<f64>);

fn container_families() -> [ContainerFamily; 3] {
    [
        (
            "container_cpu_usage_seconds_total",
            "[STABLE] Cumulative cpu time consumed by the container in core-seconds",
            Kind::Counter,
            |_, r| r.sample.cpu.usage_ns.map(|ns| ns as f64 / NS),
        ),
        (
            "container_memory_working_set_bytes",
            "[STABLE] Current working set of the container in bytes",
            Kind::Gauge,
            |_, r| r.sample.memory.working_set_bytes.map(|b| b as f64),
        ),
        (
            "container_start_time_seconds",
            "[STABLE] Start time of the container since unix epoch in seconds",
            Kind::Gauge,
            |c, _| Some(c.started_at?.duration_since(UNIX_EPOCH).ok()?.as_secs_f64()),
        ),
    ]
}

fn pod_families() -> [PodFamily; 2] {
    [
        (
            "pod_cpu_usage_seconds_total",
            "[STABLE] Cumulative cpu time consumed by the pod in core-seconds",
            Kind::Counter,
            |r| r.sample.cpu.usage_ns.map(|ns| ns as f64 / NS),
        ),
        (
            "pod_memory_working_set_bytes",
            "[STABLE] Current working set of the pod in bytes",
            Kind::Gauge,
            |r| r.sample.memory.working_set_bytes.map(|b| b as f64),
        ),
    ]
}

fn containers(out: &mut Exposition, pods: &[PodTarget], collector: &Collector) {
    let readings: Vec<(&PodTarget, &ContainerTarget, &Timed)> = pods
        .iter()
        .flat_map(|p| {
            p.containers
                .iter()
                .filter_map(move |c| Some((p, c, collector.history().latest(&c.cgroup)?)))
        })
        .collect();
    for (name, help, kind, value) in container_families() {
        out.family(name, help, kind);
        for (pod, c, r) in &readings {
            if let Some(v) = value(c, r) {
                out.sample(name, &labels(pod, c), v, Some(r.time));
            }
        }
    }
}

fn pod_totals(out: &mut Exposition, pods: &[PodTarget], collector: &Collector) {
    let readings: Vec<(&PodTarget, &Timed)> = pods
        .iter()
        .filter_map(|p| Some((p, collector.history().latest(&p.cgroup)?)))
        .collect();
    for (name, help, kind, value) in pod_families() {
        out.family(name, help, kind);
        for (pod, r) in &readings {
            if let Some(v) = value(r) {
                let labels = [("namespace", pod.namespace.as_str()), ("pod", &pod.name)];
                out.sample(name, &labels, v, Some(r.time));
            }
        }
    }
}

fn labels<'a>(pod: &'a PodTarget, c: &'a ContainerTarget) -> [(&'static str, &'a str); 3] {
    [
        ("container", &c.name),
        ("namespace", &pod.namespace),
        ("pod", &pod.name),
    ]
}
