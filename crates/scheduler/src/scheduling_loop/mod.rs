//! The scheduler as a process: informers feed one loop that owns the snapshot and the
//! queue; each cycle picks a node, assumes the pod there at once, and hands the bind to
//! a concurrent task (assume-then-bind); a failed bind forgets the assumption and
//! requeues the pod.

pub mod bind_error;
pub mod cycle;
pub mod extender;
pub mod informers;
pub mod report;
pub mod volumes;

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Binding, ObjectReference, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Status};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::runtime::watcher::Event;
use kube::Client;
use tokio::sync::{mpsc, Semaphore};
use tracing::{debug, info, info_span, warn};

use crate::algorithm::{self, Cursor};
use crate::config::SchedulerConfig;
use crate::fit_error::FitError;
use crate::metrics::{Outcome, SchedulerMetrics};
use crate::pod_info::PodInfo;
use crate::preemption::{self, Preemption};
use crate::queue::SchedulingQueue;
use crate::snapshot::Snapshot;
use bind_error::BindError;
use cycle::CycleError;
use extender::Extender;
use informers::Input;
use report::Reporter;

/// Binds in flight at once; the API server's group commit likes many.
const MAX_CONCURRENT_BINDS: usize = 256;
const INPUT_BUFFER: usize = 16_384;

#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error("scheduler extender setup: {0}")]
    Extender(#[from] extender::ExtenderError),
}

/// Which kinds' first list has arrived; scheduling waits for nodes and pods.
#[derive(Default)]
struct Synced {
    nodes: bool,
    pods: bool,
    /// Names/uids seen since the current re-list began (to drop what vanished).
    relist_nodes: Option<HashSet<String>>,
    relist_pods: Option<HashSet<String>>,
}

pub struct Scheduler {
    client: Client,
    config: SchedulerConfig,
    /// Shared with bind tasks (one HTTP client each, not one per bind).
    extenders: Vec<Arc<Extender>>,
    snapshot: Snapshot,
    queue: SchedulingQueue,
    cursor: Cursor,
    /// Pods placed by this scheduler whose bound object has not been seen yet.
    assumed: HashMap<String, String>,
    synced: Synced,
    reporter: Reporter,
    binds: Arc<Semaphore>,
    tx: mpsc::Sender<Input>,
}

fn is_terminal(p: &Pod) -> bool {
    matches!(
        p.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Succeeded" | "Failed")
    )
}

fn uid(p: &Pod) -> String {
    p.metadata.uid.clone().unwrap_or_default()
}

impl Scheduler {
    /// Runs until the process ends.
    pub async fn run(client: Client, config: SchedulerConfig) -> Result<(), RunError> {
        let extenders = config
            .extenders
            .iter()
            .cloned()
            .map(|c| Extender::new(c).map(Arc::new))
            .collect::<Result<Vec<_>, _>>()?;
        let (tx, mut rx) = mpsc::channel(INPUT_BUFFER);
        let _informers = informers::start(&client, &tx);
        let seed = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        let mut s = Scheduler {
            reporter: Reporter::start(client.clone(), "default-scheduler"),
            client,
            config,
            extenders,
            snapshot: Snapshot::default(),
            queue: SchedulingQueue::default(),
            cursor: Cursor::new(seed),
            assumed: HashMap::new(),
            synced: Synced::default(),
            binds: Arc::new(Semaphore::new(MAX_CONCURRENT_BINDS)),
            tx,
        };
        info!(
            profiles = s.config.profiles.len(),
            extenders = s.extenders.len(),
            "scheduler started"
        );
        let mut counted = Instant::now();
        loop {
            while let Ok(input) = rx.try_recv() {
                s.handle(input);
            }
            let now = Instant::now();
            // The pending counts walk the queue: once a second, not per cycle.
            if now.duration_since(counted) >= Duration::from_secs(1) {
                SchedulerMetrics::get().pending(s.queue.stats());
                counted = now;
            }
            s.queue.flush_backoff(now);
            if s.synced.nodes && s.synced.pods && s.schedule_one().await {
                continue;
            }
            let wake = s
                .queue
                .next_deadline()
                .unwrap_or(now + Duration::from_secs(1));
            tokio::select! {
                input = rx.recv() => match input {
                    Some(i) => s.handle(i),
                    None => return Ok(()),
                },
                _ = tokio::time::sleep_until(wake.into()) => {}
            }
        }
    }

