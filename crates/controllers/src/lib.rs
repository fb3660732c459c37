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
pub mod informer;
pub mod job;
pub mod namespace;
pub mod nodelifecycle;
pub mod owner;
pub mod replicaset;
pub mod resourcequota;
pub mod retry;
pub mod revisions;
pub mod runner;
pub mod select;
pub mod serviceaccount;
pub mod servicelb;
pub mod slow_start;
pub mod statefulset;
pub mod volume;

use std::sync::Arc;
use std::time::Duration;

use cairn_events::Recorder;
use futures::StreamExt;
use k8s_openapi::api::apps::v1::{
    ControllerRevision, DaemonSet, Deployment, ReplicaSet, StatefulSet,
};
use k8s_openapi::api::batch::v1::{CronJob, Job};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{
    Endpoints, Namespace, Node, PersistentVolume, PersistentVolumeClaim, Pod,
    ReplicationController, ResourceQuota, Service, ServiceAccount,
};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::rbac::v1::ClusterRole;
use k8s_openapi::api::storage::v1::StorageClass;
use kube::api::Api;
use kube::runtime::reflector::ObjectRef;
use kube::Client;
use tracing::info;

use cached_pod::CachedPod;

pub use select::Selection;

/// How often every object is reconciled even without events (repairs missed ones).
pub const RESYNC: Duration = Duration::from_secs(300);

fn resync_ticks() -> impl futures::Stream<Item = ()> + Send + 'static {
    tokio_stream::wrappers::IntervalStream::new(tokio::time::interval_at(
        tokio::time::Instant::now() + RESYNC,
        RESYNC,
    ))
    .map(|_| ())
}

/// Tunables of the controllers.
#[derive(Debug, Clone)]
pub struct Settings {
    /// First delay before a Job replaces a failed pod; it doubles per failure up to six
    /// minutes (upstream's fixed 10 s; tests shorten it).
    pub job_backoff: Duration,
    pub node_lifecycle: nodelifecycle::NodeLifecycleSettings,
    /// Finished pods kept before the pod GC deletes the oldest (0: keep all).
    pub terminated_pod_gc_threshold: usize,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            job_backoff: Duration::from_secs(10),
            node_lifecycle: Default::default(),
            terminated_pod_gc_threshold: 12_500,
        }
    }
}

/// The shared caches every controller reads.
struct Informers {
    settings: Settings,
    pods: informer::Informer<Pod, CachedPod>,
    replicasets: informer::Informer<ReplicaSet>,
    replicationcontrollers: informer::Informer<ReplicationController, ReplicaSet>,
    deployments: informer::Informer<Deployment>,
    namespaces: informer::Informer<Namespace>,
    serviceaccounts: informer::Informer<ServiceAccount>,
    nodes: informer::Informer<Node>,
    daemonsets: informer::Informer<DaemonSet>,
    jobs: informer::Informer<Job>,
    cronjobs: informer::Informer<CronJob>,
    statefulsets: informer::Informer<StatefulSet>,
    revisions: informer::Informer<ControllerRevision>,
    services: informer::Informer<Service>,
    endpoints: informer::Informer<Endpoints>,
    endpointslices: informer::Informer<EndpointSlice>,
    leases: informer::Informer<Lease>,
    budgets: informer::Informer<PodDisruptionBudget>,
    quotas: informer::Informer<ResourceQuota>,
    claims: informer::Informer<PersistentVolumeClaim>,
    volumes: informer::Informer<PersistentVolume>,
    storageclasses: informer::Informer<StorageClass>,
    clusterroles: informer::Informer<ClusterRole>,
    /// Listeners of the services a pod event wakes (computed once for all of them).
    pod_service_listeners: Option<ServiceListeners>,
}

type ServiceListeners =
    Arc<parking_lot::Mutex<Vec<tokio::sync::mpsc::UnboundedSender<ObjectRef<Service>>>>>;

type Task = futures::future::BoxFuture<'static, ()>;

fn start_replicaset(client: &Client, inf: &mut Informers) -> Task {
    let own = inf
        .replicasets
        .subscribe(|rs: &ReplicaSet| vec![ObjectRef::from_obj(rs)]);
    let flavor = replicaset::Flavor::ReplicaSet;
    let pods = inf
        .pods
        .subscribe(replicaset::pod_owners(flavor, inf.replicasets.reader()));
    let replicasets = inf.replicasets.reader();
    start_replica_controller(client, inf, flavor, replicasets, own, pods)
}

