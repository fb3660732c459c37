//! `/metrics/resource`: the kubelet's resource metrics (what metrics-server scrapes), with
//! upstream's names, labels and help, each sample at the time its pass read it. Pure.

use std::time::UNIX_EPOCH;

use cairn_stats::exposition::{Exposition, Kind};
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

fn containers(out: &mut Exposition, pods: &[PodTarget], collector: &Collector) {
    let each = || {
        pods.iter().flat_map(|p| {
            p.containers.iter().filter_map(move |c| {
                let reading = collector.history().latest(&c.cgroup)?;
                Some((p, c, reading))
            })
        })
    };
    let name = "container_cpu_usage_seconds_total";
    out.family(
        name,
        "[STABLE] Cumulative cpu time consumed by the container in core-seconds",
        Kind::Counter,
    );
    for (pod, c, r) in each() {
        if let Some(ns) = r.sample.cpu.usage_ns {
            out.sample(name, &labels(pod, c), ns as f64 / NS, Some(r.time));
        }
    }
    let name = "container_memory_working_set_bytes";
    out.family(
        name,
        "[STABLE] Current working set of the container in bytes",
        Kind::Gauge,
    );
    for (pod, c, r) in each() {
        if let Some(bytes) = r.sample.memory.working_set_bytes {
            out.sample(name, &labels(pod, c), bytes as f64, Some(r.time));
        }
    }
    let name = "container_start_time_seconds";
    out.family(
        name,
        "[STABLE] Start time of the container since unix epoch in seconds",
        Kind::Gauge,
    );
    for (pod, c, r) in each() {
        let Some(started) = c.started_at.and_then(|t| t.duration_since(UNIX_EPOCH).ok()) else {
            continue;
        };
        out.sample(name, &labels(pod, c), started.as_secs_f64(), Some(r.time));
    }
}

fn pod_totals(out: &mut Exposition, pods: &[PodTarget], collector: &Collector) {
    let each = || {
        pods.iter()
            .filter_map(|p| Some((p, collector.history().latest(&p.cgroup)?)))
    };
    let name = "pod_cpu_usage_seconds_total";
    out.family(
        name,
        "[STABLE] Cumulative cpu time consumed by the pod in core-seconds",
        Kind::Counter,
    );
    for (pod, r) in each() {
        if let Some(ns) = r.sample.cpu.usage_ns {
            out.sample(
                name,
                &[("namespace", &pod.namespace), ("pod", &pod.name)],
                ns as f64 / NS,
                Some(r.time),
            );
        }
    }
    let name = "pod_memory_working_set_bytes";
    out.family(
        name,
        "[STABLE] Current working set of the pod in bytes",
        Kind::Gauge,
    );
    for (pod, r) in each() {
        if let Some(bytes) = r.sample.memory.working_set_bytes {
            out.sample(
                name,
                &[("namespace", &pod.namespace), ("pod", &pod.name)],
                bytes as f64,
                Some(r.time),
            );
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
