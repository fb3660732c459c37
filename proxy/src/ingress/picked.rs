//! Whether this node serves Ingress and Gateway traffic: the nodes that carry
//! `ingress.cairn.io/enabled` are followed (a label selector: only they are sent), and
//! `cairn_ingress::nodes` decides for this node, the rule the control plane uses for the
//! addresses it publishes. The data plane runs while the node is picked: a node left out
//! closes its listeners (drained as on shutdown) and stops its watches; picked again, it
//! binds and serves again.

use std::sync::Arc;

use cairn_ingress::nodes::{any_opted_in, serves, SERVE_LABEL};
use k8s_openapi::api::core::v1::Node;
use kube::runtime::reflector::Store;
use kube::runtime::watcher;
use kube::Api;
use tokio::sync::{watch, Notify};
use tokio::task::JoinSet;
use tracing::info;

use super::{run, IngressConfig, IngressError};
use crate::follow::follow;

/// Whether `node` serves, by the labelled nodes in `store`.
fn picked(store: &Store<Node>, node: &str) -> bool {
    let nodes = store.state();
    let opted_in = any_opted_in(nodes.iter().map(|n| n.metadata.labels.as_ref()));
    let own = nodes
        .iter()
        .find(|n| n.metadata.name.as_deref() == Some(node));
    serves(own.and_then(|n| n.metadata.labels.as_ref()), opted_in)
}

/// Whether `node` serves, from the first list of labelled nodes on; followed until the
/// receiver is dropped.
async fn follow_pick(
    client: &kube::Client,
    node: &str,
) -> Result<watch::Receiver<bool>, IngressError> {
    let notify = Arc::new(Notify::new());
    let mut watches = JoinSet::new();
    let labelled = watcher::Config::default().labels(SERVE_LABEL);
    let api = Api::all(client.clone());
    let store: Store<Node> = follow(api, labelled, &notify, "nodes", &mut watches);
    store
        .wait_until_ready()
        .await
        .map_err(|e| IngressError::Watch("nodes", e.to_string()))?;
    let node = node.to_string();
    let (tx, rx) = watch::channel(picked(&store, &node));
    tokio::spawn(async move {
        let _watches = watches;
        loop {
            tokio::select! {
                _ = tx.closed() => return,
                _ = notify.notified() => {
                    let now = picked(&store, &node);
                    tx.send_if_modified(|was| std::mem::replace(was, now) != now);
                }
            }
        }
    });
    Ok(rx)
}

/// Runs the data plane whenever this node is picked, until `stopping` turns true.
pub async fn run_where_picked(
    client: kube::Client,
    node: &str,
    config: IngressConfig,
    mut stopping: watch::Receiver<bool>,
) -> Result<(), IngressError> {
    let mut pick = follow_pick(&client, node).await?;
    loop {
        if !*pick.borrow_and_update() {
            info!(
                label = SERVE_LABEL,
                "this node does not serve Ingress (not picked)"
            );
            tokio::select! {
                _ = stopping.wait_for(|s| *s) => return Ok(()),
                changed = pick.wait_for(|p| *p) => {
                    changed.map_err(|_| IngressError::Watch("nodes", "the node watch ended".into()))?;
                }
            }
        }
        let (mut unpick, mut stop) = (pick.clone(), stopping.clone());
        let left_out = async move {
            tokio::select! {
                _ = unpick.wait_for(|p| !*p) => {}
                _ = stop.wait_for(|s| *s) => {}
            }
        };
        run(client.clone(), config.clone(), left_out).await?;
        if *stopping.borrow() {
            return Ok(());
        }
        if pick.has_changed().is_err() {
            return Err(IngressError::Watch("nodes", "the node watch ended".into()));
        }
    }
}
