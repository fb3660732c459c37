//! The pod watcher (a kube-rs watcher on `spec.nodeName=<node>` that re-lists after errors
//! and 410) and one level-triggered worker per pod: sandbox, volumes, init containers in
//! order, app containers with restart policy and back-off, probes, graceful termination,
//! status written only on change. Orphans (containerd objects of pods the API no longer
//! has) are cleaned up after every full list.

mod probing;
mod report;
mod resources;
mod start;
mod sync;
mod terminate;

use report::*;
use resources::*;
use terminate::*;

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use cairn_runtime::{
    ContainerConfig, ContainerState, ContainerStatus, Mount, PodResources, PodSandbox,
    PodSandboxConfig, Resources, SandboxState, SecurityConfig,
};
use chrono::Utc;
use futures::StreamExt;
use k8s_openapi::api::core::v1::{Container, Pod};
use kube::api::{Api, DeleteParams, Patch, PatchParams, Preconditions};
use kube::runtime::watcher::{self, Event};
use kube::runtime::WatchStreamExt;
use serde_json::{json, Value};
use sha2::Digest;
use tokio::sync::watch;
use tracing::{info, warn, Instrument};

use crate::events::EventType;
use crate::hooks;
use crate::images::Outcome;
use crate::pod_meta::{cgroup_parent, is_mirror, is_static, requests, uid_of};
use crate::probes::{self, ProbeKind, ProbeState};
use crate::status::{self, Observed, Waiting};
use crate::volumes::{self, VolumeContext};
use crate::Agent;

const RESYNC: Duration = Duration::from_secs(10);
const FAST_RESYNC: Duration = Duration::from_secs(1);
const MAX_BACKOFF_SECS: i64 = 300;
/// Least time a container gets between its preStop hook and SIGKILL, as the kubelet's
/// `minimumGracePeriodInSeconds`.
const MIN_GRACE_AFTER_HOOK: Duration = Duration::from_secs(2);
/// postStart hooks have no timeout upstream; this only keeps a stuck exec from living forever
/// (deletion of the pod interrupts the hook long before).
const POST_START_LIMIT: Duration = Duration::from_secs(24 * 3600);

/// What a worker is told about its pod.
#[derive(Clone, Debug)]
pub enum Desired {
    Run(Box<Pod>),
    /// The pod is gone from its source: stop everything, clean up, exit.
    Gone(Box<Pod>),
}

pub struct PodManager {
    agent: Arc<Agent>,
    workers: parking_lot::Mutex<HashMap<String, watch::Sender<Desired>>>,
}

fn key_of(pod: &Pod) -> String {
    format!(
        "{}/{}",
        pod.metadata.namespace.as_deref().unwrap_or("default"),
        pod.metadata.name.as_deref().unwrap_or("")
    )
}

impl PodManager {
    pub fn new(agent: Arc<Agent>) -> Arc<Self> {
        Arc::new(PodManager {
            agent,
            workers: Default::default(),
        })
    }

    /// Hands the latest desired state to the pod's worker, starting one if needed.
    pub fn dispatch(self: &Arc<Self>, desired: Desired) {
        let pod = match &desired {
            Desired::Run(p) | Desired::Gone(p) => p.clone(),
        };
        let uid = uid_of(&pod);
        if uid.is_empty() {
            return;
        }
        let mut workers = self.workers.lock();
        if let Some(tx) = workers.get(&uid) {
            if !tx.is_closed() {
                let _ = tx.send(desired);
                return;
            }
        }
        if matches!(desired, Desired::Gone(_)) && !self.agent.pods.read().contains_key(&uid) {
            // Never ran here: only orphan cleanup may have something to do.
        }
        let (tx, rx) = watch::channel(desired);
        workers.insert(uid.clone(), tx);
        let this = self.clone();
        let span = tracing::info_span!("pod", pod = %key_of(&pod), uid = %uid);
        tokio::spawn(
            async move {
                Worker::new(this.agent.clone(), uid.clone()).run(rx).await;
                this.workers.lock().remove(&uid);
                this.agent.pods.write().remove(&uid);
                this.agent.admitted.lock().remove(&uid);
                crate::qos::refresh(&this.agent);
            }
            .instrument(span),
        );
    }

    pub fn known_uids(&self) -> HashSet<String> {
        self.workers.lock().keys().cloned().collect()
    }

