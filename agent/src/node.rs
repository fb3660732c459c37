//! Node registration, NodeStatus (written on change or every 5 minutes) and the heartbeat
//! Lease in `kube-node-lease` (renewed every 10 s), as the kubelet does.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use chrono::Utc;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::{json, Value};
use tracing::{info, warn};

use crate::config::AgentConfig;
use crate::sysinfo::{self, HostRoot};
use crate::Agent;

pub const AGENT_VERSION: &str = concat!("v1.33.0-cairn-", env!("CARGO_PKG_VERSION"));
const STATUS_REFRESH: Duration = Duration::from_secs(300);
const LEASE_RENEW: Duration = Duration::from_secs(10);
const LEASE_DURATION_SECONDS: i32 = 40;
/// Until the node has first reported Ready, its conditions are checked this often, so it
/// turns Ready as soon as it can rather than at the next status period (upstream's
/// kubelet does the same at start, `fastStatusUpdateOnce`, every 100 ms).
const UNTIL_FIRST_READY: Duration = Duration::from_millis(200);

/// Whether `conditions` (as written) say Ready=True.
fn says_ready(conditions: &[Value]) -> bool {
    conditions
        .iter()
        .any(|c| c["type"] == "Ready" && c["status"] == "True")
}

#[derive(Debug, thiserror::Error)]
pub enum NodeError {
    #[error("registering node {node}: {source}")]
    Register { node: String, source: kube::Error },
    #[error("writing status of node {node}: {source}")]
    Status { node: String, source: kube::Error },
}

/// Capacity and allocatable as Kubernetes quantities.
pub fn resources(
    config: &AgentConfig,
    host: &HostRoot,
) -> (BTreeMap<String, String>, BTreeMap<String, String>) {
    let cpus = host.cpus();
    let mem = host.meminfo().map(|m| m.total_bytes).unwrap_or(0);
    let disk = sysinfo::filesystem_bytes(&config.root_dir)
        .or_else(|| sysinfo::filesystem_bytes(std::path::Path::new("/")))
        .map(|(total, _)| total)
        .unwrap_or(0);
    let capacity = BTreeMap::from([
        ("cpu".to_string(), cpus.to_string()),
        ("memory".to_string(), format!("{}Ki", mem / 1024)),
        ("pods".to_string(), config.max_pods.to_string()),
        (
            "ephemeral-storage".to_string(),
            format!("{}Ki", disk / 1024),
        ),
    ]);
    let cpu_alloc = (cpus * 1000).saturating_sub(config.reserved_cpu_millis);
    // The kubelet also keeps the hard `memory.available` threshold out of allocatable.
    let threshold = config
        .eviction_hard
        .iter()
        .find(|t| t.signal == crate::eviction::thresholds::Signal::MemoryAvailable)
        .map_or(0, |t| {
            u64::try_from(t.quantity(i64::try_from(mem).unwrap_or(i64::MAX))).unwrap_or(0)
        });
    let mem_alloc = mem
        .saturating_sub(config.reserved_memory_bytes)
        .saturating_sub(threshold);
    let allocatable = BTreeMap::from([
        ("cpu".to_string(), format!("{cpu_alloc}m")),
        ("memory".to_string(), format!("{}Ki", mem_alloc / 1024)),
        ("pods".to_string(), config.max_pods.to_string()),
        (
            "ephemeral-storage".to_string(),
            format!("{}Ki", disk / 1024 * 9 / 10),
        ),
    ]);
    (capacity, allocatable)
}

fn condition(kind: &str, ok_is_true: bool, healthy: bool, reason: &str, message: &str) -> Value {
    let status = if healthy == ok_is_true {
        "True"
    } else {
        "False"
    };
    json!({"type": kind, "status": status, "reason": reason, "message": message})
}

