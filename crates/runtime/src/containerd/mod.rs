//! [`Runtime`] over containerd's gRPC API (works with containerd 1.6's services: containers,
//! tasks, snapshots, leases, version — no Sandbox or Transfer API needed).
//!
//! A pod sandbox is a containerd container record without a task: its labels carry the
//! pinned namespace paths and the pod IP. Containers carry pod identity, attempt, spec hash,
//! start/finish times and exit reason as labels, so a restarted agent rebuilds everything
//! from containerd.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, SecondsFormat, Utc};
use containerd_client::services::v1::container::Runtime as ContainerRuntime;
use containerd_client::services::v1::containers_client::ContainersClient;
use containerd_client::services::v1::leases_client::LeasesClient;
use containerd_client::services::v1::snapshots::snapshots_client::SnapshotsClient;
use containerd_client::services::v1::snapshots::{
    MountsRequest, PrepareSnapshotRequest, RemoveSnapshotRequest, UsageRequest,
};
use containerd_client::services::v1::tasks_client::TasksClient;
use containerd_client::services::v1::version_client::VersionClient;
use containerd_client::services::v1::{
    Container, CreateContainerRequest, CreateRequest as CreateLeaseRequest, CreateTaskRequest,
    DeleteContainerRequest, DeleteRequest as DeleteLeaseRequest, DeleteTaskRequest,
    GetContainerRequest, GetRequest, KillRequest, ListContainersRequest, ListTasksRequest,
    StartRequest, UpdateContainerRequest, WaitRequest,
};
use containerd_client::types::v1::Status as TaskStatus;
use containerd_client::types::Mount as ContainerdMount;
use prost_types::{Any, FieldMask, Timestamp};
use tokio::sync::broadcast;
use tonic::transport::Channel;
use tonic::Request;
use tracing::Instrument;

mod container;
mod exec;
mod sandbox;

use crate::cgroups::{CgroupManager, CgroupVersion};
use crate::cni::{Attachment, CniConfig};
use crate::netns::{self, PodNamespaces};
use crate::{
    labels, spec, ContainerConfig, ContainerExit, ContainerState, ContainerStatus, ExecResult,
    LayerUsage, PodSandbox, PodSandboxConfig, Runtime, RuntimeError, RuntimeVersion, SandboxState,
};
use container::mount_readonly;

const SPEC_TYPE_URL: &str = "types.containerd.io/opencontainers/runtime-spec/1/Spec";
const PROCESS_TYPE_URL: &str = "types.containerd.io/opencontainers/runtime-spec/1/Process";
const RUNC_RUNTIME: &str = "io.containerd.runc.v2";

#[derive(Debug, Clone)]
pub struct ContainerdRuntimeConfig {
    pub socket: PathBuf,
    /// containerd namespace of this agent's objects (not `k8s.io`, which belongs to CRI).
    pub namespace: String,
    pub snapshotter: String,
    /// Where pinned namespaces live (`<dir>/netns/<id>` …).
    pub state_dir: PathBuf,
    pub cni: CniConfig,
    pub cgroup_root: PathBuf,
}

#[derive(Clone)]
pub struct ContainerdRuntime {
    inner: Arc<Inner>,
}

struct Inner {
    config: ContainerdRuntimeConfig,
    channel: Channel,
    exits: broadcast::Sender<ContainerExit>,
    cgroups: CgroupManager,
    watched: parking_lot::Mutex<std::collections::HashSet<String>>,
    /// One lock per container being finalized: the exit watcher and a pod worker's relist
    /// can both see the same stopped task, and the second must not read the already
    /// removed cgroup and overwrite `OOMKilled` with `Error`.
    finalizing: parking_lot::Mutex<std::collections::HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
}

fn grpc(call: &'static str, object: &str) -> impl FnOnce(tonic::Status) -> RuntimeError {
    let object = object.to_string();
    move |status| {
        if status.code() == tonic::Code::NotFound {
            RuntimeError::NotFound(format!("{object} ({call})"))
        } else {
            RuntimeError::Grpc {
                call,
                object: object.to_string(),
                status: Box::new(status),
            }
        }
    }
}

