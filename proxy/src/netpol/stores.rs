//! The API objects policy is computed from, followed by reflectors, and the node's
//! desired state from them.

use std::collections::BTreeMap;
use std::sync::Arc;

use cairn_netpol::nft::Desired;
use cairn_netpol::{for_node, Cluster, CompiledPolicy, Namespace, Pod, PodKey, PodPolicy};
use futures::StreamExt;
use ipnetwork::IpNetwork;
use k8s_openapi::api::core::v1::{Namespace as K8sNamespace, Node, Pod as K8sPod};
use k8s_openapi::api::networking::v1::NetworkPolicy;
use kube::runtime::reflector::{self, Store};
use kube::runtime::{reflector as reflect, watcher, WatchStreamExt};
use kube::Api;
use tokio::sync::Notify;
use tracing::warn;

/// The stores the policy is computed from: policies, pods, namespaces, and this node
/// (its pod ranges, for the guard).
pub(super) struct Stores {
    pub(super) policies: Store<NetworkPolicy>,
    pub(super) pods: Store<K8sPod>,
    pub(super) namespaces: Store<K8sNamespace>,
    pub(super) node: Store<Node>,
}

/// Follows the objects of kind `K` that `config` selects into a store; each event wakes
/// `notify`.
pub(super) fn follow<K>(
    api: Api<K>,
    config: watcher::Config,
    notify: &Arc<Notify>,
    what: &'static str,
) -> Store<K>
where
    K: kube::Resource<DynamicType = ()>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug
        + Send
        + Sync
        + 'static,
{
    let (reader, writer) = reflector::store();
    let stream = reflect(writer, watcher(api, config)).default_backoff();
    let notify = Arc::clone(notify);
    tokio::spawn(async move {
        futures::pin_mut!(stream);
        while let Some(event) = stream.next().await {
            if let Err(e) = event {
                warn!(error = %e, what, "policy watch failed; retrying");
            }
            notify.notify_one();
        }
    });
    reader
}

impl Stores {
    /// The node's pods' policies and desired state from what the stores hold now. A policy that cannot be
    /// read (the API refuses those) is left out and logged.
    pub(super) fn desired(&self, node: &str) -> (BTreeMap<PodKey, PodPolicy>, Desired) {
        let mut policies: Vec<CompiledPolicy> = self
            .policies
            .state()
            .iter()
            .filter_map(|p| match CompiledPolicy::compile(p) {
                Ok(c) => Some(c),
                Err(e) => {
                    warn!(error = %e, "NetworkPolicy left out");
                    None
                }
            })
            .collect();
        // The store's order changes on relists; rules in a stable order keep chains as
        // they are.
        policies.sort_by(|a, b| a.key.cmp(&b.key));
        let mut cluster = Cluster::default();
        for ns in self.namespaces.state() {
            cluster.add_namespace(Namespace::from_k8s(&ns));
        }
        for pod in self.pods.state() {
            cluster.add_pod(Pod::from_k8s(&pod));
        }
        // No policy, no guard: a cluster without policies never waits for this node.
        let guarded = match policies.is_empty() {
            true => Vec::new(),
            false => self.pod_cidrs(),
        };
        let pods = for_node(&policies, &cluster, node);
        let desired = Desired::from_pods(pods.values()).guarding(&guarded);
        (pods, desired)
    }

    /// The node's pod ranges (`spec.podCIDRs`, or `spec.podCIDR` alone).
    fn pod_cidrs(&self) -> Vec<IpNetwork> {
        let nodes = self.node.state();
        let Some(spec) = nodes.first().and_then(|n| n.spec.as_ref()) else {
            return Vec::new();
        };
        let listed = spec.pod_cidrs.iter().flatten();
        listed
            .chain(spec.pod_cidr.iter())
            .filter_map(|c| c.parse().ok())
            .collect()
    }
}
