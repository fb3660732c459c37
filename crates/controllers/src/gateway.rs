//! The Gateway API controller's control-plane half (issue 33; every node's cairn-proxy
//! serves the listeners): the conditions of cairn's GatewayClasses
//! (`controllerName: cairn.io/gateway-controller`), their Gateways (and the nodes'
//! addresses, as ServiceLB's) and the HTTPRoutes attached to them, as
//! `cairn_ingress::gateway::attach` decides, written only where they changed.
//!
//! Attachment depends on every object at once (a listener's conflicts on older Gateways,
//! a route's acceptance on its parents' listeners, a grant on its namespace), so any
//! event recomputes the whole status from the caches, as Gateway controllers upstream do;
//! a status that did not change renders equal to the stored one and is not written. The
//! Gateway API kinds are CRDs: until they are installed their watches retry and the
//! controller has nothing to do.

use std::sync::Arc;

use cairn_ingress::gateway::attach::{key_of, Key, RouteState};
use cairn_ingress::gateway::status::{class_status, gateway_status, route_status};
use cairn_ingress::gateway::{
    attach, Gateway, GatewayClass, HttpRoute, ReferenceGrant, CONTROLLER_NAME,
};
use futures::{Stream, StreamExt};
use k8s_openapi::api::core::v1::{Namespace, Node, Secret, Service};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, Patch, PatchParams};
use kube::core::PartialObjectMeta;
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{watcher, WatchStreamExt};
use kube::Client;
use serde_json::{json, Value};
use thiserror::Error;
use tokio::sync::Notify;
use tracing::warn;

use crate::ingress::serving_node_addresses;
use crate::wiring::{resync_ticks, Informers, Task};

#[derive(Debug, Error)]
#[error("gateway controller, {kind} {key}: writing its status: {source}")]
pub struct Error {
    kind: &'static str,
    key: String,
    #[source]
    source: kube::Error,
}

/// The caches the controller reads: the shared ones and its own watches of the
/// Gateway API kinds and of the TLS Secrets' names.
struct Caches {
    services: Store<Service>,
    namespaces: Store<Namespace>,
    nodes: Store<Node>,
    classes: Store<GatewayClass>,
    gateways: Store<Gateway>,
    routes: Store<HttpRoute>,
    grants: Store<ReferenceGrant>,
    tls_secrets: Store<PartialObjectMeta<Secret>>,
}

/// Watches `api` into a store; every event wakes `notify`. A kind not served yet (its
/// CRD absent) is retried with kube-runtime's back-off, logged once per outage.
fn follow<K>(
    stream: impl Stream<Item = Result<watcher::Event<K>, watcher::Error>> + Send + 'static,
    notify: &Arc<Notify>,
    what: &'static str,
) -> Store<K>
where
    K: kube::Resource<DynamicType = ()> + Clone + std::fmt::Debug + Send + Sync + 'static,
{
    let (reader, writer) = reflector::store();
    let stream = reflector::reflector(writer, stream).default_backoff();
    let notify = notify.clone();
    tokio::spawn(async move {
        futures::pin_mut!(stream);
        let mut failing = false;
        while let Some(event) = stream.next().await {
            match event {
                // A relist begins (also before each retry): nothing changed yet.
                Ok(watcher::Event::Init) => {}
                Ok(_) => {
                    failing = false;
                    notify.notify_one();
                }
                Err(e) if !failing => {
                    failing = true;
                    warn!(error = %e, what, "watch failed (is its CRD installed?); retrying");
                }
                Err(_) => {}
            }
        }
    });
    reader
}

