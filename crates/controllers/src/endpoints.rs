//! The Endpoints controller (upstream `pkg/controller/endpoint`): the legacy `Endpoints`
//! object of every Service with a selector — ready addresses and not-ready ones, grouped
//! into subsets of identical ports, capped at 1,000 addresses with the over-capacity
//! annotation, labelled so the mirroring controller leaves it alone. Deleted with its
//! Service. Services without a selector keep the Endpoints their users write.

use crate::wiring::{resync_ticks, Informers, Task};
use std::collections::BTreeMap;
use std::sync::Arc;

use cairn_semantics::pod_state;
use futures::{Stream, StreamExt};
use k8s_openapi::api::core::v1::{
    EndpointAddress, EndpointPort, EndpointSubset, Endpoints, Service,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, DeleteParams, PostParams};
use kube::runtime::controller::Action;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Client, ResourceExt};
use thiserror::Error;

use crate::cached_pod::CachedPod;
use crate::endpointslice::desired::{self, find_port, hostname, publishes_not_ready, target_ref};
use crate::endpointslice::{selected_pods, HEADLESS};
use crate::reconcile_loop::key_of;

pub const SKIP_MIRROR: &str = "endpointslice.kubernetes.io/skip-mirror";
pub const OVER_CAPACITY: &str = "endpoints.kubernetes.io/over-capacity";
pub const MAX_ADDRESSES: usize = 1000;

#[derive(Debug, Error)]
#[error("endpoints controller, service {service}: writing its Endpoints: {source}")]
pub struct Error {
    service: String,
    #[source]
    source: kube::Error,
}

pub struct Ctx {
    pub client: Client,
    pub services: Store<Service>,
    pub pods: Store<CachedPod>,
    pub endpoints: Store<Endpoints>,
}

/// The Endpoints of a Service wake it (hand edits are repaired).
pub fn endpoints_service(ep: &Endpoints) -> Vec<ObjectRef<Service>> {
    match ep.namespace() {
        Some(ns) => vec![ObjectRef::new(&ep.name_any()).within(&ns)],
        None => Vec::new(),
    }
}

pub async fn run(
    ctx: Arc<Ctx>,
    triggers: impl Stream<Item = ObjectRef<Service>> + Send + 'static,
    deleted_services: impl Stream<Item = ObjectRef<Service>> + Send + 'static,
    resync: impl Stream<Item = ()> + Send + 'static,
) {
    let cleanup = {
        let client = ctx.client.clone();
        deleted_services.for_each_concurrent(4, move |svc| delete_endpoints(client.clone(), svc))
    };
    let store = ctx.services.clone();
    let controller =
        crate::reconcile_loop::run("endpoints", store, triggers, resync, 5, ctx, reconcile);
    futures::future::join(controller, cleanup).await;
}

/// A deleted Service's Endpoints go with it.
async fn delete_endpoints(client: Client, svc: ObjectRef<Service>) {
    let ns = svc.namespace.clone().unwrap_or_default();
    let api: Api<Endpoints> = Api::namespaced(client, &ns);
    match api.delete(&svc.name, &DeleteParams::default()).await {
        Ok(_) => {}
        Err(kube::Error::Api(e)) if e.code == 404 => {}
        // The next resync cannot repair this (the Service is gone): say so.
        Err(e) => {
            tracing::warn!(service = %format!("{ns}/{}", svc.name), error = %e, "deleting the Endpoints of a deleted service")
        }
    }
}

/// One address and the ports it serves, before repacking.
struct Member {
    address: EndpointAddress,
    ready: bool,
    ports: Vec<EndpointPort>,
}

fn members(service: &Service, pods: &[Arc<CachedPod>]) -> Vec<Member> {
    let publish = publishes_not_ready(service);
    let spec = service.spec.clone().unwrap_or_default();
    let mut out = Vec::new();
    for pod in pods {
        if !desired::should_be_in_endpoints(pod, publish) {
            continue;
        }
        let Some(net) = pod.network.as_ref() else {
            continue;
        };
        let address = EndpointAddress {
            ip: net.ips[0].clone(),
            hostname: hostname(pod, service),
            node_name: pod.node_name.clone().filter(|n| !n.is_empty()),
            target_ref: Some(target_ref(pod)),
        };
        let ports: Vec<EndpointPort> = spec
            .ports
            .iter()
            .flatten()
            .filter_map(|p| {
                Some(EndpointPort {
                    name: p.name.clone().filter(|n| !n.is_empty()),
                    port: find_port(net, p)?,
                    protocol: Some(p.protocol.clone().unwrap_or_else(|| "TCP".into())),
                    app_protocol: p.app_protocol.clone(),
                })
            })
            .collect();
        let headless_without_ports = spec.cluster_ip.as_deref() == Some("None")
            && spec.ports.as_ref().is_none_or(Vec::is_empty);
        if ports.is_empty() && !headless_without_ports {
            continue;
        }
        let ready = publish || pod_state::is_ready(pod.as_ref());
        out.push(Member {
            address,
            ready,
            ports,
        });
    }
    out
}

fn port_key(ports: &[EndpointPort]) -> String {
    let mut keys: Vec<String> = ports
        .iter()
        .map(|p| {
            format!(
                "{}/{}/{}",
                p.name.as_deref().unwrap_or(""),
                p.protocol.as_deref().unwrap_or(""),
                p.port
            )
        })
        .collect();
    keys.sort();
    keys.join(",")
}