fn start_replicationcontroller(client: &Client, inf: &mut Informers) -> Task {
    let own = inf
        .replicationcontrollers
        .subscribe(|rc: &ReplicaSet| vec![ObjectRef::from_obj(rc)]);
    let flavor = replicaset::Flavor::ReplicationController;
    let pods = inf.pods.subscribe(replicaset::pod_owners(
        flavor,
        inf.replicationcontrollers.reader(),
    ));
    let rcs = inf.replicationcontrollers.reader();
    start_replica_controller(client, inf, flavor, rcs, own, pods)
}

fn start_replica_controller(
    client: &Client,
    inf: &mut Informers,
    flavor: replicaset::Flavor,
    store: kube::runtime::reflector::Store<ReplicaSet>,
    own: impl futures::Stream<Item = ObjectRef<ReplicaSet>> + Send + 'static,
    pods: impl futures::Stream<Item = ObjectRef<ReplicaSet>> + Send + 'static,
) -> Task {
    let component = match flavor {
        replicaset::Flavor::ReplicaSet => "replicaset-controller",
        replicaset::Flavor::ReplicationController => "replication-controller",
    };
    let ctx = Arc::new(replicaset::Ctx {
        flavor,
        client: client.clone(),
        pods: inf.pods.reader(),
        replicasets: store,
        recorder: Recorder::start(client.clone(), component),
        expectations: Default::default(),
        retries: Default::default(),
    });
    Box::pin(replicaset::run(
        ctx,
        futures::stream::select(own, pods),
        resync_ticks(),
    ))
}

fn start_deployment(client: &Client, inf: &mut Informers) -> Task {
    let own = inf
        .deployments
        .subscribe(|d: &Deployment| vec![ObjectRef::from_obj(d)]);
    let rss = inf
        .replicasets
        .subscribe(deployment::rs_owners(inf.deployments.reader()));
    let pods = inf
        .pods
        .subscribe(deployment::pod_owners(inf.replicasets.reader()));
    let ctx = Arc::new(deployment::Ctx {
        client: client.clone(),
        pods: inf.pods.reader(),
        replicasets: inf.replicasets.reader(),
        deployments: inf.deployments.reader(),
        recorder: Recorder::start(client.clone(), "deployment-controller"),
        retries: Default::default(),
    });
    let triggers = futures::stream::select_all([own.boxed(), rss.boxed(), pods.boxed()]);
    Box::pin(deployment::run(ctx, triggers, resync_ticks()))
}

fn start_daemonset(client: &Client, inf: &mut Informers) -> Task {
    let own = inf
        .daemonsets
        .subscribe(|d: &DaemonSet| vec![ObjectRef::from_obj(d)]);
    let pods = inf.pods.subscribe(daemonset::pod_owner);
    let nodes = inf
        .nodes
        .subscribe_with_deletions(daemonset::node_daemonsets(inf.daemonsets.reader()));
    let ctx = Arc::new(daemonset::Ctx {
        client: client.clone(),
        pods: inf.pods.reader(),
        nodes: inf.nodes.reader(),
        daemonsets: inf.daemonsets.reader(),
        revisions: inf.revisions.reader(),
        recorder: Recorder::start(client.clone(), "daemonset-controller"),
        expectations: Default::default(),
        retries: Default::default(),
    });
    let triggers = futures::stream::select_all([own.boxed(), pods.boxed(), nodes.boxed()]);
    Box::pin(daemonset::run(ctx, triggers, resync_ticks()))
}

fn start_namespace(client: &Client, inf: &mut Informers) -> Task {
    let own = inf
        .namespaces
        .subscribe(|n: &Namespace| vec![ObjectRef::from_obj(n)]);
    let ctx = Arc::new(namespace::Ctx {
        client: client.clone(),
        namespaces: inf.namespaces.reader(),
        retries: Default::default(),
    });
    Box::pin(namespace::run(ctx, own, resync_ticks()))
}

