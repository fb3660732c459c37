//! cairn's controller manager: level-triggered reconcilers that make the cluster match
//! what its objects ask for, each a kube-runtime `Controller` over shared list-watch
//! caches ([`informer`]), with expectations ([`expectations`]) and rate-limited retries
//! ([`retry`]). They are clients of any Kubernetes API server: `cairn-control serve`
//! runs them in-process, `cairn-control controllers --kubeconfig F` alone.

pub mod cached_pod;
pub mod clusterroleaggregation;
pub mod cronjob;
pub mod daemonset;
pub mod deployment;
pub mod disruption;
pub mod endpoints;
pub mod endpointslice;
pub mod endpointslicemirroring;
pub mod expectations;
pub mod garbagecollector;
pub mod gateway;
pub mod hpa;
pub mod informer;
pub mod ingress;
pub mod job;
pub mod namespace;
pub mod nodelifecycle;
pub mod owner;
pub mod queue_metrics;
pub mod reconcile_loop;
pub mod replicaset;
pub mod resourcequota;
pub mod retry;
pub mod revisions;
pub mod rootcacertpublisher;
pub mod select;
pub mod serviceaccount;
pub mod servicelb;
pub mod slow_start;
pub mod statefulset;
pub mod volume;
mod wiring;

use std::time::Duration;

use kube::Client;
use tracing::info;

pub use select::Selection;

/// How often every object is reconciled even without events (repairs missed ones).
pub const RESYNC: Duration = Duration::from_secs(300);

/// Tunables of the controllers.
#[derive(Debug, Clone)]
pub struct Settings {
    /// First delay before a Job replaces a failed pod; it doubles per failure up to six
    /// minutes (upstream's fixed 10 s; tests shorten it).
    pub job_backoff: Duration,
    pub node_lifecycle: nodelifecycle::NodeLifecycleSettings,
    /// Finished pods kept before the pod GC deletes the oldest (0: keep all).
    pub terminated_pod_gc_threshold: usize,
    /// The cluster CA (PEM) the root CA publisher puts in every namespace's
    /// `kube-root-ca.crt`; without it that controller does nothing.
    pub root_ca_pem: Option<String>,
    pub hpa: hpa::HpaSettings,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            job_backoff: Duration::from_secs(10),
            node_lifecycle: Default::default(),
            terminated_pod_gc_threshold: 12_500,
            root_ca_pem: None,
            hpa: Default::default(),
        }
    }
}

type Starter = fn(&Client, &mut wiring::Informers) -> wiring::Task;

/// Every controller, by its `--controllers` name.
const STARTERS: &[(&str, Starter)] = &[
    ("replicaset", replicaset::start),
    (
        "replicationcontroller",
        replicaset::start_replication_controller,
    ),
    ("deployment", deployment::start),
    ("horizontalpodautoscaling", hpa::start),
    ("serviceaccount", serviceaccount::start),
    ("daemonset", daemonset::start),
    ("namespace", namespace::start),
    ("job", job::start),
    ("ttl-after-finished", job::ttl::start),
    ("cronjob", cronjob::start),
    ("statefulset", statefulset::start),
    ("garbagecollector", garbagecollector::start),
    ("endpointslice", endpointslice::start),
    ("endpoints", endpoints::start),
    ("endpointslicemirroring", endpointslicemirroring::start),
    ("nodelifecycle", nodelifecycle::start),
    ("taint-eviction-controller", nodelifecycle::eviction::start),
    ("podgc", nodelifecycle::podgc::start),
    ("disruption", disruption::start),
    ("resourcequota", resourcequota::start),
    ("persistentvolume-binder", volume::start_binder),
    ("pvc-protection", volume::start_claim_protection),
    ("pv-protection", volume::start_volume_protection),
    ("servicelb", servicelb::start),
    ("ingress", ingress::start),
    ("gateway", gateway::start),
    ("clusterrole-aggregation", clusterroleaggregation::start),
    ("root-ca-cert-publisher", rootcacertpublisher::start),
];

/// Runs the selected controllers until the process stops. Only the caches some selected
/// controller reads are watched.
pub async fn run(client: Client, selection: &Selection, settings: Settings) {
    let mut inf = wiring::Informers::new(&client, settings);
    let controllers: Vec<wiring::Task> = STARTERS
        .iter()
        .filter(|(name, _)| selection.enabled(name))
        .map(|(_, start)| start(&client, &mut inf))
        .collect();
    let informers = inf.start_used().await;
    // Only now: counting replicas against a half-listed cache would create pods twice.
    info!(controllers = ?selection.names(), "controllers started");
    futures::future::join(
        futures::future::join_all(controllers),
        futures::future::join_all(informers),
    )
    .await;
}