/// Subsets of addresses with identical ports, addresses by IP, ports by name and number;
/// and whether the 1,000-address cap cut some (ready ones are kept first).
pub fn subsets(service: &Service, pods: &[Arc<CachedPod>]) -> (Vec<EndpointSubset>, bool) {
    let mut members = members(service, pods);
    let total = members.len();
    if total > MAX_ADDRESSES {
        members.sort_by_key(|m| !m.ready);
        members.truncate(MAX_ADDRESSES);
    }
    let mut groups: BTreeMap<String, EndpointSubset> = BTreeMap::new();
    for mut m in members {
        m.ports
            .sort_by(|a, b| (&a.name, a.port).cmp(&(&b.name, b.port)));
        let subset = groups
            .entry(port_key(&m.ports))
            .or_insert_with(|| EndpointSubset {
                ports: (!m.ports.is_empty()).then(|| m.ports.clone()),
                ..Default::default()
            });
        let list = if m.ready {
            subset.addresses.get_or_insert_with(Vec::new)
        } else {
            subset.not_ready_addresses.get_or_insert_with(Vec::new)
        };
        list.push(m.address);
    }
    let mut out: Vec<EndpointSubset> = groups.into_values().collect();
    for s in &mut out {
        for list in [&mut s.addresses, &mut s.not_ready_addresses]
            .into_iter()
            .flatten()
        {
            list.sort_by(|a, b| a.ip.cmp(&b.ip));
        }
    }
    (out, total > MAX_ADDRESSES)
}

/// The Endpoints object `service` should have.
pub fn desired_endpoints(service: &Service, pods: &[Arc<CachedPod>]) -> Endpoints {
    let (subsets, truncated) = subsets(service, pods);
    let mut labels = service.metadata.labels.clone().unwrap_or_default();
    if service.spec.as_ref().and_then(|s| s.cluster_ip.as_deref()) == Some("None") {
        labels.insert(HEADLESS.into(), String::new());
    }
    labels.insert(SKIP_MIRROR.into(), "true".into());
    let annotations =
        truncated.then(|| BTreeMap::from([(OVER_CAPACITY.to_string(), "truncated".to_string())]));
    Endpoints {
        metadata: ObjectMeta {
            name: service.metadata.name.clone(),
            namespace: service.metadata.namespace.clone(),
            labels: Some(labels),
            annotations,
            ..Default::default()
        },
        subsets: (!subsets.is_empty()).then_some(subsets),
    }
}

/// Whether `current` already says what `want` says (subsets, labels, the cap annotation).
fn same(current: &Endpoints, want: &Endpoints) -> bool {
    let over = |e: &Endpoints| {
        e.metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(OVER_CAPACITY))
            .cloned()
    };
    let subsets = |e: &Endpoints| e.subsets.clone().filter(|s| !s.is_empty());
    subsets(current) == subsets(want)
        && current.metadata.labels == want.metadata.labels
        && over(current) == over(want)
}

async fn reconcile(service: Arc<Service>, ctx: Arc<Ctx>) -> Result<Action, Error> {
    if service.metadata.deletion_timestamp.is_some() {
        return Ok(Action::await_change());
    }
    let Some(pods) = selected_pods(&ctx.pods, &service) else {
        return Ok(Action::await_change());
    };
    let mut want = desired_endpoints(&service, &pods);
    let ns = service.namespace().unwrap_or_default();
    let current = ctx
        .endpoints
        .get(&ObjectRef::new(&service.name_any()).within(&ns));
    let api: Api<Endpoints> = Api::namespaced(ctx.client.clone(), &ns);
    let fail = |source| Error {
        service: key_of(service.as_ref()),
        source,
    };
    match current {
        Some(cur) if same(&cur, &want) => {}
        Some(cur) => {
            // Other annotations (someone's own) stay; ours is set or cleared.
            let mut annotations = cur.metadata.annotations.clone().unwrap_or_default();
            annotations.remove(OVER_CAPACITY);
            annotations.extend(want.metadata.annotations.take().unwrap_or_default());
            want.metadata.annotations = (!annotations.is_empty()).then_some(annotations);
            want.metadata.resource_version = cur.metadata.resource_version.clone();
            api.replace(&service.name_any(), &PostParams::default(), &want)
                .await
                .map_err(fail)?;
        }
        None => match api.create(&PostParams::default(), &want).await {
            Ok(_) => {}
            // The cache is behind: the next event brings the object and a compare.
            Err(kube::Error::Api(e)) if e.code == 409 => {
                return Ok(Action::requeue(std::time::Duration::from_millis(200)))
            }
            Err(e) => return Err(fail(e)),
        },
    }
    Ok(Action::await_change())
}

// What the controller watches and how events map to its keys (kube-runtime's
// `.owns()`/`.watches()`), with its context: `lib.rs` only lists it.

pub(crate) fn start(client: &Client, inf: &mut Informers) -> Task {
    let ctx = Arc::new(Ctx {
        client: client.clone(),
        services: inf.services.reader(),
        pods: inf.pods.reader(),
        endpoints: inf.endpoints.reader(),
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
    let eps = inf.endpoints.subscribe(endpoints_service);
    let triggers = futures::stream::select_all([own.boxed(), pods.boxed(), eps.boxed()]);
    Box::pin(run(ctx, triggers, deleted, resync_ticks()))
}