fn start_serviceaccount(client: &Client, inf: &mut Informers) -> Task {
    let own = inf
        .namespaces
        .subscribe(|n: &Namespace| vec![ObjectRef::from_obj(n)]);
    let sas = inf.serviceaccounts.subscribe(serviceaccount::sa_namespace);
    let ctx = Arc::new(serviceaccount::Ctx {
        client: client.clone(),
        namespaces: inf.namespaces.reader(),
        serviceaccounts: inf.serviceaccounts.reader(),
        retries: Default::default(),
    });
    Box::pin(serviceaccount::run(
        ctx,
        futures::stream::select(own, sas),
        resync_ticks(),
    ))
}

fn start_clusterrole_aggregation(client: &Client, inf: &mut Informers) -> Task {
    let roles = inf.clusterroles.reader();
    let triggers = inf
        .clusterroles
        .subscribe_with_deletions(clusterroleaggregation::aggregators(roles.clone()));
    let ctx = Arc::new(clusterroleaggregation::Ctx {
        client: client.clone(),
        roles,
        retries: Default::default(),
    });
    Box::pin(clusterroleaggregation::run(ctx, triggers, resync_ticks()))
}

fn start_job(client: &Client, inf: &mut Informers) -> Task {
    let own = inf.jobs.subscribe(|j: &Job| vec![ObjectRef::from_obj(j)]);
    let pods = inf.pods.subscribe_with_deletions(|p, _| job::pod_owner(p));
    let ctx = Arc::new(job::Ctx {
        client: client.clone(),
        pods: inf.pods.reader(),
        jobs: inf.jobs.reader(),
        recorder: Recorder::start(client.clone(), "job-controller"),
        expectations: Default::default(),
        retries: Default::default(),
        backoff: job::policy::Backoff::new(inf.settings.job_backoff),
        released: Default::default(),
    });
    let orphan_ctx = Arc::new(job::orphans::Ctx {
        client: client.clone(),
        pods: inf.pods.reader(),
        jobs: inf.jobs.reader(),
    });
    let orphan_pods = inf.pods.subscribe(job::orphans::pod_key);
    let ended_jobs = inf
        .jobs
        .subscribe_with_deletions(job::orphans::job_pods(inf.pods.reader()));
    Box::pin(async move {
        futures::join!(
            job::run(ctx, futures::stream::select(own, pods), resync_ticks()),
            job::orphans::run(
                orphan_ctx,
                futures::stream::select(orphan_pods, ended_jobs),
                resync_ticks(),
            ),
        );
    })
}

fn start_ttl_after_finished(client: &Client, inf: &mut Informers) -> Task {
    let own = inf.jobs.subscribe(|j: &Job| vec![ObjectRef::from_obj(j)]);
    let ctx = Arc::new(job::ttl::Ctx {
        client: client.clone(),
        jobs: inf.jobs.reader(),
        retries: Default::default(),
    });
    Box::pin(job::ttl::run(ctx, own, resync_ticks()))
}

fn start_cronjob(client: &Client, inf: &mut Informers) -> Task {
    let own = inf
        .cronjobs
        .subscribe(|c: &CronJob| vec![ObjectRef::from_obj(c)]);
    let jobs = inf
        .jobs
        .subscribe_with_deletions(|j, _| cronjob::job_owner(j));
    let ctx = Arc::new(cronjob::Ctx {
        client: client.clone(),
        jobs: inf.jobs.reader(),
        cronjobs: inf.cronjobs.reader(),
        recorder: Recorder::start(client.clone(), "cronjob-controller"),
        retries: Default::default(),
    });
    Box::pin(cronjob::run(
        ctx,
        futures::stream::select(own, jobs),
        resync_ticks(),
    ))
}

fn start_statefulset(client: &Client, inf: &mut Informers) -> Task {
    let own = inf
        .statefulsets
        .subscribe(|s: &StatefulSet| vec![ObjectRef::from_obj(s)]);
    let pods = inf
        .pods
        .subscribe_with_deletions(|p, _| statefulset::pod_owner(p));
    let ctx = Arc::new(statefulset::Ctx {
        client: client.clone(),
        pods: inf.pods.reader(),
        statefulsets: inf.statefulsets.reader(),
        revisions: inf.revisions.reader(),
        recorder: Recorder::start(client.clone(), "statefulset-controller"),
        retries: Default::default(),
    });
    Box::pin(statefulset::run(
        ctx,
        futures::stream::select(own, pods),
        resync_ticks(),
    ))
}

