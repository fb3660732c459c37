//! The ServiceAccount controller: every active namespace has a `default`
//! ServiceAccount, recreated if deleted (upstream `pkg/controller/serviceaccount`).

use crate::wiring::{resync_ticks, Informers, Task};
use std::sync::Arc;

use futures::Stream;
use k8s_openapi::api::core::v1::{Namespace, ServiceAccount};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, PostParams};
use kube::runtime::controller::Action;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Client, ResourceExt};
use thiserror::Error;

pub const DEFAULT: &str = "default";

#[derive(Debug, Error)]
#[error("serviceaccount controller, namespace {namespace}: {source}")]
pub struct Error {
    namespace: String,
    #[source]
    source: kube::Error,
}

pub struct Ctx {
    pub client: Client,
    pub namespaces: Store<Namespace>,
    pub serviceaccounts: Store<ServiceAccount>,
}

/// A touched ServiceAccount wakes its namespace (a deleted `default` comes back).
pub fn sa_namespace(sa: &ServiceAccount) -> Vec<ObjectRef<Namespace>> {
    match sa.namespace() {
        Some(ns) if sa.name_any() == DEFAULT => vec![ObjectRef::new(&ns)],
        _ => Vec::new(),
    }
}

pub async fn run(
    ctx: Arc<Ctx>,
    triggers: impl Stream<Item = ObjectRef<Namespace>> + Send + 'static,
    resync: impl Stream<Item = ()> + Send + 'static,
) {
    let store = ctx.namespaces.clone();
    crate::reconcile_loop::run("serviceaccount", store, triggers, resync, 4, ctx, reconcile).await;
}

async fn reconcile(ns: Arc<Namespace>, ctx: Arc<Ctx>) -> Result<Action, Error> {
    let name = ns.name_any();
    let terminating = crate::namespace::is_terminating(&ns);
    let present = ctx
        .serviceaccounts
        .get(&ObjectRef::new(DEFAULT).within(&name))
        .is_some();
    if terminating || present {
        return Ok(Action::await_change());
    }
    let sa = ServiceAccount {
        metadata: ObjectMeta {
            name: Some(DEFAULT.into()),
            namespace: Some(name.clone()),
            ..Default::default()
        },
        ..Default::default()
    };
    let api: Api<ServiceAccount> = Api::namespaced(ctx.client.clone(), &name);
    crate::namespace::settled(api.create(&PostParams::default(), &sa).await).map_err(|source| {
        Error {
            namespace: name,
            source,
        }
    })?;
    Ok(Action::await_change())
}

// What the controller watches and how events map to its keys (kube-runtime's
// `.owns()`/`.watches()`), with its context: `lib.rs` only lists it.

pub(crate) fn start(client: &Client, inf: &mut Informers) -> Task {
    let own = inf
        .namespaces
        .subscribe(|n: &Namespace| vec![ObjectRef::from_obj(n)]);
    let sas = inf.serviceaccounts.subscribe(sa_namespace);
    let ctx = Arc::new(Ctx {
        client: client.clone(),
        namespaces: inf.namespaces.reader(),
        serviceaccounts: inf.serviceaccounts.reader(),
    });
    Box::pin(run(ctx, futures::stream::select(own, sas), resync_ticks()))
}