    fn handle(&mut self, input: Input) {
        let now = Instant::now();
        match input {
            Input::Node(ev) => self.on_node(*ev, now),
            Input::Pod(ev) => self.on_pod_event(*ev, now),
            Input::Namespace(ev) => match *ev {
                Event::Apply(ns) | Event::InitApply(ns) => {
                    let name = ns.metadata.name.clone().unwrap_or_default();
                    self.snapshot
                        .namespaces
                        .insert(name, ns.metadata.labels.unwrap_or_default());
                    self.queue.move_all(now);
                }
                Event::Delete(ns) => {
                    self.snapshot
                        .namespaces
                        .remove(ns.metadata.name.as_deref().unwrap_or(""));
                }
                Event::Init | Event::InitDone => {}
            },
            Input::Bound { uid, pod, result } => self.on_bound(uid, pod, result, now),
            Input::Claim(ev) => {
                match *ev {
                    Event::Apply(c) | Event::InitApply(c) => self.snapshot.volumes.upsert_claim(&c),
                    Event::Delete(c) => self.snapshot.volumes.remove_claim(&c),
                    Event::Init | Event::InitDone => {}
                }
                self.queue.move_all(now);
            }
            Input::Volume(ev) => {
                match *ev {
                    Event::Apply(v) | Event::InitApply(v) => {
                        self.snapshot.volumes.upsert_volume(&v)
                    }
                    Event::Delete(v) => self.snapshot.volumes.remove_volume(&v),
                    Event::Init | Event::InitDone => {}
                }
                self.queue.move_all(now);
            }
            Input::Class(ev) => {
                match *ev {
                    Event::Apply(c) | Event::InitApply(c) => self.snapshot.volumes.upsert_class(&c),
                    Event::Delete(c) => self.snapshot.volumes.remove_class(&c),
                    Event::Init | Event::InitDone => {}
                }
                self.queue.move_all(now);
            }
        }
    }

    fn on_node(&mut self, ev: Event<k8s_openapi::api::core::v1::Node>, now: Instant) {
        match ev {
            Event::Init => self.synced.relist_nodes = Some(HashSet::new()),
            Event::InitApply(n) | Event::Apply(n) => {
                let name = n.metadata.name.clone().unwrap_or_default();
                if let Some(seen) = self.synced.relist_nodes.as_mut() {
                    seen.insert(name.clone());
                }
                let malformed = self.snapshot.upsert_node_shared(Arc::new(n));
                if !malformed.is_empty() {
                    warn!(node = name, resources = ?malformed, "node has malformed allocatable quantities; counted as zero");
                }
                self.queue.move_all(now);
            }
            Event::Delete(n) => self
                .snapshot
                .remove_node(n.metadata.name.as_deref().unwrap_or("")),
            Event::InitDone => {
                if let Some(seen) = self.synced.relist_nodes.take() {
                    let gone: Vec<String> = self
                        .snapshot
                        .nodes()
                        .iter()
                        .filter(|n| !seen.contains(&n.name))
                        .map(|n| n.name.clone())
                        .collect();
                    for n in gone {
                        self.snapshot.remove_node(&n);
                    }
                }
                self.synced.nodes = true;
                self.queue.move_all(now);
            }
        }
    }

    fn on_pod_event(&mut self, ev: Event<Pod>, now: Instant) {
        match ev {
            Event::Init => self.synced.relist_pods = Some(HashSet::new()),
            Event::InitApply(p) | Event::Apply(p) => {
                if let Some(seen) = self.synced.relist_pods.as_mut() {
                    seen.insert(uid(&p));
                }
                self.on_pod(p, now);
            }
            Event::Delete(p) => self.forget_pod(&uid(&p), now),
            Event::InitDone => {
                if let Some(seen) = self.synced.relist_pods.take() {
                    // Pods deleted while the watch was down: neither placed nor queued any more.
                    let placed: Vec<String> = self
                        .snapshot
                        .nodes()
                        .iter()
                        .flat_map(|n| n.pods.iter().map(|p| p.uid.clone()))
                        .filter(|u| !seen.contains(u) && !self.assumed.contains_key(u))
                        .collect();
                    for u in placed {
                        self.forget_pod(&u, now);
                    }
                }
                self.synced.pods = true;
            }
        }
    }

    fn forget_pod(&mut self, uid: &str, now: Instant) {
        self.queue.remove(uid);
        self.assumed.remove(uid);
        if self.snapshot.remove_pod(uid).is_some() {
            self.queue.move_all(now);
        }
    }