fn start_garbagecollector(client: &Client, _inf: &mut Informers) -> Task {
    // Its own metadata-only watches of every resource, not the shared typed caches.
    Box::pin(garbagecollector::run(client.clone()))
}

fn start_endpointslice(client: &Client, inf: &mut Informers) -> Task {
    let ctx = Arc::new(endpointslice::Ctx {
        client: client.clone(),
        services: inf.services.reader(),
        pods: inf.pods.reader(),
        slices: inf.endpointslices.reader(),
        nodes: inf.nodes.reader(),
        tracker: Default::default(),
        triggers: Default::default(),
        retries: Default::default(),
    });
    let own = {
        let ctx = ctx.clone();
        inf.services
            .subscribe_with_deletions(move |s: &Service, deleted| {
                if deleted {
                    let key = runner::key_of(s);
                    ctx.tracker.forget(&key);
                    ctx.triggers.forget(&key);
                }
                vec![ObjectRef::from_obj(s)]
            })
    };
    let pods = inf.pod_services();
    let slices = inf
        .endpointslices
        .subscribe_with_deletions(|s, _| endpointslice::slice_service(s));
    let triggers = futures::stream::select_all([own.boxed(), pods.boxed(), slices.boxed()]);
    Box::pin(endpointslice::run(ctx, triggers, resync_ticks()))
}

fn start_endpoints(client: &Client, inf: &mut Informers) -> Task {
    let ctx = Arc::new(endpoints::Ctx {
        client: client.clone(),
        services: inf.services.reader(),
        pods: inf.pods.reader(),
        endpoints: inf.endpoints.reader(),
        retries: Default::default(),
    });
    let own = inf
        .services
        .subscribe(|s: &Service| vec![ObjectRef::from_obj(s)]);
    let deleted = inf
        .services
        .subscribe_with_deletions(|s: &Service, deleted| {
            let selected = s.spec.as_ref().is_some_and(|sp| sp.selector.is_some());
            if deleted && selected {
                vec![ObjectRef::from_obj(s)]
            } else {
                Vec::new()
            }
        });
    let pods = inf.pod_services();
    let eps = inf.endpoints.subscribe(endpoints::endpoints_service);
    let triggers = futures::stream::select_all([own.boxed(), pods.boxed(), eps.boxed()]);
    Box::pin(endpoints::run(ctx, triggers, deleted, resync_ticks()))
}

fn start_endpointslicemirroring(client: &Client, inf: &mut Informers) -> Task {
    let ctx = Arc::new(endpointslicemirroring::Ctx {
        client: client.clone(),
        services: inf.services.reader(),
        endpoints: inf.endpoints.reader(),
        slices: inf.endpointslices.reader(),
        tracker: Default::default(),
        retries: Default::default(),
    });
    let own = inf
        .endpoints
        .subscribe(|e: &Endpoints| vec![ObjectRef::from_obj(e)]);
    let services = inf
        .services
        .subscribe(endpointslicemirroring::service_endpoints);
    let slices = inf
        .endpointslices
        .subscribe(endpointslicemirroring::slice_endpoints);
    let triggers = futures::stream::select_all([own.boxed(), services.boxed(), slices.boxed()]);
    Box::pin(endpointslicemirroring::run(ctx, triggers, resync_ticks()))
}

fn start_nodelifecycle(client: &Client, inf: &mut Informers) -> Task {
    let ctx = Arc::new(nodelifecycle::Ctx {
        client: client.clone(),
        nodes: inf.nodes.reader(),
        leases: inf.leases.reader(),
        pods: inf.pods.reader(),
        settings: inf.settings.node_lifecycle.clone(),
    });
    Box::pin(nodelifecycle::run(ctx))
}

fn start_taint_eviction(client: &Client, inf: &mut Informers) -> Task {
    let own = inf.nodes.subscribe(|n: &Node| vec![ObjectRef::from_obj(n)]);
    let pods = inf.pods.subscribe(nodelifecycle::eviction::pod_node);
    let ctx = Arc::new(nodelifecycle::eviction::Ctx {
        client: client.clone(),
        nodes: inf.nodes.reader(),
        pods: inf.pods.reader(),
        recorder: Recorder::start(client.clone(), "taint-eviction-controller"),
        retries: Default::default(),
    });
    Box::pin(nodelifecycle::eviction::run(
        ctx,
        futures::stream::select(own, pods),
        resync_ticks(),
    ))
}

