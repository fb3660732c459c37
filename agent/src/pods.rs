//! The pod watcher (a kube-rs watcher on `spec.nodeName=<node>` that re-lists after errors
//! and 410) and one level-triggered worker per pod: sandbox, volumes, init containers in
//! order, app containers with restart policy and back-off, probes, graceful termination,
//! status written only on change. Orphans (containerd objects of pods the API no longer
//! has) are cleaned up after every full list.

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

    async fn sync(&mut self, pod: &Pod) -> Result<(), cairn_runtime::RuntimeError> {
        let (sandboxes, containers) = self.my_state().await?;
        if !self.admit(pod, !containers.is_empty() || !sandboxes.is_empty()) {
            self.write_status(pod, &[], None).await;
            return Ok(());
        }
        let spec = pod.spec.clone().unwrap_or_default();
        let policy = spec
            .restart_policy
            .clone()
            .unwrap_or_else(|| "Always".into());
        let phase = pod
            .status
            .as_ref()
            .and_then(|s| s.phase.clone())
            .unwrap_or_default();
        let terminal = matches!(phase.as_str(), "Succeeded" | "Failed");

        // A finished pod stays finished: stop what runs, never start anything.
        if terminal {
            for c in containers
                .iter()
                .filter(|c| c.state == ContainerState::Running)
            {
                let _ = self
                    .agent
                    .runtime
                    .stop_container(&c.id, Duration::from_secs(2))
                    .await;
            }
            for s in sandboxes.iter().filter(|s| s.state == SandboxState::Ready) {
                let _ = self.agent.runtime.stop_pod_sandbox(&s.id).await;
            }
            let (_, containers) = self.my_state().await?;
            let refs: Vec<&ContainerStatus> = containers.iter().collect();
            self.write_status(pod, &refs, None).await;
            return Ok(());
        }

        if !self.qos_counted {
            crate::qos::refresh(&self.agent);
            self.qos_counted = true;
        }
        let cgroup = cgroup_parent(&self.agent.config.cgroup_root, pod);
        if let Err(e) = self.agent.cgroups.ensure(&cgroup, &pod_resources(pod)) {
            warn!(error = %e, "creating pod cgroup");
        }

        // Sandbox: reuse the ready one with the highest attempt; otherwise make a new one
        // (which restarts every container, as a lost pod network namespace must).
        let mut ready: Vec<&PodSandbox> = sandboxes
            .iter()
            .filter(|s| s.state == SandboxState::Ready)
            .collect();
        ready.sort_by_key(|s| std::cmp::Reverse(s.attempt));
        let sandbox = match ready.first() {
            Some(s) => (*s).clone(),
            None => {
                let attempt = sandboxes.iter().map(|s| s.attempt + 1).max().unwrap_or(0);
                for c in &containers {
                    let _ = self.agent.runtime.remove_container(&c.id).await;
                }
                for s in &sandboxes {
                    let _ = self.agent.runtime.remove_pod_sandbox(&s.id).await;
                }
                let config = PodSandboxConfig {
                    uid: self.uid.clone(),
                    namespace: pod
                        .metadata
                        .namespace
                        .clone()
                        .unwrap_or_else(|| "default".into()),
                    name: pod.metadata.name.clone().unwrap_or_default(),
                    attempt,
                    hostname: spec
                        .hostname
                        .clone()
                        .or(pod.metadata.name.clone())
                        .unwrap_or_default(),
                    host_network: spec.host_network == Some(true),
                    cgroup_parent: cgroup.clone(),
                };
                match self.agent.runtime.run_pod_sandbox(&config).await {
                    Ok(s) => s,
                    Err(e) => {
                        let message = format!("Failed to create pod sandbox: {e}");
                        self.agent.events.pod(
                            pod,
                            None,
                            EventType::Warning,
                            "FailedCreatePodSandBox",
                            &message,
                        );
                        for c in &spec.containers {
                            self.waiting.insert(
                                c.name.clone(),
                                Waiting {
                                    reason: "ContainerCreating".into(),
                                    message: message.clone(),
                                },
                            );
                        }
                        self.write_status(pod, &[], None).await;
                        self.wake_in(Duration::from_secs(5));
                        return Ok(());
                    }
                }
            }
        };
        let pod_ip = if spec.host_network == Some(true) {
            self.agent.node_ip.clone()
        } else {
            sandbox.ip.clone()
        };
        let containers: Vec<ContainerStatus> = containers
            .into_iter()
            .filter(|c| c.sandbox_id == sandbox.id)
            .collect();

        // Pod files and volumes (refreshed every minute so configMap/secret updates land).
        let etc_ok = self.write_pod_files(pod, pod_ip.as_deref());
        if let Err(e) = etc_ok {
            warn!(error = %e, "writing pod etc files");
        }
        if self
            .volumes_synced
            .is_none_or(|t| t.elapsed() > Duration::from_secs(60))
        {
            let (_, alloc) = crate::node::resources(&self.agent.config, &self.agent.host);
            let source = crate::env::ApiConfigSource(self.agent.client.clone());
            let ctx = VolumeContext {
                root: &self.agent.config.root_dir,
                pod,
                source: &source,
                host_ip: self.agent.node_ip.as_deref(),
                pod_ip: pod_ip.as_deref(),
                node_alloc: &alloc,
            };
            match volumes::setup(&ctx).await {
                Ok(paths) => {
                    self.volume_paths = paths;
                    self.volumes_synced = Some(std::time::Instant::now());
                }
                Err(e) => {
                    let message = e.to_string();
                    self.agent
                        .events
                        .pod(pod, None, EventType::Warning, "FailedMount", &message);
                    for c in spec
                        .init_containers
                        .iter()
                        .flatten()
                        .chain(spec.containers.iter())
                    {
                        self.waiting.insert(
                            c.name.clone(),
                            Waiting {
                                reason: "ContainerCreating".into(),
                                message: message.clone(),
                            },
                        );
                    }
                    let refs: Vec<&ContainerStatus> = containers.iter().collect();
                    self.write_status(pod, &refs, pod_ip.clone()).await;
                    self.wake_in(Duration::from_secs(5));
                    return Ok(());
                }
            }
        }

        // Init containers, in order.
        let mut init_done = true;
        let mut init_failed = false;
        for ic in spec.init_containers.iter().flatten() {
            let (cur, _) = status::instances(&containers.iter().collect::<Vec<_>>(), &ic.name);
            match cur {
                Some(c) if c.state == ContainerState::Exited && c.exit_code == Some(0) => continue,
                Some(c)
                    if c.state == ContainerState::Running || c.state == ContainerState::Created =>
                {
                    init_done = false;
                    break;
                }
                Some(c) if c.state == ContainerState::Exited => {
                    init_done = false;
                    if policy == "Never" {
                        init_failed = true;
                    } else {
                        self.restart_with_backoff(pod, ic, c, &sandbox, pod_ip.as_deref(), true)
                            .await;
                    }
                    break;
                }
                _ => {
                    init_done = false;
                    self.start_container(pod, ic, 0, &sandbox, pod_ip.as_deref(), true)
                        .await;
                    break;
                }
            }
        }

        if init_done && !init_failed {
            for c in &spec.containers {
                let (cur, _) = status::instances(&containers.iter().collect::<Vec<_>>(), &c.name);
                match cur {
                    None => {
                        self.start_container(pod, c, 0, &sandbox, pod_ip.as_deref(), false)
                            .await;
                    }
                    Some(cur) if cur.state == ContainerState::Running => {
                        if cur.spec_hash != spec_hash(c) {
                            info!(container = %c.name, "container spec changed; restarting it");
                            // Like the kubelet, the preStop hook comes from the current spec.
                            kill_container(
                                &self.agent,
                                pod,
                                Some(c),
                                cur,
                                pod_ip.as_deref(),
                                pod_grace(pod),
                                &format!(
                                    "Container {} definition changed, will be restarted",
                                    c.name
                                ),
                            )
                            .await;
                            self.start_container(
                                pod,
                                c,
                                cur.attempt + 1,
                                &sandbox,
                                pod_ip.as_deref(),
                                false,
                            )
                            .await;
                        } else {
                            self.waiting.remove(&c.name);
                            self.run_probes(pod, c, cur, pod_ip.as_deref()).await;
                        }
                    }
                    Some(cur) if cur.state == ContainerState::Exited => {
                        if status::will_restart(&policy, cur.exit_code.unwrap_or(0)) {
                            self.restart_with_backoff(
                                pod,
                                c,
                                cur,
                                &sandbox,
                                pod_ip.as_deref(),
                                false,
                            )
                            .await;
                        } else {
                            self.waiting.remove(&c.name);
                        }
                    }
                    Some(cur) => {
                        // Created but not started (agent died between the two): start it.
                        if let Err(e) = self.agent.runtime.start_container(&cur.id).await {
                            warn!(container = %c.name, error = %e, "starting created container");
                        }
                    }
                }
            }
        }
        self.prune_dead(&containers).await;
        let (_, fresh) = self.my_state().await?;
        let fresh: Vec<ContainerStatus> = fresh
            .into_iter()
            .filter(|c| c.sandbox_id == sandbox.id)
            .collect();
        let refs: Vec<&ContainerStatus> = fresh.iter().collect();
        if init_failed {
            self.rejected = None;
        }
        self.write_status(pod, &refs, pod_ip).await;
        if !self.probes.is_empty() {
            self.wake_in(FAST_RESYNC);
        }
        Ok(())
    }

    /// Keeps the latest two instances per container name (current and previous, for
    /// `kubectl logs --previous`), removes older ones.
    async fn prune_dead(&self, containers: &[ContainerStatus]) {
        let mut by_name: HashMap<&str, Vec<&ContainerStatus>> = HashMap::new();
        for c in containers {
            by_name.entry(c.name.as_str()).or_default().push(c);
        }
        for (_, mut list) in by_name {
            list.sort_by_key(|c| std::cmp::Reverse(c.attempt));
            for old in list
                .iter()
                .skip(2)
                .filter(|c| c.state == ContainerState::Exited)
            {
                if let Err(e) = self.agent.runtime.remove_container(&old.id).await {
                    warn!(container = %old.id, error = %e, "removing old container instance");
                }
            }
        }
    }

    async fn restart_with_backoff(
        &mut self,
        pod: &Pod,
        c: &Container,
        last: &ContainerStatus,
        sandbox: &PodSandbox,
        pod_ip: Option<&str>,
        init: bool,
    ) {
        if let Some(backoff) = restart_backoff(last) {
            let ns = pod.metadata.namespace.clone().unwrap_or_default();
            let name = pod.metadata.name.clone().unwrap_or_default();
            let message = format!(
                "back-off {}s restarting failed container={} pod={}_{}({})",
                backoff.num_seconds(),
                c.name,
                name,
                ns,
                self.uid
            );
            self.agent.events.pod(
                pod,
                Some(&c.name),
                EventType::Warning,
                "BackOff",
                "Back-off restarting failed container",
            );
            self.waiting.insert(
                c.name.clone(),
                Waiting {
                    reason: "CrashLoopBackOff".into(),
                    message,
                },
            );
            let until = last.finished_at.unwrap_or_else(Utc::now) + backoff - Utc::now();
            self.wake_in(
                until
                    .to_std()
                    .unwrap_or(FAST_RESYNC)
                    .max(Duration::from_millis(200)),
            );
            return;
        }
        self.start_container(pod, c, last.attempt + 1, sandbox, pod_ip, init)
            .await;
    }

    fn write_pod_files(&self, pod: &Pod, ip: Option<&str>) -> std::io::Result<()> {
        let dir = volumes::pod_dir(&self.agent.config.root_dir, &self.uid);
        std::fs::create_dir_all(&dir)?;
        let cfg = &self.agent.config;
        let hosts = volumes::hosts_file(pod, ip, &cfg.cluster_domain);
        write_if_changed(&dir.join("etc-hosts"), hosts.as_bytes())?;
        let host_resolv = std::fs::read_to_string("/etc/resolv.conf").unwrap_or_default();
        let resolv = volumes::resolv_conf(pod, &cfg.cluster_dns, &cfg.cluster_domain, &host_resolv);
        write_if_changed(&dir.join("resolv.conf"), resolv.as_bytes())?;
        let spec = pod.spec.as_ref();
        let hostname = if spec.and_then(|s| s.host_network) == Some(true) {
            cfg.node_name.clone()
        } else {
            spec.and_then(|s| s.hostname.clone())
                .or(pod.metadata.name.clone())
                .unwrap_or_default()
        };
        write_if_changed(&dir.join("hostname"), format!("{hostname}\n").as_bytes())?;
        Ok(())
    }

    async fn start_container(
        &mut self,
        pod: &Pod,
        c: &Container,
        attempt: u32,
        sandbox: &PodSandbox,
        pod_ip: Option<&str>,
        init: bool,
    ) {
        let agent = self.agent.clone();
        // Container records can vanish (containerd state wiped) while logs stay: continue the
        // numbering after the newest log, as the kubelet derives restart counts from it.
        let attempt = if attempt == 0 {
            let dir = cairn_podlogs::pod_log_dir(
                &agent.config.pod_log_dir,
                &pod.metadata
                    .namespace
                    .clone()
                    .unwrap_or_else(|| "default".into()),
                pod.metadata.name.as_deref().unwrap_or(""),
                &self.uid,
            )
            .join(&c.name);
            std::fs::read_dir(&dir)
                .map(|d| {
                    d.flatten()
                        .filter_map(|e| {
                            e.file_name()
                                .to_str()?
                                .strip_suffix(".log")?
                                .parse::<u32>()
                                .ok()
                        })
                        .map(|n| n + 1)
                        .max()
                        .unwrap_or(0)
                })
                .unwrap_or(0)
        } else {
            attempt
        };
        // Image.
        let image = match agent.images.ensure(&agent.client, pod, c).await {
            Outcome::Ready {
                image,
                pulled,
                took,
            } => {
                if pulled {
                    agent.events.pod(
                        pod,
                        Some(&c.name),
                        EventType::Normal,
                        "Pulled",
                        &format!(
                            "Successfully pulled image {:?} in {:.3}s",
                            c.image.clone().unwrap_or_default(),
                            took.as_secs_f64()
                        ),
                    );
                } else {
                    agent.events.pod(
                        pod,
                        Some(&c.name),
                        EventType::Normal,
                        "Pulled",
                        &format!(
                            "Container image {:?} already present on machine",
                            c.image.clone().unwrap_or_default()
                        ),
                    );
                }
                image
            }
            Outcome::Failed(f) => {
                let kind = if f.reason == "ImagePullBackOff" {
                    "BackOff"
                } else {
                    "Failed"
                };
                agent
                    .events
                    .pod(pod, Some(&c.name), EventType::Warning, kind, &f.message);
                if f.reason == "ErrImagePull" {
                    agent.events.pod(
                        pod,
                        Some(&c.name),
                        EventType::Warning,
                        "Failed",
                        &format!("Error: {}", f.reason),
                    );
                }
                self.waiting.insert(
                    c.name.clone(),
                    Waiting {
                        reason: f.reason.into(),
                        message: f.message,
                    },
                );
                self.wake_in(Duration::from_secs(5));
                return;
            }
        };
        // Environment.
        let (_, alloc) = crate::node::resources(&agent.config, &agent.host);
        let services: Vec<_> = agent
            .services
            .state()
            .iter()
            .map(|s| (**s).clone())
            .collect();
        let source = crate::env::ApiConfigSource(agent.client.clone());
        let env = match crate::env::container_env(
            pod,
            c,
            &services,
            &source,
            agent.node_ip.as_deref(),
            pod_ip,
            &alloc,
        )
        .await
        {
            Ok(env) => env,
            Err(e) => {
                self.hold(
                    pod,
                    c,
                    "CreateContainerConfigError",
                    e.to_string(),
                    Duration::from_secs(5),
                );
                return;
            }
        };
        let vars: std::collections::BTreeMap<String, String> = env.iter().cloned().collect();
        let expand = |v: &Vec<String>| {
            v.iter()
                .map(|s| crate::env::expand(s, &vars))
                .collect::<Vec<_>>()
        };
        // Mounts.
        let mut mounts = match volumes::container_mounts(c, &self.volume_paths) {
            Ok(m) => m,
            Err(e) => {
                self.hold(
                    pod,
                    c,
                    "CreateContainerConfigError",
                    e.to_string(),
                    Duration::from_secs(5),
                );
                return;
            }
        };
        let pod_dir = volumes::pod_dir(&agent.config.root_dir, &self.uid);
        let has = |mounts: &Vec<Mount>, p: &str| mounts.iter().any(|m| m.container_path == p);
        for (file, target) in [
            ("etc-hosts", "/etc/hosts"),
            ("resolv.conf", "/etc/resolv.conf"),
            ("hostname", "/etc/hostname"),
        ] {
            if !has(&mounts, target) {
                mounts.push(Mount {
                    host_path: pod_dir.join(file),
                    container_path: target.into(),
                    readonly: false,
                });
            }
        }
        let term_dir = pod_dir.join("containers").join(&c.name);
        let term_file = term_dir.join(format!("{attempt}-termination-log"));
        let term_target = c
            .termination_message_path
            .clone()
            .unwrap_or_else(|| "/dev/termination-log".into());
        let term_ok = std::fs::create_dir_all(&term_dir)
            .and_then(|_| std::fs::write(&term_file, b""))
            .is_ok();
        if term_ok && !has(&mounts, &term_target) {
            mounts.push(Mount {
                host_path: term_file.clone(),
                container_path: term_target,
                readonly: false,
            });
        }
        // Logs.
        let ns = pod
            .metadata
            .namespace
            .clone()
            .unwrap_or_else(|| "default".into());
        let name = pod.metadata.name.clone().unwrap_or_default();
        let log_path = cairn_podlogs::container_log_path(
            &agent.config.pod_log_dir,
            &ns,
            &name,
            &self.uid,
            &c.name,
            attempt,
        );
        if let Some(parent) = log_path.parent() {
            let _ = std::fs::create_dir_all(parent);
        }
        let rotate = cairn_podlogs::RotateOptions {
            max_size: agent.config.container_log_max_bytes,
            max_files: agent.config.container_log_max_files,
        };
        let log_uri = cairn_podlogs::binary_log_uri(&agent.config.logger_path, &log_path, &rotate);
        let config = ContainerConfig {
            name: c.name.clone(),
            attempt,
            image,
            command: expand(&c.command.clone().unwrap_or_default()),
            args: expand(&c.args.clone().unwrap_or_default()),
            working_dir: c.working_dir.clone(),
            env,
            mounts,
            resources: container_resources(
                pod,
                c,
                agent.host.meminfo().map_or(1, |m| m.total_bytes as i64),
            ),
            security: security(pod, c),
            log_uri,
            log_path,
            spec_hash: spec_hash(c),
            termination_message_path: term_ok.then_some(term_file),
            init,
            tty: c.tty == Some(true),
            stdin: c.stdin == Some(true),
        };
        let id = match agent.runtime.create_container(sandbox, &config).await {
            Ok(id) => id,
            Err(e) => {
                self.hold(
                    pod,
                    c,
                    "CreateContainerError",
                    e.to_string(),
                    Duration::from_secs(10),
                );
                return;
            }
        };
        agent.events.pod(
            pod,
            Some(&c.name),
            EventType::Normal,
            "Created",
            &format!("Created container {}", c.name),
        );
        match agent.runtime.start_container(&id).await {
            Ok(()) => {
                self.waiting.remove(&c.name);
                agent.events.pod(
                    pod,
                    Some(&c.name),
                    EventType::Normal,
                    "Started",
                    &format!("Started container {}", c.name),
                );
                for kind in [
                    ProbeKind::Liveness,
                    ProbeKind::Readiness,
                    ProbeKind::Startup,
                ] {
                    self.probes.remove(&(c.name.clone(), kind));
                }
                if let Some(hook) = c.lifecycle.as_ref().and_then(|l| l.post_start.as_ref()) {
                    self.post_start(pod, c, &id, pod_ip, hook).await;
                }
            }
            Err(e) => {
                agent.events.pod(
                    pod,
                    Some(&c.name),
                    EventType::Warning,
                    "Failed",
                    &format!("Error: {e}"),
                );
                self.waiting.remove(&c.name);
            }
        }
    }

    /// Runs the postStart hook right after the start, as the kubelet does: the pod's sync (and
    /// so its status, which still shows the container waiting) holds until the hook returns.
    /// A failed hook kills the container (restarted per restartPolicy) and leaves it waiting
    /// with `PostStartHookError`.
    async fn post_start(
        &mut self,
        pod: &Pod,
        c: &Container,
        id: &str,
        pod_ip: Option<&str>,
        hook: &k8s_openapi::api::core::v1::LifecycleHandler,
    ) {
        let agent = self.agent.clone();
        let run = hooks::run(
            agent.runtime.as_ref(),
            c,
            id,
            pod_ip,
            hook,
            POST_START_LIMIT,
        );
        let result = match self.desired.clone() {
            Some(mut rx) => {
                let deleted = async move {
                    loop {
                        let gone = match &*rx.borrow_and_update() {
                            Desired::Gone(_) => true,
                            Desired::Run(p) => p.metadata.deletion_timestamp.is_some(),
                        };
                        if gone || rx.changed().await.is_err() {
                            return;
                        }
                    }
                };
                tokio::select! {
                    r = run => Some(r),
                    _ = deleted => None,
                }
            }
            None => Some(run.await),
        };
        let error = match result {
            Some(Ok(())) => return,
            Some(Err(e)) => e,
            None => {
                info!(container = %c.name, "pod is being deleted; postStart hook interrupted");
                return;
            }
        };
        let message = report_hook_failure(&agent, pod, c, hook, &error, "PostStart");
        if let Ok(status) = agent.runtime.container_status(id).await {
            kill_container(
                &agent,
                pod,
                Some(c),
                &status,
                pod_ip,
                pod_grace(pod),
                "FailedPostStartHook",
            )
            .await;
        } else if let Err(e) = agent.runtime.stop_container(id, pod_grace(pod)).await {
            warn!(container = %c.name, error = %e, "stopping container after its postStart hook failed");
        }
        self.waiting.insert(
            c.name.clone(),
            Waiting {
                reason: "PostStartHookError".into(),
                message,
            },
        );
        self.wake_in(FAST_RESYNC);
    }

    async fn run_probes(
        &mut self,
        pod: &Pod,
        c: &Container,
        cur: &ContainerStatus,
        pod_ip: Option<&str>,
    ) {
        // Readiness and liveness wait until the startup probe has succeeded once.
        if let Some(p) = &c.startup_probe {
            if !self
                .probe_once(pod, c, cur, pod_ip, ProbeKind::Startup, p)
                .await
            {
                let key = (c.name.clone(), ProbeKind::Startup);
                let failed_out = self
                    .probes
                    .get(&key)
                    .is_some_and(|s| s.failures >= p.failure_threshold.unwrap_or(3).max(1));
                if failed_out {
                    kill_container(
                        &self.agent,
                        pod,
                        Some(c),
                        cur,
                        pod_ip,
                        probe_grace(pod, p),
                        &format!(
                            "Container {} failed startup probe, will be restarted",
                            c.name
                        ),
                    )
                    .await;
                    self.probes.remove(&key);
                }
                return;
            }
        }
        if let Some(p) = &c.readiness_probe {
            self.probe_once(pod, c, cur, pod_ip, ProbeKind::Readiness, p)
                .await;
        }
        if let Some(p) = &c.liveness_probe {
            let alive = self
                .probe_once(pod, c, cur, pod_ip, ProbeKind::Liveness, p)
                .await;
            if !alive {
                kill_container(
                    &self.agent,
                    pod,
                    Some(c),
                    cur,
                    pod_ip,
                    probe_grace(pod, p),
                    &format!(
                        "Container {} failed liveness probe, will be restarted",
                        c.name
                    ),
                )
                .await;
                self.probes.remove(&(c.name.clone(), ProbeKind::Liveness));
            }
        }
    }

    async fn probe_once(
        &mut self,
        pod: &Pod,
        c: &Container,
        cur: &ContainerStatus,
        pod_ip: Option<&str>,
        kind: ProbeKind,
        probe: &k8s_openapi::api::core::v1::Probe,
    ) -> bool {
        let key = (c.name.clone(), kind);
        let state = self
            .probes
            .entry(key.clone())
            .or_insert_with(|| ProbeState::new(&cur.id, kind));
        if state.container_id != cur.id {
            *state = ProbeState::new(&cur.id, kind);
        }
        // A startup probe is done once it succeeded; it never runs again for this instance.
        if kind == ProbeKind::Startup && state.ok {
            return true;
        }
        if !state.due(probe) {
            return state.ok;
        }
        let (ok, message) =
            probes::run(self.agent.runtime.as_ref(), c, &cur.id, pod_ip, probe).await;
        let state = self
            .probes
            .entry(key)
            .or_insert_with(|| ProbeState::new(&cur.id, kind));
        state.record(probe, ok);
        if !ok {
            let what = match kind {
                ProbeKind::Liveness => "Liveness",
                ProbeKind::Readiness => "Readiness",
                ProbeKind::Startup => "Startup",
            };
            self.agent.events.pod(
                pod,
                Some(&c.name),
                EventType::Warning,
                "Unhealthy",
                &format!("{what} probe failed: {message}"),
            );
        }
        state.ok
    }

    async fn write_status(
        &mut self,
        pod: &Pod,
        containers: &[&ContainerStatus],
        pod_ip: Option<String>,
    ) {
        let mut obs = Observed {
            containers: containers.to_vec(),
            waiting: self.waiting.clone(),
            pod_ip,
            host_ip: self.agent.node_ip.clone(),
            pod_failure: self.rejected.clone(),
            ..Default::default()
        };
        for ((name, kind), st) in &self.probes {
            match kind {
                ProbeKind::Readiness => {
                    obs.ready.insert(name.clone(), st.ok);
                }
                ProbeKind::Startup => {
                    obs.started.insert(name.clone(), st.ok);
                }
                ProbeKind::Liveness => {}
            }
        }
        let spec = pod.spec.clone().unwrap_or_default();
        for c in &spec.containers {
            if c.readiness_probe.is_some() && !obs.ready.contains_key(&c.name) {
                obs.ready.insert(c.name.clone(), false);
            }
            if c.startup_probe.is_some() && !obs.started.contains_key(&c.name) {
                obs.started.insert(c.name.clone(), false);
            }
        }
        {
            let mut live = self.agent.running_logs.write();
            for c in containers {
                let path = std::path::PathBuf::from(&c.log_path);
                if c.state == ContainerState::Running {
                    live.insert(path);
                } else {
                    live.remove(&path);
                }
            }
        }
        let status = status::pod_status(pod, &obs, Utc::now());
        let current = pod
            .status
            .as_ref()
            .and_then(|s| serde_json::to_value(s).ok());
        if self.last_status.as_ref() == Some(&status) || same_status(current.as_ref(), &status) {
            self.last_status = Some(status);
            return;
        }
        let ns = pod
            .metadata
            .namespace
            .clone()
            .unwrap_or_else(|| "default".into());
        let name = if is_static(pod) {
            crate::pod_meta::api_name(pod)
        } else {
            pod.metadata.name.clone().unwrap_or_default()
        };
        let api: Api<Pod> = Api::namespaced(self.agent.client.clone(), &ns);
        let body = json!({"status": status});
        match api
            .patch_status(&name, &PatchParams::default(), &Patch::Merge(&body))
            .await
        {
            Ok(_) => self.last_status = Some(status),
            Err(kube::Error::Api(e)) if e.code == 404 => {}
            Err(e) => {
                warn!(error = %e, "writing pod status");
                self.wake_in(Duration::from_secs(2));
            }
        }
    }

    /// Graceful stop of every running container in parallel: preStop hook, SIGTERM, SIGKILL
    /// at the end of the grace period.
    async fn terminate(&mut self, pod: &Pod, grace: Duration) {
        let Ok((sandboxes, containers)) = self.my_state().await else {
            return;
        };
        let spec = pod.spec.clone().unwrap_or_default();
        let pod_ip = if spec.host_network == Some(true) {
            self.agent.node_ip.clone()
        } else {
            sandboxes
                .iter()
                .filter(|s| s.state == SandboxState::Ready)
                .max_by_key(|s| s.attempt)
                .and_then(|s| s.ip.clone())
        };
        let running: Vec<(&ContainerStatus, String)> = containers
            .iter()
            .filter(|c| c.state == ContainerState::Running)
            .map(|c| (c, format!("Stopping container {}", c.name)))
            .collect();
        let mut stops = Vec::new();
        for (c, message) in &running {
            let spec_c = spec
                .containers
                .iter()
                .chain(spec.init_containers.iter().flatten())
                .find(|s| s.name == c.name);
            stops.push(kill_container(
                &self.agent,
                pod,
                spec_c,
                c,
                pod_ip.as_deref(),
                grace,
                message,
            ));
        }
        futures::future::join_all(stops).await;
        let mut live = self.agent.running_logs.write();
        for c in &containers {
            live.remove(&std::path::PathBuf::from(&c.log_path));
        }
    }

    /// Removes containers, sandbox (CNI DEL), cgroup, volumes and logs of the pod.
    async fn cleanup(&mut self, pod: &Pod) {
        if let Ok((sandboxes, containers)) = self.my_state().await {
            // Log followers end once their container is no longer running.
            {
                let mut live = self.agent.running_logs.write();
                for c in &containers {
                    live.remove(&std::path::PathBuf::from(&c.log_path));
                }
            }
            for c in &containers {
                if let Err(e) = self.agent.runtime.remove_container(&c.id).await {
                    warn!(container = %c.id, error = %e, "removing container");
                }
            }
            for s in &sandboxes {
                if let Err(e) = self.agent.runtime.remove_pod_sandbox(&s.id).await {
                    warn!(sandbox = %s.id, error = %e, "removing sandbox");
                }
            }
        }
        self.agent
            .cgroups
            .remove(&cgroup_parent(&self.agent.config.cgroup_root, pod));
        volumes::teardown(&self.agent.config.root_dir, &self.uid);
        let ns = pod
            .metadata
            .namespace
            .clone()
            .unwrap_or_else(|| "default".into());
        let name = pod.metadata.name.clone().unwrap_or_default();
        let _ = std::fs::remove_dir_all(cairn_podlogs::pod_log_dir(
            &self.agent.config.pod_log_dir,
            &ns,
            &name,
            &self.uid,
        ));
    }

    /// The final delete (grace 0, UID precondition) that removes the pod object.
    async fn finish_deletion(&self, pod: &Pod) {
        if is_static(pod) {
            return;
        }
        let ns = pod
            .metadata
            .namespace
            .clone()
            .unwrap_or_else(|| "default".into());
        let name = pod.metadata.name.clone().unwrap_or_default();
        let api: Api<Pod> = Api::namespaced(self.agent.client.clone(), &ns);
        let params = DeleteParams {
            grace_period_seconds: Some(0),
            preconditions: Some(Preconditions {
                uid: Some(self.uid.clone()),
                resource_version: None,
            }),
            ..Default::default()
        };
        for _ in 0..5 {
            match api.delete(&name, &params).await {
                Ok(_) => return,
                Err(kube::Error::Api(e)) if e.code == 404 || e.code == 409 => return,
                Err(e) => {
                    warn!(error = %e, "final pod delete");
                    tokio::time::sleep(Duration::from_secs(1)).await;
                }
            }
        }
    }
}

