//! cairn-agent: the kubelet. Registers the node, watches the pods bound to it and drives
//! containerd (through `cairn_runtime::Runtime`) to run them, reporting status back.
//!
//! - [`node`]: Node registration, status and heartbeat Lease.
//! - [`pods`]: the pod watcher and one level-triggered worker per pod.
//! - [`status`]: PodStatus from what containerd holds.
//! - [`env`], [`volumes`]: container environment and volumes.
//! - [`images`]: pull policy and back-off over `cairn_image`.
//! - [`probes`]: liveness/readiness/startup probes.
//! - [`hooks`]: postStart/preStop lifecycle handlers.
//! - [`server`]: the routes of the port on :10250 (logs, /pods, stats, streaming).
//! - [`serving`]: that port's HTTPS, its certificate and its gate ([`server_auth`]).
//! - [`static_pods`]: pods from a manifest directory, mirrored into the API.
//! - [`pod_meta`]: facts read off a pod (uid, static/mirror, requests, cgroup parent); a leaf.
//! - [`qos`]: the QoS-class parent cgroups.
//! - [`ledger`]: the pods this agent runs, admission grants, live log files; a leaf.

pub mod config;
pub mod dns;
pub mod env;
pub mod events;
pub mod eviction;
pub mod hooks;
pub mod image_gc;
pub mod images;
pub mod inflight;
pub mod join;
pub mod ledger;
pub mod local_path;
pub mod metrics;
pub mod node;
pub mod node_cmd;
pub mod pod_logs;
pub mod pod_meta;
pub mod pods;
pub mod probes;
pub mod qos;
pub mod quantity;
pub mod sa_tokens;
pub mod server;
pub mod server_auth;
pub mod serving;
pub mod static_pods;
pub mod stats;
pub mod status;
pub mod streaming;
pub mod sysinfo;
pub mod volumes;

use std::sync::Arc;

use cairn_runtime::{CgroupManager, CniConfig, Runtime};
use k8s_openapi::api::core::v1::Service;
use kube::runtime::reflector::Store;

use crate::config::AgentConfig;

/// What every part of the agent shares.
pub struct Agent {
    pub config: AgentConfig,
    pub client: kube::Client,
    pub runtime: Arc<dyn Runtime>,
    pub cni: CniConfig,
    pub host: sysinfo::HostRoot,
    pub node_ip: Option<String>,
    pub cgroups: CgroupManager,
    /// The kubepods/burstable/besteffort parents.
    pub qos: qos::QosCgroups,
    pub images: Arc<images::ImageManager>,
    pub events: Arc<events::EventRecorder>,
    pub services: Store<Service>,
    /// Pods this agent runs (API pods and static pods), admission grants, live log files.
    pub ledger: Arc<ledger::PodLedger>,
    /// Usage statistics from the housekeeping passes.
    pub stats: Arc<stats::Stats>,
    /// The agent's own metrics (`/metrics`, `/metrics/probes`).
    pub metrics: Arc<metrics::AgentMetrics>,
    /// Node pressure and the pods evicted for it.
    pub eviction: Arc<eviction::Eviction>,
    /// The image garbage collector's memory of images.
    pub image_gc: Arc<image_gc::ImageGc>,
}