fn start_podgc(client: &Client, inf: &mut Informers) -> Task {
    let ctx = Arc::new(nodelifecycle::podgc::Ctx {
        client: client.clone(),
        nodes: inf.nodes.reader(),
        pods: inf.pods.reader(),
        terminated_threshold: inf.settings.terminated_pod_gc_threshold,
    });
    Box::pin(nodelifecycle::podgc::run(ctx))
}

fn start_disruption(client: &Client, inf: &mut Informers) -> Task {
    let own = inf
        .budgets
        .subscribe(|b: &PodDisruptionBudget| vec![ObjectRef::from_obj(b)]);
    let budgets = inf.budgets.reader();
    let pods = inf
        .pods
        .subscribe(move |p: &CachedPod| disruption::pod_budgets(&budgets, p));
    let ctx = Arc::new(disruption::Ctx {
        client: client.clone(),
        budgets: inf.budgets.reader(),
        pods: inf.pods.reader(),
        replicasets: inf.replicasets.reader(),
        deployments: inf.deployments.reader(),
        statefulsets: inf.statefulsets.reader(),
        retries: Default::default(),
    });
    Box::pin(disruption::run(
        ctx,
        futures::stream::select(own, pods),
        resync_ticks(),
    ))
}

fn start_resourcequota(client: &Client, inf: &mut Informers) -> Task {
    let own = inf
        .quotas
        .subscribe(|q: &ResourceQuota| vec![ObjectRef::from_obj(q)]);
    let quotas = inf.quotas.reader();
    let pods = inf.pods.subscribe_with_deletions(move |p: &CachedPod, _| {
        resourcequota::namespace_quotas(&quotas, p.metadata.namespace.as_deref())
    });
    let quotas = inf.quotas.reader();
    let services = inf
        .services
        .subscribe_with_deletions(move |s: &Service, _| {
            resourcequota::namespace_quotas(&quotas, s.metadata.namespace.as_deref())
        });
    let ctx = Arc::new(resourcequota::Ctx {
        client: client.clone(),
        quotas: inf.quotas.reader(),
        pods: inf.pods.reader(),
        services: inf.services.reader(),
        retries: Default::default(),
        decreases: Default::default(),
    });
    let triggers = futures::stream::select_all([own.boxed(), pods.boxed(), services.boxed()]);
    Box::pin(resourcequota::run(ctx, triggers, resync_ticks()))
}

fn volume_ctx(client: &Client, inf: &mut Informers, component: &str) -> Arc<volume::Ctx> {
    Arc::new(volume::Ctx {
        client: client.clone(),
        claims: inf.claims.reader(),
        volumes: inf.volumes.reader(),
        classes: inf.storageclasses.reader(),
        nodes: inf.nodes.reader(),
        pods: inf.pods.reader(),
        recorder: Recorder::start(client.clone(), component),
        retries: Default::default(),
    })
}

fn start_volume_binder(client: &Client, inf: &mut Informers) -> Task {
    let ctx = volume_ctx(client, inf, "persistentvolume-controller");
    let own_claims = inf
        .claims
        .subscribe(|c: &PersistentVolumeClaim| vec![ObjectRef::from_obj(c)]);
    let volume_claims = inf.volumes.subscribe(volume::volume_claim);
    // A volume that becomes Available may suit any waiting claim.
    let claims = inf.claims.reader();
    let freed = inf.volumes.subscribe(move |_: &PersistentVolume| {
        claims
            .state()
            .iter()
            .filter(|c| {
                c.spec
                    .as_ref()
                    .and_then(|s| s.volume_name.as_deref())
                    .is_none_or(str::is_empty)
            })
            .map(|c| ObjectRef::from_obj(c.as_ref()))
            .collect()
    });
    let own_volumes = inf
        .volumes
        .subscribe_with_deletions(|v: &PersistentVolume, _| vec![ObjectRef::from_obj(v)]);
    let claim_volumes = inf
        .claims
        .subscribe_with_deletions(|c: &PersistentVolumeClaim, _| volume::claim_volume(c));
    let claim_triggers =
        futures::stream::select_all([own_claims.boxed(), volume_claims.boxed(), freed.boxed()]);
    let volume_triggers = futures::stream::select(own_volumes, claim_volumes);
    let claims = volume::run_claims(ctx.clone(), claim_triggers, resync_ticks());
    let volumes = volume::run_volumes(ctx, volume_triggers, resync_ticks());
    Box::pin(async move {
        futures::future::join(claims, volumes).await;
    })
}

