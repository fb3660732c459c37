//! What the policy core reads besides the policies: pods and namespaces, reduced to what
//! NetworkPolicy looks at (labels, addresses, named container ports).

use std::collections::BTreeMap;
use std::fmt;
use std::net::IpAddr;

use cairn_semantics::selector::Labels;

/// The label the API server puts on every Namespace (upstream's
/// `kubernetes.io/metadata.name`), so a policy can select a namespace by name.
pub const NAMESPACE_NAME_LABEL: &str = "kubernetes.io/metadata.name";

pub use cairn_semantics::protocol::Protocol;

/// A pod by namespace and name.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PodKey {
    pub namespace: String,
    pub name: String,
}

impl PodKey {
    pub fn new(namespace: &str, name: &str) -> PodKey {
        PodKey {
            namespace: namespace.to_string(),
            name: name.to_string(),
        }
    }
}

impl fmt::Display for PodKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

/// A named container port: what a named policy port resolves to on a pod.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NamedPort {
    pub name: String,
    pub protocol: Protocol,
    pub port: u16,
}

/// A pod as policy sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pod {
    pub key: PodKey,
    pub labels: Labels,
    /// `status.podIPs`; empty until the pod has an address.
    pub ips: Vec<IpAddr>,
    pub node: Option<String>,
    /// Host-network pods share their node's address: policy neither isolates them nor
    /// lets a pod selector pick them as peers (upstream leaves both undefined).
    pub host_network: bool,
    /// Succeeded or Failed: no longer a peer or a target.
    pub finished: bool,
    pub named_ports: Vec<NamedPort>,
}

impl Pod {
    /// The port number `name` has on this pod for `protocol`, if a container declares it.
    pub fn named_port(&self, name: &str, protocol: Protocol) -> Option<u16> {
        self.named_ports
            .iter()
            .find(|p| p.name == name && p.protocol == protocol)
            .map(|p| p.port)
    }

    /// Whether the pod takes part in pod-network policy: addressed, running its own
    /// network namespace, not finished.
    pub fn on_pod_network(&self) -> bool {
        !self.host_network && !self.finished && !self.ips.is_empty()
    }
}

/// A namespace's labels, `kubernetes.io/metadata.name` included.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Namespace {
    pub name: String,
    pub labels: Labels,
}

impl Namespace {
    /// A namespace with `labels`, and the name label the API server adds to every one.
    pub fn new(name: &str, labels: Labels) -> Namespace {
        let mut labels = labels;
        labels
            .entry(NAMESPACE_NAME_LABEL.to_string())
            .or_insert_with(|| name.to_string());
        Namespace {
            name: name.to_string(),
            labels,
        }
    }
}

/// Every pod and namespace, as the node's watches see them.
#[derive(Debug, Clone, Default)]
pub struct Cluster {
    pub pods: BTreeMap<PodKey, Pod>,
    pub namespaces: BTreeMap<String, Namespace>,
}

impl Cluster {
    pub fn add_pod(&mut self, pod: Pod) {
        self.pods.insert(pod.key.clone(), pod);
    }

    pub fn add_namespace(&mut self, ns: Namespace) {
        self.namespaces.insert(ns.name.clone(), ns);
    }

    /// A namespace's labels; a namespace not (yet) seen has only its name label.
    pub fn namespace_labels(&self, name: &str) -> Labels {
        match self.namespaces.get(name) {
            Some(ns) => ns.labels.clone(),
            None => Namespace::new(name, Labels::new()).labels,
        }
    }
}

impl Pod {
    /// The pod as policy sees it, from the API's object.
    pub fn from_k8s(pod: &k8s_openapi::api::core::v1::Pod) -> Pod {
        let meta = &pod.metadata;
        let spec = pod.spec.as_ref();
        let status = pod.status.as_ref();
        let mut ips: Vec<IpAddr> = status
            .and_then(|s| s.pod_ips.as_ref())
            .into_iter()
            .flatten()
            .filter_map(|ip| ip.ip.parse().ok())
            .collect();
        if ips.is_empty() {
            ips.extend(
                status
                    .and_then(|s| s.pod_ip.as_deref())
                    .and_then(|ip| ip.parse::<IpAddr>().ok()),
            );
        }
        let phase = status.and_then(|s| s.phase.as_deref());
        let named_ports = spec
            .into_iter()
            .flat_map(|s| s.containers.iter())
            .flat_map(|c| c.ports.iter().flatten())
            .filter_map(|p| {
                Some(NamedPort {
                    name: p.name.clone()?,
                    protocol: Protocol::from_api(p.protocol.as_deref().unwrap_or("TCP"))?,
                    port: u16::try_from(p.container_port).ok()?,
                })
            })
            .collect();
        Pod {
            key: PodKey::new(
                meta.namespace.as_deref().unwrap_or_default(),
                meta.name.as_deref().unwrap_or_default(),
            ),
            labels: meta.labels.clone().unwrap_or_default(),
            ips,
            node: spec.and_then(|s| s.node_name.clone()),
            host_network: spec.and_then(|s| s.host_network).unwrap_or(false),
            finished: matches!(phase, Some("Succeeded" | "Failed")),
            named_ports,
        }
    }
}

impl Namespace {
    pub fn from_k8s(ns: &k8s_openapi::api::core::v1::Namespace) -> Namespace {
        let name = ns.metadata.name.as_deref().unwrap_or_default();
        Namespace::new(name, ns.metadata.labels.clone().unwrap_or_default())
    }
}