/// The pod's `terminationGracePeriodSeconds` (default 30).
fn pod_grace(pod: &Pod) -> Duration {
    let secs = pod
        .spec
        .as_ref()
        .and_then(|s| s.termination_grace_period_seconds)
        .unwrap_or(30);
    Duration::from_secs(secs.max(0) as u64)
}

/// Grace for a kill after a failed liveness/startup probe: the probe's own
/// `terminationGracePeriodSeconds` when set, else the pod's.
fn probe_grace(pod: &Pod, probe: &k8s_openapi::api::core::v1::Probe) -> Duration {
    match probe.termination_grace_period_seconds {
        Some(secs) => Duration::from_secs(secs.max(0) as u64),
        None => pod_grace(pod),
    }
}

/// The kubelet's `killContainer`: a `Killing` event, the preStop hook bounded by the grace
/// period (a failure is a `FailedPreStopHook` warning, nothing more), then SIGTERM and SIGKILL
/// when what is left of the grace period (at least 2 s after a hook) runs out.
async fn kill_container(
    agent: &Agent,
    pod: &Pod,
    spec: Option<&Container>,
    cur: &ContainerStatus,
    pod_ip: Option<&str>,
    grace: Duration,
    message: &str,
) {
    agent
        .events
        .pod(pod, Some(&cur.name), EventType::Normal, "Killing", message);
    let pre_stop = spec.and_then(|c| Some((c, c.lifecycle.as_ref()?.pre_stop.as_ref()?)));
    let mut left = grace;
    if let Some((c, hook)) = pre_stop.filter(|_| !grace.is_zero()) {
        let started = std::time::Instant::now();
        match hooks::run(agent.runtime.as_ref(), c, &cur.id, pod_ip, hook, grace).await {
            Ok(()) => {}
            Err(e) if e.is_deadline() => {
                info!(container = %cur.name, "preStop hook did not finish within the grace period")
            }
            Err(e) => {
                report_hook_failure(agent, pod, c, hook, &e, "PreStop");
            }
        }
        left = grace
            .saturating_sub(started.elapsed())
            .max(MIN_GRACE_AFTER_HOOK);
    }
    if let Err(e) = agent.runtime.stop_container(&cur.id, left).await {
        warn!(container = %cur.id, error = %e, "stopping container");
    }
}

