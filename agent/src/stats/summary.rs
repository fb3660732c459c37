//! `/stats/summary` in `stats.k8s.io/v1alpha1`'s shape (what metrics-server and the
//! kubelet's eviction read) from the collector's last passes. Pure: the agent lists pods
//! and containers, the collector holds the readings, this only shapes them. Values the
//! passes did not get are left out, as upstream's optional fields are.

use std::time::SystemTime;

use cairn_runtime::{ContainerState, ContainerStatus};
use cairn_stats::history::Timed;
use cairn_stats::parse::InterfaceCounters;
use cairn_stats::{Collector, PodCgroups};
use k8s_openapi::api::core::v1::Pod;
use serde_json::{json, Map, Value};

/// The interface whose counters upstream puts inline in a pod's `network`.
const DEFAULT_INTERFACE: &str = "eth0";

#[derive(Debug, Clone)]
pub struct ContainerTarget {
    pub name: String,
    /// The runtime's id (cAdvisor's `name` label).
    pub id: String,
    pub image: String,
    pub cgroup: String,
    pub started_at: Option<SystemTime>,
    /// Its writable layer and logs from the last pass.
    pub fs: Option<super::fs::ContainerFs>,
}

#[derive(Debug, Clone)]
pub struct PodTarget {
    pub name: String,
    pub namespace: String,
    pub uid: String,
    pub cgroup: String,
    pub start_time: Option<String>,
    pub containers: Vec<ContainerTarget>,
    /// Its volumes from the last pass.
    pub volumes: Vec<super::fs::VolumeFs>,
}

impl PodTarget {
    /// `pod` with its running containers among `containers`.
    pub fn new(pod: &Pod, cgroup: String, containers: &[ContainerStatus]) -> PodTarget {
        let uid = pod.metadata.uid.clone().unwrap_or_default();
        let running = containers
            .iter()
            .filter(|c| c.pod_uid == uid && c.state == ContainerState::Running);
        PodTarget {
            name: pod.metadata.name.clone().unwrap_or_default(),
            namespace: pod.metadata.namespace.clone().unwrap_or_default(),
            start_time: pod
                .status
                .as_ref()
                .and_then(|s| s.start_time.as_ref())
                .map(|t| t.0.to_string()),
            containers: running
                .map(|c| ContainerTarget {
                    name: c.name.clone(),
                    id: c.id.clone(),
                    image: c.image_ref.clone(),
                    cgroup: c.cgroup.clone(),
                    started_at: c.started_at.map(SystemTime::from),
                    fs: None,
                })
                .collect(),
            volumes: Vec::new(),
            uid,
            cgroup,
        }
    }

    /// Upstream's pod ephemeral storage: writable layers, logs and local ephemeral
    /// volumes; `None` before a pass has read any of them.
    pub fn ephemeral_usage(&self) -> Option<StorageUsage> {
        let mut usage: Option<StorageUsage> = None;
        let mut add = |time: SystemTime, bytes: u64, inodes: u64| {
            let u = usage.get_or_insert(StorageUsage {
                time,
                bytes: 0,
                inodes: 0,
            });
            u.time = u.time.max(time);
            u.bytes = u.bytes.saturating_add(bytes);
            u.inodes = u.inodes.saturating_add(inodes);
        };
        for c in &self.containers {
            if let Some(fs) = &c.fs {
                let (bytes, inodes) = fs.storage();
                add(fs.time, bytes, inodes);
            }
        }
        for v in self.volumes.iter().filter(|v| v.local_ephemeral) {
            add(v.time, v.used_bytes, v.inodes_used);
        }
        usage
    }

    pub(super) fn cgroups(&self) -> PodCgroups {
        PodCgroups {
            uid: self.uid.clone(),
            cgroup: self.cgroup.clone(),
            containers: self.containers.iter().map(|c| c.cgroup.clone()).collect(),
        }
    }
}

/// Bytes and inodes of ephemeral storage, as of `time`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StorageUsage {
    pub time: SystemTime,
    pub bytes: u64,
    pub inodes: u64,
}

