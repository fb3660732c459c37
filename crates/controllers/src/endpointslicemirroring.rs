//! The EndpointSlice mirroring controller (upstream `pkg/controller/endpointslicemirroring`):
//! a Service without a selector gets its endpoints from an Endpoints object its user
//! writes; this mirrors those into EndpointSlices (managed by
//! `endpointslicemirroring-controller.k8s.io`, owned by the Endpoints), so readers of
//! slices such as the service proxy see them too. Endpoints the Endpoints controller wrote
//! carry `endpointslice.kubernetes.io/skip-mirror` and are left alone.

use crate::wiring::{resync_ticks, Informers, Task};
use futures::StreamExt;
use std::collections::BTreeMap;
use std::sync::Arc;

use futures::Stream;
use k8s_openapi::api::core::v1::{EndpointAddress, Endpoints, Service};
use k8s_openapi::api::discovery::v1::{Endpoint, EndpointConditions, EndpointPort, EndpointSlice};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::{Api, DeleteParams, PostParams};
use kube::runtime::controller::Action;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Client, ResourceExt};
use thiserror::Error;

use crate::endpoints::SKIP_MIRROR;
use crate::endpointslice::desired::{address_type, group_key, Group};
use crate::endpointslice::pack::{self, Owner};
use crate::endpointslice::{managed_by, MANAGED_BY, SERVICE_NAME};
use crate::reconcile_loop::key_of;

pub const MIRROR_CONTROLLER: &str = "endpointslicemirroring-controller.k8s.io";

#[derive(Debug, Error)]
#[error("endpointslice mirroring controller, endpoints {endpoints}: {action} a slice: {source}")]
pub struct Error {
    endpoints: String,
    action: &'static str,
    #[source]
    source: kube::Error,
}

pub struct Ctx {
    pub client: Client,
    pub services: Store<Service>,
    pub endpoints: Store<Endpoints>,
    pub slices: Store<EndpointSlice>,
    pub tracker: crate::endpointslice::tracker::SliceTracker,
}

/// A Service wakes its Endpoints (gaining or losing a selector changes what is mirrored).
pub fn service_endpoints(svc: &Service) -> Vec<ObjectRef<Endpoints>> {
    match svc.namespace() {
        Some(ns) => vec![ObjectRef::new(&svc.name_any()).within(&ns)],
        None => Vec::new(),
    }
}

/// A mirrored slice wakes the Endpoints it mirrors.
pub fn slice_endpoints(slice: &EndpointSlice) -> Vec<ObjectRef<Endpoints>> {
    managed_by(slice, MIRROR_CONTROLLER)
        .map(|(ns, name)| ObjectRef::new(&name).within(&ns))
        .into_iter()
        .collect()
}

pub async fn run(
    ctx: Arc<Ctx>,
    triggers: impl Stream<Item = ObjectRef<Endpoints>> + Send + 'static,
    resync: impl Stream<Item = ()> + Send + 'static,
) {
    let store = ctx.endpoints.clone();
    crate::reconcile_loop::run(
        "endpointslicemirroring",
        store,
        triggers,
        resync,
        5,
        ctx,
        reconcile,
    )
    .await;
}

fn owner(ep: &Endpoints) -> Owner {
    let name = ep.name_any();
    let mut labels = ep.metadata.labels.clone().unwrap_or_default();
    labels.remove(SKIP_MIRROR);
    labels.insert(SERVICE_NAME.into(), name.clone());
    labels.insert(MANAGED_BY.into(), MIRROR_CONTROLLER.into());
    Owner {
        namespace: ep.namespace().unwrap_or_default(),
        generate_name: format!("{name}-"),
        labels,
        reference: OwnerReference {
            api_version: "v1".into(),
            kind: "Endpoints".into(),
            name,
            uid: ep.uid().unwrap_or_default(),
            controller: Some(true),
            block_owner_deletion: Some(true),
        },
        placeholder: false,
    }
}

fn mirrored(a: &EndpointAddress, ready: bool) -> Endpoint {
    Endpoint {
        addresses: vec![a.ip.clone()],
        conditions: Some(EndpointConditions {
            ready: Some(ready),
            ..Default::default()
        }),
        hostname: a.hostname.clone(),
        node_name: a.node_name.clone(),
        target_ref: a.target_ref.clone(),
        ..Default::default()
    }
}

