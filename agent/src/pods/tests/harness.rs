//! A pod worker on fakes: the in-memory runtime, an API that echoes status writes back as the
//! pod watch would, recorded events, images always present, no cgroups — and tokio's paused
//! clock, so back-off and grace periods take no real time.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use cairn_runtime::fake::{FakeRuntime, Script};
use cairn_runtime::{CgroupError, Clock, ImageSpec, PodResources, TokioClock};
use chrono::{DateTime, Utc};
use k8s_openapi::api::core::v1::{Container, Pod, PodStatus};
use parking_lot::Mutex;
use serde_json::{json, Value};
use tokio::sync::watch;

use super::super::handles::{
    EventSink, Handles, ImageSource, NodeView, PodApi, PodApiError, PodCgroups,
};
use super::super::{Desired, Worker};
use crate::config::{AgentConfig, AgentFlags};
use crate::events::EventType;
use crate::images::Outcome;

pub const UID: &str = "uid-1";

/// The API side: the pod as stored, status writes echoed to the worker like a watch event,
/// and the final delete.
#[derive(Default)]
pub struct FakeApi {
    pod: Mutex<Option<Pod>>,
    to_worker: Mutex<Option<watch::Sender<Desired>>>,
    pub statuses: Mutex<Vec<(DateTime<Utc>, PodStatus)>>,
    pub deleted: Mutex<Vec<String>>,
    clock: Mutex<Option<Arc<dyn Clock>>>,
}

#[async_trait]
impl PodApi for FakeApi {
    async fn write_status(&self, _: &str, _: &str, status: &PodStatus) -> Result<(), PodApiError> {
        let now = self
            .clock
            .lock()
            .as_ref()
            .map_or_else(Utc::now, |c| c.now());
        self.statuses.lock().push((now, status.clone()));
        let updated = {
            let mut pod = self.pod.lock();
            let Some(p) = pod.as_mut() else {
                return Err(PodApiError::NotFound("pod".into()));
            };
            p.status = Some(status.clone());
            p.clone()
        };
        if let Some(tx) = self.to_worker.lock().as_ref() {
            // Err: the worker has ended; nothing to tell.
            let _ = tx.send(Desired::Run(Box::new(updated)));
        }
        Ok(())
    }

    async fn delete_final(&self, _: &str, name: &str, uid: &str) -> Result<(), PodApiError> {
        self.deleted.lock().push(format!("{name} {uid}"));
        Ok(())
    }
}

#[derive(Default)]
pub struct Events(pub Mutex<Vec<(String, String)>>);

impl EventSink for Events {
    fn pod(&self, _: &Pod, _: Option<&str>, _: EventType, reason: &str, message: &str) {
        self.0
            .lock()
            .push((reason.to_string(), message.to_string()));
    }
}

struct PresentImages;

#[async_trait]
impl ImageSource for PresentImages {
    async fn ensure(&self, _: &Pod, c: &Container) -> Outcome {
        let name = c.image.clone().unwrap_or_default();
        if name.contains("unreachable") {
            // A registry that never answers: the pull waits until someone gives up on it.
            std::future::pending::<()>().await;
        }
        Outcome::Ready {
            image: ImageSpec {
                id: format!("sha256:{name}"),
                name,
                chain_id: String::new(),
                config: Default::default(),
            },
            pulled: false,
            took: Duration::ZERO,
        }
    }
}

struct NoCgroups;

impl PodCgroups for NoCgroups {
    fn ensure(&self, _: &str, _: &PodResources) -> Result<(), CgroupError> {
        Ok(())
    }
    fn remove(&self, _: &str) {}
    fn refresh_qos(&self) {}
}

/// One worker on fakes, with the handles a test looks into.
pub struct Rig {
    pub runtime: FakeRuntime,
    pub api: Arc<FakeApi>,
    pub events: Arc<Events>,
    pub clock: Arc<dyn Clock>,
    pub handles: Handles,
    tx: Option<watch::Sender<Desired>>,
    task: Option<tokio::task::JoinHandle<()>>,
    _dir: tempfile::TempDir,
}

impl Rig {
    /// A rig whose node admits at most `max_pods`.
    pub fn with_max_pods(max_pods: u32) -> Rig {
        let dir = tempfile::tempdir().unwrap();
        let flags = AgentFlags {
            node_name: Some("node-a".into()),
            root_dir: Some(dir.path().join("root")),
            state_dir: Some(dir.path().join("state")),
            pod_log_dir: Some(dir.path().join("logs")),
            max_pods: Some(max_pods),
            ..Default::default()
        };
        let config = AgentConfig::resolve(flags, None).unwrap();
        let clock: Arc<dyn Clock> = Arc::new(TokioClock::new());
        let runtime = FakeRuntime::with_clock(clock.clone());
        let api = Arc::new(FakeApi::default());
        *api.clock.lock() = Some(clock.clone());
        let events = Arc::new(Events::default());
        let (services, _) = kube::runtime::reflector::store();
        let handles = Handles {
            runtime: Arc::new(runtime.clone()),
            api: api.clone(),
            events: events.clone(),
            images: Arc::new(PresentImages),
            config_source: Arc::new(crate::env::FakeConfigSource::default()),
            services,
            cgroups: Arc::new(NoCgroups),
            ledger: Default::default(),
            node: Arc::new(NodeView {
                config,
                host: Default::default(),
                node_ip: Some("198.18.0.2".into()),
            }),
            clock: clock.clone(),
            metrics: Arc::new(crate::metrics::AgentMetrics::new("test-node")),
            evictions: Default::default(),
        };
        Rig {
            runtime,
            api,
            events,
            clock,
            handles,
            tx: None,
            task: None,
            _dir: dir,
        }
    }