fn gateway_api<K>(client: &Client, notify: &Arc<Notify>, what: &'static str) -> Store<K>
where
    K: kube::Resource<DynamicType = ()>
        + Clone
        + std::fmt::Debug
        + serde::de::DeserializeOwned
        + Send
        + Sync
        + 'static,
{
    let stream = watcher(Api::<K>::all(client.clone()), watcher::Config::default());
    follow(stream, notify, what)
}

/// Every event is the same wake-up: the whole status is computed again.
fn wake<S>(_: &S) -> Vec<ObjectRef<Node>> {
    vec![ObjectRef::new("gateway-api")]
}

pub(crate) fn start(client: &Client, inf: &mut Informers) -> Task {
    // Any of these may change a listener's routes, a reference or the addresses.
    let triggers = futures::stream::select_all([
        inf.services.subscribe(wake::<Service>).boxed(),
        inf.namespaces.subscribe(wake::<Namespace>).boxed(),
        inf.nodes.subscribe(wake::<Node>).boxed(),
    ]);
    let notify = Arc::new(Notify::new());
    let tls = watcher::Config::default().fields("type=kubernetes.io/tls");
    // Names only: the controller never needs a key.
    let secrets = watcher(Api::<PartialObjectMeta<Secret>>::all(client.clone()), tls);
    let caches = Caches {
        services: inf.services.reader(),
        namespaces: inf.namespaces.reader(),
        nodes: inf.nodes.reader(),
        classes: gateway_api(client, &notify, "gatewayclasses"),
        gateways: gateway_api(client, &notify, "gateways"),
        routes: gateway_api(client, &notify, "httproutes"),
        grants: gateway_api(client, &notify, "referencegrants"),
        tls_secrets: follow(secrets, &notify, "secrets"),
    };
    Box::pin(run(client.clone(), caches, notify, triggers))
}

async fn run(
    client: Client,
    caches: Caches,
    notify: Arc<Notify>,
    triggers: impl Stream<Item = ObjectRef<Node>> + Send + 'static,
) {
    let wakes = futures::stream::select(triggers.map(|_| ()), resync_ticks());
    let waker = notify.clone();
    tokio::spawn(wakes.for_each(move |_| {
        waker.notify_one();
        futures::future::ready(())
    }));
    loop {
        notify.notified().await;
        let failed = sync(&client, &caches).await;
        for e in &failed {
            warn!(error = %e, "gateway status");
        }
        if !failed.is_empty() {
            // A write that failed (a conflict, the API away) is tried again soon.
            tokio::time::sleep(std::time::Duration::from_secs(1)).await;
            notify.notify_one();
        }
    }
}

/// Writes every status that changed; the writes that failed.
async fn sync(client: &Client, caches: &Caches) -> Vec<Error> {
    let (classes, gateways) = (caches.classes.state(), caches.gateways.state());
    let (routes, grants) = (caches.routes.state(), caches.grants.state());
    let inputs = attach::Inputs {
        classes: classes.iter().map(AsRef::as_ref).collect(),
        gateways: gateways.iter().map(AsRef::as_ref).collect(),
        routes: routes.iter().map(AsRef::as_ref).collect(),
        grants: grants.iter().map(AsRef::as_ref).collect(),
        namespaces: attach::labels_by_name(caches.namespaces.state().iter().map(|n| &n.metadata)),
        services: attach::keys(caches.services.state().iter().map(|s| &s.metadata)),
        tls_secrets: attach::keys(caches.tls_secrets.state().iter().map(|s| &s.metadata)),
    };
    let attachment = attach::attach(&inputs);
    let now = Timestamp::from_second(Timestamp::now().as_second())
        .unwrap_or(Timestamp::UNIX_EPOCH)
        .to_string();
    let addresses = serving_node_addresses(&caches.nodes.state());
    let mut writes: Vec<(&'static str, Key, Value)> = Vec::new();
    for class in classes
        .iter()
        .filter(|c| c.spec.controller_name == CONTROLLER_NAME)
    {
        let want = class_status(class.metadata.generation, class.status.as_ref(), &now);
        if class.status.as_ref() != Some(&want) {
            writes.push(("GatewayClass", key_of(&class.metadata), want));
        }
    }
    for gateway in &gateways {
        let key = key_of(&gateway.metadata);
        let Some(state) = attachment.gateways.get(&key) else {
            continue;
        };
        let want = gateway_status(state, &addresses, gateway.status.as_ref(), &now);
        if gateway.status.as_ref() != Some(&want) {
            writes.push(("Gateway", key, want));
        }
    }
    let none = RouteState {
        generation: None,
        parents: Vec::new(),
    };
    for route in &routes {
        let key = key_of(&route.metadata);
        let state = attachment.routes.get(&key).unwrap_or(&none);
        if state.parents.is_empty() && !has_our_parents(route) {
            continue;
        }
        let want = route_status(state, route.status.as_ref(), &now);
        if route.status.as_ref() != Some(&want) {
            writes.push(("HTTPRoute", key, want));
        }
    }
    let mut failed = Vec::new();
    for (kind, key, status) in writes {
        if let Err(source) = write(client, kind, &key, status).await {
            failed.push(Error {
                kind,
                key: format!("{}/{}", key.0, key.1),
                source,
            });
        }
    }
    failed
}

async fn write(client: &Client, kind: &str, key: &Key, status: Value) -> Result<(), kube::Error> {
    let patch = Patch::Merge(json!({"status": status}));
    let params = PatchParams::default();
    let (namespace, name) = key;
    match kind {
        "GatewayClass" => Api::<GatewayClass>::all(client.clone())
            .patch_status(name, &params, &patch)
            .await
            .map(drop),
        "Gateway" => Api::<Gateway>::namespaced(client.clone(), namespace)
            .patch_status(name, &params, &patch)
            .await
            .map(drop),
        _ => Api::<HttpRoute>::namespaced(client.clone(), namespace)
            .patch_status(name, &params, &patch)
            .await
            .map(drop),
    }
}

/// Whether a route's status has parent entries of cairn's (to remove when it no longer
/// refers to a cairn Gateway).
fn has_our_parents(route: &HttpRoute) -> bool {
    let parents = route.status.as_ref().and_then(|s| s.get("parents"));
    parents.and_then(Value::as_array).is_some_and(|list| {
        list.iter()
            .any(|p| p.get("controllerName").and_then(Value::as_str) == Some(CONTROLLER_NAME))
    })
}