fn new_id() -> String {
    uuid::Uuid::new_v4().simple().to_string()
}

fn rfc3339(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Nanos, true)
}

fn from_timestamp(ts: &Option<Timestamp>) -> Option<DateTime<Utc>> {
    let ts = ts.as_ref()?;
    let t = DateTime::from_timestamp(ts.seconds, u32::try_from(ts.nanos).unwrap_or(0))?;
    // containerd reports the zero time for "not yet".
    (t.timestamp() > 0).then_some(t)
}

fn parse_time(s: Option<&String>) -> Option<DateTime<Utc>> {
    DateTime::parse_from_rfc3339(s?)
        .ok()
        .map(|t| t.with_timezone(&Utc))
}

impl ContainerdRuntime {
    pub async fn connect(config: ContainerdRuntimeConfig) -> Result<Self, RuntimeError> {
        let channel = containerd_client::connect(&config.socket)
            .await
            .map_err(|source| RuntimeError::Connect {
                path: config.socket.clone(),
                source,
            })?;
        let (exits, _) = broadcast::channel(1024);
        let cgroups = CgroupManager::detect(&config.cgroup_root);
        Ok(ContainerdRuntime {
            inner: Arc::new(Inner {
                config,
                channel,
                exits,
                cgroups,
                watched: parking_lot::Mutex::new(Default::default()),
                finalizing: parking_lot::Mutex::new(Default::default()),
            }),
        })
    }

    pub fn channel(&self) -> Channel {
        self.inner.channel.clone()
    }

    pub fn namespace(&self) -> &str {
        &self.inner.config.namespace
    }

    pub fn cgroups(&self) -> &CgroupManager {
        &self.inner.cgroups
    }

    fn request<T>(&self, message: T) -> Request<T> {
        let mut req = Request::new(message);
        if let Ok(ns) = self.inner.config.namespace.parse() {
            req.metadata_mut().insert("containerd-namespace", ns);
        }
        req
    }

    fn leased<T>(&self, message: T, lease: &str) -> Request<T> {
        let mut req = self.request(message);
        if let Ok(l) = lease.parse() {
            req.metadata_mut().insert("containerd-lease", l);
        }
        req
    }

    fn containers(&self) -> ContainersClient<Channel> {
        ContainersClient::new(self.inner.channel.clone())
    }

    fn tasks(&self) -> TasksClient<Channel> {
        TasksClient::new(self.inner.channel.clone())
    }

    fn snapshots(&self) -> SnapshotsClient<Channel> {
        SnapshotsClient::new(self.inner.channel.clone())
    }

    async fn get_container(&self, id: &str) -> Result<Container, RuntimeError> {
        self.containers()
            .get(self.request(GetContainerRequest { id: id.to_string() }))
            .await
            .map_err(grpc("containers.Get", id))?
            .into_inner()
            .container
            .ok_or_else(|| RuntimeError::NotFound(id.to_string()))
    }

    /// Records of one kind, of one pod only when `pod_uid` is given (filtered by containerd,
    /// so a pod's sync does not decode every container spec on the node).
    async fn list_kind(
        &self,
        kind: &str,
        pod_uid: Option<&str>,
    ) -> Result<Vec<Container>, RuntimeError> {
        let mut filter = format!("labels.\"{}\"=={kind}", labels::KIND);
        if let Some(uid) = pod_uid {
            // A quoted literal (containerd unquotes it like Go's strconv.Unquote).
            filter.push_str(&format!(",labels.\"{}\"=={uid:?}", labels::POD_UID));
        }
        Ok(self
            .containers()
            .list(self.request(ListContainersRequest {
                filters: vec![filter],
            }))
            .await
            .map_err(grpc("containers.List", kind))?
            .into_inner()
            .containers)
    }