fn same_status(current: Option<&Value>, new: &Value) -> bool {
    let Some(current) = current else { return false };
    // Compare after a round trip through the typed status so formatting does not matter.
    let typed: Option<k8s_openapi::api::core::v1::PodStatus> =
        serde_json::from_value(new.clone()).ok();
    typed.and_then(|t| serde_json::to_value(t).ok()).as_ref() == Some(current)
}

fn write_if_changed(path: &std::path::Path, content: &[u8]) -> std::io::Result<()> {
    if std::fs::read(path).ok().as_deref() == Some(content) {
        return Ok(());
    }
    std::fs::write(path, content)
}

fn limit_or_request(c: &Container, name: &str, limit: bool) -> Option<String> {
    let r = c.resources.as_ref()?;
    let m = if limit {
        r.limits.as_ref()
    } else {
        r.requests.as_ref().or(r.limits.as_ref())
    };
    m?.get(name).map(|q| q.0.clone()).or_else(|| {
        if limit {
            None
        } else {
            r.limits.as_ref()?.get(name).map(|q| q.0.clone())
        }
    })
}

fn container_resources(pod: &Pod, c: &Container, node_memory_bytes: i64) -> Resources {
    let cpu_request =
        limit_or_request(c, "cpu", false).and_then(|q| crate::quantity::millicores(&q));
    let cpu_limit = limit_or_request(c, "cpu", true).and_then(|q| crate::quantity::millicores(&q));
    let memory = limit_or_request(c, "memory", true).and_then(|q| crate::quantity::bytes(&q));
    // Shares as the kubelet computes them: requests * 1024 / 1000, at least 2.
    let shares = cpu_request.map(|m| (m * 1024 / 1000).max(2)).unwrap_or(2);
    let oom = match status::qos_class(pod) {
        "Guaranteed" => -997,
        "BestEffort" => 1000,
        _ => {
            let mem_req = limit_or_request(c, "memory", false)
                .and_then(|q| crate::quantity::bytes(&q))
                .unwrap_or(0);
            let total = node_memory_bytes.max(1);
            (1000 - (1000 * mem_req) / total).clamp(2, 999) as i32
        }
    };
    Resources {
        cpu_shares: Some(shares),
        cpu_quota: cpu_limit.map(|m| (m as i64) * 100),
        cpu_period: cpu_limit.map(|_| 100_000),
        memory_limit: memory,
        oom_score_adj: Some(clamp_oom_score(oom)),
    }
}

