//! CRI-shaped runtime trait and its containerd implementation.
//!
//! The agent talks to [`Runtime`] only; [`containerd::ContainerdRuntime`] implements it over
//! containerd's gRPC API (containers, tasks, snapshots, leases), and tests of the agent's logic
//! can use a fake. Everything the agent must remember about a pod lives in containerd labels
//! (see [`labels`]), so the agent itself is stateless across restarts.

pub mod cgroups;
pub mod clock;
pub mod cni;
pub mod conformance;
pub mod containerd;
pub mod fake;
pub mod netns;
pub mod spec;

use std::collections::BTreeMap;
use std::path::PathBuf;

use async_trait::async_trait;
use chrono::{DateTime, Utc};

pub use cgroups::{CgroupError, CgroupManager, PodResources};
pub use clock::{Clock, SystemClock, TokioClock};
pub use cni::{CniConfig, CniError};
pub use containerd::{ContainerdRuntime, ContainerdRuntimeConfig};
pub use spec::{ImageConfig, SpecError};

/// Label keys cairn puts on containerd objects. They are the agent's only memory.
pub mod labels {
    pub const KIND: &str = "io.cairn.kind";
    pub const KIND_SANDBOX: &str = "sandbox";
    pub const KIND_CONTAINER: &str = "container";
    pub const POD_UID: &str = "io.kubernetes.pod.uid";
    pub const POD_NAME: &str = "io.kubernetes.pod.name";
    pub const POD_NAMESPACE: &str = "io.kubernetes.pod.namespace";
    pub const CONTAINER_NAME: &str = "io.kubernetes.container.name";
    pub const SANDBOX_ID: &str = "io.cairn.sandbox.id";
    pub const ATTEMPT: &str = "io.cairn.attempt";
    pub const SPEC_HASH: &str = "io.cairn.container.hash";
    pub const NETNS: &str = "io.cairn.sandbox.netns";
    pub const UTSNS: &str = "io.cairn.sandbox.utsns";
    pub const IPCNS: &str = "io.cairn.sandbox.ipcns";
    pub const POD_IP: &str = "io.cairn.sandbox.ip";
    pub const SANDBOX_STATE: &str = "io.cairn.sandbox.state";
    pub const CGROUP: &str = "io.cairn.cgroup";
    pub const LOG_PATH: &str = "io.cairn.log-path";
    pub const LOG_URI: &str = "io.cairn.log-uri";
    pub const IMAGE_REF: &str = "io.cairn.image.ref";
    pub const IMAGE_ID: &str = "io.cairn.image.id";
    pub const STARTED_AT: &str = "io.cairn.started-at";
    pub const FINISHED_AT: &str = "io.cairn.finished-at";
    pub const EXIT_CODE: &str = "io.cairn.exit-code";
    pub const REASON: &str = "io.cairn.reason";
    pub const MESSAGE: &str = "io.cairn.message";
    pub const MESSAGE_PATH: &str = "io.cairn.termination-message-path";
    pub const INIT: &str = "io.cairn.init";
}

