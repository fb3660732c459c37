//! `/metrics/cadvisor`: cAdvisor's container metrics as the kubelet serves them, from the
//! last passes. Labels as the kubelet sets them (`container`, `id` = the cgroup, `image`,
//! `name` = the runtime's id, `namespace`, `pod`); a pod's own cgroup is the entry with
//! `container=""` and carries the pod's network. Samples are stamped with the time their
//! pass read them. Pure: block device names come from the caller.

use std::time::{SystemTime, UNIX_EPOCH};

use cairn_stats::exposition::{Exposition, Kind};
use cairn_stats::history::Timed;
use cairn_stats::parse::{DeviceIo, InterfaceCounters};
use cairn_stats::{CgroupSample, Collector, NetworkReading};

use super::PodTarget;

const NS: f64 = 1e9;

/// One cgroup to report: its base labels, its last reading and what only pods have.
struct Entry<'a> {
    labels: [(&'static str, &'a str); 6],
    reading: &'a Timed,
    started_at: Option<SystemTime>,
    network: Option<&'a NetworkReading>,
    /// A container's writable layer and logs.
    fs: Option<super::fs::ContainerFs>,
}

type Scalar = fn(&CgroupSample) -> Option<f64>;
/// A per-device family: name, help and the figure it takes.
type DeviceFamily = (&'static str, &'static str, fn(&DeviceIo) -> u64);
/// A writable layer's figure.
type LayerFigure = fn(&cairn_runtime::LayerUsage) -> u64;
/// A per-interface family: name, help and the figure it takes.
type InterfaceFamily = (&'static str, &'static str, fn(&InterfaceCounters) -> u64);

fn scalars() -> [(&'static str, &'static str, Kind, Scalar); 16] {
    use Kind::{Counter, Gauge};
    [
        ("container_cpu_user_seconds_total", "Cumulative user cpu time consumed in seconds.", Counter, |s| secs(s.cpu.user_ns)),
        ("container_cpu_system_seconds_total", "Cumulative system cpu time consumed in seconds.", Counter, |s| secs(s.cpu.system_ns)),
        ("container_cpu_cfs_periods_total", "Number of elapsed enforcement period intervals.", Counter, |s| cfs(s, s.cpu.periods.map(|v| v as f64))),
        ("container_cpu_cfs_throttled_periods_total", "Number of throttled period intervals.", Counter, |s| cfs(s, s.cpu.throttled_periods.map(|v| v as f64))),
        ("container_cpu_cfs_throttled_seconds_total", "Total time duration the container has been throttled.", Counter, |s| cfs(s, secs(s.cpu.throttled_ns))),
        ("container_memory_cache", "Number of bytes of page cache memory.", Gauge, |s| num(s.memory.cache_bytes)),
        ("container_memory_rss", "Size of RSS in bytes.", Gauge, |s| num(s.memory.rss_bytes)),
        ("container_memory_mapped_file", "Size of memory mapped files in bytes.", Gauge, |s| num(s.memory.mapped_file_bytes)),
        ("container_memory_swap", "Container swap usage in bytes.", Gauge, |s| num(s.memory.swap_bytes)),
        ("container_memory_usage_bytes", "Current memory usage in bytes, including all memory regardless of when it was accessed", Gauge, |s| num(s.memory.usage_bytes)),
        ("container_memory_working_set_bytes", "Current working set in bytes.", Gauge, |s| num(s.memory.working_set_bytes)),
        ("container_oom_events_total", "Count of out of memory events observed for the container", Counter, |s| num(s.memory.oom_events)),
        // cAdvisor reports 0 for "no limit".
        ("container_spec_memory_limit_bytes", "Memory limit for the container.", Gauge, |s| Some(s.memory.limit_bytes.unwrap_or(0) as f64)),
        ("container_processes", "Number of processes running inside the container.", Gauge, |s| num(s.processes.processes)),
        ("container_threads", "Number of threads running inside the container", Gauge, |s| num(s.processes.threads)),
        ("container_file_descriptors", "Number of open file descriptors for the container.", Gauge, |s| num(s.processes.file_descriptors)),
    ]
}

fn num(v: Option<u64>) -> Option<f64> {
    v.map(|v| v as f64)
}

fn secs(ns: Option<u64>) -> Option<f64> {
    ns.map(|ns| ns as f64 / NS)
}