/// What the node reports besides the collector's readings.
#[derive(Debug, Clone, Default)]
pub struct NodeFacts {
    pub name: String,
    /// The root filesystem of the agent's data: capacity and available bytes.
    pub fs: Option<(u64, u64)>,
}

pub fn summary(node: &NodeFacts, pods: &[PodTarget], collector: &Collector) -> Value {
    json!({
        "node": node_stats(node, collector),
        "pods": pods.iter().map(|p| pod_stats(p, collector)).collect::<Vec<_>>(),
    })
}

fn node_stats(facts: &NodeFacts, collector: &Collector) -> Value {
    let mut node = object([("nodeName", Some(json!(facts.name)))]);
    let Some(reading) = collector.node() else {
        return Value::Object(node);
    };
    let (s, time) = (&reading.sample, rfc3339(reading.time));
    let cpu = object([
        ("time", Some(json!(time))),
        (
            "usageNanoCores",
            collector.node_usage_nano_cores().map(Value::from),
        ),
        ("usageCoreNanoSeconds", s.cpu_usage_ns.map(Value::from)),
    ]);
    // Without the root cgroup's inactive file pages, the working set is what the kernel
    // would not give back: total less MemAvailable.
    let used = s
        .memory_total_bytes
        .zip(s.memory_available_bytes)
        .map(|(t, a)| t.saturating_sub(a));
    let memory = object([
        ("time", Some(json!(time))),
        ("availableBytes", s.memory_available_bytes.map(Value::from)),
        ("usageBytes", used.map(Value::from)),
        ("workingSetBytes", used.map(Value::from)),
    ]);
    node.insert("cpu".into(), Value::Object(cpu));
    node.insert("memory".into(), Value::Object(memory));
    node.insert("network".into(), network(&time, &s.interfaces));
    if let Some((capacity, available)) = facts.fs {
        let used = capacity.saturating_sub(available);
        let fs = json!({"time": time, "capacityBytes": capacity, "availableBytes": available, "usedBytes": used});
        node.insert("fs".into(), fs);
    }
    let rlimit = object([
        ("time", Some(json!(time))),
        ("maxpid", s.pid_max.map(Value::from)),
        ("curproc", s.processes.map(Value::from)),
    ]);
    node.insert("rlimit".into(), Value::Object(rlimit));
    Value::Object(node)
}

fn pod_stats(pod: &PodTarget, collector: &Collector) -> Value {
    let containers: Vec<Value> = pod
        .containers
        .iter()
        .map(|c| {
            let mut entry = object([
                ("name", Some(json!(c.name))),
                ("startTime", c.started_at.map(|t| Value::from(rfc3339(t)))),
            ]);
            entry.extend(usage(collector, &c.cgroup));
            entry.extend(filesystems(c.fs.as_ref()));
            Value::Object(entry)
        })
        .collect();
    let processes: Option<u64> = pod
        .containers
        .iter()
        .map(|c| {
            collector
                .history()
                .latest(&c.cgroup)?
                .sample
                .processes
                .processes
        })
        .sum();
    let mut entry = object([
        (
            "podRef",
            Some(json!({"name": pod.name, "namespace": pod.namespace, "uid": pod.uid})),
        ),
        ("startTime", pod.start_time.clone().map(Value::from)),
        ("containers", Some(Value::Array(containers))),
        (
            "process_stats",
            Some(json!({"process_count": processes.unwrap_or(0)})),
        ),
    ]);
    entry.extend(usage(collector, &pod.cgroup));
    if let Some(storage) = ephemeral_storage(pod) {
        entry.insert("ephemeral-storage".into(), storage);
    }
    if !pod.volumes.is_empty() {
        let volumes = pod.volumes.iter().map(volume).collect();
        entry.insert("volume".into(), Value::Array(volumes));
    }
    if let Some(net) = collector.network(&pod.uid) {
        entry.insert(
            "network".into(),
            network(&rfc3339(net.time), &net.interfaces),
        );
    }
    Value::Object(entry)
}

