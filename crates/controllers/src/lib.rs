//! cairn's controller manager: level-triggered reconcilers that make the cluster match
//! what its objects ask for, each a kube-runtime `Controller` over shared list-watch
//! caches ([`informer`]), with expectations ([`expectations`]) and rate-limited retries
//! ([`retry`]). They are clients of any Kubernetes API server: `cairn-control serve`
//! runs them in-process, `cairn-control controllers --kubeconfig F` alone.

pub mod cached_pod;
pub mod daemonset;
pub mod deployment;
pub mod expectations;
pub mod informer;
pub mod namespace;
pub mod owner;
pub mod replicaset;
pub mod retry;
pub mod runner;
pub mod select;
pub mod serviceaccount;

use std::sync::Arc;
use std::time::Duration;

use cairn_events::Recorder;
use futures::StreamExt;
use k8s_openapi::api::apps::v1::{DaemonSet, Deployment, ReplicaSet};
use k8s_openapi::api::core::v1::{Namespace, Node, Pod, ServiceAccount};
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

/// The shared caches every controller reads.
struct Informers {
    pods: informer::Informer<Pod, CachedPod>,
    replicasets: informer::Informer<ReplicaSet>,
    deployments: informer::Informer<Deployment>,
    namespaces: informer::Informer<Namespace>,
    serviceaccounts: informer::Informer<ServiceAccount>,
    nodes: informer::Informer<Node>,
    daemonsets: informer::Informer<DaemonSet>,
}

type Task = futures::future::BoxFuture<'static, ()>;

/// Waits until the store holds its first full list. One waiter per store: kube-runtime's
/// readiness signal wakes only the last task that polled it, so concurrent waiters
/// could sleep forever.
async fn ready<K>(store: &kube::runtime::reflector::Store<K>)
where
    K: kube::Resource + Clone + Send + Sync + 'static,
    K::DynamicType: Eq + std::hash::Hash + Clone + Send + Sync,
{
    // Err only when the writer is dropped, i.e. the process is stopping.
    let _ = store.wait_until_ready().await;
}

fn start_replicaset(client: &Client, inf: &mut Informers) -> Task {
    let own = inf
        .replicasets
        .subscribe(|rs: &ReplicaSet| vec![ObjectRef::from_obj(rs)]);
    let pods = inf
        .pods
        .subscribe(replicaset::pod_owners(inf.replicasets.store.clone()));
    let ctx = Arc::new(replicaset::Ctx {
        client: client.clone(),
        pods: inf.pods.store.clone(),
        replicasets: inf.replicasets.store.clone(),
        recorder: Recorder::start(client.clone(), "replicaset-controller"),
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
        .subscribe(deployment::rs_owners(inf.deployments.store.clone()));
    let pods = inf
        .pods
        .subscribe(deployment::pod_owners(inf.replicasets.store.clone()));
    let ctx = Arc::new(deployment::Ctx {
        client: client.clone(),
        pods: inf.pods.store.clone(),
        replicasets: inf.replicasets.store.clone(),
        deployments: inf.deployments.store.clone(),
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
        .subscribe_with_deletions(daemonset::node_daemonsets(inf.daemonsets.store.clone()));
    let ctx = Arc::new(daemonset::Ctx {
        client: client.clone(),
        pods: inf.pods.store.clone(),
        nodes: inf.nodes.store.clone(),
        daemonsets: inf.daemonsets.store.clone(),
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
        namespaces: inf.namespaces.store.clone(),
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
        namespaces: inf.namespaces.store.clone(),
        serviceaccounts: inf.serviceaccounts.store.clone(),
        retries: Default::default(),
    });
    Box::pin(serviceaccount::run(
        ctx,
        futures::stream::select(own, sas),
        resync_ticks(),
    ))
}

/// Runs the selected controllers until the process stops. Only the caches some selected
/// controller reads are watched.
pub async fn run(client: Client, selection: &Selection) {
    let mut inf = Informers {
        pods: informer::Informer::converting(Api::all(client.clone()), CachedPod::from),
        replicasets: informer::Informer::new(Api::all(client.clone())),
        deployments: informer::Informer::new(Api::all(client.clone())),
        namespaces: informer::Informer::new(Api::all(client.clone())),
        serviceaccounts: informer::Informer::new(Api::all(client.clone())),
        nodes: informer::Informer::new(Api::all(client.clone())),
        daemonsets: informer::Informer::new(Api::all(client.clone())),
    };
    let mut controllers: Vec<Task> = Vec::new();
    let (rs, deploy, sa, ds) = (
        selection.enabled("replicaset"),
        selection.enabled("deployment"),
        selection.enabled("serviceaccount"),
        selection.enabled("daemonset"),
    );
    let ns = selection.enabled("namespace");
    if rs {
        controllers.push(start_replicaset(&client, &mut inf));
    }
    if deploy {
        controllers.push(start_deployment(&client, &mut inf));
    }
    if sa {
        controllers.push(start_serviceaccount(&client, &mut inf));
    }
    if ds {
        controllers.push(start_daemonset(&client, &mut inf));
    }
    if ns {
        controllers.push(start_namespace(&client, &mut inf));
    }
    let mut informers = Vec::new();
    let stores = (
        inf.pods.store.clone(),
        inf.replicasets.store.clone(),
        inf.deployments.store.clone(),
        inf.namespaces.store.clone(),
        inf.serviceaccounts.store.clone(),
    );
    let (node_store, ds_store) = (inf.nodes.store.clone(), inf.daemonsets.store.clone());
    if rs || deploy || ds {
        informers.push(inf.pods.start("pods"));
        ready(&stores.0).await;
    }
    if rs || deploy {
        informers.push(inf.replicasets.start("replicasets"));
        ready(&stores.1).await;
    }
    if ds {
        informers.push(inf.nodes.start("nodes"));
        informers.push(inf.daemonsets.start("daemonsets"));
        ready(&node_store).await;
        ready(&ds_store).await;
    }
    if deploy {
        informers.push(inf.deployments.start("deployments"));
        ready(&stores.2).await;
    }
    if sa || ns {
        informers.push(inf.namespaces.start("namespaces"));
        ready(&stores.3).await;
    }
    if sa {
        informers.push(inf.serviceaccounts.start("serviceaccounts"));
        ready(&stores.4).await;
    }
    // Only now: counting replicas against a half-listed cache would create pods twice.
    info!(controllers = ?selection.names(), "controllers started");
    futures::future::join(
        futures::future::join_all(controllers),
        futures::future::join_all(informers),
    )
    .await;
}