    /// Watches the API's pods bound to this node and feeds the workers.
    pub async fn watch_api_pods(self: Arc<Self>) {
        let api: Api<Pod> = Api::all(self.agent.client.clone());
        let config = watcher::Config::default()
            .fields(&format!("spec.nodeName={}", self.agent.config.node_name));
        let mut stream = watcher::watcher(api, config).default_backoff().boxed();
        let mut listing: HashSet<String> = HashSet::new();
        let mut seen: HashSet<String> = HashSet::new();
        while let Some(event) = stream.next().await {
            match event {
                Ok(Event::Init) => listing.clear(),
                Ok(Event::InitApply(pod)) => {
                    if is_mirror(&pod) {
                        continue;
                    }
                    listing.insert(uid_of(&pod));
                    self.dispatch(Desired::Run(Box::new(pod)));
                }
                Ok(Event::InitDone) => {
                    // Pods we run that the fresh list no longer has were deleted meanwhile.
                    for (uid, pod) in self.agent.pods.read().clone() {
                        if !listing.contains(&uid) && !is_static(&pod) && seen.contains(&uid) {
                            self.dispatch(Desired::Gone(Box::new(pod)));
                        }
                    }
                    seen = listing.clone();
                    let this = self.clone();
                    tokio::spawn(async move { this.clean_orphans().await });
                }
                Ok(Event::Apply(pod)) => {
                    if is_mirror(&pod) {
                        continue;
                    }
                    seen.insert(uid_of(&pod));
                    self.dispatch(Desired::Run(Box::new(pod)));
                }
                Ok(Event::Delete(pod)) => {
                    if is_mirror(&pod) {
                        continue;
                    }
                    self.dispatch(Desired::Gone(Box::new(pod)));
                }
                Err(e) => warn!(error = %e, "pod watch failed; re-listing"),
            }
        }
    }

    /// Stops and removes containerd objects of pods no worker owns.
    pub async fn clean_orphans(&self) {
        let known = self.known_uids();
        let runtime = &self.agent.runtime;
        let containers = match runtime.list_containers().await {
            Ok(c) => c,
            Err(e) => {
                warn!(error = %e, "listing containers for orphan cleanup");
                return;
            }
        };
        let sandboxes = runtime.list_pod_sandboxes().await.unwrap_or_default();
        let mut orphan_pods: HashSet<String> = HashSet::new();
        for c in containers.iter().filter(|c| !known.contains(&c.pod_uid)) {
            info!(container = %c.id, pod = %format!("{}/{}", c.pod_namespace, c.pod_name), "removing container of a pod that no longer exists");
            if let Err(e) = runtime.stop_container(&c.id, Duration::from_secs(2)).await {
                warn!(container = %c.id, error = %e, "stopping orphan container");
            }
            if let Err(e) = runtime.remove_container(&c.id).await {
                warn!(container = %c.id, error = %e, "removing orphan container");
            }
            orphan_pods.insert(c.pod_uid.clone());
        }
        for s in sandboxes.iter().filter(|s| !known.contains(&s.uid)) {
            info!(sandbox = %s.id, pod = %format!("{}/{}", s.namespace, s.name), "removing sandbox of a pod that no longer exists");
            if let Err(e) = runtime.remove_pod_sandbox(&s.id).await {
                warn!(sandbox = %s.id, error = %e, "removing orphan sandbox");
            }
            orphan_pods.insert(s.uid.clone());
            let log_dir = cairn_podlogs::pod_log_dir(
                &self.agent.config.pod_log_dir,
                &s.namespace,
                &s.name,
                &s.uid,
            );
            let _ = std::fs::remove_dir_all(log_dir);
        }
        for uid in orphan_pods {
            if !self.known_uids().contains(&uid) {
                volumes::teardown(&self.agent.config.root_dir, &uid);
                for qos in ["", "burstable/", "besteffort/"] {
                    self.agent.cgroups.remove(&format!(
                        "{}/kubepods/{qos}pod{uid}",
                        self.agent.config.cgroup_root
                    ));
                }
            }
        }
    }
}

/// Per-pod state that lives only as long as the worker (everything durable is in containerd).
struct Worker {
    agent: Arc<Agent>,
    uid: String,
    waiting: HashMap<String, Waiting>,
    probes: HashMap<(String, ProbeKind), ProbeState>,
    last_status: Option<Value>,
    rejected: Option<(String, String)>,
    admitted: bool,
    volumes_synced: Option<std::time::Instant>,
    /// Whether the QoS parents were updated with this pod counted (once per worker; the
    /// heartbeat loop and worker exits keep them current afterwards).
    qos_counted: bool,
    volume_paths: std::collections::BTreeMap<String, std::path::PathBuf>,
    next_wake: Option<Duration>,
    /// What the pod source wants, watched by long hooks so a deletion interrupts them.
    desired: Option<watch::Receiver<Desired>>,
}