/// CFS figures only for a cgroup CFS has enforced a quota on (cAdvisor: quota set).
fn cfs(s: &CgroupSample, value: Option<f64>) -> Option<f64> {
    value.filter(|_| s.cpu.periods.is_some_and(|p| p > 0))
}

pub fn cadvisor_metrics(
    pods: &[PodTarget],
    collector: &Collector,
    cpu_cores: u64,
    device_name: &dyn Fn(u64, u64) -> String,
) -> String {
    let entries = entries(pods, collector);
    let mut out = Exposition::new();
    for (name, help, kind, value) in scalars() {
        out.family(name, help, kind);
        for e in &entries {
            if let Some(v) = value(&e.reading.sample) {
                out.sample(name, &e.labels, v, Some(e.reading.time));
            }
        }
    }
    cpu_usage(&mut out, &entries);
    memory_failures(&mut out, &entries);
    block_io(&mut out, &entries, device_name);
    network(&mut out, &entries);
    start_and_last_seen(&mut out, &entries);
    filesystem(&mut out, &entries);
    machine(&mut out, collector, cpu_cores);
    out.finish()
}

fn entries<'a>(pods: &'a [PodTarget], collector: &'a Collector) -> Vec<Entry<'a>> {
    let mut entries = Vec::new();
    for pod in pods {
        if let Some(reading) = collector.history().latest(&pod.cgroup) {
            let labels = [
                ("container", ""),
                ("id", pod.cgroup.as_str()),
                ("image", ""),
                ("name", ""),
                ("namespace", &pod.namespace),
                ("pod", &pod.name),
            ];
            let network = collector.network(&pod.uid);
            entries.push(Entry {
                labels,
                reading,
                started_at: None,
                network,
                fs: None,
            });
        }
        for c in &pod.containers {
            let Some(reading) = collector.history().latest(&c.cgroup) else {
                continue;
            };
            let labels = [
                ("container", c.name.as_str()),
                ("id", &c.cgroup),
                ("image", &c.image),
                ("name", &c.id),
                ("namespace", &pod.namespace),
                ("pod", &pod.name),
            ];
            entries.push(Entry {
                labels,
                reading,
                started_at: c.started_at,
                network: None,
                fs: c.fs,
            });
        }
    }
    entries
}

