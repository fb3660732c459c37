//! The EndpointSlice controller (upstream `pkg/controller/endpointslice`): for every
//! Service with a selector, slices of at most 100 endpoints — one per selected pod with an
//! address, with ready/serving/terminating conditions, per-pod resolved ports, hostname,
//! node and zone — packed to keep churn low ([`pack`]), owned by the Service (the garbage
//! collector removes them with it). [`desired`] is shared with the Endpoints controller.

pub mod desired;
pub mod membership;
pub mod pack;
pub mod tracker;
pub mod trigger;

use crate::wiring::{resync_ticks, Informers, Task};
use futures::StreamExt;
use std::sync::Arc;
use std::time::Duration;

use futures::Stream;
use k8s_openapi::api::core::v1::{Node, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::api::{Api, DeleteParams, PostParams};
use kube::runtime::controller::Action;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Client, ResourceExt};
use thiserror::Error;

use crate::cached_pod::CachedPod;
use crate::reconcile_loop::key_of;

pub const MANAGED_BY: &str = "endpointslice.kubernetes.io/managed-by";
pub const CONTROLLER_NAME: &str = "endpointslice-controller.k8s.io";
pub const SERVICE_NAME: &str = "kubernetes.io/service-name";
pub const HEADLESS: &str = "service.kubernetes.io/headless";
pub const ZONE_LABEL: &str = "topology.kubernetes.io/zone";

#[derive(Debug, Error)]
#[error("endpointslice controller, service {service}: {action} slice {slice}: {source}")]
pub struct Error {
    service: String,
    action: &'static str,
    slice: String,
    #[source]
    source: kube::Error,
}

pub struct Ctx {
    pub client: Client,
    pub services: Store<Service>,
    pub pods: Store<CachedPod>,
    pub slices: Store<EndpointSlice>,
    pub nodes: Store<Node>,
    pub tracker: tracker::SliceTracker,
    pub triggers: trigger::TriggerTimes,
}

/// The `(namespace, service name)` of a slice that `manager` manages.
pub fn managed_by(slice: &EndpointSlice, manager: &str) -> Option<(String, String)> {
    let labels = slice.metadata.labels.as_ref()?;
    if labels.get(MANAGED_BY).map(String::as_str) != Some(manager) {
        return None;
    }
    Some((slice.namespace()?, labels.get(SERVICE_NAME)?.clone()))
}

/// A slice this controller manages wakes its Service.
pub fn slice_service(slice: &EndpointSlice) -> Vec<ObjectRef<Service>> {
    managed_by(slice, CONTROLLER_NAME)
        .map(|(ns, name)| ObjectRef::new(&name).within(&ns))
        .into_iter()
        .collect()
}

pub async fn run(
    ctx: Arc<Ctx>,
    triggers: impl Stream<Item = ObjectRef<Service>> + Send + 'static,
    resync: impl Stream<Item = ()> + Send + 'static,
) {
    let store = ctx.services.clone();
    crate::reconcile_loop::run("endpointslice", store, triggers, resync, 5, ctx, reconcile).await;
}

/// The pods a service selects, from the cache (`None`: the service has no selector, so
/// its endpoints are written by hand and mirrored, not managed here).
pub fn selected_pods(pods: &Store<CachedPod>, service: &Service) -> Option<Vec<Arc<CachedPod>>> {
    let spec = service.spec.as_ref()?;
    if spec.type_.as_deref() == Some("ExternalName") {
        return Some(Vec::new());
    }
    let selector = cairn_semantics::selector::Selector::from_map(spec.selector.as_ref()?);
    let ns = service.metadata.namespace.as_deref();
    let empty = Default::default();
    Some(
        pods.state()
            .into_iter()
            .filter(|p| p.metadata.namespace.as_deref() == ns)
            .filter(|p| selector.matches(p.metadata.labels.as_ref().unwrap_or(&empty)))
            .collect(),
    )
}

/// A node's zone label.
pub fn zone_of(nodes: &Store<Node>, node: &str) -> Option<String> {
    let node = nodes.get(&ObjectRef::new(node))?;
    node.metadata.labels.as_ref()?.get(ZONE_LABEL).cloned()
}

