//! The pod watcher (a kube-rs watcher on `spec.nodeName=<node>` that re-lists after errors
//! and 410) and one level-triggered worker per pod: sandbox, volumes, init containers in
//! order, app containers with restart policy and back-off, probes, graceful termination,
//! status written only on change. Orphans (containerd objects of pods the API no longer
//! has) are cleaned up after every full list.

mod admit;
mod containers;
mod ephemeral;
pub mod handles;
mod orphans;
mod pod_files;
mod probing;
mod report;
mod resources;
mod start;
mod sync;
mod terminate;
mod worker;

use containers::InitState;
pub use handles::Handles;
use handles::{EventSink, PodApiError};
use report::*;
use resources::*;
use terminate::*;
use worker::*;

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use cairn_runtime::{
    ContainerConfig, ContainerExit, ContainerState, ContainerStatus, Mount, PodResources,
    PodSandbox, PodSandboxConfig, Resources, SandboxState, SecurityConfig,
};
use chrono::{DateTime, Utc};
use futures::StreamExt;
use k8s_openapi::api::core::v1::{Container, Pod, PodStatus};
use kube::api::Api;
use kube::runtime::watcher::{self, Event};
use kube::runtime::WatchStreamExt;
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
    h: Handles,
    /// The API client the pod watch lists and watches with.
    client: kube::Client,
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
    pub fn new(h: Handles, client: kube::Client) -> Arc<Self> {
        Arc::new(PodManager {
            h,
            client,
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
            // Err: the worker ended after this check; a fresh one starts below.
            if tx.send(desired.clone()).is_ok() {
                return;
            }
        }
        let (tx, rx) = watch::channel(desired);
        workers.insert(uid.clone(), tx);
        let this = self.clone();
        let span = tracing::info_span!("pod", pod = %key_of(&pod), uid = %uid);
        tokio::spawn(
            async move {
                Worker::new(this.h.clone(), uid.clone()).run(rx).await;
                this.workers.lock().remove(&uid);
                this.h.ledger.forget(&uid);
                this.h.cgroups.refresh_qos();
            }
            .instrument(span),
        );
    }

    /// Asks the pod's worker to evict it (the eviction manager's hard eviction).
    pub fn evict(&self, uid: &str, message: String) {
        self.h.evictions.request(uid, message);
        if let Some(tx) = self.workers.lock().get(uid) {
            // Wakes the worker with its current desired state; it takes the request.
            tx.send_modify(|_| {});
        }
    }

    pub fn known_uids(&self) -> HashSet<String> {
        self.workers.lock().keys().cloned().collect()
    }

    /// Watches the API's pods bound to this node and feeds the workers.
    pub async fn watch_api_pods(self: Arc<Self>) {
        let api: Api<Pod> = Api::all(self.client.clone());
        let config = watcher::Config::default()
            .fields(&format!("spec.nodeName={}", self.h.node.config.node_name));
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
                    for (uid, pod) in self.h.ledger.pods() {
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
}

#[cfg(test)]
mod tests;
