//! The Namespace controller: a namespace being deleted is emptied through the API —
//! every namespaced resource the server serves (found by discovery) is deleted — and
//! once nothing is left its `kubernetes` finalizer is removed through
//! `namespaces/finalize`, after which the API server removes the namespace (upstream
//! `pkg/controller/namespace`).

use crate::wiring::{resync_ticks, Informers, Task};
use std::sync::Arc;
use std::time::Duration;

use futures::Stream;
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, PostParams};
use kube::discovery::{verbs, Discovery, Scope};
use kube::runtime::controller::Action;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Client, ResourceExt};
use thiserror::Error;
use tracing::info;

const FINALIZER: &str = "kubernetes";

#[derive(Debug, Error)]
#[error("namespace controller, namespace {namespace}: {source}")]
pub struct Error {
    namespace: String,
    #[source]
    source: kube::Error,
}

pub struct Ctx {
    pub client: Client,
    pub namespaces: Store<Namespace>,
}

pub async fn run(
    ctx: Arc<Ctx>,
    triggers: impl Stream<Item = ObjectRef<Namespace>> + Send + 'static,
    resync: impl Stream<Item = ()> + Send + 'static,
) {
    let store = ctx.namespaces.clone();
    crate::reconcile_loop::run("namespace", store, triggers, resync, 4, ctx, reconcile).await;
}

async fn reconcile(ns: Arc<Namespace>, ctx: Arc<Ctx>) -> Result<Action, Error> {
    let name = ns.name_any();
    if ns.metadata.deletion_timestamp.is_none() {
        return Ok(Action::await_change());
    }
    let err = |source| Error {
        namespace: name.clone(),
        source,
    };
    let remaining = delete_content(&ctx.client, &name).await.map_err(err)?;
    if remaining > 0 {
        // Pods wait for their kubelets; look again shortly.
        return Ok(Action::requeue(Duration::from_secs(1)));
    }
    finalize(&ctx.client, &ns).await.map_err(err)?;
    Ok(Action::await_change())
}

/// Deletes everything in the namespace; returns how many objects were still there.
async fn delete_content(client: &Client, ns: &str) -> Result<usize, kube::Error> {
    let discovery = Discovery::new(client.clone()).run().await?;
    let mut remaining = 0;
    for group in discovery.groups() {
        for (ar, caps) in group.recommended_resources() {
            let deletable =
                caps.supports_operation(verbs::LIST) && caps.supports_operation(verbs::DELETE);
            if caps.scope != Scope::Namespaced || !deletable {
                continue;
            }
            let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns, &ar);
            for obj in api.list(&ListParams::default()).await?.items {
                remaining += 1;
                if obj.metadata.deletion_timestamp.is_some() {
                    continue;
                }
                match api
                    .delete(&obj.name_any(), &DeleteParams::background())
                    .await
                {
                    Ok(_) => {}
                    Err(kube::Error::Api(s)) if s.code == 404 => {}
                    Err(e) => return Err(e),
                }
            }
        }
    }
    Ok(remaining)
}

/// Removes the `kubernetes` finalizer; the API server then removes the namespace.
async fn finalize(client: &Client, ns: &Namespace) -> Result<(), kube::Error> {
    let mut next = ns.clone();
    next.metadata.managed_fields = None;
    let spec = next.spec.get_or_insert_with(Default::default);
    spec.finalizers = Some(
        spec.finalizers
            .take()
            .unwrap_or_default()
            .into_iter()
            .filter(|f| f != FINALIZER)
            .collect(),
    );
    let api: Api<Namespace> = Api::all(client.clone());
    match api
        .replace_subresource("finalize", &ns.name_any(), &PostParams::default(), &next)
        .await
    {
        Ok(_) => {
            info!(namespace = %ns.name_any(), "namespace emptied and finalized");
            Ok(())
        }
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
        Err(e) => Err(e),
    }
}

// What the controller watches and how events map to its keys (kube-runtime's
// `.owns()`/`.watches()`), with its context: `lib.rs` only lists it.

/// Whether a namespace is being deleted (no new objects may go in).
pub(crate) fn is_terminating(ns: &Namespace) -> bool {
    ns.metadata.deletion_timestamp.is_some()
        || ns.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Terminating")
}

/// A write of an object every namespace should hold: 409 means someone (or a stale
/// cache) was faster and the next event settles it, 403 that the namespace began
/// terminating; neither is an error.
pub(crate) fn settled<T>(written: Result<T, kube::Error>) -> Result<(), kube::Error> {
    match written {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 409 || s.code == 403 => Ok(()),
        Err(e) => Err(e),
    }
}

pub(crate) fn start(client: &Client, inf: &mut Informers) -> Task {
    let own = inf
        .namespaces
        .subscribe(|n: &Namespace| vec![ObjectRef::from_obj(n)]);
    let ctx = Arc::new(Ctx {
        client: client.clone(),
        namespaces: inf.namespaces.reader(),
    });
    Box::pin(run(ctx, own, resync_ticks()))
}
