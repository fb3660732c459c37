//! The built-in service load balancer for bare-metal nodes (what k3s users know as
//! ServiceLB): a `LoadBalancer` Service without a `loadBalancerClass` gets
//! `status.loadBalancer.ingress` = the InternalIP of each Ready node that exposes it —
//! every schedulable Ready node, or under `externalTrafficPolicy: Local` only those with a
//! ready endpoint of the service. The proxy on each node accepts traffic to those
//! addresses on the service's ports.

use crate::wiring::{resync_ticks, Informers, Task};
use futures::StreamExt;
use std::collections::BTreeSet;
use std::sync::Arc;

use futures::Stream;
use k8s_openapi::api::core::v1::{Node, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::controller::Action;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Client, ResourceExt};
use serde_json::json;
use thiserror::Error;

use crate::reconcile_loop::key_of;

#[derive(Debug, Error)]
#[error("service-lb controller, service {service}: writing its status: {source}")]
pub struct Error {
    service: String,
    #[source]
    source: kube::Error,
}

pub struct Ctx {
    pub client: Client,
    pub services: Store<Service>,
    pub nodes: Store<Node>,
    pub slices: Store<EndpointSlice>,
}

/// Whether this controller serves the Service.
pub fn is_ours(s: &Service) -> bool {
    let spec = s.spec.as_ref();
    spec.and_then(|s| s.type_.as_deref()) == Some("LoadBalancer")
        && spec
            .and_then(|s| s.load_balancer_class.as_deref())
            .is_none()
}

/// Every Service of ours (a node change can move any of them).
pub fn all_ours(services: &Store<Service>) -> Vec<ObjectRef<Service>> {
    services
        .state()
        .iter()
        .filter(|s| is_ours(s))
        .map(|s| ObjectRef::from_obj(s.as_ref()))
        .collect()
}

/// The Service a slice belongs to.
pub fn slice_service(s: &EndpointSlice) -> Vec<ObjectRef<Service>> {
    let name = s
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get("kubernetes.io/service-name"));
    match (name, s.metadata.namespace.as_deref()) {
        (Some(n), Some(ns)) => vec![ObjectRef::new(n).within(ns)],
        _ => Vec::new(),
    }
}

fn node_ready(n: &Node) -> bool {
    let ready = n
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"));
    ready && n.spec.as_ref().and_then(|s| s.unschedulable) != Some(true)
}

fn internal_ip(n: &Node) -> Option<String> {
    let addrs = n.status.as_ref()?.addresses.as_ref()?;
    addrs
        .iter()
        .find(|a| a.type_ == "InternalIP")
        .map(|a| a.address.clone())
}

/// The InternalIP of every Ready, schedulable node, sorted: where node-wide listeners
/// (ServiceLB's addresses, the Ingress data plane) are reached.
pub fn node_addresses(nodes: &[Arc<Node>]) -> Vec<String> {
    let ips: BTreeSet<String> = nodes
        .iter()
        .filter(|n| node_ready(n))
        .filter_map(|n| internal_ip(n))
        .collect();
    ips.into_iter().collect()
}

/// The ingress addresses of `svc`, sorted.
pub fn ingress(svc: &Service, nodes: &[Arc<Node>], slices: &[Arc<EndpointSlice>]) -> Vec<String> {
    let local = svc
        .spec
        .as_ref()
        .and_then(|s| s.external_traffic_policy.as_deref())
        == Some("Local");
    let (ns, name) = (svc.namespace(), svc.name_any());
    // Only `Local` needs the endpoints' nodes (node heartbeats wake every LB service).
    let with_endpoints: BTreeSet<String> = if local {
        slices
            .iter()
            .filter(|s| s.metadata.namespace == ns)
            .filter(|s| {
                s.metadata
                    .labels
                    .as_ref()
                    .and_then(|l| l.get("kubernetes.io/service-name"))
                    == Some(&name)
            })
            .flat_map(|s| s.endpoints.iter())
            .filter(|e| e.conditions.as_ref().and_then(|c| c.ready).unwrap_or(true))
            .filter_map(|e| e.node_name.clone())
            .collect()
    } else {
        BTreeSet::new()
    };
    let ips: BTreeSet<String> = nodes
        .iter()
        .filter(|n| node_ready(n))
        .filter(|n| !local || with_endpoints.contains(&n.name_any()))
        .filter_map(|n| internal_ip(n))
        .collect();
    ips.into_iter().collect()
}

pub async fn run(
    ctx: Arc<Ctx>,
    triggers: impl Stream<Item = ObjectRef<Service>> + Send + 'static,
    resync: impl Stream<Item = ()> + Send + 'static,
) {
    let store = ctx.services.clone();
    crate::reconcile_loop::run("service-lb", store, triggers, resync, 2, ctx, reconcile).await;
}

#[tracing::instrument(skip_all, fields(service = %key_of(svc.as_ref())))]
async fn reconcile(svc: Arc<Service>, ctx: Arc<Ctx>) -> Result<Action, Error> {
    if !is_ours(&svc) || svc.metadata.deletion_timestamp.is_some() {
        return Ok(Action::await_change());
    }
    let want = ingress(&svc, &ctx.nodes.state(), &ctx.slices.state());
    let have: Vec<String> = svc
        .status
        .as_ref()
        .and_then(|s| s.load_balancer.as_ref())
        .and_then(|lb| lb.ingress.as_ref())
        .map(|i| i.iter().filter_map(|x| x.ip.clone()).collect())
        .unwrap_or_default();
    if want == have {
        return Ok(Action::await_change());
    }
    let entries: Vec<_> = want
        .iter()
        .map(|ip| json!({"ip": ip, "ipMode": "VIP"}))
        .collect();
    let patch = json!({"status": {"loadBalancer": {"ingress": entries}}});
    let api: Api<Service> =
        Api::namespaced(ctx.client.clone(), &svc.namespace().unwrap_or_default());
    api.patch_status(
        &svc.name_any(),
        &PatchParams::default(),
        &Patch::Merge(&patch),
    )
    .await
    .map_err(|source| Error {
        service: key_of(svc.as_ref()),
        source,
    })?;
    Ok(Action::await_change())
}

// What the controller watches and how events map to its keys (kube-runtime's
// `.owns()`/`.watches()`), with its context: `lib.rs` only lists it.

pub(crate) fn start(client: &Client, inf: &mut Informers) -> Task {
    let own = inf.services.subscribe(|s: &Service| {
        if is_ours(s) {
            vec![ObjectRef::from_obj(s)]
        } else {
            Vec::new()
        }
    });
    let services = inf.services.reader();
    let nodes = inf.nodes.subscribe(move |_: &Node| all_ours(&services));
    let slices = inf.endpointslices.subscribe(slice_service);
    let ctx = Arc::new(Ctx {
        client: client.clone(),
        services: inf.services.reader(),
        nodes: inf.nodes.reader(),
        slices: inf.endpointslices.reader(),
    });
    let triggers = futures::stream::select_all([own.boxed(), nodes.boxed(), slices.boxed()]);
    Box::pin(run(ctx, triggers, resync_ticks()))
}
