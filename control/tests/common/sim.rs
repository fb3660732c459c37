//! Simulated nodes for control-plane tests: Node objects plus a small "kubelet" that
//! marks bound pods Running and Ready (or Running and not Ready when the pod has the
//! label `sim.cairn.dev/ready: "false"`), ends pods labelled `sim.cairn.dev/exit: "N"`
//! after one pass as Running (Succeeded for 0, Failed with exit code N otherwise), and
//! finishes graceful deletions at once. It also keeps every node alive as a kubelet does:
//! its Lease in `kube-node-lease` renewed and its Ready condition's heartbeat fresh — except
//! for nodes [`FakeKubelet::pause`]d, whose pods it leaves alone too (a node gone dark).
//! And it plays each node's `cairn.io/local-path` provisioner: a claim placed on a node it
//! simulates gets a pre-bound volume there (no directory, nothing mounts it).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};

use super::Kubectl;

pub const NOT_READY_LABEL: &str = "sim.cairn.dev/ready";
pub const EXIT_LABEL: &str = "sim.cairn.dev/exit";

pub fn add_node(k: &Kubectl, name: &str, cpu: &str) {
    let node = json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
        "status": {
            "capacity": {"cpu": cpu, "memory": "8Gi", "pods": "110"},
            "allocatable": {"cpu": cpu, "memory": "8Gi", "pods": "110"},
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    });
    k.ok_stdin(&["apply", "-f", "-"], &node.to_string());
}

pub struct FakeKubelet {
    stop: Arc<AtomicBool>,
    paused: Paused,
    thread: Option<std::thread::JoinHandle<()>>,
}

type Paused = Arc<std::sync::Mutex<std::collections::HashSet<String>>>;

impl FakeKubelet {
    /// The node goes dark: no Lease renewals, no status, its pods untouched.
    pub fn pause(&self, node: &str) {
        self.paused.lock().unwrap().insert(node.to_string());
    }

    /// The node comes back.
    pub fn resume(&self, node: &str) {
        self.paused.lock().unwrap().remove(node);
    }
}