    async fn set_labels(&self, id: &str, set: &[(&str, String)]) -> Result<(), RuntimeError> {
        let container = Container {
            id: id.to_string(),
            labels: set
                .iter()
                .map(|(k, v)| (k.to_string(), v.clone()))
                .collect(),
            ..Default::default()
        };
        let paths = set.iter().map(|(k, _)| format!("labels.{k}")).collect();
        self.containers()
            .update(self.request(UpdateContainerRequest {
                container: Some(container),
                update_mask: Some(FieldMask { paths }),
            }))
            .await
            .map_err(grpc("containers.Update", id))?;
        Ok(())
    }

    async fn with_lease<T, F, Fut>(&self, what: &str, f: F) -> Result<T, RuntimeError>
    where
        F: FnOnce(String) -> Fut,
        Fut: std::future::Future<Output = Result<T, RuntimeError>>,
    {
        let id = format!("cairn-{}", new_id());
        let mut leases = LeasesClient::new(self.inner.channel.clone());
        leases
            .create(self.request(CreateLeaseRequest {
                id: id.clone(),
                labels: HashMap::from([("containerd.io/gc.expire".to_string(), {
                    rfc3339(Utc::now() + chrono::Duration::hours(1))
                })]),
            }))
            .await
            .map_err(grpc("leases.Create", what))?;
        let result = f(id.clone()).await;
        if let Err(e) = leases
            .delete(self.request(DeleteLeaseRequest {
                id: id.clone(),
                sync: false,
            }))
            .await
        {
            tracing::warn!(lease = %id, error = %e, "deleting lease");
        }
        result
    }

    fn sandbox_from(&self, c: &Container) -> PodSandbox {
        let l = &c.labels;
        let path = |k: &str| l.get(k).filter(|v| !v.is_empty()).map(PathBuf::from);
        PodSandbox {
            id: c.id.clone(),
            uid: l.get(labels::POD_UID).cloned().unwrap_or_default(),
            namespace: l.get(labels::POD_NAMESPACE).cloned().unwrap_or_default(),
            name: l.get(labels::POD_NAME).cloned().unwrap_or_default(),
            attempt: l
                .get(labels::ATTEMPT)
                .and_then(|a| a.parse().ok())
                .unwrap_or(0),
            netns: path(labels::NETNS),
            utsns: path(labels::UTSNS),
            ipcns: path(labels::IPCNS),
            ip: l.get(labels::POD_IP).filter(|v| !v.is_empty()).cloned(),
            cgroup_parent: l.get(labels::CGROUP).cloned().unwrap_or_default(),
            // A sandbox whose pinned namespace vanished (host reboot, /run wiped) is not
            // ready whatever its label says: the agent must make a new one.
            state: if l.get(labels::SANDBOX_STATE).map(String::as_str) == Some("ready")
                && path(labels::NETNS).is_none_or(|p| netns::is_pinned(&p))
            {
                SandboxState::Ready
            } else {
                SandboxState::NotReady
            },
            created_at: from_timestamp(&c.created_at),
        }
    }

