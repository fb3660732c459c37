//! The ServiceAccount controller: every active namespace has a `default`
//! ServiceAccount, recreated if deleted (upstream `pkg/controller/serviceaccount`).

use std::sync::Arc;

use futures::Stream;
use k8s_openapi::api::core::v1::{Namespace, ServiceAccount};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, PostParams};
use kube::runtime::controller::Action;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Client, ResourceExt};
use thiserror::Error;

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
    let store = ctx.namespaces.clone();
    crate::runner::run("serviceaccount", store, triggers, resync, 4, ctx, reconcile).await;
}

impl crate::runner::Retrying for Ctx {
    fn retries(&self) -> &Retries {
        &self.retries
    }
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
    Ok(Action::await_change())
}
