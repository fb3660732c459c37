//! The ServiceAccount controller: every active namespace has a `default`
//! ServiceAccount, recreated if deleted (upstream `pkg/controller/serviceaccount`).

use std::sync::Arc;

use futures::{Stream, StreamExt};
use k8s_openapi::api::core::v1::{Namespace, ServiceAccount};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, PostParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Client, ResourceExt};
use thiserror::Error;
use tracing::warn;

use crate::retry::Retries;

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
    pub retries: Retries,
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
    Controller::for_stream(futures::stream::empty(), ctx.namespaces.clone())
        .reconcile_on(triggers)
        .reconcile_all_on(resync)
        .run(reconcile, error_policy, ctx)
        .for_each(|_| async {})
        .await;
}

fn error_policy(ns: Arc<Namespace>, err: &Error, ctx: Arc<Ctx>) -> Action {
    let wait = ctx.retries.failed(&ns.name_any());
    warn!(error = %err, retry_in = ?wait, "serviceaccount sync failed");
    Action::requeue(wait)
}

async fn reconcile(ns: Arc<Namespace>, ctx: Arc<Ctx>) -> Result<Action, Error> {
    let name = ns.name_any();
    let terminating = ns.metadata.deletion_timestamp.is_some()
        || ns.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Terminating");
    let present = ctx
        .serviceaccounts
        .get(&ObjectRef::new(DEFAULT).within(&name))
        .is_some();
    if terminating || present {
        ctx.retries.succeeded(&name);
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
    match api.create(&PostParams::default(), &sa).await {
        // 409: someone else (or our cache) was faster; 403: the namespace began terminating.
        Ok(_) => {}
        Err(kube::Error::Api(s)) if s.code == 409 || s.code == 403 => {}
        Err(source) => {
            return Err(Error {
                namespace: name,
                source,
            })
        }
    }
    ctx.retries.succeeded(&name);
    Ok(Action::await_change())
}