/// Logs a failed `PostStart`/`PreStop` hook with the kubelet's message (returned) and posts
/// the `Failed<Kind>Hook` Warning, which, like the kubelet's, leaves out the hook's output
/// (it may hold secrets).
fn report_hook_failure(
    agent: &Agent,
    pod: &Pod,
    c: &Container,
    hook: &k8s_openapi::api::core::v1::LifecycleHandler,
    error: &hooks::HookError,
    kind: &str,
) -> String {
    let message = hooks::failure_message(pod, c, hook, error);
    warn!(container = %c.name, error = %message, "{kind} hook failed");
    agent.events.pod(
        pod,
        Some(&c.name),
        EventType::Warning,
        &format!("Failed{kind}Hook"),
        &format!("{kind}Hook failed"),
    );
    message
}

fn spec_hash(c: &Container) -> String {
    let bytes = serde_json::to_vec(c).unwrap_or_default();
    hex::encode(&sha2::Sha256::digest(&bytes)[..8])
}

fn restart_backoff(last: &ContainerStatus) -> Option<chrono::Duration> {
    let finished = last.finished_at?;
    let ran = last.started_at.map(|s| finished - s).unwrap_or_default();
    // A container that ran ≥10 minutes resets the back-off, as the kubelet does.
    let secs = if ran >= chrono::Duration::minutes(10) {
        10
    } else {
        (10i64 << last.attempt.min(5)).min(MAX_BACKOFF_SECS)
    };
    let until = finished + chrono::Duration::seconds(secs);
    let left = until - Utc::now();
    (left > chrono::Duration::zero()).then_some(chrono::Duration::seconds(secs))
}

impl Worker {
    fn new(agent: Arc<Agent>, uid: String) -> Self {
        Worker {
            agent,
            uid,
            waiting: HashMap::new(),
            probes: HashMap::new(),
            last_status: None,
            rejected: None,
            admitted: false,
            volumes_synced: None,
            qos_counted: false,
            volume_paths: Default::default(),
            next_wake: None,
            desired: None,
        }
    }

    async fn run(mut self, mut rx: watch::Receiver<Desired>) {
        self.desired = Some(rx.clone());
        let mut exits = self.agent.runtime.subscribe_exits();
        loop {
            let desired = rx.borrow_and_update().clone();
            match desired {
                Desired::Run(pod) => {
                    self.agent
                        .pods
                        .write()
                        .insert(self.uid.clone(), (*pod).clone());
                    if pod.metadata.deletion_timestamp.is_some() {
                        let grace = pod
                            .metadata
                            .deletion_grace_period_seconds
                            .unwrap_or(30)
                            .max(0) as u64;
                        self.terminate(&pod, Duration::from_secs(grace)).await;
                        self.cleanup(&pod).await;
                        self.finish_deletion(&pod).await;
                        return;
                    }
                    self.next_wake = None;
                    if let Err(e) = self.sync(&pod).await {
                        warn!(error = %e, "pod sync failed");
                    }
                }
                Desired::Gone(pod) => {
                    let grace = pod
                        .metadata
                        .deletion_grace_period_seconds
                        .unwrap_or(2)
                        .clamp(0, 30) as u64;
                    self.terminate(&pod, Duration::from_secs(grace)).await;
                    self.cleanup(&pod).await;
                    return;
                }
            }
            let wake = self.next_wake.unwrap_or(RESYNC);
            tokio::select! {
                changed = rx.changed() => { if changed.is_err() { return; } }
                _ = async {
                    loop {
                        match exits.recv().await {
                            Ok(e) if e.pod_uid == self.uid => break,
                            Ok(_) => continue,
                            Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => break,
                            Err(_) => std::future::pending::<()>().await,
                        }
                    }
                } => {}
                _ = tokio::time::sleep(wake) => {}
            }
        }
    }

    /// Keeps a container waiting with `reason` (and a Failed event) until a retry.
    fn hold(&mut self, pod: &Pod, c: &Container, reason: &str, message: String, retry: Duration) {
        self.agent.events.pod(
            pod,
            Some(&c.name),
            EventType::Warning,
            "Failed",
            &format!("Error: {message}"),
        );
        self.waiting.insert(
            c.name.clone(),
            Waiting {
                reason: reason.into(),
                message,
            },
        );
        self.wake_in(retry);
    }

    fn wake_in(&mut self, d: Duration) {
        self.next_wake = Some(self.next_wake.map_or(d, |w| w.min(d)));
    }

    async fn my_state(
        &self,
    ) -> Result<(Vec<PodSandbox>, Vec<ContainerStatus>), cairn_runtime::RuntimeError> {
        let sandboxes = self.agent.runtime.list_pod_sandboxes_of(&self.uid).await?;
        let containers = self.agent.runtime.list_containers_of(&self.uid).await?;
        Ok((sandboxes, containers))
    }

