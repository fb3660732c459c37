//! The narrow handles a pod worker talks through — the runtime, the pod API, the event
//! recorder, images, ConfigMaps/Secrets, cgroups, the node ledger and a clock — with the
//! adapters the agent runs with. Tests of the worker pass fakes instead.

use std::collections::BTreeMap;
use std::sync::Arc;

use async_trait::async_trait;
use cairn_runtime::{CgroupError, Clock, PodResources, Runtime};
use k8s_openapi::api::core::v1::{Container, Pod, PodStatus, Service};
use kube::api::{Api, DeleteParams, Patch, PatchParams, Preconditions};
use kube::runtime::reflector::Store;
use serde_json::json;

use crate::config::AgentConfig;
use crate::env::ConfigSource;
use crate::events::{EventRecorder, EventType};
use crate::images::Outcome;
use crate::ledger::PodLedger;
use crate::sysinfo::HostRoot;
use crate::Agent;

/// Why a pod API call failed, as far as a worker cares.
#[derive(Debug, thiserror::Error)]
pub enum PodApiError {
    #[error("pod {0} not found")]
    NotFound(String),
    #[error("pod {0} changed: precondition failed")]
    Conflict(String),
    #[error("pod {pod}: {message}")]
    Other { pod: String, message: String },
}

/// The two pod writes a worker makes.
#[async_trait]
pub trait PodApi: Send + Sync {
    /// Merge-patches `pods/status` of `namespace/name`.
    async fn write_status(
        &self,
        namespace: &str,
        name: &str,
        status: &PodStatus,
    ) -> Result<(), PodApiError>;
    /// The final delete (grace 0, UID precondition) that removes the pod object.
    async fn delete_final(&self, namespace: &str, name: &str, uid: &str)
        -> Result<(), PodApiError>;
}

/// Where a worker's Events go.
pub trait EventSink: Send + Sync {
    fn pod(&self, pod: &Pod, container: Option<&str>, kind: EventType, reason: &str, message: &str);
}

/// Makes a container's image available as its pull policy says.
#[async_trait]
pub trait ImageSource: Send + Sync {
    async fn ensure(&self, pod: &Pod, container: &Container) -> Outcome;
}

/// The pod's cgroup and the QoS parents above it.
pub trait PodCgroups: Send + Sync {
    fn ensure(&self, path: &str, limits: &PodResources) -> Result<(), CgroupError>;
    fn remove(&self, path: &str);
    /// Brings the QoS parents up to date with the pods the ledger holds.
    fn refresh_qos(&self);
}

/// Node facts a worker reads: its configuration, the host, its address.
pub struct NodeView {
    pub config: AgentConfig,
    pub host: HostRoot,
    pub node_ip: Option<String>,
}

impl NodeView {
    /// The node's allocatable as quantities (for admission, downward API, emptyDir sizes).
    pub fn allocatable(&self) -> BTreeMap<String, String> {
        crate::node::resources(&self.config, &self.host).1
    }

    pub fn memory_bytes(&self) -> i64 {
        self.host
            .meminfo()
            .map_or(1, |m| i64::try_from(m.total_bytes).unwrap_or(i64::MAX))
    }
}

/// Everything a worker (and the manager that starts workers) talks through.
#[derive(Clone)]
pub struct Handles {
    pub runtime: Arc<dyn Runtime>,
    pub api: Arc<dyn PodApi>,
    pub events: Arc<dyn EventSink>,
    pub images: Arc<dyn ImageSource>,
    pub config_source: Arc<dyn ConfigSource>,
    pub services: Store<Service>,
    pub cgroups: Arc<dyn PodCgroups>,
    pub ledger: Arc<PodLedger>,
    pub node: Arc<NodeView>,
    pub clock: Arc<dyn Clock>,
    pub metrics: Arc<crate::metrics::AgentMetrics>,
    /// Pods the eviction manager wants gone, with their eviction message.
    pub evictions: Arc<Evictions>,
}

/// Eviction requests, by pod uid, until the pod's worker takes them.
#[derive(Debug, Default)]
pub struct Evictions(parking_lot::Mutex<std::collections::HashMap<String, String>>);

impl Evictions {
    pub fn request(&self, uid: &str, message: String) {
        self.0.lock().insert(uid.to_string(), message);
    }