/// The writable layer of each container, as cAdvisor's `container_fs_*` (device: the
/// snapshotter's; cAdvisor names the backing device, cairn the layer).
fn filesystem(out: &mut Exposition, entries: &[Entry<'_>]) {
    let layers: Vec<(&Entry<'_>, cairn_runtime::LayerUsage, SystemTime)> = entries
        .iter()
        .filter_map(|e| Some((e, e.fs?.rootfs?, e.fs?.time)))
        .collect();
    let families: [(&str, &str, LayerFigure); 2] = [
        (
            "container_fs_usage_bytes",
            "Number of bytes that are consumed by the container on this filesystem.",
            |l| l.bytes,
        ),
        ("container_fs_inodes_total", "Number of Inodes", |l| {
            l.inodes
        }),
    ];
    for (name, help, value) in families {
        out.family(name, help, Kind::Gauge);
        for (e, layer, time) in &layers {
            let labels = with(e, &[("device", "writable-layer")]);
            out.sample(name, &labels, value(layer) as f64, Some(*time));
        }
    }
}

/// Base labels and extra ones, in one list.
fn with<'a>(e: &Entry<'a>, extra: &[(&'static str, &'a str)]) -> Vec<(&'static str, &'a str)> {
    e.labels
        .iter()
        .copied()
        .chain(extra.iter().copied())
        .collect()
}

fn cpu_usage(out: &mut Exposition, entries: &[Entry<'_>]) {
    let name = "container_cpu_usage_seconds_total";
    out.family(
        name,
        "Cumulative cpu time consumed in seconds.",
        Kind::Counter,
    );
    for e in entries {
        if let Some(v) = secs(e.reading.sample.cpu.usage_ns) {
            out.sample(name, &with(e, &[("cpu", "total")]), v, Some(e.reading.time));
        }
    }
}

/// Page faults by scope. Both scopes read the hierarchical counters: under cgroup v2
/// (and for a v1 cgroup without children, every container's) they are the same figures,
/// as cAdvisor reports them there.
fn memory_failures(out: &mut Exposition, entries: &[Entry<'_>]) {
    let name = "container_memory_failures_total";
    out.family(
        name,
        "Cumulative count of memory allocation failures.",
        Kind::Counter,
    );
    for e in entries {
        let m = &e.reading.sample.memory;
        for scope in ["container", "hierarchy"] {
            for (kind, value) in [
                ("pgfault", m.page_faults),
                ("pgmajfault", m.major_page_faults),
            ] {
                if let Some(v) = value {
                    let labels = with(e, &[("failure_type", kind), ("scope", scope)]);
                    out.sample(name, &labels, v as f64, Some(e.reading.time));
                }
            }
        }
    }
}

fn block_io(out: &mut Exposition, entries: &[Entry<'_>], device_name: &dyn Fn(u64, u64) -> String) {
    let families: [DeviceFamily; 4] = [
        (
            "container_fs_reads_bytes_total",
            "Cumulative count of bytes read",
            |d| d.read_bytes,
        ),
        (
            "container_fs_writes_bytes_total",
            "Cumulative count of bytes written",
            |d| d.write_bytes,
        ),
        (
            "container_fs_reads_total",
            "Cumulative count of reads completed",
            |d| d.read_ops,
        ),
        (
            "container_fs_writes_total",
            "Cumulative count of writes completed",
            |d| d.write_ops,
        ),
    ];
    for (name, help, value) in families {
        out.family(name, help, Kind::Counter);
        for e in entries {
            for io in &e.reading.sample.io {
                let device = device_name(io.major, io.minor);
                let labels = with(e, &[("device", device.as_str())]);
                out.sample(name, &labels, value(io) as f64, Some(e.reading.time));
            }
        }
    }
}

fn network(out: &mut Exposition, entries: &[Entry<'_>]) {
    let families: [InterfaceFamily; 8] = [
        (
            "container_network_receive_bytes_total",
            "Cumulative count of bytes received",
            |i| i.rx_bytes,
        ),
        (
            "container_network_receive_packets_total",
            "Cumulative count of packets received",
            |i| i.rx_packets,
        ),
        (
            "container_network_receive_packets_dropped_total",
            "Cumulative count of packets dropped while receiving",
            |i| i.rx_dropped,
        ),
        (
            "container_network_receive_errors_total",
            "Cumulative count of errors encountered while receiving",
            |i| i.rx_errors,
        ),
        (
            "container_network_transmit_bytes_total",
            "Cumulative count of bytes transmitted",
            |i| i.tx_bytes,
        ),
        (
            "container_network_transmit_packets_total",
            "Cumulative count of packets transmitted",
            |i| i.tx_packets,
        ),
        (
            "container_network_transmit_packets_dropped_total",
            "Cumulative count of packets dropped while transmitting",
            |i| i.tx_dropped,
        ),
        (
            "container_network_transmit_errors_total",
            "Cumulative count of errors encountered while transmitting",
            |i| i.tx_errors,
        ),
    ];
    for (name, help, value) in families {
        out.family(name, help, Kind::Counter);
        for e in entries {
            let Some(net) = e.network else { continue };
            for i in &net.interfaces {
                let labels = with(e, &[("interface", i.name.as_str())]);
                out.sample(name, &labels, value(i) as f64, Some(net.time));
            }
        }
    }
}

fn start_and_last_seen(out: &mut Exposition, entries: &[Entry<'_>]) {
    let name = "container_start_time_seconds";
    out.family(
        name,
        "Start time of the container since unix epoch in seconds.",
        Kind::Gauge,
    );
    for e in entries {
        if let Some(started) = e.started_at.and_then(|t| t.duration_since(UNIX_EPOCH).ok()) {
            out.sample(
                name,
                &e.labels,
                started.as_secs() as f64,
                Some(e.reading.time),
            );
        }
    }
    let name = "container_last_seen";
    out.family(
        name,
        "Last time a container was seen by the exporter",
        Kind::Gauge,
    );
    for e in entries {
        if let Ok(seen) = e.reading.time.duration_since(UNIX_EPOCH) {
            out.sample(name, &e.labels, seen.as_secs() as f64, Some(e.reading.time));
        }
    }
}

fn machine(out: &mut Exposition, collector: &Collector, cpu_cores: u64) {
    out.family(
        "machine_cpu_cores",
        "Number of logical CPU cores.",
        Kind::Gauge,
    );
    out.sample("machine_cpu_cores", &[], cpu_cores as f64, None);
    if let Some(total) = collector.node().and_then(|n| n.sample.memory_total_bytes) {
        out.family(
            "machine_memory_bytes",
            "Amount of memory installed on the machine.",
            Kind::Gauge,
        );
        out.sample("machine_memory_bytes", &[], total as f64, None);
    }
}
