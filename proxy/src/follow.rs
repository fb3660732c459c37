//! Reflectors the proxy's controllers (NetworkPolicy, Ingress) read from: objects
//! trimmed to what is read before a store keeps them, every event a wake-up.

use std::sync::Arc;

use futures::StreamExt;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::runtime::reflector::{self, Store};
use kube::runtime::{reflector as reflect, watcher, WatchStreamExt};
use kube::Api;
use tokio::sync::Notify;
use tokio::task::JoinSet;
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

/// What a store can follow: a typed, trimmable API object.
pub(crate) trait Followed:
    kube::Resource<DynamicType = ()>
    + Trim
    + Clone
    + serde::de::DeserializeOwned
    + std::fmt::Debug
    + Send
    + Sync
    + 'static
{
}

impl<K> Followed for K where
    K: kube::Resource<DynamicType = ()>
        + Trim
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug
        + Send
        + Sync
        + 'static
{
}

/// Follows the objects of kind `K` that `config` selects into a store, trimmed; each
/// event wakes `notify`. The watch runs in `tasks`: it stops when they are dropped.
pub(crate) fn follow<K>(
    api: Api<K>,
    config: watcher::Config,
    notify: &Arc<Notify>,
    what: &'static str,
    tasks: &mut JoinSet<()>,
) -> Store<K>
where
    K: Followed,
{
    let (reader, writer) = reflector::store();
    let stream = reflect(writer, watcher(api, config).modify(K::trim)).default_backoff();
    let notify = Arc::clone(notify);
    tasks.spawn(async move {
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

/// Retries a failed watch after 1, 2, 4, 8, then every 10 seconds: a kind whose CRD is
/// not installed yet (the Gateway API's) is found within 10 s of its install, at a
/// few requests a minute meanwhile.
#[derive(Default)]
struct Capped(u32);

impl Iterator for Capped {
    type Item = std::time::Duration;

    fn next(&mut self) -> Option<std::time::Duration> {
        self.0 = self.0.saturating_add(1);
        let seconds = match self.0 {
            1 => 1,
            2 => 2,
            3 => 4,
            4 => 8,
            _ => 10,
        };
        Some(std::time::Duration::from_secs(seconds))
    }
}

impl kube::runtime::utils::Backoff for Capped {
    fn reset(&mut self) {
        self.0 = 0;
    }
}

/// [`follow`] for a kind that may not be served yet (a CRD): its store stays empty, and
/// only its events, not its failures, wake `notify`. The receiver turns true once the
/// first list is in or has failed (the kind is not served): a restarted proxy waits for
/// it before serving, without waiting on a CRD that is not installed.
pub(crate) fn follow_optional<K>(
    api: Api<K>,
    notify: &Arc<Notify>,
    what: &'static str,
    tasks: &mut JoinSet<()>,
) -> (Store<K>, tokio::sync::watch::Receiver<bool>)
where
    K: Followed,
{
    let (reader, writer) = reflector::store();
    let watch = watcher(api, watcher::Config::default()).modify(K::trim);
    let stream = reflect(writer, watch).backoff(Capped::default());
    let notify = Arc::clone(notify);
    let (listed, ready) = tokio::sync::watch::channel(false);
    tasks.spawn(async move {
        futures::pin_mut!(stream);
        let mut failing = false;
        while let Some(event) = stream.next().await {
            if matches!(event, Ok(watcher::Event::InitDone) | Err(_)) {
                listed.send_replace(true);
            }
            match event {
                // A relist begins (also before each retry): nothing changed yet.
                Ok(watcher::Event::Init) => {}
                Ok(_) => {
                    failing = false;
                    notify.notify_one();
                }
                // Once per outage: a missing CRD fails every retry.
                Err(e) if !failing => {
                    failing = true;
                    warn!(error = %e, what, "watch failed (is its CRD installed?); retrying");
                }
                Err(_) => {}
            }
        }
    });
    (reader, ready)
}