/// The groups the subsets of `ep` make.
pub fn groups(ep: &Endpoints) -> BTreeMap<String, Group> {
    let mut out: BTreeMap<String, Group> = BTreeMap::new();
    for subset in ep.subsets.iter().flatten() {
        let ports: Vec<EndpointPort> = subset
            .ports
            .iter()
            .flatten()
            .map(|p| EndpointPort {
                name: Some(p.name.clone().unwrap_or_default()),
                port: Some(p.port),
                protocol: Some(p.protocol.clone().unwrap_or_else(|| "TCP".into())),
                app_protocol: p.app_protocol.clone(),
            })
            .collect();
        let ready = subset.addresses.iter().flatten().map(|a| (a, true));
        let not_ready = subset
            .not_ready_addresses
            .iter()
            .flatten()
            .map(|a| (a, false));
        for (address, is_ready) in ready.chain(not_ready) {
            let kind = address_type(&address.ip);
            let group = out.entry(group_key(kind, &ports)).or_insert_with(|| Group {
                address_type: kind.to_string(),
                ports: ports.clone(),
                endpoints: Vec::new(),
            });
            group.endpoints.push(mirrored(address, is_ready));
        }
    }
    out
}

/// Whether `ep` is mirrored: its Service exists without a selector and nobody said skip.
fn wants_mirror(ctx: &Ctx, ep: &Endpoints) -> bool {
    let labels = ep.metadata.labels.as_ref();
    if labels.and_then(|l| l.get(SKIP_MIRROR)).map(String::as_str) == Some("true") {
        return false;
    }
    let ns = ep.namespace().unwrap_or_default();
    let svc = ctx
        .services
        .get(&ObjectRef::new(&ep.name_any()).within(&ns));
    svc.is_some_and(|s| s.spec.as_ref().is_some_and(|sp| sp.selector.is_none()))
}

async fn reconcile(ep: Arc<Endpoints>, ctx: Arc<Ctx>) -> Result<Action, Error> {
    let owner = owner(&ep);
    let existing: Vec<EndpointSlice> = ctx
        .slices
        .state()
        .iter()
        .filter(|s| {
            managed_by(s, MIRROR_CONTROLLER)
                == Some((ep.namespace().unwrap_or_default(), ep.name_any()))
        })
        .map(|s| (**s).clone())
        .collect();
    let key = key_of(ep.as_ref());
    if ctx.tracker.is_stale(&key, &existing) {
        // Our last writes are not in the cache yet: planning now would write them twice.
        return Ok(Action::requeue(std::time::Duration::from_millis(100)));
    }
    let desired = if wants_mirror(&ctx, &ep) && ep.metadata.deletion_timestamp.is_none() {
        groups(&ep)
    } else {
        BTreeMap::new()
    };
    let plan = pack::plan(&owner, &existing, &desired);
    let api: Api<EndpointSlice> = Api::namespaced(ctx.client.clone(), &owner.namespace);
    let fail = |action| {
        let endpoints = key_of(ep.as_ref());
        move |source| Error {
            endpoints,
            action,
            source,
        }
    };
    for slice in &plan.create {
        api.create(&PostParams::default(), slice)
            .await
            .map_err(fail("creating"))?;
    }
    for slice in &plan.update {
        let name = slice.metadata.name.clone().unwrap_or_default();
        api.replace(&name, &PostParams::default(), slice)
            .await
            .map_err(fail("updating"))?;
    }
    for slice in &plan.delete {
        let name = slice.metadata.name.clone().unwrap_or_default();
        match api.delete(&name, &DeleteParams::default()).await {
            Ok(_) => {}
            Err(kube::Error::Api(e)) if e.code == 404 => {}
            Err(e) => return Err(fail("deleting")(e)),
        }
    }
    Ok(Action::await_change())
}

// What the controller watches and how events map to its keys (kube-runtime's
// `.owns()`/`.watches()`), with its context: `lib.rs` only lists it.

pub(crate) fn start(client: &Client, inf: &mut Informers) -> Task {
    let ctx = Arc::new(Ctx {
        client: client.clone(),
        services: inf.services.reader(),
        endpoints: inf.endpoints.reader(),
        slices: inf.endpointslices.reader(),
        tracker: Default::default(),
    });
    let own = inf
        .endpoints
        .subscribe(|e: &Endpoints| vec![ObjectRef::from_obj(e)]);
    let services = inf.services.subscribe(service_endpoints);
    let slices = inf.endpointslices.subscribe(slice_endpoints);
    let triggers = futures::stream::select_all([own.boxed(), services.boxed(), slices.boxed()]);
    Box::pin(run(ctx, triggers, resync_ticks()))
}
