//! The Ingress controller's control-plane half (issue 33; the data plane is in every
//! node's cairn-proxy): each Ingress of cairn's class gets `status.loadBalancer.ingress`
//! = the InternalIP of every Ready, schedulable node that serves (each serves ports 80
//! and 443; `ingress.cairn.io/enabled` picks them, as ServiceLB's label does), and a Warning event for what the route table could
//! not take: a rule an older Ingress holds (`Conflict`) or a backend Service or port that
//! does not exist (`ServiceNotFound`, `PortNotFound`). Ingress has no status conditions
//! upstream; events are where ingress-nginx reports the same. Each problem is told once
//! per controller run, not on every node heartbeat.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use cairn_events::{EventType, Recorder};
use cairn_ingress::class::cairn_is_default;
use cairn_ingress::table::is_ours;
use cairn_ingress::{endpoints, BackendError, RouteTable};
use futures::{Stream, StreamExt};
use k8s_openapi::api::core::v1::{Node, Service};
use k8s_openapi::api::networking::v1::{Ingress, IngressClass};
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::controller::Action;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Client, ResourceExt};
use parking_lot::Mutex;
use serde_json::json;
use thiserror::Error;

use crate::reconcile_loop::{key_of, note};
use crate::servicelb::node_addresses;
use crate::wiring::{resync_ticks, Informers, Task};

#[derive(Debug, Error)]
#[error("ingress controller, ingress {ingress}: writing its status: {source}")]
pub struct Error {
    ingress: String,
    #[source]
    source: kube::Error,
}

pub struct Ctx {
    pub client: Client,
    pub ingresses: Store<Ingress>,
    pub classes: Store<IngressClass>,
    pub services: Store<Service>,
    pub nodes: Store<Node>,
    pub recorder: Recorder,
    /// Problems already told, by Ingress UID.
    told: Mutex<HashMap<String, BTreeSet<String>>>,
}

/// The InternalIP of every Ready, schedulable node that serves Ingress and Gateway
/// traffic (`ingress.cairn.io/enabled`, [`cairn_ingress::nodes`]), sorted.
pub fn serving_node_addresses(nodes: &[Arc<Node>]) -> Vec<String> {
    fn labels(n: &Node) -> Option<&std::collections::BTreeMap<String, String>> {
        n.metadata.labels.as_ref()
    }
    let opted_in = cairn_ingress::nodes::any_opted_in(nodes.iter().map(|n| labels(n)));
    let serving: Vec<Arc<Node>> = nodes
        .iter()
        .filter(|n| cairn_ingress::nodes::serves(labels(n), opted_in))
        .cloned()
        .collect();
    node_addresses(&serving)
}