/// Conditions from real checks: containerd answers, CNI config present, memory/disk/PIDs.
pub async fn conditions(agent: &Agent) -> Vec<Value> {
    let runtime_ok = agent.runtime.version().await.is_ok();
    let network_ok = agent.cni.network_ready();
    // The eviction manager's view of the thresholds (`eviction/`).
    let pressure = agent
        .eviction
        .node_pressure(agent.config.eviction_pressure_transition);
    let (mem_pressure, disk_pressure, pid_pressure) =
        (pressure.memory, pressure.disk, pressure.pid);
    let ready_message = match (runtime_ok, network_ok) {
        (true, true) => "cairn-agent is posting ready status".to_string(),
        (false, _) => format!(
            "container runtime is down: containerd at {} does not answer",
            agent.config.containerd_socket.display()
        ),
        (true, false) => format!(
            "container runtime network not ready: NetworkReady=false reason:NetworkPluginNotReady message:no CNI network config in {}",
            agent.config.cni_conf_dir.display()
        ),
    };
    vec![
        condition(
            "MemoryPressure",
            false,
            !mem_pressure,
            if mem_pressure {
                "KubeletHasInsufficientMemory"
            } else {
                "KubeletHasSufficientMemory"
            },
            if mem_pressure {
                "kubelet has insufficient memory available"
            } else {
                "kubelet has sufficient memory available"
            },
        ),
        condition(
            "DiskPressure",
            false,
            !disk_pressure,
            if disk_pressure {
                "KubeletHasDiskPressure"
            } else {
                "KubeletHasNoDiskPressure"
            },
            if disk_pressure {
                "kubelet has disk pressure"
            } else {
                "kubelet has no disk pressure"
            },
        ),
        condition(
            "PIDPressure",
            false,
            !pid_pressure,
            if pid_pressure {
                "KubeletHasInsufficientPID"
            } else {
                "KubeletHasSufficientPID"
            },
            if pid_pressure {
                "kubelet has insufficient PID available"
            } else {
                "kubelet has sufficient PID available"
            },
        ),
        condition(
            "NetworkUnavailable",
            false,
            network_ok,
            if network_ok {
                "CNIConfigured"
            } else {
                "NoCNIConfig"
            },
            if network_ok {
                "CNI network config present"
            } else {
                "no CNI network config"
            },
        ),
        condition(
            "Ready",
            true,
            runtime_ok && network_ok,
            if runtime_ok && network_ok {
                "KubeletReady"
            } else {
                "KubeletNotReady"
            },
            &ready_message,
        ),
    ]
}

async fn status_body(agent: &Agent, conditions: &[Value]) -> Value {
    let config = &agent.config;
    let (capacity, allocatable) = resources(config, &agent.host);
    let runtime_version = agent
        .runtime
        .version()
        .await
        .map(|v| format!("containerd://{}", v.runtime_version))
        .unwrap_or_else(|_| "containerd://unknown".into());
    let mut addresses = vec![];
    if let Some(ip) = &agent.node_ip {
        addresses.push(json!({"type": "InternalIP", "address": ip}));
    }
    addresses.push(json!({"type": "Hostname", "address": config.node_name}));
    json!({
        "capacity": capacity,
        "allocatable": allocatable,
        "conditions": conditions,
        "addresses": addresses,
        "daemonEndpoints": {"kubeletEndpoint": {"Port": config.listen.port()}},
        "nodeInfo": {
            "machineID": agent.host.machine_id(),
            "systemUUID": agent.host.machine_id(),
            "bootID": agent.host.boot_id(),
            "kernelVersion": agent.host.kernel_version(),
            "osImage": agent.host.os_image(),
            "containerRuntimeVersion": runtime_version,
            "kubeletVersion": AGENT_VERSION,
            "kubeProxyVersion": AGENT_VERSION,
            "operatingSystem": "linux",
            "architecture": go_arch(),
        },
    })
}

pub fn go_arch() -> &'static str {
    match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        other => other,
    }
}

/// Creates the Node if missing (labels as the kubelet sets them).
pub async fn register(agent: &Agent) -> Result<(), NodeError> {
    let nodes: Api<Node> = Api::all(agent.client.clone());
    let name = &agent.config.node_name;
    let node: Node = serde_json::from_value(json!({
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": go_arch(),
                "beta.kubernetes.io/os": "linux",
                "beta.kubernetes.io/arch": go_arch(),
            },
        },
        "spec": {},
    }))
    .unwrap_or_default();
    match nodes.create(&PostParams::default(), &node).await {
        Ok(_) => info!(node = %name, "registered node"),
        Err(kube::Error::Api(e)) if e.code == 409 => info!(node = %name, "node already registered"),
        Err(source) => {
            return Err(NodeError::Register {
                node: name.clone(),
                source,
            })
        }
    }
    Ok(())
}