    pub fn take(&self, uid: &str) -> Option<String> {
        self.0.lock().remove(uid)
    }
}

impl Handles {
    /// The handles of the running agent.
    pub fn of_agent(agent: &Arc<Agent>) -> Self {
        Handles {
            runtime: agent.runtime.clone(),
            api: Arc::new(KubePodApi(agent.client.clone())),
            events: agent.events.clone(),
            images: Arc::new(KubeImages {
                images: agent.images.clone(),
                client: agent.client.clone(),
                events: agent.events.clone(),
            }),
            config_source: Arc::new(crate::env::ApiConfigSource::new(agent.client.clone())),
            services: agent.services.clone(),
            cgroups: Arc::new(AgentCgroups(agent.clone())),
            ledger: agent.ledger.clone(),
            node: Arc::new(NodeView {
                config: agent.config.clone(),
                host: agent.host.clone(),
                node_ip: agent.node_ip.clone(),
            }),
            clock: Arc::new(cairn_runtime::SystemClock),
            metrics: agent.metrics.clone(),
            evictions: Default::default(),
        }
    }
}

/// [`PodApi`] over the API server.
pub struct KubePodApi(pub kube::Client);

fn api_error(pod: String, e: kube::Error) -> PodApiError {
    match e {
        kube::Error::Api(s) if s.code == 404 => PodApiError::NotFound(pod),
        kube::Error::Api(s) if s.code == 409 => PodApiError::Conflict(pod),
        e => PodApiError::Other {
            pod,
            message: e.to_string(),
        },
    }
}

#[async_trait]
impl PodApi for KubePodApi {
    async fn write_status(
        &self,
        namespace: &str,
        name: &str,
        status: &PodStatus,
    ) -> Result<(), PodApiError> {
        let api: Api<Pod> = Api::namespaced(self.0.clone(), namespace);
        let body = json!({ "status": status });
        api.patch_status(name, &PatchParams::default(), &Patch::Merge(&body))
            .await
            .map(|_| ())
            .map_err(|e| api_error(format!("{namespace}/{name}"), e))
    }

    async fn delete_final(
        &self,
        namespace: &str,
        name: &str,
        uid: &str,
    ) -> Result<(), PodApiError> {
        let api: Api<Pod> = Api::namespaced(self.0.clone(), namespace);
        let params = DeleteParams {
            grace_period_seconds: Some(0),
            preconditions: Some(Preconditions {
                uid: Some(uid.to_string()),
                resource_version: None,
            }),
            ..Default::default()
        };
        api.delete(name, &params)
            .await
            .map(|_| ())
            .map_err(|e| api_error(format!("{namespace}/{name}"), e))
    }
}

impl EventSink for EventRecorder {
    fn pod(
        &self,
        pod: &Pod,
        container: Option<&str>,
        kind: EventType,
        reason: &str,
        message: &str,
    ) {
        EventRecorder::pod(self, pod, container, kind, reason, message)
    }
}

/// [`ImageSource`] over containerd's image store, with pull secrets from the API.
struct KubeImages {
    images: Arc<crate::images::ImageManager>,
    client: kube::Client,
    events: Arc<dyn EventSink>,
}

#[async_trait]
impl ImageSource for KubeImages {
    async fn ensure(&self, pod: &Pod, container: &Container) -> Outcome {
        let image = container.image.clone().unwrap_or_default();
        let pulling = || {
            let message = format!("Pulling image {image:?}");
            self.events.pod(
                pod,
                Some(&container.name),
                EventType::Normal,
                "Pulling",
                &message,
            );
        };
        self.images
            .ensure(&self.client, pod, container, &pulling)
            .await
    }
}

/// [`PodCgroups`] over the host's cgroup tree.
struct AgentCgroups(Arc<Agent>);

impl PodCgroups for AgentCgroups {
    fn ensure(&self, path: &str, limits: &PodResources) -> Result<(), CgroupError> {
        self.0.cgroups.ensure(path, limits)
    }

    fn remove(&self, path: &str) {
        self.0.cgroups.remove(path)
    }

    fn refresh_qos(&self) {
        crate::qos::refresh(&self.0)
    }
}