    fn status_from(
        &self,
        c: &Container,
        task: Option<&containerd_client::types::v1::Process>,
    ) -> ContainerStatus {
        let l = &c.labels;
        let get = |k: &str| l.get(k).cloned().unwrap_or_default();
        let started_at = parse_time(l.get(labels::STARTED_AT));
        let finished_at = parse_time(l.get(labels::FINISHED_AT));
        let (state, pid) = match task.map(|t| TaskStatus::try_from(t.status)) {
            Some(Ok(TaskStatus::Running))
            | Some(Ok(TaskStatus::Paused))
            | Some(Ok(TaskStatus::Pausing)) => (ContainerState::Running, task.map(|t| t.pid)),
            Some(Ok(TaskStatus::Created)) => (ContainerState::Created, None),
            Some(Ok(TaskStatus::Stopped)) => (ContainerState::Exited, None),
            _ if finished_at.is_some() => (ContainerState::Exited, None),
            _ if started_at.is_some() => (ContainerState::Exited, None),
            _ => (ContainerState::Created, None),
        };
        let mut exit_code = l.get(labels::EXIT_CODE).and_then(|c| c.parse().ok());
        let mut reason = l.get(labels::REASON).cloned();
        if state == ContainerState::Exited && exit_code.is_none() {
            // Started but neither a task nor a recorded exit: the task vanished (containerd
            // or host restart). Report it like the kubelet does for lost containers.
            exit_code = Some(255);
            reason = Some("Unknown".into());
        }
        ContainerStatus {
            id: c.id.clone(),
            sandbox_id: get(labels::SANDBOX_ID),
            pod_uid: get(labels::POD_UID),
            pod_namespace: get(labels::POD_NAMESPACE),
            pod_name: get(labels::POD_NAME),
            name: get(labels::CONTAINER_NAME),
            attempt: l
                .get(labels::ATTEMPT)
                .and_then(|a| a.parse().ok())
                .unwrap_or(0),
            spec_hash: get(labels::SPEC_HASH),
            init: l.get(labels::INIT).map(String::as_str) == Some("true"),
            state,
            image_ref: get(labels::IMAGE_REF),
            image_id: get(labels::IMAGE_ID),
            pid,
            created_at: from_timestamp(&c.created_at),
            started_at,
            finished_at,
            exit_code,
            reason,
            log_path: get(labels::LOG_PATH),
            cgroup: get(labels::CGROUP),
            termination_message_path: l.get(labels::MESSAGE_PATH).cloned(),
            labels: l
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect::<BTreeMap<_, _>>(),
        }
    }

    /// A listed container's status; records an exit nobody watched (agent restart) and
    /// starts watching a running task.
    async fn listed_status(
        &self,
        c: &Container,
        task: Option<&containerd_client::types::v1::Process>,
    ) -> Result<ContainerStatus, RuntimeError> {
        if task.map(|t| TaskStatus::try_from(t.status)) == Some(Ok(TaskStatus::Stopped)) {
            if let Err(e) = self.finalize_exit(&c.id).await {
                tracing::warn!(container = %c.id, error = %e, "recording container exit");
            }
            // Read again whoever recorded it: the listed record predates the exit labels.
            let task = self.task(&c.id).await?;
            let fresh = self.get_container_if_any(c).await?;
            return Ok(self.status_from(&fresh, task.as_ref()));
        }
        if task.is_none() && !c.labels.contains_key(labels::EXIT_CODE) {
            // The exit may have been recorded (and the task deleted) after this record was
            // listed: trust only a fresh read before calling the container lost.
            let fresh = self.get_container_if_any(c).await?;
            return Ok(self.status_from(&fresh, None));
        }
        let status = self.status_from(c, task);
        if status.state == ContainerState::Running {
            self.watch_exit(&c.id, &status.pod_uid);
        }
        Ok(status)
    }

    /// The container's current record, or the listed one if it was removed meanwhile.
    async fn get_container_if_any(&self, listed: &Container) -> Result<Container, RuntimeError> {
        match self.get_container(&listed.id).await {
            Ok(fresh) => Ok(fresh),
            Err(RuntimeError::NotFound(_)) => Ok(listed.clone()),
            Err(e) => Err(e),
        }
    }

    async fn task(
        &self,
        id: &str,
    ) -> Result<Option<containerd_client::types::v1::Process>, RuntimeError> {
        match self
            .tasks()
            .get(self.request(GetRequest {
                container_id: id.to_string(),
                exec_id: String::new(),
            }))
            .await
        {
            Ok(r) => Ok(r.into_inner().process),
            Err(s) if s.code() == tonic::Code::NotFound => Ok(None),
            Err(s) => Err(grpc("tasks.Get", id)(s)),
        }
    }