/// Heartbeat loop: Lease every 10 s; NodeStatus on change or every 5 minutes.
pub async fn run(agent: Arc<Agent>) {
    let nodes: Api<Node> = Api::all(agent.client.clone());
    let leases: Api<Lease> = Api::namespaced(agent.client.clone(), "kube-node-lease");
    let name = agent.config.node_name.clone();
    let mut last_written: Option<(Vec<Value>, Instant)> = None;
    let mut last_lease = Instant::now() - LEASE_RENEW;
    let tick = Duration::from_secs(agent.config.node_status_update_seconds.clamp(1, 10));
    let mut was_ready = false;
    loop {
        crate::qos::refresh(&agent);
        let conds = conditions(&agent).await;
        let comparable: Vec<Value> = conds.clone();
        let due = match &last_written {
            None => true,
            Some((prev, at)) => *prev != comparable || at.elapsed() >= STATUS_REFRESH,
        };
        if due {
            let now = Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
            let stamped: Vec<Value> = conds
                .iter()
                .map(|c| {
                    let mut c = c.clone();
                    c["lastHeartbeatTime"] = json!(now);
                    c["lastTransitionTime"] = json!(now);
                    c
                })
                .collect();
            // Keep lastTransitionTime of unchanged conditions.
            let stamped = match nodes.get_status(&name).await {
                Ok(current) => keep_transition_times(&current, stamped),
                Err(_) => stamped,
            };
            let body = json!({"status": status_body(&agent, &stamped).await});
            match nodes
                .patch_status(&name, &PatchParams::default(), &Patch::Merge(&body))
                .await
            {
                Ok(_) => {
                    was_ready |= says_ready(&comparable);
                    last_written = Some((comparable, Instant::now()));
                }
                Err(kube::Error::Api(e)) if e.code == 404 => {
                    warn!(node = %name, "node object deleted; registering again");
                    if let Err(e) = register(&agent).await {
                        warn!(error = %e, "re-registering node");
                    }
                }
                Err(e) => warn!(node = %name, error = %e, "writing node status"),
            }
        }
        if last_lease.elapsed() >= LEASE_RENEW {
            match renew_lease(&agent, &leases, &nodes).await {
                Ok(()) => last_lease = Instant::now(),
                Err(e) => warn!(node = %name, error = %e, "renewing node lease"),
            }
        }
        tokio::time::sleep(if was_ready {
            tick
        } else {
            tick.min(UNTIL_FIRST_READY)
        })
        .await;
    }
}

fn keep_transition_times(current: &Node, mut fresh: Vec<Value>) -> Vec<Value> {
    let old = current
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .cloned()
        .unwrap_or_default();
    for c in &mut fresh {
        let kind = c["type"].as_str().unwrap_or_default().to_string();
        if let Some(prev) = old.iter().find(|o| o.type_ == kind) {
            if Some(prev.status.as_str()) == c["status"].as_str() {
                if let Some(t) = &prev.last_transition_time {
                    c["lastTransitionTime"] = serde_json::to_value(t).unwrap_or(Value::Null);
                }
            }
        }
    }
    fresh
}

async fn renew_lease(
    agent: &Agent,
    leases: &Api<Lease>,
    nodes: &Api<Node>,
) -> Result<(), kube::Error> {
    let name = &agent.config.node_name;
    let now = Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Micros, true);
    let patch = json!({"spec": {"holderIdentity": name, "leaseDurationSeconds": LEASE_DURATION_SECONDS, "renewTime": now}});
    match leases
        .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
    {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(e)) if e.code == 404 => {
            let node_uid = nodes.get(name).await.ok().and_then(|n| n.metadata.uid);
            let mut lease = json!({
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "metadata": {"name": name, "namespace": "kube-node-lease"},
                "spec": {"holderIdentity": name, "leaseDurationSeconds": LEASE_DURATION_SECONDS, "renewTime": now},
            });
            if let Some(uid) = node_uid {
                lease["metadata"]["ownerReferences"] = json!([{
                    "apiVersion": "v1", "kind": "Node", "name": name, "uid": uid
                }]);
            }
            let lease: Lease = serde_json::from_value(lease).unwrap_or_default();
            leases
                .create(&PostParams::default(), &lease)
                .await
                .map(|_| ())
        }
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_true_ready_condition_says_ready() {
        let ready = |status: &str| json!({"type": "Ready", "status": status});
        let pressure = json!({"type": "MemoryPressure", "status": "True"});
        assert!(says_ready(&[pressure.clone(), ready("True")]));
        assert!(!says_ready(&[pressure, ready("False")]));
        assert!(!says_ready(&[ready("Unknown")]));
        assert!(!says_ready(&[]));
    }
}