impl Drop for FakeKubelet {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Now in RFC 3339 (UTC, seconds), without a time crate in the tests' dependencies.
fn now() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    // Civil-from-days (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

fn status_patch(pod: &Value, ready: bool, ip: &str) -> Value {
    let flag = if ready { "True" } else { "False" };
    let t = now();
    let containers: Vec<Value> = pod["spec"]["containers"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .map(|c| {
            json!({"name": c["name"], "image": c["image"], "imageID": "", "ready": ready,
                   "restartCount": 0, "started": true, "state": {"running": {"startedAt": t}}})
        })
        .collect();
    json!({"status": {
        "phase": "Running", "podIP": ip, "startTime": t,
        "conditions": [
            {"type": "Ready", "status": flag, "lastTransitionTime": t},
            {"type": "ContainersReady", "status": flag, "lastTransitionTime": t},
        ],
        "containerStatuses": containers,
    }})
}

/// The status of a pod whose containers all exited with `code`.
fn exit_patch(pod: &Value, code: i64) -> Value {
    let t = now();
    let containers: Vec<Value> = pod["spec"]["containers"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .map(|c| {
            json!({"name": c["name"], "image": c["image"], "imageID": "", "ready": false,
                   "restartCount": 0, "started": false,
                   "state": {"terminated": {"exitCode": code, "startedAt": t, "finishedAt": t,
                             "reason": if code == 0 { "Completed" } else { "Error" }}}})
        })
        .collect();
    json!({"status": {
        "phase": if code == 0 { "Succeeded" } else { "Failed" },
        "conditions": [
            {"type": "Ready", "status": "False", "lastTransitionTime": t},
            {"type": "ContainersReady", "status": "False", "lastTransitionTime": t},
        ],
        "containerStatuses": containers,
    }})
}

/// Renews the Lease and refreshes the Ready heartbeat of every node not paused.
async fn heartbeat(c: &reqwest::Client, url: &str, paused: &Paused) -> Result<(), reqwest::Error> {
    let nodes: Value = c
        .get(format!("{url}/api/v1/nodes"))
        .send()
        .await?
        .json()
        .await?;
    let t = now();
    for node in nodes["items"].as_array().cloned().unwrap_or_default() {
        let name = node["metadata"]["name"].as_str().unwrap_or("").to_string();
        if paused.lock().unwrap().contains(&name) {
            continue;
        }
        let leases = format!("{url}/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases");
        let spec = json!({"holderIdentity": name, "leaseDurationSeconds": 40, "renewTime": format!("{}.000000Z", t.trim_end_matches('Z'))});
        let renewed = c
            .patch(format!("{leases}/{name}"))
            .header("Content-Type", "application/merge-patch+json")
            .body(json!({"spec": spec}).to_string())
            .send()
            .await?;
        if renewed.status() == reqwest::StatusCode::NOT_FOUND {
            let lease = json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                "metadata": {"name": name, "namespace": "kube-node-lease"}, "spec": spec});
            c.post(&leases).json(&lease).send().await?;
        }
        let ready = json!({"status": {"conditions": [
            {"type": "Ready", "status": "True", "reason": "KubeletReady", "lastHeartbeatTime": t,
             "lastTransitionTime": node["status"]["conditions"].as_array().and_then(|cs| cs.iter().find(|c| c["type"] == "Ready" && c["status"] == "True")).map_or(json!(t), |c| c["lastTransitionTime"].clone())},
        ]}});
        c.patch(format!("{url}/api/v1/nodes/{name}/status"))
            .header("Content-Type", "application/merge-patch+json")
            .body(ready.to_string())
            .send()
            .await?;
    }
    Ok(())
}

/// Volumes for claims handed to `cairn.io/local-path` and placed on a simulated node.
async fn provision(c: &reqwest::Client, url: &str, paused: &Paused) -> Result<(), reqwest::Error> {
    let claims: Value = c
        .get(format!("{url}/api/v1/persistentvolumeclaims"))
        .send()
        .await?
        .json()
        .await?;
    for claim in claims["items"].as_array().cloned().unwrap_or_default() {
        let ann = &claim["metadata"]["annotations"];
        let node = ann["volume.kubernetes.io/selected-node"]
            .as_str()
            .unwrap_or("");
        let ours = ann["volume.kubernetes.io/storage-provisioner"] == "cairn.io/local-path";
        let unbound = claim["spec"]["volumeName"]
            .as_str()
            .unwrap_or("")
            .is_empty();
        if !ours || !unbound || node.is_empty() || paused.lock().unwrap().contains(node) {
            continue;
        }
        let uid = claim["metadata"]["uid"].as_str().unwrap_or("");
        let pv = json!({"apiVersion": "v1", "kind": "PersistentVolume",
            "metadata": {"name": format!("pvc-{uid}"), "annotations": {"pv.kubernetes.io/provisioned-by": "cairn.io/local-path"}},
            "spec": {"capacity": {"storage": claim["spec"]["resources"]["requests"]["storage"]},
                "accessModes": claim["spec"]["accessModes"], "storageClassName": claim["spec"]["storageClassName"],
                "persistentVolumeReclaimPolicy": "Delete", "local": {"path": format!("/sim/{uid}")},
                "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                    {"key": "kubernetes.io/hostname", "operator": "In", "values": [node]}]}]}},
                "claimRef": {"namespace": claim["metadata"]["namespace"], "name": claim["metadata"]["name"], "uid": uid}}});
        // A 409 (made on an earlier pass) is fine.
        c.post(format!("{url}/api/v1/persistentvolumes"))
            .json(&pv)
            .send()
            .await?;
    }
    Ok(())
}

async fn sync_once(
    c: &reqwest::Client,
    url: &str,
    seq: &mut u32,
    paused: &Paused,
) -> Result<(), reqwest::Error> {
    provision(c, url, paused).await?;
    let list: Value = c
        .get(format!("{url}/api/v1/pods"))
        .send()
        .await?
        .json()
        .await?;
    for pod in list["items"].as_array().cloned().unwrap_or_default() {
        let ns = pod["metadata"]["namespace"]
            .as_str()
            .unwrap_or("")
            .to_string();
        let name = pod["metadata"]["name"].as_str().unwrap_or("").to_string();
        let base = format!("{url}/api/v1/namespaces/{ns}/pods/{name}");
        let node = pod["spec"]["nodeName"].as_str().unwrap_or("");
        if node.is_empty() || paused.lock().unwrap().contains(node) {
            continue;
        }
        if !pod["metadata"]["deletionTimestamp"].is_null() {
            // The containers "stopped": finish the deletion, as a kubelet does.
            c.delete(format!("{base}?gracePeriodSeconds=0"))
                .send()
                .await?;
            continue;
        }
        let phase = pod["status"]["phase"].as_str().unwrap_or("");
        if phase == "Succeeded" || phase == "Failed" {
            continue;
        }
        let exit = pod["metadata"]["labels"][EXIT_LABEL].as_str();
        if let (Some(code), "Running") = (exit.and_then(|c| c.parse::<i64>().ok()), phase) {
            c.patch(format!("{base}/status"))
                .header("Content-Type", "application/merge-patch+json")
                .body(exit_patch(&pod, code).to_string())
                .send()
                .await?;
            continue;
        }
        let ready = pod["metadata"]["labels"][NOT_READY_LABEL].as_str() != Some("false");
        let is_ready = pod["status"]["conditions"].as_array().is_some_and(|cs| {
            cs.iter().any(|c| {
                c["type"] == "Ready" && c["status"] == if ready { "True" } else { "False" }
            })
        });
        if pod["status"]["phase"] == "Running" && is_ready {
            continue;
        }
        *seq += 1;
        let ip = format!("10.244.{}.{}", *seq / 250, *seq % 250 + 2);
        c.patch(format!("{base}/status"))
            .header("Content-Type", "application/merge-patch+json")
            .body(status_patch(&pod, ready, &ip).to_string())
            .send()
            .await?;
    }
    Ok(())
}

/// Starts the simulated kubelet for every node of the server at `url`.
pub fn start_kubelet(server: &super::Server) -> FakeKubelet {
    let stop = Arc::new(AtomicBool::new(false));
    let flag = stop.clone();
    let paused: Paused = Arc::default();
    let dark = paused.clone();
    let url = server.url.clone();
    let http = server.http();
    let thread = std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let c = http;
            let mut seq = 0;
            let mut pass = 0u32;
            while !flag.load(Ordering::SeqCst) {
                // Errors (a pod deleted meanwhile) are retried on the next pass.
                let _ = sync_once(&c, &url, &mut seq, &dark).await;
                if pass.is_multiple_of(10) {
                    // Err: retried on the next beat, a second later.
                    let _ = heartbeat(&c, &url, &dark).await;
                }
                pass = pass.wrapping_add(1);
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        });
    });
    FakeKubelet {
        stop,
        paused,
        thread: Some(thread),
    }
}