    /// Records the exit of a stopped task in labels and deletes the task (which ends the shim
    /// and the logger). Idempotent: no task, nothing to do.
    async fn finalize_exit(&self, id: &str) -> Result<bool, RuntimeError> {
        let lock = self
            .inner
            .finalizing
            .lock()
            .entry(id.to_string())
            .or_default()
            .clone();
        let result = {
            let _held = lock.lock().await;
            self.finalize_exit_locked(id).await
        };
        // Whoever finishes drops the entry; a later caller finds the task deleted.
        self.inner.finalizing.lock().remove(id);
        result
    }

    async fn finalize_exit_locked(&self, id: &str) -> Result<bool, RuntimeError> {
        let Some(task) = self.task(id).await? else {
            return Ok(false);
        };
        if TaskStatus::try_from(task.status) != Ok(TaskStatus::Stopped) {
            return Ok(false);
        }
        let container = self.get_container(id).await?;
        let cgroup = container
            .labels
            .get(labels::CGROUP)
            .cloned()
            .unwrap_or_default();
        let code = i32::try_from(task.exit_status).unwrap_or(255);
        let oom_killed = || {
            self.inner
                .cgroups
                .stats(&cgroup)
                .and_then(|s| s.memory.oom_events)
                .is_some_and(|n| n > 0)
        };
        let mut oom = oom_killed();
        if !oom && code == 128 + nix::sys::signal::Signal::SIGKILL as i32 {
            // The kernel sends the OOM SIGKILL before it logs the kill and bumps the
            // cgroup's oom_kill counter; on a slow console the victim's exit can be
            // reported first. Look once more before calling it a plain error.
            tokio::time::sleep(Duration::from_millis(200)).await;
            oom = oom_killed();
        }
        let reason = if oom {
            "OOMKilled"
        } else if code == 0 {
            "Completed"
        } else {
            "Error"
        };
        let finished = from_timestamp(&task.exited_at).unwrap_or_else(Utc::now);
        // terminationMessagePath: the kubelet reads at most 4 KiB of it.
        let message = container
            .labels
            .get(labels::MESSAGE_PATH)
            .and_then(|p| std::fs::read(p).ok())
            .map(|mut b| {
                b.truncate(4096);
                String::from_utf8_lossy(&b).into_owned()
            })
            .unwrap_or_default();
        self.set_labels(
            id,
            &[
                (labels::EXIT_CODE, code.to_string()),
                (labels::REASON, reason.to_string()),
                (labels::FINISHED_AT, rfc3339(finished)),
                (labels::MESSAGE, message),
            ],
        )
        .await?;
        match self
            .tasks()
            .delete(self.request(DeleteTaskRequest {
                container_id: id.to_string(),
            }))
            .await
        {
            Ok(_) => {}
            Err(s) if s.code() == tonic::Code::NotFound => {}
            Err(s) => return Err(grpc("tasks.Delete", id)(s)),
        }
        self.inner.cgroups.remove(&cgroup);
        Ok(true)
    }

    async fn record_start_error(
        &self,
        id: &str,
        at: DateTime<Utc>,
        message: &str,
    ) -> Result<(), RuntimeError> {
        self.set_labels(
            id,
            &[
                (labels::STARTED_AT, rfc3339(at)),
                (labels::FINISHED_AT, rfc3339(Utc::now())),
                (labels::EXIT_CODE, "128".into()),
                (labels::REASON, "StartError".into()),
                (labels::MESSAGE, message.to_string()),
            ],
        )
        .await
    }

    /// Waits for the task's exit in the background and reports it once.
    fn watch_exit(&self, id: &str, pod_uid: &str) {
        if !self.inner.watched.lock().insert(id.to_string()) {
            return;
        }
        let this = self.clone();
        let id = id.to_string();
        let pod_uid = pod_uid.to_string();
        tokio::spawn(async move {
            let result = this
                .tasks()
                .wait(this.request(WaitRequest {
                    container_id: id.clone(),
                    exec_id: String::new(),
                }))
                .await;
            this.inner.watched.lock().remove(&id);
            match result {
                Ok(_) => {
                    if let Err(e) = this.finalize_exit(&id).await {
                        tracing::warn!(container = %id, error = %e, "recording container exit");
                    }
                    let _ = this.inner.exits.send(ContainerExit { id, pod_uid });
                }
                Err(s) if s.code() == tonic::Code::NotFound => {}
                Err(s) => {
                    tracing::warn!(container = %id, error = %s, "waiting for container exit");
                    // Let the pod worker look at it again.
                    let _ = this.inner.exits.send(ContainerExit { id, pod_uid });
                }
            }
        });
    }