    pub fn new() -> Rig {
        Self::with_max_pods(110)
    }

    pub fn script(&self, container: &str, script: Script) {
        self.runtime.script(container, script);
    }

    /// Starts the worker on `pod` (as the API holds it).
    pub fn run(&mut self, pod: Pod) {
        let (tx, rx) = watch::channel(Desired::Run(Box::new(pod.clone())));
        *self.api.pod.lock() = Some(pod);
        *self.api.to_worker.lock() = Some(tx.clone());
        self.tx = Some(tx);
        let worker = Worker::new(self.handles.clone(), UID.to_string());
        self.task = Some(tokio::spawn(worker.run(rx)));
    }

    /// An agent restart: the worker dies with everything it held in memory, a fresh one
    /// takes over the same runtime.
    pub fn restart_worker(&mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
        }
        let pod = self.api.pod.lock().clone().unwrap();
        let (tx, rx) = watch::channel(Desired::Run(Box::new(pod)));
        *self.api.to_worker.lock() = Some(tx.clone());
        self.tx = Some(tx);
        let worker = Worker::new(self.handles.clone(), UID.to_string());
        self.task = Some(tokio::spawn(worker.run(rx)));
    }

    /// Hands the worker a new version of the pod (a spec change, a deletion).
    pub fn update(&self, change: impl FnOnce(&mut Pod)) {
        let pod = {
            let mut stored = self.api.pod.lock();
            let pod = stored.as_mut().unwrap();
            change(pod);
            pod.clone()
        };
        self.tx
            .as_ref()
            .unwrap()
            .send(Desired::Run(Box::new(pod)))
            .unwrap();
    }

    /// The pod left its source without a graceful delete.
    pub fn gone(&self) {
        let pod = self.api.pod.lock().clone().unwrap();
        self.tx
            .as_ref()
            .unwrap()
            .send(Desired::Gone(Box::new(pod)))
            .unwrap();
    }

    /// A graceful delete with `grace` seconds, as the API server records it.
    pub fn delete(&self, grace: i64) {
        self.update(|p| {
            p.metadata.deletion_timestamp =
                Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                    k8s_openapi::jiff::Timestamp::now(),
                ));
            p.metadata.deletion_grace_period_seconds = Some(grace);
        });
    }

    /// Lets `secs` of (virtual) time pass.
    pub async fn wait(&self, secs: u64) {
        tokio::time::sleep(Duration::from_secs(secs)).await;
    }

    /// Whether the worker still runs.
    pub fn working(&self) -> bool {
        self.task.as_ref().is_some_and(|t| !t.is_finished())
    }

    /// Waits for the worker to end.
    pub async fn finished(&mut self) {
        let task = self.task.take().unwrap();
        tokio::time::timeout(Duration::from_secs(600), task)
            .await
            .unwrap()
            .unwrap();
    }

    /// The latest status written.
    pub fn status(&self) -> Value {
        let statuses = self.api.statuses.lock();
        serde_json::to_value(&statuses.last().expect("no status written yet").1).unwrap()
    }

    /// The first container's waiting reason in every status written, in order.
    pub fn waiting_reasons(&self) -> Vec<String> {
        let statuses = self.api.statuses.lock();
        statuses
            .iter()
            .filter_map(|(_, s)| {
                let state = s.container_statuses.as_ref()?.first()?.state.as_ref()?;
                state.waiting.as_ref()?.reason.clone()
            })
            .collect()
    }

    pub fn phases(&self) -> Vec<String> {
        let mut phases: Vec<String> = Vec::new();
        for (_, s) in self.api.statuses.lock().iter() {
            let phase = s.phase.clone().unwrap_or_default();
            if phases.last() != Some(&phase) {
                phases.push(phase);
            }
        }
        phases
    }

    /// Calls to the runtime that start with `prefix`, with their times.
    pub fn calls(&self, prefix: &str) -> Vec<(DateTime<Utc>, String)> {
        self.runtime
            .timed_calls()
            .into_iter()
            .filter(|(_, c)| c.starts_with(prefix))
            .collect()
    }

    /// Container names in the order they were started.
    pub fn started(&self) -> Vec<String> {
        self.calls("start_container ")
            .into_iter()
            .map(|(_, c)| c.rsplit(' ').next().unwrap_or_default().to_string())
            .collect()
    }

    pub fn events(&self, reason: &str) -> Vec<String> {
        self.events
            .0
            .lock()
            .iter()
            .filter(|(r, _)| r == reason)
            .map(|(_, m)| m.clone())
            .collect()
    }
}

/// A pod from its spec (JSON), named `p` in `default`, with [`UID`].
pub fn pod(spec: Value) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": "p", "namespace": "default", "uid": UID},
        "spec": spec,
    }))
    .unwrap()
}

/// A container from JSON, image `busybox`.
pub fn container(name: &str, extra: Value) -> Value {
    let mut c = json!({"name": name, "image": "busybox"});
    if let (Some(c), Some(extra)) = (c.as_object_mut(), extra.as_object()) {
        c.extend(extra.clone());
    }
    c
}

/// A container that exits with `code` `after` seconds after each start.
pub fn exits(after: u64, code: i32) -> Script {
    Script {
        exits_after: Some((Duration::from_secs(after), code)),
        ..Default::default()
    }
}