    /// Kubelet-style admission: reject pods whose requests do not fit what is left.
    fn admit(&mut self, pod: &Pod, has_containers: bool) -> bool {
        if self.admitted {
            return true;
        }
        let (cpu, mem) = requests(pod);
        let phase = pod
            .status
            .as_ref()
            .and_then(|s| s.phase.clone())
            .unwrap_or_default();
        if phase == "Failed"
            && pod
                .status
                .as_ref()
                .and_then(|s| s.reason.as_deref())
                .is_some_and(|r| r.starts_with("OutOf"))
        {
            self.rejected = pod.status.as_ref().map(|s| {
                (
                    s.reason.clone().unwrap_or_default(),
                    s.message.clone().unwrap_or_default(),
                )
            });
            return false;
        }
        if !has_containers {
            let (_, alloc) = crate::node::resources(&self.agent.config, &self.agent.host);
            let alloc_mem = alloc
                .get("memory")
                .and_then(|q| crate::quantity::bytes(q))
                .unwrap_or(i64::MAX);
            let alloc_cpu = alloc
                .get("cpu")
                .and_then(|q| crate::quantity::millicores(q))
                .unwrap_or(u64::MAX);
            let admitted = self.agent.admitted.lock();
            let used_mem: i64 = admitted.values().map(|(_, m)| *m).sum();
            let used_cpu: u64 = admitted.values().map(|(c, _)| *c).sum();
            let pods = admitted.len() as u32;
            drop(admitted);
            let name = pod.metadata.name.clone().unwrap_or_default();
            let reject = if mem > 0 && used_mem + mem > alloc_mem {
                Some(("OutOfmemory", format!("Pod was rejected: Node didn't have enough resource: memory, requested: {mem}, used: {used_mem}, capacity: {alloc_mem}")))
            } else if cpu > 0 && used_cpu + cpu > alloc_cpu {
                Some(("OutOfcpu", format!("Pod was rejected: Node didn't have enough resource: cpu, requested: {cpu}, used: {used_cpu}, capacity: {alloc_cpu}")))
            } else if pods >= self.agent.config.max_pods {
                Some(("OutOfpods", format!("Pod was rejected: Node didn't have enough resource: pods, requested: 1, used: {pods}, capacity: {}", self.agent.config.max_pods)))
            } else {
                None
            };
            if let Some((reason, message)) = reject {
                warn!(pod = %name, reason, "rejecting pod");
                self.agent
                    .events
                    .pod(pod, None, EventType::Warning, reason, &message);
                self.rejected = Some((reason.to_string(), message));
                return false;
            }
        }
        self.agent
            .admitted
            .lock()
            .insert(self.uid.clone(), (cpu, mem));
        self.admitted = true;
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_grows_and_caps() {
        let mut c = ContainerStatus {
            id: "x".into(),
            sandbox_id: String::new(),
            pod_uid: String::new(),
            pod_namespace: String::new(),
            pod_name: String::new(),
            name: "c".into(),
            attempt: 0,
            spec_hash: String::new(),
            init: false,
            state: ContainerState::Exited,
            image_ref: String::new(),
            image_id: String::new(),
            pid: None,
            created_at: None,
            started_at: Some(Utc::now()),
            finished_at: Some(Utc::now()),
            exit_code: Some(1),
            reason: None,
            log_path: String::new(),
            cgroup: String::new(),
            termination_message_path: None,
            labels: Default::default(),
        };
        assert_eq!(restart_backoff(&c).unwrap().num_seconds(), 10);
        c.attempt = 2;
        assert_eq!(restart_backoff(&c).unwrap().num_seconds(), 40);
        c.attempt = 9;
        assert_eq!(restart_backoff(&c).unwrap().num_seconds(), 300);
        c.finished_at = Some(Utc::now() - chrono::Duration::seconds(301));
        assert!(restart_backoff(&c).is_none());
    }

    #[test]
    fn resources_convert_to_cgroup_units() {
        let pod: Pod = serde_json::from_value(json!({"spec": {"containers": [{"name": "a", "resources": {"requests": {"cpu": "250m", "memory": "32Mi"}, "limits": {"cpu": "500m", "memory": "64Mi"}}}]}})).unwrap();
        let c = &pod.spec.as_ref().unwrap().containers[0];
        let r = container_resources(&pod, c, 8 << 30);
        assert_eq!(r.cpu_shares, Some(256));
        assert_eq!(r.cpu_quota, Some(50_000));
        assert_eq!(r.memory_limit, Some(64 << 20));
        let p = pod_resources(&pod);
        assert_eq!(p.memory_limit, Some(64 << 20));
    }
}