    async fn rootfs_mounts(&self, id: &str) -> Result<Vec<ContainerdMount>, RuntimeError> {
        Ok(self
            .snapshots()
            .mounts(self.request(MountsRequest {
                snapshotter: self.inner.config.snapshotter.clone(),
                key: id.to_string(),
            }))
            .await
            .map_err(grpc("snapshots.Mounts", id))?
            .into_inner()
            .mounts)
    }

    /// Resolves a named image user against the rootfs' /etc/passwd, by mounting the snapshot
    /// read-only for a moment (as containerd's WithUser does).
    async fn resolve_user(
        &self,
        config: &ContainerConfig,
        mounts: &[ContainerdMount],
    ) -> Result<(u32, u32, Vec<u32>), RuntimeError> {
        let user = config.image.config.user.trim();
        let needs_rootfs = config.security.run_as_user.is_some()
            || (!user.is_empty() && !user.split(':').all(|p| p.parse::<u32>().is_ok()));
        if !needs_rootfs {
            return Ok(spec::resolve_user(config, None)?);
        }
        let dir = tempfile::tempdir().map_err(|source| RuntimeError::Io {
            what: "creating a temporary rootfs mount point".into(),
            source,
        })?;
        let mounted = mount_readonly(mounts, dir.path());
        let result = spec::resolve_user(config, mounted.then_some(dir.path()));
        if mounted {
            let _ = nix::mount::umount2(dir.path(), nix::mount::MntFlags::MNT_DETACH);
        }
        Ok(result?)
    }
}

#[async_trait]
impl Runtime for ContainerdRuntime {
    async fn version(&self) -> Result<RuntimeVersion, RuntimeError> {
        let v = VersionClient::new(self.inner.channel.clone())
            .version(Request::new(()))
            .await
            .map_err(grpc("version.Version", "containerd"))?
            .into_inner();
        Ok(RuntimeVersion {
            runtime_name: "containerd".into(),
            runtime_version: v.version,
        })
    }

    async fn run_pod_sandbox(&self, config: &PodSandboxConfig) -> Result<PodSandbox, RuntimeError> {
        self.run_pod_sandbox_impl(config).await
    }

    async fn stop_pod_sandbox(&self, id: &str) -> Result<(), RuntimeError> {
        self.stop_pod_sandbox_impl(id).await
    }

    async fn remove_pod_sandbox(&self, id: &str) -> Result<(), RuntimeError> {
        self.remove_pod_sandbox_impl(id).await
    }

    async fn list_pod_sandboxes(&self) -> Result<Vec<PodSandbox>, RuntimeError> {
        Ok(self
            .list_kind(labels::KIND_SANDBOX, None)
            .await?
            .iter()
            .map(|c| self.sandbox_from(c))
            .collect())
    }

    async fn create_container(
        &self,
        sandbox: &PodSandbox,
        config: &ContainerConfig,
    ) -> Result<String, RuntimeError> {
        self.create_container_impl(sandbox, config).await
    }

    async fn start_container(&self, id: &str) -> Result<(), RuntimeError> {
        self.start_container_impl(id).await
    }

    async fn stop_container(&self, id: &str, grace: Duration) -> Result<(), RuntimeError> {
        self.stop_container_impl(id, grace).await
    }

    async fn remove_container(&self, id: &str) -> Result<(), RuntimeError> {
        self.remove_container_impl(id).await
    }