/// `cpu` and `memory` of one cgroup's last reading.
fn usage(collector: &Collector, cgroup: &str) -> Map<String, Value> {
    let Some(Timed { time, sample, .. }) = collector.history().latest(cgroup) else {
        return Map::new();
    };
    let (time, m) = (rfc3339(*time), &sample.memory);
    let cpu = object([
        ("time", Some(json!(time))),
        (
            "usageNanoCores",
            collector
                .history()
                .usage_nano_cores(cgroup)
                .map(Value::from),
        ),
        ("usageCoreNanoSeconds", sample.cpu.usage_ns.map(Value::from)),
    ]);
    let available = m
        .limit_bytes
        .zip(m.working_set_bytes)
        .map(|(l, w)| l.saturating_sub(w));
    let memory = object([
        ("time", Some(json!(time))),
        ("availableBytes", available.map(Value::from)),
        ("usageBytes", m.usage_bytes.map(Value::from)),
        ("workingSetBytes", m.working_set_bytes.map(Value::from)),
        ("rssBytes", m.rss_bytes.map(Value::from)),
        ("pageFaults", m.page_faults.map(Value::from)),
        ("majorPageFaults", m.major_page_faults.map(Value::from)),
    ]);
    Map::from_iter([
        ("cpu".into(), Value::Object(cpu)),
        ("memory".into(), Value::Object(memory)),
    ])
}

/// A container's `rootfs` (writable layer) and `logs`, upstream's FsStats.
fn filesystems(fs: Option<&super::fs::ContainerFs>) -> Map<String, Value> {
    let Some(fs) = fs else {
        return Map::new();
    };
    let time = rfc3339(fs.time);
    let mut out = Map::new();
    if let Some(layer) = fs.rootfs {
        let rootfs = json!({"time": time, "usedBytes": layer.bytes, "inodesUsed": layer.inodes});
        out.insert("rootfs".into(), rootfs);
    }
    if let Some((bytes, files)) = fs.logs {
        out.insert(
            "logs".into(),
            json!({"time": time, "usedBytes": bytes, "inodesUsed": files}),
        );
    }
    out
}

/// The pod's ephemeral storage as the kubelet sums it: its containers' writable layers
/// and logs and its local ephemeral volumes.
fn ephemeral_storage(pod: &PodTarget) -> Option<Value> {
    let usage = pod.ephemeral_usage()?;
    Some(json!({
        "time": rfc3339(usage.time),
        "usedBytes": usage.bytes,
        "inodesUsed": usage.inodes,
    }))
}

/// upstream's VolumeStats: the volume's use and the filesystem it lives on.
fn volume(v: &super::fs::VolumeFs) -> Value {
    let fs = v.filesystem;
    Value::Object(object([
        ("time", Some(json!(rfc3339(v.time)))),
        ("availableBytes", fs.map(|f| json!(f.available))),
        ("capacityBytes", fs.map(|f| json!(f.bytes))),
        ("usedBytes", Some(json!(v.used_bytes))),
        ("inodesFree", fs.map(|f| json!(f.inodes_free))),
        ("inodes", fs.map(|f| json!(f.inodes))),
        ("inodesUsed", Some(json!(v.inodes_used))),
        ("name", Some(json!(v.name))),
    ]))
}

/// upstream's NetworkStats: the default interface inline, every interface listed.
fn network(time: &str, interfaces: &[InterfaceCounters]) -> Value {
    let counters = |i: &InterfaceCounters| json!({"name": i.name, "rxBytes": i.rx_bytes, "rxErrors": i.rx_errors, "txBytes": i.tx_bytes, "txErrors": i.tx_errors});
    let mut net = object([("time", Some(json!(time)))]);
    let default = interfaces
        .iter()
        .find(|i| i.name == DEFAULT_INTERFACE)
        .or(interfaces.first());
    if let Some(Value::Object(inline)) = default.map(counters) {
        net.extend(inline);
    }
    net.insert(
        "interfaces".into(),
        interfaces.iter().map(counters).collect(),
    );
    Value::Object(net)
}

/// A JSON object of the fields that have values.
fn object<const N: usize>(fields: [(&str, Option<Value>); N]) -> Map<String, Value> {
    fields
        .into_iter()
        .filter_map(|(k, v)| Some((k.to_string(), v?)))
        .collect()
}

fn rfc3339(time: SystemTime) -> String {
    chrono::DateTime::<chrono::Utc>::from(time).to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}