/// Lowering oom_score_adj below our own needs CAP_SYS_RESOURCE, which some hosts withhold:
/// clamp to what we may set and say so once.
fn clamp_oom_score(wanted: i32) -> i32 {
    // Our own score does not change while we run: read it once.
    static OWN: std::sync::OnceLock<i32> = std::sync::OnceLock::new();
    let own = *OWN.get_or_init(|| {
        std::fs::read_to_string("/proc/self/oom_score_adj")
            .ok()
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(0)
    });
    if wanted < own {
        static ONCE: std::sync::Once = std::sync::Once::new();
        ONCE.call_once(|| {
            warn!(
                wanted,
                own, "cannot lower oom_score_adj below the agent's own; clamping"
            )
        });
        own
    } else {
        wanted
    }
}

fn pod_resources(pod: &Pod) -> PodResources {
    let containers = pod
        .spec
        .as_ref()
        .map(|s| s.containers.clone())
        .unwrap_or_default();
    let mut mem: Option<i64> = Some(0);
    let mut cpu_quota: Option<i64> = Some(0);
    let mut shares = 0u64;
    for c in &containers {
        let m = limit_or_request(c, "memory", true).and_then(|q| crate::quantity::bytes(&q));
        mem = mem.and_then(|t| m.map(|m| t + m));
        let l = limit_or_request(c, "cpu", true).and_then(|q| crate::quantity::millicores(&q));
        cpu_quota = cpu_quota.and_then(|t| l.map(|l| t + l as i64 * 100));
        shares += limit_or_request(c, "cpu", false)
            .and_then(|q| crate::quantity::millicores(&q))
            .map(|m| m * 1024 / 1000)
            .unwrap_or(0);
    }
    PodResources {
        cpu_shares: Some(shares.max(2)),
        cpu_quota: cpu_quota.filter(|q| *q > 0),
        cpu_period: Some(100_000),
        memory_limit: mem.filter(|m| *m > 0),
    }
}

fn security(pod: &Pod, c: &Container) -> SecurityConfig {
    let psc = pod
        .spec
        .as_ref()
        .and_then(|s| s.security_context.clone())
        .unwrap_or_default();
    let sc = c.security_context.clone().unwrap_or_default();
    let caps = sc.capabilities.clone().unwrap_or_default();
    SecurityConfig {
        privileged: sc.privileged == Some(true),
        run_as_user: sc.run_as_user.or(psc.run_as_user),
        run_as_group: sc.run_as_group.or(psc.run_as_group),
        supplemental_groups: psc
            .supplemental_groups
            .clone()
            .unwrap_or_default()
            .into_iter()
            .chain(psc.fs_group)
            .collect(),
        capabilities_add: caps.add.unwrap_or_default(),
        capabilities_drop: caps.drop.unwrap_or_default(),
        readonly_rootfs: sc.read_only_root_filesystem == Some(true),
        allow_privilege_escalation: sc.allow_privilege_escalation,
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
