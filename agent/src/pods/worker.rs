//! One pod's worker: its state, the loop that turns what the pod source wants into a sync
//! or a termination, and the small helpers every phase shares.

use super::*;

/// Where a pod's worker stands (the kubelet's pod-worker states, made explicit). Each turn
/// of [`Worker::run`] acts on the state and may move it on:
///
/// `Pending` → (admission) → `Running` | `Rejected`; `Running` → `Finished` once the pod's
/// phase is Succeeded or Failed; any of them → `Terminating` when the pod is deleted or
/// leaves its source; `Terminating` → `Terminated`, and the worker exits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum WorkerState {
    /// Not admitted yet: the next sync checks the node has room for it.
    Pending,
    /// Refused by admission: its status says Failed with the reason; nothing runs.
    Rejected { reason: String, message: String },
    /// Admitted: every sync passes through the phases.
    Running,
    /// Succeeded or Failed: what still runs is stopped, nothing starts again.
    Finished,
    /// Evicted under node pressure: killed at once, then Failed with reason `Evicted`.
    Evicted { message: String },
    /// Its containers are being stopped within `grace`; `final_delete` when the API
    /// object waits for the agent's last delete (a graceful deletion, not a vanished pod).
    Terminating { grace: Duration, final_delete: bool },
    /// Everything is removed: the worker exits.
    Terminated,
}

impl WorkerState {
    /// The state `desired` moves a worker in `self` to (before the sync acts).
    pub(super) fn on_desired(&self, desired: &Desired) -> WorkerState {
        if matches!(
            self,
            WorkerState::Terminating { .. } | WorkerState::Terminated
        ) {
            return self.clone();
        }
        match desired {
            Desired::Gone(pod) => WorkerState::Terminating {
                // A pod that vanished without a graceful delete gets a short grace.
                grace: secs(
                    pod.metadata
                        .deletion_grace_period_seconds
                        .unwrap_or(2)
                        .clamp(0, 30),
                ),
                final_delete: false,
            },
            Desired::Run(pod) if pod.metadata.deletion_timestamp.is_some() => {
                WorkerState::Terminating {
                    grace: secs(pod.metadata.deletion_grace_period_seconds.unwrap_or(30)),
                    final_delete: true,
                }
            }
            Desired::Run(pod) if *self == WorkerState::Running && is_finished(pod) => {
                WorkerState::Finished
            }
            Desired::Run(_) => self.clone(),
        }
    }
}

fn secs(s: i64) -> Duration {
    Duration::from_secs(u64::try_from(s).unwrap_or(0))
}

/// Whether the pod's recorded phase is final.
pub(super) fn is_finished(pod: &Pod) -> bool {
    matches!(
        pod.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Succeeded" | "Failed")
    )
}

/// Per-pod state that lives only as long as the worker (everything durable is in containerd).
pub(super) struct Worker {
    pub(super) h: Handles,
    pub(super) uid: String,
    pub(super) state: WorkerState,
    pub(super) waiting: HashMap<String, Waiting>,
    pub(super) probes: HashMap<(String, ProbeKind), ProbeState>,
    pub(super) last_status: Option<PodStatus>,
    pub(super) volumes_synced: Option<tokio::time::Instant>,
    /// When a projected ServiceAccount token in the volumes is due for replacement.
    pub(super) volumes_refresh_by: Option<std::time::SystemTime>,
    /// Whether the QoS parents were updated with this pod counted (once per worker; the
    /// heartbeat loop and worker exits keep them current afterwards).
    pub(super) qos_counted: bool,
    pub(super) volume_paths: std::collections::BTreeMap<String, std::path::PathBuf>,
    pub(super) next_wake: Option<Duration>,
    /// What the pod source wants, watched by long hooks so a deletion interrupts them.
    pub(super) desired: Option<watch::Receiver<Desired>>,
    /// When this agent first saw the pod, and whether its start was counted
    /// (`kubelet_pod_start_duration_seconds`).
    pub(super) seen_at: std::time::Instant,
    pub(super) start_counted: bool,
}

impl Worker {
    pub(super) fn new(h: Handles, uid: String) -> Self {
        Worker {
            h,
            uid,
            state: WorkerState::Pending,
            waiting: HashMap::new(),
            probes: HashMap::new(),
            last_status: None,
            volumes_synced: None,
            volumes_refresh_by: None,
            qos_counted: false,
            volume_paths: Default::default(),
            next_wake: None,
            desired: None,
            seen_at: std::time::Instant::now(),
            start_counted: false,
        }
    }