    fn on_pod(&mut self, pod: Pod, now: Instant) {
        let id = uid(&pod);
        if is_terminal(&pod) {
            return self.forget_pod(&id, now);
        }
        if let Some(node) = pod
            .spec
            .as_ref()
            .and_then(|s| s.node_name.clone())
            .filter(|n| !n.is_empty())
        {
            let assumed_on = self.assumed.remove(&id);
            self.queue.remove(&id);
            // Our own binding confirmed: the assumed pod already counts, compiled from the
            // same spec; re-adding it would only redo the work.
            if assumed_on.as_deref() == Some(node.as_str())
                && self.snapshot.node_of(&id) == Some(node.as_str())
            {
                return;
            }
            // Agents update their pods' status often; what placement depends on of a bound
            // pod (labels, deletion; the rest of its spec is immutable) rarely changes.
            let unchanged = self.snapshot.node_of(&id) == Some(node.as_str())
                && self.snapshot.placed_pod(&id).is_some_and(|p| {
                    Some(&p.labels) == pod.metadata.labels.as_ref().or(Some(&Default::default()))
                        && p.terminating == pod.metadata.deletion_timestamp.is_some()
                });
            if unchanged {
                return;
            }
            match PodInfo::from_pod(&pod) {
                Ok(info) => self.snapshot.add_pod(info, &node),
                Err(e) => warn!(error = %e, "bound pod not counted"),
            }
            if assumed_on.is_none() {
                self.queue.move_all(now);
            }
            return;
        }
        if self.assumed.contains_key(&id) {
            return;
        }
        let name = pod
            .spec
            .as_ref()
            .and_then(|s| s.scheduler_name.as_deref())
            .unwrap_or(crate::config::DEFAULT_SCHEDULER_NAME);
        if pod.metadata.deletion_timestamp.is_some() || self.config.profile(name).is_none() {
            self.queue.remove(&id);
            return;
        }
        self.queue.upsert(Arc::new(pod), now);
    }

    fn on_bound(
        &mut self,
        uid: String,
        pod: Arc<Pod>,
        result: Result<(), BindError>,
        now: Instant,
    ) {
        let Err(error) = result else {
            return;
        };
        // The pod may be gone already (then the informer forgot it and nothing requeues).
        if self.assumed.remove(&uid).is_none() {
            return;
        }
        self.snapshot.remove_pod(&uid);
        if error.pod_gone() {
            // Deleted while binding: its delete event may still be on its way; nothing
            // to retry and nobody to tell.
            self.queue.remove(&uid);
            return;
        }
        self.queue.move_all(now);
        self.reporter.event(
            &pod,
            cairn_events::EventType::Warning,
            "FailedScheduling",
            &format!("Binding rejected: {error}"),
        );
        self.queue.upsert(pod, now);
        self.queue.retry_later(&uid, now);
    }

    /// One cycle; false when nothing was ready to schedule.
    async fn schedule_one(&mut self) -> bool {
        let Some(popped) = self.queue.pop() else {
            return false;
        };
        let pod = popped.pod;
        let id = uid(&pod);
        let key = format!(
            "{}/{}",
            pod.metadata.namespace.as_deref().unwrap_or(""),
            pod.metadata.name.as_deref().unwrap_or("")
        );
        let span = info_span!("schedule", pod = key, attempt = popped.attempts);
        let _guard = span.enter();
        let info = match PodInfo::from_pod(&pod) {
            Ok(i) => i,
            Err(e) => {
                self.queue.unschedulable(&id, Instant::now());
                self.reporter
                    .unschedulable(pod, "Unschedulable", e.to_string());
                return true;
            }
        };
        let profile_name = info.scheduler_name.clone();
        let Some(profile) = self.config.profile(&profile_name) else {
            self.queue.remove(&id);
            return true;
        };
        let result = if self.extenders.is_empty() {
            algorithm::schedule(&info, &self.snapshot, profile, &mut self.cursor)
                .map(|p| p.node)
                .map_err(CycleError::from)
        } else {
            drop(_guard);
            cycle::schedule_with_extenders(
                &pod,
                &info,
                &self.snapshot,
                profile,
                &mut self.cursor,
                &self.extenders,
            )
            .await
        };
        let now = Instant::now();
        let outcome = match &result {
            Ok(_) => Outcome::Scheduled,
            Err(CycleError::Fit(_)) => Outcome::Unschedulable,
            Err(CycleError::Extender(_)) => Outcome::Error,
        };
        let waited = now.saturating_duration_since(popped.first_queued);
        SchedulerMetrics::get().attempt(outcome, &profile_name, popped.attempts, waited);
        match result {
            Ok(node) => {
                debug!(node, "assumed");
                // Decided before the pod info moves into the snapshot.
                let binder = self
                    .extenders
                    .iter()
                    .find(|e| e.binds() && e.interested(&info))
                    .cloned();
                let claims = crate::plugins::volume_binding::pre_filter(
                    &info.namespace,
                    &info.claims,
                    &self.snapshot.volumes,
                )
                .to_provision;
                self.snapshot.add_pod(info, &node);
                self.assumed.insert(id.clone(), node.clone());
                self.queue.done(&id);
                self.spawn_bind(pod, id, binder, node, claims).await;
            }
            Err(CycleError::Fit(mut fit)) => {
                self.queue.unschedulable(&id, now);
                if let FitError::Unfit { post_filter, .. } = &mut fit {
                    if profile.preemption {
                        match preemption::preempt(&info, &self.snapshot, profile) {
                            Ok(p) => self.preempt_for(&pod, p),
                            Err(why) => *post_filter = Some(why),
                        }
                    }
                }
                debug!(reason = %fit, "unschedulable");
                self.reporter
                    .unschedulable(pod, "Unschedulable", fit.to_string());
            }
            Err(CycleError::Extender(e)) => {
                warn!(error = %e, "extender failed");
                self.queue.retry_later(&id, now);
                self.reporter
                    .unschedulable(pod, "SchedulerError", e.to_string());
            }
        }
        true
    }

