//! The root CA publisher (upstream `pkg/controller/certificates/rootcacertpublisher`):
//! every active namespace has a ConfigMap `kube-root-ca.crt` whose `ca.crt` is the
//! cluster CA, which projected ServiceAccount volumes mount so pods can verify the API
//! server. A deleted or edited copy is put back.

use std::collections::BTreeMap;
use std::sync::Arc;

use futures::Stream;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, PostParams};
use kube::runtime::controller::Action;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Client, ResourceExt};
use thiserror::Error;

use crate::wiring::{resync_ticks, Informers, Task};

pub const NAME: &str = crate::wiring::ROOT_CA_CONFIGMAP;
pub const KEY: &str = "ca.crt";
/// Upstream's description annotation, word for word.
const DESCRIPTION: &str = "Contains a CA bundle that can be used to verify the kube-apiserver when using internal endpoints such as the internal service IP or kubernetes.default.svc. No other usage is guaranteed across distributions of Kubernetes clusters.";

#[derive(Debug, Error)]
#[error("root CA publisher, namespace {namespace}: {source}")]
pub struct Error {
    namespace: String,
    #[source]
    source: kube::Error,
}

pub struct Ctx {
    pub client: Client,
    pub ca_pem: String,
    pub namespaces: Store<Namespace>,
    pub configmaps: Store<ConfigMap>,
}

/// A touched `kube-root-ca.crt` wakes its namespace.
pub fn configmap_namespace(cm: &ConfigMap) -> Vec<ObjectRef<Namespace>> {
    match cm.namespace() {
        Some(ns) if cm.name_any() == NAME => vec![ObjectRef::new(&ns)],
        _ => Vec::new(),
    }
}

pub async fn run(
    ctx: Arc<Ctx>,
    triggers: impl Stream<Item = ObjectRef<Namespace>> + Send + 'static,
    resync: impl Stream<Item = ()> + Send + 'static,
) {
    let store = ctx.namespaces.clone();
    crate::reconcile_loop::run(
        "root-ca-cert-publisher",
        store,
        triggers,
        resync,
        4,
        ctx,
        reconcile,
    )
    .await;
}

fn desired(namespace: &str, ca_pem: &str, existing: Option<&ConfigMap>) -> ConfigMap {
    let mut cm = existing.cloned().unwrap_or_else(|| ConfigMap {
        metadata: ObjectMeta {
            name: Some(NAME.into()),
            namespace: Some(namespace.into()),
            ..Default::default()
        },
        ..Default::default()
    });
    cm.metadata
        .annotations
        .get_or_insert_with(BTreeMap::new)
        .insert("kubernetes.io/description".into(), DESCRIPTION.into());
    cm.data = Some(BTreeMap::from([(KEY.to_string(), ca_pem.to_string())]));
    cm
}

async fn reconcile(ns: Arc<Namespace>, ctx: Arc<Ctx>) -> Result<Action, Error> {
    let name = ns.name_any();
    let terminating = crate::namespace::is_terminating(&ns);
    if terminating {
        return Ok(Action::await_change());
    }
    let existing = ctx.configmaps.get(&ObjectRef::new(NAME).within(&name));
    let current = existing.as_ref().and_then(|cm| cm.data.as_ref());
    let right = current.is_some_and(|d| d.len() == 1 && d.get(KEY) == Some(&ctx.ca_pem));
    if right {
        return Ok(Action::await_change());
    }
    let api: Api<ConfigMap> = Api::namespaced(ctx.client.clone(), &name);
    let cm = desired(&name, &ctx.ca_pem, existing.as_deref());
    let written = match existing {
        None => api.create(&PostParams::default(), &cm).await.map(|_| ()),
        Some(_) => api
            .replace(NAME, &PostParams::default(), &cm)
            .await
            .map(|_| ()),
    };
    crate::namespace::settled(written).map_err(|source| Error {
        namespace: name,
        source,
    })?;
    Ok(Action::await_change())
}

// What the controller watches and how events map to its keys, with its context.

pub(crate) fn start(client: &Client, inf: &mut Informers) -> Task {
    let Some(ca_pem) = inf.settings.root_ca_pem.clone() else {
        tracing::warn!("root CA publisher: no cluster CA given; not publishing kube-root-ca.crt");
        return Box::pin(futures::future::ready(()));
    };
    let own = inf
        .namespaces
        .subscribe(|n: &Namespace| vec![ObjectRef::from_obj(n)]);
    let cms = inf.root_ca_configmaps.subscribe(configmap_namespace);
    let ctx = Arc::new(Ctx {
        client: client.clone(),
        ca_pem,
        namespaces: inf.namespaces.reader(),
        configmaps: inf.root_ca_configmaps.reader(),
    });
    Box::pin(run(ctx, futures::stream::select(own, cms), resync_ticks()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn desired_keeps_other_metadata_and_replaces_data() {
        let mut edited = desired("a", "PEM", None);
        edited.metadata.labels = Some(BTreeMap::from([("x".into(), "y".into())]));
        edited.data = Some(BTreeMap::from([
            ("ca.crt".into(), "other".into()),
            ("extra".into(), "z".into()),
        ]));
        let fixed = desired("a", "PEM", Some(&edited));
        assert_eq!(
            fixed.data,
            Some(BTreeMap::from([("ca.crt".into(), "PEM".into())]))
        );
        assert_eq!(fixed.metadata.labels, edited.metadata.labels);
        let annotations = fixed.metadata.annotations.unwrap();
        assert_eq!(annotations["kubernetes.io/description"], DESCRIPTION);
    }
}