#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    #[error("containerd call {call} failed for {object}: {status}")]
    Grpc {
        call: &'static str,
        object: String,
        status: Box<tonic::Status>,
    },
    #[error("connecting to containerd at {path}: {source}")]
    Connect {
        path: PathBuf,
        source: tonic::transport::Error,
    },
    #[error("{0} not found")]
    NotFound(String),
    #[error(transparent)]
    Netns(#[from] netns::NetnsError),
    #[error(transparent)]
    Cni(#[from] cni::CniError),
    #[error(transparent)]
    Spec(#[from] spec::SpecError),
    #[error(transparent)]
    Cgroup(#[from] cgroups::CgroupError),
    #[error("{what}: {source}")]
    Io {
        what: String,
        source: std::io::Error,
    },
    #[error("exec in {id} timed out after {seconds}s")]
    ExecTimeout { id: String, seconds: u64 },
}

impl RuntimeError {
    pub fn is_not_found(&self) -> bool {
        match self {
            RuntimeError::NotFound(_) => true,
            RuntimeError::Grpc { status, .. } => status.code() == tonic::Code::NotFound,
            _ => false,
        }
    }
}

/// DNS settings written into the pod's resolv.conf.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DnsConfig {
    pub servers: Vec<String>,
    pub searches: Vec<String>,
    pub options: Vec<String>,
}

/// What the agent asks for when it creates a pod's sandbox.
#[derive(Debug, Clone, Default)]
pub struct PodSandboxConfig {
    pub uid: String,
    pub namespace: String,
    pub name: String,
    /// Bumped each time the sandbox is recreated.
    pub attempt: u32,
    pub hostname: String,
    pub host_network: bool,
    /// Cgroup parent of the pod (e.g. `/cairn/kubepods/burstable/pod<uid>`).
    pub cgroup_parent: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SandboxState {
    Ready,
    NotReady,
}

#[derive(Debug, Clone)]
pub struct PodSandbox {
    pub id: String,
    pub uid: String,
    pub namespace: String,
    pub name: String,
    pub attempt: u32,
    pub netns: Option<PathBuf>,
    pub utsns: Option<PathBuf>,
    pub ipcns: Option<PathBuf>,
    pub ip: Option<String>,
    pub cgroup_parent: String,
    pub state: SandboxState,
    pub created_at: Option<DateTime<Utc>>,
}

/// One bind mount into a container.
#[derive(Debug, Clone, PartialEq)]
pub struct Mount {
    pub host_path: PathBuf,
    pub container_path: String,
    pub readonly: bool,
}

/// Resource limits of one container, already converted to cgroup units.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Resources {
    pub cpu_shares: Option<u64>,
    pub cpu_quota: Option<i64>,
    pub cpu_period: Option<u64>,
    pub memory_limit: Option<i64>,
    pub oom_score_adj: Option<i32>,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct SecurityConfig {
    pub privileged: bool,
    pub run_as_user: Option<i64>,
    pub run_as_group: Option<i64>,
    pub supplemental_groups: Vec<i64>,
    pub capabilities_add: Vec<String>,
    pub capabilities_drop: Vec<String>,
    pub readonly_rootfs: bool,
    pub allow_privilege_escalation: Option<bool>,
}

/// The image a container runs, as resolved by the image layer.
#[derive(Debug, Clone, Default)]
pub struct ImageSpec {
    /// Normalised reference, e.g. `docker.io/library/busybox:latest`.
    pub name: String,
    /// Image ID (config digest) reported as `imageID`.
    pub id: String,
    /// Snapshot chain ID of the top layer: the parent of the container's rootfs.
    pub chain_id: String,
    pub config: ImageConfig,
}

#[derive(Debug, Clone, Default)]
pub struct ContainerConfig {
    pub name: String,
    pub attempt: u32,
    pub image: ImageSpec,
    pub command: Vec<String>,
    pub args: Vec<String>,
    pub working_dir: Option<String>,
    pub env: Vec<(String, String)>,
    pub mounts: Vec<Mount>,
    pub resources: Resources,
    pub security: SecurityConfig,
    /// containerd stdio URI for stdout and stderr (the `binary://` logger), or empty for none.
    pub log_uri: String,
    pub log_path: PathBuf,
    pub spec_hash: String,
    pub termination_message_path: Option<PathBuf>,
    pub init: bool,
    pub tty: bool,
    pub stdin: bool,
    /// Join this PID namespace (`/proc/<pid>/ns/pid` of a target container, for ephemeral
    /// debug containers) instead of getting one of its own.
    pub pid_namespace: Option<PathBuf>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ContainerState {
    Created,
    Running,
    Exited,
    Unknown,
}

#[derive(Debug, Clone)]
pub struct ContainerStatus {
    pub id: String,
    pub sandbox_id: String,
    pub pod_uid: String,
    pub pod_namespace: String,
    pub pod_name: String,
    pub name: String,
    pub attempt: u32,
    pub spec_hash: String,
    pub init: bool,
    pub state: ContainerState,
    pub image_ref: String,
    pub image_id: String,
    pub pid: Option<u32>,
    pub created_at: Option<DateTime<Utc>>,
    pub started_at: Option<DateTime<Utc>>,
    pub finished_at: Option<DateTime<Utc>>,
    pub exit_code: Option<i32>,
    /// `OOMKilled`, `Error`, `Completed` for exited containers.
    pub reason: Option<String>,
    pub log_path: String,
    pub cgroup: String,
    pub termination_message_path: Option<String>,
    pub labels: BTreeMap<String, String>,
}

#[derive(Debug, Clone)]
pub struct ExecResult {
    pub exit_code: i32,
    /// stdout then stderr (as the kubelet's `RunInContainer` joins them), the first
    /// [`EXEC_OUTPUT_LIMIT`] bytes (probe and hook failure messages quote it, as the
    /// kubelet's do).
    pub output: String,
}

/// What a streaming exec (`kubectl exec`) asks for. With `tty`, stderr is merged into
/// stdout by the terminal, as with the kubelet.
#[derive(Debug, Clone, Default)]
pub struct ExecStreamRequest {
    pub command: Vec<String>,
    pub tty: bool,
    pub stdin: bool,
    pub stdout: bool,
    pub stderr: bool,
}

pub type StreamReader = Box<dyn tokio::io::AsyncRead + Send + Unpin>;
pub type StreamWriter = Box<dyn tokio::io::AsyncWrite + Send + Unpin>;
pub type ExitFuture =
    std::pin::Pin<Box<dyn std::future::Future<Output = Result<i32, RuntimeError>> + Send>>;

/// A started exec process and its standard streams. Dropping `stdin` closes the
/// process's stdin. `exit` resolves once the process has exited and has been removed
/// from the runtime (the runtime cleans up even when nobody awaits it).
pub struct ExecStreams {
    pub exec_id: String,
    pub stdin: Option<StreamWriter>,
    pub stdout: Option<StreamReader>,
    pub stderr: Option<StreamReader>,
    pub exit: ExitFuture,
}

/// How much of an exec's output is kept: the kubelet's probe output limit (10 KiB).
pub const EXEC_OUTPUT_LIMIT: usize = 10 * 1024;

/// A container whose main process exited.
#[derive(Debug, Clone)]
pub struct ContainerExit {
    pub id: String,
    pub pod_uid: String,
}

/// What a container's writable layer holds (the snapshotter's `Usage`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LayerUsage {
    pub bytes: u64,
    pub inodes: u64,
}

#[derive(Debug, Clone)]
pub struct RuntimeVersion {
    pub runtime_name: String,
    pub runtime_version: String,
}

/// The CRI-shaped surface the agent uses.
#[async_trait]
pub trait Runtime: Send + Sync {
    async fn version(&self) -> Result<RuntimeVersion, RuntimeError>;

    /// Creates the pod's namespaces and network; returns once the pod has its IP.
    async fn run_pod_sandbox(&self, config: &PodSandboxConfig) -> Result<PodSandbox, RuntimeError>;
    /// Tears down the network (best effort) and marks the sandbox NotReady.
    async fn stop_pod_sandbox(&self, id: &str) -> Result<(), RuntimeError>;
    async fn remove_pod_sandbox(&self, id: &str) -> Result<(), RuntimeError>;
    async fn list_pod_sandboxes(&self) -> Result<Vec<PodSandbox>, RuntimeError>;
    /// The sandboxes of one pod. Pod workers call this on every sync, so runtimes should
    /// filter on their side rather than list the whole node.
    async fn list_pod_sandboxes_of(&self, pod_uid: &str) -> Result<Vec<PodSandbox>, RuntimeError> {
        let all = self.list_pod_sandboxes().await?;
        Ok(all.into_iter().filter(|s| s.uid == pod_uid).collect())
    }

    async fn create_container(
        &self,
        sandbox: &PodSandbox,
        config: &ContainerConfig,
    ) -> Result<String, RuntimeError>;
    async fn start_container(&self, id: &str) -> Result<(), RuntimeError>;
    /// SIGTERM, then SIGKILL after `grace`; returns once the process is gone.
    async fn stop_container(
        &self,
        id: &str,
        grace: std::time::Duration,
    ) -> Result<(), RuntimeError>;
    async fn remove_container(&self, id: &str) -> Result<(), RuntimeError>;
    async fn list_containers(&self) -> Result<Vec<ContainerStatus>, RuntimeError>;
    /// The containers of one pod (see [`Runtime::list_pod_sandboxes_of`]).
    async fn list_containers_of(
        &self,
        pod_uid: &str,
    ) -> Result<Vec<ContainerStatus>, RuntimeError> {
        let all = self.list_containers().await?;
        Ok(all.into_iter().filter(|c| c.pod_uid == pod_uid).collect())
    }
    async fn container_status(&self, id: &str) -> Result<ContainerStatus, RuntimeError>;
    /// The container's writable layer usage; `None` from a runtime that cannot say.
    async fn writable_layer_usage(&self, id: &str) -> Result<Option<LayerUsage>, RuntimeError> {
        let _ = id;
        Ok(None)
    }
    async fn exec_sync(
        &self,
        id: &str,
        command: &[String],
        timeout: std::time::Duration,
    ) -> Result<ExecResult, RuntimeError>;
    /// Starts `request.command` in a running container with its streams attached.
    async fn exec_stream(
        &self,
        id: &str,
        request: &ExecStreamRequest,
    ) -> Result<ExecStreams, RuntimeError>;
    /// Resizes the terminal of a `tty` exec.
    async fn resize_exec(
        &self,
        id: &str,
        exec_id: &str,
        width: u16,
        height: u16,
    ) -> Result<(), RuntimeError>;
    /// SIGKILLs an exec process (its client went away); `exit` then resolves.
    async fn kill_exec(&self, id: &str, exec_id: &str) -> Result<(), RuntimeError>;
    /// Exits of containers this runtime is watching.
    fn subscribe_exits(&self) -> tokio::sync::broadcast::Receiver<ContainerExit>;
}