    /// Nominates the node for the pod and deletes the victims (gracefully); the pod is
    /// retried when their deletion frees the node.
    fn preempt_for(&self, pod: &Arc<Pod>, p: Preemption) {
        let preemptor = format!(
            "{}/{}",
            pod.metadata.namespace.as_deref().unwrap_or(""),
            pod.metadata.name.as_deref().unwrap_or("")
        );
        info!(
            preemptor,
            node = p.node,
            victims = p.victims.len(),
            "preempting"
        );
        let client = self.client.clone();
        let reporter = self.reporter.clone();
        let pod = pod.clone();
        tokio::spawn(async move {
            let ns = pod.metadata.namespace.clone().unwrap_or_default();
            let name = pod.metadata.name.clone().unwrap_or_default();
            let api = Api::<Pod>::namespaced(client.clone(), &ns);
            let patch = serde_json::json!({"status": {"nominatedNodeName": p.node}});
            if let Err(e) = api
                .patch_status(&name, &PatchParams::default(), &Patch::Merge(patch))
                .await
            {
                warn!(pod = preemptor, error = %e, "could not set nominatedNodeName");
            }
            for v in &p.victims {
                let victim = Pod {
                    metadata: ObjectMeta {
                        name: Some(v.name.clone()),
                        namespace: Some(v.namespace.clone()),
                        uid: Some(v.uid.clone()),
                        ..Default::default()
                    },
                    ..Default::default()
                };
                let msg = format!(
                    "Preempted by pod {} on node {}",
                    pod.metadata.uid.as_deref().unwrap_or(""),
                    p.node
                );
                reporter.event(&victim, cairn_events::EventType::Normal, "Preempted", &msg);
                let vapi = Api::<Pod>::namespaced(client.clone(), &v.namespace);
                if let Err(e) = vapi.delete(&v.name, &DeleteParams::default()).await {
                    warn!(victim = v.name, error = %e, "could not delete preemption victim");
                }
            }
        });
    }

    async fn spawn_bind(
        &mut self,
        pod: Arc<Pod>,
        uid: String,
        binder: Option<Arc<Extender>>,
        node: String,
        claims: Vec<(String, String)>,
    ) {
        // Waiting for a permit bounds the binds in flight (back-pressure on the loop).
        let Ok(permit) = self.binds.clone().acquire_owned().await else {
            return;
        };
        let client = self.client.clone();
        let tx = self.tx.clone();
        let reporter = self.reporter.clone();
        tokio::spawn(async move {
            let result = match volumes::pre_bind(&client, &claims, &node).await {
                Err(e) => Err(BindError::Volumes(e)),
                Ok(()) => match binder {
                    Some(e) => e.bind(&pod, &node).await.map_err(BindError::from),
                    None => bind(&client, &pod, &node).await.map_err(BindError::from),
                },
            };
            drop(permit);
            if result.is_ok() {
                let ns = pod.metadata.namespace.as_deref().unwrap_or("");
                let name = pod.metadata.name.as_deref().unwrap_or("");
                reporter.event(
                    &pod,
                    cairn_events::EventType::Normal,
                    "Scheduled",
                    &format!("Successfully assigned {ns}/{name} to {node}"),
                );
            }
            // The loop may have stopped; then nobody needs the result.
            let _ = tx.send(Input::Bound { uid, pod, result }).await;
        });
    }
}

/// `POST pods/<name>/binding`.
async fn bind(client: &Client, pod: &Pod, node: &str) -> Result<(), kube::Error> {
    let ns = pod.metadata.namespace.clone().unwrap_or_default();
    let name = pod.metadata.name.clone().unwrap_or_default();
    let binding = Binding {
        metadata: ObjectMeta {
            name: Some(name.clone()),
            namespace: Some(ns.clone()),
            uid: pod.metadata.uid.clone(),
            ..Default::default()
        },
        target: ObjectReference {
            api_version: Some("v1".into()),
            kind: Some("Node".into()),
            name: Some(node.to_string()),
            ..Default::default()
        },
    };
    Api::<Pod>::namespaced(client.clone(), &ns)
        .create_subresource::<Binding, Status>("binding", &name, &PostParams::default(), &binding)
        .await
        .map(|_| ())
}
