//! The shared list-watch caches the controllers read and subscribe to, and what every
//! controller's `start` returns. Each controller module declares its own watches and
//! event-to-key mappings in its `start`; `lib.rs` lists the controllers by name.

use std::sync::Arc;

use futures::StreamExt;
use k8s_openapi::api::apps::v1::{
    ControllerRevision, DaemonSet, Deployment, ReplicaSet, StatefulSet,
};
use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
use k8s_openapi::api::batch::v1::{CronJob, Job};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{
    ConfigMap, Endpoints, Namespace, Node, PersistentVolume, PersistentVolumeClaim, Pod,
    ReplicationController, ResourceQuota, Service, ServiceAccount,
};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::api::networking::v1::{Ingress, IngressClass};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::rbac::v1::ClusterRole;
use k8s_openapi::api::storage::v1::StorageClass;
use kube::api::Api;
use kube::runtime::reflector::ObjectRef;
use kube::Client;

use crate::cached_pod::CachedPod;
use crate::{informer, Settings, RESYNC};

/// Ticks every [`RESYNC`], starting one period from now.
pub(crate) fn resync_ticks() -> impl futures::Stream<Item = ()> + Send + 'static {
    tokio_stream::wrappers::IntervalStream::new(tokio::time::interval_at(
        tokio::time::Instant::now() + RESYNC,
        RESYNC,
    ))
    .map(|_| ())
}

/// The shared caches every controller reads.
pub(crate) struct Informers {
    pub(crate) settings: Settings,
    pub(crate) pods: informer::Informer<Pod, CachedPod>,
    pub(crate) replicasets: informer::Informer<ReplicaSet>,
    pub(crate) replicationcontrollers: informer::Informer<ReplicationController, ReplicaSet>,
    pub(crate) deployments: informer::Informer<Deployment>,
    pub(crate) namespaces: informer::Informer<Namespace>,
    pub(crate) serviceaccounts: informer::Informer<ServiceAccount>,
    pub(crate) nodes: informer::Informer<Node>,
    pub(crate) daemonsets: informer::Informer<DaemonSet>,
    pub(crate) jobs: informer::Informer<Job>,
    pub(crate) cronjobs: informer::Informer<CronJob>,
    pub(crate) statefulsets: informer::Informer<StatefulSet>,
    pub(crate) revisions: informer::Informer<ControllerRevision>,
    pub(crate) services: informer::Informer<Service>,
    pub(crate) endpoints: informer::Informer<Endpoints>,
    pub(crate) endpointslices: informer::Informer<EndpointSlice>,
    pub(crate) leases: informer::Informer<Lease>,
    pub(crate) budgets: informer::Informer<PodDisruptionBudget>,
    pub(crate) quotas: informer::Informer<ResourceQuota>,
    pub(crate) claims: informer::Informer<PersistentVolumeClaim>,
    pub(crate) volumes: informer::Informer<PersistentVolume>,
    pub(crate) storageclasses: informer::Informer<StorageClass>,
    pub(crate) clusterroles: informer::Informer<ClusterRole>,
    pub(crate) hpas: informer::Informer<HorizontalPodAutoscaler>,
    pub(crate) ingresses: informer::Informer<Ingress>,
    pub(crate) ingressclasses: informer::Informer<IngressClass>,
    /// Only the `kube-root-ca.crt` ConfigMaps (a field-selected watch).
    pub(crate) root_ca_configmaps: informer::Informer<ConfigMap>,
    /// Listeners of the services a pod event wakes (computed once for all of them).
    pod_service_listeners: Option<ServiceListeners>,
}

type ServiceListeners =
    Arc<parking_lot::Mutex<Vec<tokio::sync::mpsc::UnboundedSender<ObjectRef<Service>>>>>;

/// The ConfigMap the root CA publisher keeps in every namespace (the only ones its
/// informer watches).
pub(crate) const ROOT_CA_CONFIGMAP: &str = "kube-root-ca.crt";

/// A started controller: runs until the process stops.
pub(crate) type Task = futures::future::BoxFuture<'static, ()>;

impl Informers {
    pub(crate) fn new(client: &Client, settings: Settings) -> Self {
        Informers {
            settings,
            pods: informer::Informer::converting(Api::all(client.clone()), CachedPod::from),
            replicasets: informer::Informer::new(Api::all(client.clone())),
            replicationcontrollers: informer::Informer::converting(
                Api::all(client.clone()),
                crate::replicaset::rc::to_replica_set,
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
            hpas: informer::Informer::new(Api::all(client.clone())),
            ingresses: informer::Informer::new(Api::all(client.clone())),
            ingressclasses: informer::Informer::new(Api::all(client.clone())),
            root_ca_configmaps: informer::Informer::new(Api::all(client.clone())).with_config(
                kube::runtime::watcher::Config::default()
                    .fields(&format!("metadata.name={ROOT_CA_CONFIGMAP}")),
            ),
            pod_service_listeners: None,
        }
    }

    /// The Services each pod event wakes (matched now or before), for the endpoint
    /// controllers: the selectors are matched once per event whoever listens.
    pub(crate) fn pod_services(
        &mut self,
    ) -> impl futures::Stream<Item = ObjectRef<Service>> + Send + 'static {
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        match &self.pod_service_listeners {
            Some(listeners) => listeners.lock().push(tx),
            None => {
                let listeners: ServiceListeners = Arc::new(parking_lot::Mutex::new(vec![tx]));
                let membership =
                    crate::endpointslice::membership::Membership::new(self.services.reader());
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
    pub(crate) async fn start_used(self) -> Vec<tokio::task::JoinHandle<()>> {
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
            self.hpas.start_if_used("horizontalpodautoscalers").await,
            self.ingressclasses.start_if_used("ingressclasses").await,
            self.ingresses.start_if_used("ingresses").await,
            self.root_ca_configmaps
                .start_if_used("configmaps kube-root-ca.crt")
                .await,
        ];
        started.into_iter().flatten().collect()
    }
}