fn start_claim_protection(client: &Client, inf: &mut Informers) -> Task {
    let ctx = volume_ctx(client, inf, "pvc-protection-controller");
    let own = inf
        .claims
        .subscribe(|c: &PersistentVolumeClaim| vec![ObjectRef::from_obj(c)]);
    let pods = inf
        .pods
        .subscribe_with_deletions(|p: &CachedPod, _| volume::pod_claims(p));
    Box::pin(volume::run_claim_protection(
        ctx,
        futures::stream::select(own, pods),
        resync_ticks(),
    ))
}

fn start_volume_protection(client: &Client, inf: &mut Informers) -> Task {
    let ctx = volume_ctx(client, inf, "pv-protection-controller");
    let own = inf
        .volumes
        .subscribe(|v: &PersistentVolume| vec![ObjectRef::from_obj(v)]);
    Box::pin(volume::run_volume_protection(ctx, own, resync_ticks()))
}

fn start_servicelb(client: &Client, inf: &mut Informers) -> Task {
    let own = inf.services.subscribe(|s: &Service| {
        if servicelb::is_ours(s) {
            vec![ObjectRef::from_obj(s)]
        } else {
            Vec::new()
        }
    });
    let services = inf.services.reader();
    let nodes = inf
        .nodes
        .subscribe(move |_: &Node| servicelb::all_ours(&services));
    let slices = inf.endpointslices.subscribe(servicelb::slice_service);
    let ctx = Arc::new(servicelb::Ctx {
        client: client.clone(),
        services: inf.services.reader(),
        nodes: inf.nodes.reader(),
        slices: inf.endpointslices.reader(),
        retries: Default::default(),
    });
    let triggers = futures::stream::select_all([own.boxed(), nodes.boxed(), slices.boxed()]);
    Box::pin(servicelb::run(ctx, triggers, resync_ticks()))
}

type Starter = fn(&Client, &mut Informers) -> Task;

/// Every controller, by its `--controllers` name.
const STARTERS: &[(&str, Starter)] = &[
    ("replicaset", start_replicaset),
    ("replicationcontroller", start_replicationcontroller),
    ("deployment", start_deployment),
    ("serviceaccount", start_serviceaccount),
    ("daemonset", start_daemonset),
    ("namespace", start_namespace),
    ("job", start_job),
    ("ttl-after-finished", start_ttl_after_finished),
    ("cronjob", start_cronjob),
    ("statefulset", start_statefulset),
    ("garbagecollector", start_garbagecollector),
    ("endpointslice", start_endpointslice),
    ("endpoints", start_endpoints),
    ("endpointslicemirroring", start_endpointslicemirroring),
    ("nodelifecycle", start_nodelifecycle),
    ("taint-eviction-controller", start_taint_eviction),
    ("podgc", start_podgc),
    ("disruption", start_disruption),
    ("resourcequota", start_resourcequota),
    ("persistentvolume-binder", start_volume_binder),
    ("pvc-protection", start_claim_protection),
    ("pv-protection", start_volume_protection),
    ("servicelb", start_servicelb),
    ("clusterrole-aggregation", start_clusterrole_aggregation),
];