    /// Until the pod is terminated: take what the source wants, act on it, then sleep until
    /// the source changes, one of the pod's containers exits, or a phase asked to be woken.
    pub(super) async fn run(mut self, mut rx: watch::Receiver<Desired>) {
        self.desired = Some(rx.clone());
        let mut exits = self.h.runtime.subscribe_exits();
        loop {
            let desired = rx.borrow_and_update().clone();
            let pod = match &desired {
                Desired::Run(p) | Desired::Gone(p) => p.clone(),
            };
            if matches!(desired, Desired::Run(_)) {
                self.h.ledger.record(&self.uid, &pod);
            }
            self.state = self.state.on_desired(&desired);
            if let Some(message) = self.h.evictions.take(&self.uid) {
                if matches!(self.state, WorkerState::Pending | WorkerState::Running) {
                    self.h
                        .events
                        .pod(&pod, None, EventType::Warning, "Evicted", &message);
                    self.state = WorkerState::Evicted { message };
                }
            }
            if let WorkerState::Terminating {
                grace,
                final_delete,
            } = self.state
            {
                self.terminate(&pod, grace).await;
                if final_delete {
                    self.write_final_status(&pod).await;
                }
                self.cleanup(&pod).await;
                if final_delete {
                    self.finish_deletion(&pod).await;
                }
                self.state = WorkerState::Terminated;
                return;
            }
            self.next_wake = None;
            let sync = tracing::debug_span!("sync", state = ?self.state);
            if let Err(e) = self.sync(&pod).instrument(sync).await {
                warn!(error = %e, "pod sync failed");
            }
            let wake = self.next_wake.unwrap_or(RESYNC);
            tokio::select! {
                changed = rx.changed() => { if changed.is_err() { return; } }
                _ = own_exit(&mut exits, &self.uid) => {}
                _ = tokio::time::sleep(wake) => {}
            }
        }
    }

    /// Keeps a container waiting with `reason` (and a Failed event) until a retry.
    pub(super) fn hold(
        &mut self,
        pod: &Pod,
        c: &Container,
        reason: &str,
        message: String,
        retry: Duration,
    ) {
        let event = format!("Error: {message}");
        self.h
            .events
            .pod(pod, Some(&c.name), EventType::Warning, "Failed", &event);
        self.waiting.insert(
            c.name.clone(),
            Waiting {
                reason: reason.into(),
                message,
            },
        );
        self.wake_in(retry);
    }

    pub(super) fn wake_in(&mut self, d: Duration) {
        self.next_wake = Some(self.next_wake.map_or(d, |w| w.min(d)));
    }

    /// `work`, unless the pod's deletion arrives first (`None`): the long steps of a sync
    /// (image pulls, probes, hooks) must not hold back a deleted pod's termination.
    pub(super) async fn unless_deleted<T>(
        &self,
        work: impl std::future::Future<Output = T>,
    ) -> Option<T> {
        match self.desired.clone() {
            Some(rx) => tokio::select! {
                r = work => Some(r),
                _ = deletion(rx) => None,
            },
            None => Some(work.await),
        }
    }

    pub(super) async fn my_state(
        &self,
    ) -> Result<(Vec<PodSandbox>, Vec<ContainerStatus>), cairn_runtime::RuntimeError> {
        let sandboxes = self.h.runtime.list_pod_sandboxes_of(&self.uid).await?;
        let containers = self.h.runtime.list_containers_of(&self.uid).await?;
        Ok((sandboxes, containers))
    }
}

/// Resolves once the pod source says the pod is deleted (or gone from it).
async fn deletion(mut rx: watch::Receiver<Desired>) {
    loop {
        let deleted = match &*rx.borrow_and_update() {
            Desired::Gone(_) => true,
            Desired::Run(p) => p.metadata.deletion_timestamp.is_some(),
        };
        if deleted {
            return;
        }
        if rx.changed().await.is_err() {
            // The source is gone without a deletion: nothing will arrive any more.
            std::future::pending::<()>().await;
        }
    }
}

/// Resolves when a container of pod `uid` exits (or exits were missed and a look is due).
async fn own_exit(exits: &mut tokio::sync::broadcast::Receiver<ContainerExit>, uid: &str) {
    loop {
        match exits.recv().await {
            Ok(e) if e.pod_uid == uid => return,
            Ok(_) => continue,
            Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => return,
            Err(_) => std::future::pending::<()>().await,
        }
    }
}

/// Logs a failed `PostStart`/`PreStop` hook with the kubelet's message (returned) and posts
/// the `Failed<Kind>Hook` Warning, which, like the kubelet's, leaves out the hook's output
/// (it may hold secrets).
pub(super) fn report_hook_failure(
    events: &dyn EventSink,
    pod: &Pod,
    c: &Container,
    hook: &k8s_openapi::api::core::v1::LifecycleHandler,
    error: &hooks::HookError,
    kind: &str,
) -> String {
    let message = hooks::failure_message(pod, c, hook, error);
    warn!(container = %c.name, error = %message, "{kind} hook failed");
    events.pod(
        pod,
        Some(&c.name),
        EventType::Warning,
        &format!("Failed{kind}Hook"),
        &format!("{kind}Hook failed"),
    );
    message
}

/// A short digest of a container's spec: a running container whose spec changed is restarted.
pub(super) fn spec_hash(c: &Container) -> String {
    let bytes = serde_json::to_vec(c).unwrap_or_default();
    hex::encode(&sha2::Sha256::digest(&bytes)[..8])
}

/// The back-off before restarting `last` (10 s doubling per restart to 5 min), if it has not
/// run out at `now`.
pub(super) fn restart_backoff(
    last: &ContainerStatus,
    now: DateTime<Utc>,
) -> Option<chrono::Duration> {
    let finished = last.finished_at?;
    let ran = last.started_at.map(|s| finished - s).unwrap_or_default();
    // A container that ran ≥10 minutes resets the back-off, as the kubelet does.
    let secs = if ran >= chrono::Duration::minutes(10) {
        10
    } else {
        (10i64 << last.attempt.min(5)).min(MAX_BACKOFF_SECS)
    };
    let until = finished + chrono::Duration::seconds(secs);
    (until > now).then_some(chrono::Duration::seconds(secs))
}
