//! Reflectors the proxy's controllers (NetworkPolicy, Ingress) read from: objects
//! trimmed to what is read before a store keeps them, every event a wake-up.

use std::sync::Arc;

use futures::StreamExt;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::runtime::reflector::{self, Store};
use kube::runtime::{reflector as reflect, watcher, WatchStreamExt};
use kube::Api;
use tokio::sync::Notify;
use tracing::warn;

/// Drops what a controller never reads before a store keeps an object: at a thousand pods the
/// whole objects were most of the proxy's memory.
pub(crate) trait Trim {
    fn trim(&mut self);
}

/// Managed fields and annotations (a `kubectl apply`'s last configuration) are often
/// larger than the rest of an object.
pub(crate) fn trim_meta(meta: &mut ObjectMeta) {
    meta.managed_fields = None;
    meta.annotations = None;
}

/// Follows the objects of kind `K` that `config` selects into a store, trimmed; each
/// event wakes `notify`.
pub(crate) fn follow<K>(
    api: Api<K>,
    config: watcher::Config,
    notify: &Arc<Notify>,
    what: &'static str,
) -> Store<K>
where
    K: kube::Resource<DynamicType = ()>
        + Trim
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug
        + Send
        + Sync
        + 'static,
{
    let (reader, writer) = reflector::store();
    let stream = reflect(writer, watcher(api, config).modify(K::trim)).default_backoff();
    let notify = Arc::clone(notify);
    tokio::spawn(async move {
        futures::pin_mut!(stream);
        while let Some(event) = stream.next().await {
            if let Err(e) = event {
                warn!(error = %e, what, "watch failed; retrying");
            }
            notify.notify_one();
        }
    });
    reader
}