/// This controller's slices of `service`, and those of an older service of the same name.
fn slices_of(ctx: &Ctx, service: &Service) -> (Vec<EndpointSlice>, Vec<EndpointSlice>) {
    let ns = service.metadata.namespace.as_deref();
    let name = service.metadata.name.as_deref();
    let uid = service.metadata.uid.as_deref();
    let (mut mine, mut stale) = (Vec::new(), Vec::new());
    for slice in ctx.slices.state() {
        let labels = slice.metadata.labels.as_ref();
        let label = |k: &str| labels.and_then(|l| l.get(k)).map(String::as_str);
        if slice.metadata.namespace.as_deref() != ns
            || label(SERVICE_NAME) != name
            || label(MANAGED_BY) != Some(CONTROLLER_NAME)
        {
            continue;
        }
        let owners = slice.metadata.owner_references.iter().flatten();
        let owned = owners.into_iter().any(|o| Some(o.uid.as_str()) == uid);
        if owned {
            mine.push((*slice).clone());
        } else {
            stale.push((*slice).clone());
        }
    }
    (mine, stale)
}

async fn reconcile(service: Arc<Service>, ctx: Arc<Ctx>) -> Result<Action, Error> {
    let key = key_of(service.as_ref());
    if service.metadata.deletion_timestamp.is_some() {
        return Ok(Action::await_change());
    }
    let Some(pods) = selected_pods(&ctx.pods, &service) else {
        return Ok(Action::await_change());
    };
    let (existing, stale) = slices_of(&ctx, &service);
    if ctx.tracker.is_stale(&key, &existing) {
        // Our last writes are not in the cache yet: planning now would write them twice.
        return Ok(Action::requeue(Duration::from_millis(100)));
    }
    let refs: Vec<&CachedPod> = pods.iter().map(Arc::as_ref).collect();
    let zone = |node: &str| zone_of(&ctx.nodes, node);
    let desired = desired::groups(&service, &refs, &zone);
    let mut plan = pack::plan(&pack::Owner::of_service(&service), &existing, &desired);
    plan.delete.extend(stale);
    let observed = ctx.triggers.observe(&key, &service, &refs);
    trigger::stamp(&mut plan, observed.time);
    apply(&ctx, &service, plan).await?;
    ctx.triggers.commit(observed);
    Ok(Action::await_change())
}

/// Creates first, then updates, then deletes, so readers never see a service lose
/// endpoints in between.
async fn apply(ctx: &Ctx, service: &Service, plan: pack::Plan) -> Result<(), Error> {
    let key = key_of(service);
    let ns = service.namespace().unwrap_or_default();
    let api: Api<EndpointSlice> = Api::namespaced(ctx.client.clone(), &ns);
    let fail = |action, slice: &EndpointSlice| {
        let slice = slice
            .metadata
            .name
            .clone()
            .unwrap_or_else(|| "(new)".into());
        let service = key.clone();
        move |source| Error {
            service,
            action,
            slice,
            source,
        }
    };
    for slice in &plan.create {
        let created = api
            .create(&PostParams::default(), slice)
            .await
            .map_err(fail("creating", slice))?;
        ctx.tracker.wrote(&key, &created);
    }
    for slice in &plan.update {
        let name = slice.metadata.name.clone().unwrap_or_default();
        let updated = api
            .replace(&name, &PostParams::default(), slice)
            .await
            .map_err(fail("updating", slice))?;
        ctx.tracker.wrote(&key, &updated);
    }
    for slice in &plan.delete {
        let name = slice.metadata.name.clone().unwrap_or_default();
        match api.delete(&name, &DeleteParams::default()).await {
            Ok(_) => ctx.tracker.deleted(&key, &name),
            Err(kube::Error::Api(e)) if e.code == 404 => ctx.tracker.deleted(&key, &name),
            Err(e) => return Err(fail("deleting", slice)(e)),
        }
    }
    Ok(())
}

// What the controller watches and how events map to its keys (kube-runtime's
// `.owns()`/`.watches()`), with its context: `lib.rs` only lists it.

pub(crate) fn start(client: &Client, inf: &mut Informers) -> Task {
    let ctx = Arc::new(Ctx {
        client: client.clone(),
        services: inf.services.reader(),
        pods: inf.pods.reader(),
        slices: inf.endpointslices.reader(),
        nodes: inf.nodes.reader(),
        tracker: Default::default(),
        triggers: Default::default(),
    });
    let own = {
        let ctx = ctx.clone();
        inf.services
            .subscribe_with_deletions(move |s: &Service, deleted| {
                if deleted {
                    let key = crate::reconcile_loop::key_of(s);
                    ctx.tracker.forget(&key);
                    ctx.triggers.forget(&key);
                }
                vec![ObjectRef::from_obj(s)]
            })
    };
    let pods = inf.pod_services();
    let slices = inf
        .endpointslices
        .subscribe_with_deletions(|s, _| slice_service(s));
    let triggers = futures::stream::select_all([own.boxed(), pods.boxed(), slices.boxed()]);
    Box::pin(run(ctx, triggers, resync_ticks()))
}

#[cfg(test)]
mod tests;