    async fn list_containers(&self) -> Result<Vec<ContainerStatus>, RuntimeError> {
        let containers = self.list_kind(labels::KIND_CONTAINER, None).await?;
        let tasks = self
            .tasks()
            .list(self.request(ListTasksRequest {
                filter: String::new(),
            }))
            .await
            .map_err(grpc("tasks.List", "all"))?
            .into_inner()
            .tasks;
        let by_id: HashMap<&str, &containerd_client::types::v1::Process> =
            tasks.iter().map(|t| (t.id.as_str(), t)).collect();
        let mut out = Vec::with_capacity(containers.len());
        for c in &containers {
            out.push(
                self.listed_status(c, by_id.get(c.id.as_str()).copied())
                    .await?,
            );
        }
        Ok(out)
    }

    async fn list_pod_sandboxes_of(&self, pod_uid: &str) -> Result<Vec<PodSandbox>, RuntimeError> {
        Ok(self
            .list_kind(labels::KIND_SANDBOX, Some(pod_uid))
            .await?
            .iter()
            .map(|c| self.sandbox_from(c))
            .collect())
    }

    async fn list_containers_of(
        &self,
        pod_uid: &str,
    ) -> Result<Vec<ContainerStatus>, RuntimeError> {
        let containers = self
            .list_kind(labels::KIND_CONTAINER, Some(pod_uid))
            .await?;
        let mut out = Vec::with_capacity(containers.len());
        for c in &containers {
            // tasks.Get per container: containerd 1.6's tasks.List asks every shim on the
            // node for its state, which is what a per-pod listing must avoid.
            let task = self.task(&c.id).await?;
            out.push(self.listed_status(c, task.as_ref()).await?);
        }
        Ok(out)
    }

    /// The snapshotter's usage of the container's writable layer (its snapshot's key is
    /// the container id), as the CRI plugin reports `WritableLayer`.
    async fn writable_layer_usage(&self, id: &str) -> Result<Option<LayerUsage>, RuntimeError> {
        let usage = self
            .snapshots()
            .usage(self.request(UsageRequest {
                snapshotter: self.inner.config.snapshotter.clone(),
                key: id.to_string(),
            }))
            .await
            .map_err(grpc("snapshots.Usage", id))?
            .into_inner();
        Ok(Some(LayerUsage {
            bytes: u64::try_from(usage.size).unwrap_or(0),
            inodes: u64::try_from(usage.inodes).unwrap_or(0),
        }))
    }

    async fn container_status(&self, id: &str) -> Result<ContainerStatus, RuntimeError> {
        let mut task = self.task(id).await?;
        if task
            .as_ref()
            .is_some_and(|t| TaskStatus::try_from(t.status) == Ok(TaskStatus::Stopped))
        {
            // Recorded here or, concurrently, by the exit watcher: either way read again.
            self.finalize_exit(id).await?;
            task = self.task(id).await?;
        }
        let c = self.get_container(id).await?;
        Ok(self.status_from(&c, task.as_ref()))
    }

    async fn exec_sync(
        &self,
        id: &str,
        command: &[String],
        timeout: Duration,
    ) -> Result<ExecResult, RuntimeError> {
        self.exec_sync_impl(id, command, timeout).await
    }

    async fn exec_stream(
        &self,
        id: &str,
        request: &crate::ExecStreamRequest,
    ) -> Result<crate::ExecStreams, RuntimeError> {
        self.exec_stream_impl(id, request).await
    }

    async fn resize_exec(
        &self,
        id: &str,
        exec_id: &str,
        width: u16,
        height: u16,
    ) -> Result<(), RuntimeError> {
        self.resize_exec_impl(id, exec_id, width, height).await
    }

    async fn kill_exec(&self, id: &str, exec_id: &str) -> Result<(), RuntimeError> {
        self.kill_exec_impl(id, exec_id).await
    }

    fn subscribe_exits(&self) -> broadcast::Receiver<ContainerExit> {
        self.inner.exits.subscribe()
    }
}