/// The Warning events `ingress` is due: its conflicts in the table of every Ingress
/// of ours, and its backends' missing Services or ports.
pub fn problems(
    ingress: &Ingress,
    ours: &[&Ingress],
    services: &[Arc<Service>],
) -> Vec<(&'static str, String)> {
    let table = RouteTable::build(ours.iter().copied());
    let key = (ingress.namespace().unwrap_or_default(), ingress.name_any());
    let mut out: Vec<(&'static str, String)> = table
        .conflicts
        .iter()
        .filter(|c| (c.ingress.namespace.clone(), c.ingress.name.clone()) == key)
        .map(|c| ("Conflict", c.message.clone()))
        .collect();
    let alone = RouteTable::build([ingress]);
    let by_name: HashMap<(String, String), &Service> = services
        .iter()
        .map(|s| {
            (
                (s.namespace().unwrap_or_default(), s.name_any()),
                s.as_ref(),
            )
        })
        .collect();
    let mut seen = BTreeSet::new();
    for backend in alone.services().filter(|b| seen.insert((*b).clone())) {
        let service = by_name
            .get(&(backend.namespace.clone(), backend.name.clone()))
            .copied();
        match endpoints(backend, service, &[]) {
            Err(e @ BackendError::NoService { .. }) => out.push(("ServiceNotFound", e.to_string())),
            Err(e @ BackendError::NoPort { .. }) => out.push(("PortNotFound", e.to_string())),
            // Endpoints come and go with rollouts: the data plane answers 503 meanwhile.
            _ => {}
        }
    }
    out
}

pub async fn run(
    ctx: Arc<Ctx>,
    triggers: impl Stream<Item = ObjectRef<Ingress>> + Send + 'static,
    resync: impl Stream<Item = ()> + Send + 'static,
) {
    let store = ctx.ingresses.clone();
    crate::reconcile_loop::run("ingress", store, triggers, resync, 2, ctx, reconcile).await;
}

#[tracing::instrument(skip_all, fields(ingress = %key_of(ingress.as_ref())))]
async fn reconcile(ingress: Arc<Ingress>, ctx: Arc<Ctx>) -> Result<Action, Error> {
    let default = cairn_is_default(&ctx.classes.state());
    if !is_ours(&ingress, default) || ingress.metadata.deletion_timestamp.is_some() {
        return Ok(Action::await_change());
    }
    tell_problems(&ingress, &ctx, default);
    let want = serving_node_addresses(&ctx.nodes.state());
    let have: Vec<String> = ingress
        .status
        .as_ref()
        .and_then(|s| s.load_balancer.as_ref())
        .and_then(|lb| lb.ingress.as_ref())
        .map(|i| i.iter().filter_map(|x| x.ip.clone()).collect())
        .unwrap_or_default();
    if want == have {
        return Ok(Action::await_change());
    }
    let entries: Vec<_> = want.iter().map(|ip| json!({"ip": ip})).collect();
    let patch = json!({"status": {"loadBalancer": {"ingress": entries}}});
    let api: Api<Ingress> =
        Api::namespaced(ctx.client.clone(), &ingress.namespace().unwrap_or_default());
    api.patch_status(
        &ingress.name_any(),
        &PatchParams::default(),
        &Patch::Merge(&patch),
    )
    .await
    .map_err(|source| Error {
        ingress: key_of(ingress.as_ref()),
        source,
    })?;
    Ok(Action::await_change())
}

fn tell_problems(ingress: &Ingress, ctx: &Ctx, default: bool) {
    let all = ctx.ingresses.state();
    // Only Ingresses that can conflict with this one: the table is built per reconcile,
    // and node heartbeats reconcile every Ingress.
    let claims = claims_of(ingress);
    let ours: Vec<&Ingress> = all
        .iter()
        .map(AsRef::as_ref)
        .filter(|i| is_ours(i, default) && !claims.is_disjoint(&claims_of(i)))
        .collect();
    let now = problems(ingress, &ours, &ctx.services.state());
    let uid = ingress.metadata.uid.clone().unwrap_or_default();
    let mut told = ctx.told.lock();
    let before = told.remove(&uid).unwrap_or_default();
    for (reason, message) in now.iter().filter(|(_, m)| !before.contains(m)) {
        note(&ctx.recorder, ingress, EventType::Warning, reason, message);
    }
    let messages: BTreeSet<String> = now.into_iter().map(|(_, m)| m).collect();
    if !messages.is_empty() {
        told.insert(uid, messages);
    }
}

/// What an Ingress can contend for with another: its rules' and TLS hosts (`None`: a
/// rule with no host) and the default backend.
fn claims_of(ingress: &Ingress) -> BTreeSet<(&'static str, Option<&str>)> {
    let Some(spec) = ingress.spec.as_ref() else {
        return BTreeSet::new();
    };
    let rules = spec
        .rules
        .iter()
        .flatten()
        .map(|r| ("host", r.host.as_deref()));
    let tls = spec
        .tls
        .iter()
        .flatten()
        .flat_map(|t| t.hosts.iter().flatten());
    let default = spec.default_backend.as_ref().map(|_| ("default", None));
    rules
        .chain(tls.map(|h| ("tls", Some(h.as_str()))))
        .chain(default)
        .collect()
}

// What the controller watches and how events map to its keys (kube-runtime's
// `.owns()`/`.watches()`), with its context: `lib.rs` only lists it.

fn every(ingresses: &Store<Ingress>) -> Vec<ObjectRef<Ingress>> {
    ingresses
        .state()
        .iter()
        .map(|i| ObjectRef::from_obj(i.as_ref()))
        .collect()
}

pub(crate) fn start(client: &Client, inf: &mut Informers) -> Task {
    let own = inf
        .ingresses
        .subscribe(|i: &Ingress| vec![ObjectRef::from_obj(i)]);
    let (a, b, c) = (
        inf.ingresses.reader(),
        inf.ingresses.reader(),
        inf.ingresses.reader(),
    );
    // A node's address or readiness, a class made default, a Service created: any
    // Ingress's status or problems may change.
    let nodes = inf.nodes.subscribe(move |_: &Node| every(&a));
    let classes = inf
        .ingressclasses
        .subscribe(move |_: &IngressClass| every(&b));
    let services = inf.services.subscribe(move |_: &Service| every(&c));
    let ctx = Arc::new(Ctx {
        client: client.clone(),
        ingresses: inf.ingresses.reader(),
        classes: inf.ingressclasses.reader(),
        services: inf.services.reader(),
        nodes: inf.nodes.reader(),
        recorder: Recorder::start(client.clone(), "ingress-controller"),
        told: Mutex::new(HashMap::new()),
    });
    let triggers = futures::stream::select_all([
        own.boxed(),
        nodes.boxed(),
        classes.boxed(),
        services.boxed(),
    ]);
    Box::pin(run(ctx, triggers, resync_ticks()))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn ingress(name: &str, created: &str, host: &str, svc: &str) -> Ingress {
        serde_json::from_value(json!({
            "metadata": {"namespace": "default", "name": name, "creationTimestamp": created},
            "spec": {"rules": [{"host": host, "http": {"paths": [{"path": "/", "pathType": "Prefix",
                "backend": {"service": {"name": svc, "port": {"number": 80}}}}]}}]}
        }))
        .unwrap()
    }

    #[test]
    fn a_newer_overlapping_ingress_and_a_missing_service_or_port_are_told() {
        let old = ingress("old", "2026-01-01T00:00:00Z", "foo.com", "web");
        let new = ingress("new", "2026-01-02T00:00:00Z", "foo.com", "nosuch");
        let services = vec![Arc::new(
            serde_json::from_value::<Service>(json!({
                "metadata": {"namespace": "default", "name": "web"},
                "spec": {"ports": [{"port": 8080}]}
            }))
            .unwrap(),
        )];
        let ours = [&old, &new];
        let told = problems(&new, &ours, &services);
        let reasons: Vec<&str> = told.iter().map(|(r, _)| *r).collect();
        assert_eq!(reasons, ["Conflict", "ServiceNotFound"], "{told:?}");
        assert!(
            told[0]
                .1
                .contains("default/old, an older Ingress, routes it"),
            "{told:?}"
        );
        assert_eq!(told[1].1, "service \"default/nosuch\" not found");
        let told = problems(&old, &ours, &services);
        assert_eq!(
            told,
            [(
                "PortNotFound",
                "service \"default/web\" has no port 80".to_string()
            )]
        );
    }

    fn node(ip: &str, label: Option<&str>, ready: &str) -> Arc<Node> {
        let labels = label.map(|v| json!({"ingress.cairn.io/enabled": v}));
        Arc::new(
            serde_json::from_value(json!({
                "metadata": {"name": ip, "labels": labels},
                "status": {"addresses": [{"type": "InternalIP", "address": ip}],
                    "conditions": [{"type": "Ready", "status": ready}]}
            }))
            .unwrap(),
        )
    }

    #[test]
    fn the_published_addresses_are_the_serving_ready_nodes() {
        let all = |nodes: &[Arc<Node>]| serving_node_addresses(nodes);
        let plain = [
            node("10.0.0.1", None, "True"),
            node("10.0.0.2", None, "True"),
        ];
        assert_eq!(all(&plain), ["10.0.0.1", "10.0.0.2"]);
        let out = [
            node("10.0.0.1", Some("false"), "True"),
            node("10.0.0.2", None, "True"),
        ];
        assert_eq!(all(&out), ["10.0.0.2"]);
        let picked = [
            node("10.0.0.1", None, "True"),
            node("10.0.0.2", Some("true"), "True"),
            node("10.0.0.3", Some("true"), "False"),
        ];
        assert_eq!(all(&picked), ["10.0.0.2"]);
    }
}
