//! List-watch of nodes, pods, namespaces, claims, volumes and storage classes (kube-runtime watchers, re-listing after
//! errors), forwarded into the scheduling loop's channel.

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Namespace, Node, PersistentVolume, PersistentVolumeClaim, Pod};
use k8s_openapi::api::storage::v1::StorageClass;
use kube::api::Api;
use kube::runtime::watcher::{self, Event};
use kube::runtime::WatchStreamExt;
use kube::Client;
use tokio::sync::mpsc;
use tracing::warn;

/// What the loop receives.
pub enum Input {
    // Boxed: the objects are large and the channel holds many inputs.
    Node(Box<Event<Node>>),
    Pod(Box<Event<Pod>>),
    Namespace(Box<Event<Namespace>>),
    Claim(Box<Event<PersistentVolumeClaim>>),
    Volume(Box<Event<PersistentVolume>>),
    Class(Box<Event<StorageClass>>),
    /// A bind finished.
    Bound {
        uid: String,
        pod: std::sync::Arc<Pod>,
        result: Result<(), super::bind_error::BindError>,
    },
}

async fn forward<K>(
    api: Api<K>,
    tx: mpsc::Sender<Input>,
    wrap: fn(Box<Event<K>>) -> Input,
    what: &'static str,
) where
    K: kube::Resource + Clone + std::fmt::Debug + serde::de::DeserializeOwned + Send + 'static,
{
    let mut stream = watcher::watcher(api, watcher::Config::default())
        .default_backoff()
        .boxed();
    while let Some(ev) = stream.next().await {
        match ev {
            Ok(e) => {
                if tx.send(wrap(Box::new(e))).await.is_err() {
                    return;
                }
            }
            Err(e) => warn!(resource = what, error = %e, "watch failed, re-listing"),
        }
    }
}

pub fn start(client: &Client, tx: &mpsc::Sender<Input>) -> Vec<tokio::task::JoinHandle<()>> {
    vec![
        tokio::spawn(forward(
            Api::<Node>::all(client.clone()),
            tx.clone(),
            Input::Node,
            "nodes",
        )),
        tokio::spawn(forward(
            Api::<Pod>::all(client.clone()),
            tx.clone(),
            Input::Pod,
            "pods",
        )),
        tokio::spawn(forward(
            Api::<Namespace>::all(client.clone()),
            tx.clone(),
            Input::Namespace,
            "namespaces",
        )),
        tokio::spawn(forward(
            Api::<PersistentVolumeClaim>::all(client.clone()),
            tx.clone(),
            Input::Claim,
            "persistentvolumeclaims",
        )),
        tokio::spawn(forward(
            Api::<PersistentVolume>::all(client.clone()),
            tx.clone(),
            Input::Volume,
            "persistentvolumes",
        )),
        tokio::spawn(forward(
            Api::<StorageClass>::all(client.clone()),
            tx.clone(),
            Input::Class,
            "storageclasses",
        )),
    ]
}