impl Informers {
    fn new(client: &Client, settings: Settings) -> Self {
        Informers {
            settings,
            pods: informer::Informer::converting(Api::all(client.clone()), CachedPod::from),
            replicasets: informer::Informer::new(Api::all(client.clone())),
            replicationcontrollers: informer::Informer::converting(
                Api::all(client.clone()),
                replicaset::rc::to_replica_set,
            ),
            deployments: informer::Informer::new(Api::all(client.clone())),
            namespaces: informer::Informer::new(Api::all(client.clone())),
            serviceaccounts: informer::Informer::new(Api::all(client.clone())),
            nodes: informer::Informer::new(Api::all(client.clone())),
            daemonsets: informer::Informer::new(Api::all(client.clone())),
            jobs: informer::Informer::new(Api::all(client.clone())),
            cronjobs: informer::Informer::new(Api::all(client.clone())),
            statefulsets: informer::Informer::new(Api::all(client.clone())),
            revisions: informer::Informer::new(Api::all(client.clone())),
            services: informer::Informer::new(Api::all(client.clone())),
            endpoints: informer::Informer::new(Api::all(client.clone())),
            endpointslices: informer::Informer::new(Api::all(client.clone())),
            leases: informer::Informer::new(Api::namespaced(client.clone(), "kube-node-lease")),
            budgets: informer::Informer::new(Api::all(client.clone())),
            quotas: informer::Informer::new(Api::all(client.clone())),
            claims: informer::Informer::new(Api::all(client.clone())),
            volumes: informer::Informer::new(Api::all(client.clone())),
            storageclasses: informer::Informer::new(Api::all(client.clone())),
            clusterroles: informer::Informer::new(Api::all(client.clone())),
            pod_service_listeners: None,
        }
    }

    /// The Services each pod event wakes (matched now or before), for the endpoint
    /// controllers: the selectors are matched once per event whoever listens.
    fn pod_services(&mut self) -> impl futures::Stream<Item = ObjectRef<Service>> + Send + 'static {
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        match &self.pod_service_listeners {
            Some(listeners) => listeners.lock().push(tx),
            None => {
                let listeners: ServiceListeners = Arc::new(parking_lot::Mutex::new(vec![tx]));
                let membership = endpointslice::membership::Membership::new(self.services.reader());
                let sinks = listeners.clone();
                let keys = self.pods.subscribe_with_deletions(move |p, deleted| {
                    let services = membership.touched(p, deleted);
                    for sink in sinks.lock().iter() {
                        for s in &services {
                            // Err: that controller stopped; the others go on.
                            let _ = sink.send(s.clone());
                        }
                    }
                    Vec::<ObjectRef<Service>>::new()
                });
                // The subscription's own stream carries nothing: the sinks above do.
                drop(keys);
                self.pod_service_listeners = Some(listeners);
            }
        }
        tokio_stream::wrappers::UnboundedReceiverStream::new(rx)
    }

    /// Starts the watches some controller uses, one after another, each listed once
    /// before the next starts.
    async fn start_used(self) -> Vec<tokio::task::JoinHandle<()>> {
        let started = [
            self.pods.start_if_used("pods").await,
            self.replicasets.start_if_used("replicasets").await,
            self.replicationcontrollers
                .start_if_used("replicationcontrollers")
                .await,
            self.nodes.start_if_used("nodes").await,
            self.daemonsets.start_if_used("daemonsets").await,
            self.deployments.start_if_used("deployments").await,
            self.namespaces.start_if_used("namespaces").await,
            self.serviceaccounts.start_if_used("serviceaccounts").await,
            self.jobs.start_if_used("jobs").await,
            self.cronjobs.start_if_used("cronjobs").await,
            self.revisions.start_if_used("controllerrevisions").await,
            self.statefulsets.start_if_used("statefulsets").await,
            self.services.start_if_used("services").await,
            self.endpoints.start_if_used("endpoints").await,
            self.endpointslices.start_if_used("endpointslices").await,
            self.leases.start_if_used("leases").await,
            self.budgets.start_if_used("poddisruptionbudgets").await,
            self.quotas.start_if_used("resourcequotas").await,
            self.storageclasses.start_if_used("storageclasses").await,
            self.volumes.start_if_used("persistentvolumes").await,
            self.claims.start_if_used("persistentvolumeclaims").await,
            self.clusterroles.start_if_used("clusterroles").await,
        ];
        started.into_iter().flatten().collect()
    }
}

/// Runs the selected controllers until the process stops. Only the caches some selected
/// controller reads are watched.
pub async fn run(client: Client, selection: &Selection, settings: Settings) {
    let mut inf = Informers::new(&client, settings);
    let controllers: Vec<Task> = STARTERS
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
