//! What the scheduler needs of a pod, compiled once from the API object: requests,
//! host ports, tolerations, node selection, affinity terms and spread constraints.

use std::collections::HashSet;
use std::sync::Arc;

use cairn_semantics::resources::{pod_requests, MissingRequests};
use cairn_semantics::selector::{Labels, NodeSelectorTerms, NodeTerm, Selector, SelectorError};
use cairn_semantics::Resources;
use k8s_openapi::api::core::v1::{
    Affinity, Pod, PodAffinityTerm, PodSpec, Toleration, TopologySpreadConstraint,
    WeightedPodAffinityTerm,
};

pub const HOSTNAME_KEY: &str = "kubernetes.io/hostname";
pub const ZONE_KEY: &str = "topology.kubernetes.io/zone";

#[derive(Debug, thiserror::Error)]
pub enum PodInfoError {
    #[error("pod {pod}: {field}: {source}")]
    Selector {
        pod: String,
        field: &'static str,
        source: SelectorError,
    },
}

/// A `hostPort` a container asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostPort {
    pub ip: String,
    pub protocol: String,
    pub port: i32,
}

impl HostPort {
    /// Two ports conflict on the same protocol and port when either binds all addresses.
    pub fn conflicts(&self, o: &HostPort) -> bool {
        let wildcard = |ip: &str| ip.is_empty() || ip == "0.0.0.0" || ip == "::";
        self.port == o.port
            && self.protocol == o.protocol
            && (self.ip == o.ip || wildcard(&self.ip) || wildcard(&o.ip))
    }
}

/// Which namespaces an affinity term looks at.
#[derive(Debug, Clone)]
pub struct NamespaceSet {
    pub names: HashSet<String>,
    /// `namespaceSelector`; `Some(everything)` for `{}`.
    pub selector: Option<Selector>,
}

impl NamespaceSet {
    pub fn matches(&self, ns: &str, ns_labels: Option<&Labels>) -> bool {
        if self.names.contains(ns) {
            return true;
        }
        match (&self.selector, ns_labels) {
            (Some(s), _) if s.is_everything() => true,
            (Some(s), Some(l)) => s.matches(l),
            _ => false,
        }
    }
}

/// A compiled pod (anti-)affinity term.
#[derive(Debug, Clone)]
pub struct AffinityTerm {
    pub selector: Selector,
    pub namespaces: NamespaceSet,
    pub topology_key: String,
    pub weight: i64,
}

impl AffinityTerm {
    pub fn matches(&self, pod: &PodInfo, ns_labels: Option<&Labels>) -> bool {
        self.namespaces.matches(&pod.namespace, ns_labels) && self.selector.matches(&pod.labels)
    }
}

/// Which pods a spread constraint counts.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum SpreadSelector {
    Labels(Selector),
    /// System default spreading: pods of the same controller.
    SameOwner(String),
}

#[derive(Debug, Clone)]
pub struct SpreadConstraint {
    pub max_skew: i32,
    pub topology_key: String,
    pub hard: bool,
    pub selector: SpreadSelector,
    pub min_domains: Option<i32>,
    /// nodeAffinityPolicy Honor (default) / Ignore.
    pub honor_node_affinity: bool,
    /// nodeTaintsPolicy Honor / Ignore (default).
    pub honor_taints: bool,
}

impl SpreadConstraint {
    pub fn counts(&self, namespace: &str, p: &PodInfo) -> bool {
        if p.namespace != namespace || p.terminating {
            return false;
        }
        match &self.selector {
            SpreadSelector::Labels(s) => s.matches(&p.labels),
            SpreadSelector::SameOwner(uid) => p.owner_uid.as_deref() == Some(uid.as_str()),
        }
    }
}

#[derive(Debug, Clone, Default)]
pub struct PodInfo {
    pub uid: String,
    pub namespace: String,
    pub name: String,
    pub labels: Labels,
    pub priority: i32,
    pub node_name: Option<String>,
    pub scheduler_name: String,
    pub requests: Resources,
    /// cpu/memory with the scoring defaults for containers that ask for none.
    pub non_zero_requests: Resources,
    pub host_ports: Vec<HostPort>,
    pub tolerations: Vec<Toleration>,
    pub node_selector: Labels,
    pub required_node_affinity: Option<NodeSelectorTerms>,
    pub preferred_node_affinity: Vec<(i64, NodeTerm)>,
    pub required_affinity: Vec<AffinityTerm>,
    pub required_anti_affinity: Vec<AffinityTerm>,
    pub preferred_affinity: Vec<AffinityTerm>,
    pub preferred_anti_affinity: Vec<AffinityTerm>,
    pub spread: Vec<SpreadConstraint>,
    /// Containers' images, normalised.
    pub images: Vec<String>,
    pub owner_uid: Option<String>,
    pub gated: bool,
    pub terminating: bool,
    pub preemption_never: bool,
    /// The claims its volumes name.
    pub claims: Vec<String>,
}

impl PodInfo {
    pub fn key(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }

    pub fn has_affinity(&self) -> bool {
        !self.required_affinity.is_empty()
            || !self.required_anti_affinity.is_empty()
            || !self.preferred_affinity.is_empty()
            || !self.preferred_anti_affinity.is_empty()
    }

    /// Whether the pod's nodeSelector and required node affinity admit the node.
    pub fn fits_node_selection(&self, node_name: &str, labels: &Labels) -> bool {
        self.node_selector
            .iter()
            .all(|(k, v)| labels.get(k) == Some(v))
            && self
                .required_node_affinity
                .as_ref()
                .is_none_or(|t| t.matches(node_name, labels))
    }

    pub fn from_pod(pod: &Pod) -> Result<PodInfo, PodInfoError> {
        let meta = &pod.metadata;
        let namespace = meta.namespace.clone().unwrap_or_else(|| "default".into());
        let name = meta.name.clone().unwrap_or_default();
        let err = |(field, source): (&'static str, SelectorError)| PodInfoError::Selector {
            pod: format!("{namespace}/{name}"),
            field,
            source,
        };
        let empty = PodSpec::default();
        let spec = pod.spec.as_ref().unwrap_or(&empty);
        let labels = meta.labels.clone().unwrap_or_default();
        let aff = Affinities::compile(spec.affinity.as_ref(), &namespace, &labels).map_err(err)?;
        let spread = compile_spread(&spec.topology_spread_constraints, &labels)
            .map_err(|e| err(("spec.topologySpreadConstraints", e)))?;
        Ok(PodInfo {
            uid: meta.uid.clone().unwrap_or_default(),
            priority: spec.priority.unwrap_or(0),
            node_name: spec.node_name.clone().filter(|n| !n.is_empty()),
            scheduler_name: spec
                .scheduler_name
                .clone()
                .unwrap_or_else(|| "default-scheduler".into()),
            requests: pod_requests(spec, MissingRequests::Zero),
            non_zero_requests: pod_requests(spec, MissingRequests::Defaulted),
            host_ports: host_ports(spec),
            tolerations: spec.tolerations.clone().unwrap_or_default(),
            node_selector: spec.node_selector.clone().unwrap_or_default(),
            required_node_affinity: aff.required_node,
            preferred_node_affinity: aff.preferred_node,
            required_affinity: aff.required,
            preferred_affinity: aff.preferred,
            required_anti_affinity: aff.required_anti,
            preferred_anti_affinity: aff.preferred_anti,
            spread,
            images: spec
                .init_containers
                .iter()
                .flatten()
                .chain(spec.containers.iter())
                .filter_map(|c| c.image.as_deref().map(normalize_image))
                .collect(),
            owner_uid: meta
                .owner_references
                .iter()
                .flatten()
                .find(|o| o.controller == Some(true))
                .map(|o| o.uid.clone()),
            gated: spec
                .scheduling_gates
                .as_ref()
                .is_some_and(|g| !g.is_empty()),
            terminating: meta.deletion_timestamp.is_some(),
            preemption_never: spec.preemption_policy.as_deref() == Some("Never"),
            claims: spec
                .volumes
                .iter()
                .flatten()
                .filter_map(|v| {
                    v.persistent_volume_claim
                        .as_ref()
                        .map(|c| c.claim_name.clone())
                })
                .collect(),
            namespace,
            name,
            labels,
        })
    }
}

/// A pod's `spec.affinity`, compiled.
#[derive(Default)]
struct Affinities {
    required_node: Option<NodeSelectorTerms>,
    preferred_node: Vec<(i64, NodeTerm)>,
    required: Vec<AffinityTerm>,
    preferred: Vec<AffinityTerm>,
    required_anti: Vec<AffinityTerm>,
    preferred_anti: Vec<AffinityTerm>,
}

type FieldError = (&'static str, SelectorError);

impl Affinities {
    fn compile(a: Option<&Affinity>, ns: &str, labels: &Labels) -> Result<Affinities, FieldError> {
        let Some(a) = a else {
            return Ok(Affinities::default());
        };
        let mut out = Affinities::default();
        if let Some(na) = &a.node_affinity {
            const REQ: &str =
                "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution";
            const PREF: &str =
                "spec.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution";
            out.required_node = na
                .required_during_scheduling_ignored_during_execution
                .as_ref()
                .map(NodeSelectorTerms::compile)
                .transpose()
                .map_err(|e| (REQ, e))?;
            out.preferred_node = na
                .preferred_during_scheduling_ignored_during_execution
                .iter()
                .flatten()
                .map(|p| Ok((i64::from(p.weight), NodeTerm::compile(&p.preference)?)))
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| (PREF, e))?;
        }
        let terms =
            |list: &Option<Vec<PodAffinityTerm>>| -> Result<Vec<AffinityTerm>, SelectorError> {
                list.iter()
                    .flatten()
                    .map(|t| compile_term(t, 1, ns, labels))
                    .collect()
            };
        let weighted = |list: &Option<Vec<WeightedPodAffinityTerm>>| -> Result<Vec<AffinityTerm>, SelectorError> {
            list.iter()
                .flatten()
                .map(|w| compile_term(&w.pod_affinity_term, i64::from(w.weight), ns, labels))
                .collect()
        };
        if let Some(pa) = &a.pod_affinity {
            let f = |e| ("spec.affinity.podAffinity", e);
            out.required =
                terms(&pa.required_during_scheduling_ignored_during_execution).map_err(f)?;
            out.preferred =
                weighted(&pa.preferred_during_scheduling_ignored_during_execution).map_err(f)?;
        }
        if let Some(paa) = &a.pod_anti_affinity {
            let f = |e| ("spec.affinity.podAntiAffinity", e);
            out.required_anti =
                terms(&paa.required_during_scheduling_ignored_during_execution).map_err(f)?;
            out.preferred_anti =
                weighted(&paa.preferred_during_scheduling_ignored_during_execution).map_err(f)?;
        }
        Ok(out)
    }
}

fn compile_term(
    t: &PodAffinityTerm,
    weight: i64,
    pod_ns: &str,
    pod_labels: &Labels,
) -> Result<AffinityTerm, SelectorError> {
    let mut selector = match &t.label_selector {
        Some(s) => Selector::from_label_selector(s)?,
        None => Selector::nothing(),
    };
    for key in t.match_label_keys.iter().flatten() {
        if let Some(v) = pod_labels.get(key) {
            selector.and_equals(key, v);
        }
    }
    let ns_selector = t
        .namespace_selector
        .as_ref()
        .map(Selector::from_label_selector)
        .transpose()?;
    let mut names: HashSet<String> = t.namespaces.iter().flatten().cloned().collect();
    if names.is_empty() && ns_selector.is_none() {
        names.insert(pod_ns.to_string());
    }
    Ok(AffinityTerm {
        selector,
        namespaces: NamespaceSet {
            names,
            selector: ns_selector,
        },
        topology_key: t.topology_key.clone(),
        weight,
    })
}

fn compile_spread(
    list: &Option<Vec<TopologySpreadConstraint>>,
    pod_labels: &Labels,
) -> Result<Vec<SpreadConstraint>, SelectorError> {
    list.iter()
        .flatten()
        .map(|c| {
            let mut selector = match &c.label_selector {
                Some(s) => Selector::from_label_selector(s)?,
                None => Selector::nothing(),
            };
            for key in c.match_label_keys.iter().flatten() {
                if let Some(v) = pod_labels.get(key) {
                    selector.and_equals(key, v);
                }
            }
            Ok(SpreadConstraint {
                max_skew: c.max_skew.max(1),
                topology_key: c.topology_key.clone(),
                hard: c.when_unsatisfiable != "ScheduleAnyway",
                selector: SpreadSelector::Labels(selector),
                min_domains: c.min_domains,
                honor_node_affinity: c.node_affinity_policy.as_deref() != Some("Ignore"),
                honor_taints: c.node_taints_policy.as_deref() == Some("Honor"),
            })
        })
        .collect()
}

fn host_ports(spec: &k8s_openapi::api::core::v1::PodSpec) -> Vec<HostPort> {
    spec.init_containers
        .iter()
        .flatten()
        .chain(spec.containers.iter())
        .flat_map(|c| c.ports.iter().flatten())
        .filter_map(|p| {
            p.host_port.filter(|hp| *hp > 0).map(|port| HostPort {
                ip: p.host_ip.clone().unwrap_or_default(),
                protocol: p.protocol.clone().unwrap_or_else(|| "TCP".into()),
                port,
            })
        })
        .collect()
}

/// An image reference in its full form (`httpd` → `docker.io/library/httpd:latest`), so
/// a pod's image matches the names a node reports.
pub fn normalize_image(image: &str) -> String {
    let (first, rest) = image.split_once('/').unwrap_or(("", image));
    let has_registry =
        !first.is_empty() && (first.contains('.') || first.contains(':') || first == "localhost");
    let mut full = if has_registry {
        image.to_string()
    } else if first.is_empty() {
        format!("docker.io/library/{rest}")
    } else {
        format!("docker.io/{image}")
    };
    let last = full.rsplit('/').next().unwrap_or("");
    if !last.contains(':') && !full.contains('@') {
        full.push_str(":latest");
    }
    full
}

pub type SharedPod = Arc<PodInfo>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn image_names_normalise() {
        assert_eq!(normalize_image("httpd"), "docker.io/library/httpd:latest");
        assert_eq!(normalize_image("me/app:1"), "docker.io/me/app:1");
        assert_eq!(normalize_image("reg.io:5000/a/b"), "reg.io:5000/a/b:latest");
        assert_eq!(
            normalize_image("a@sha256:00"),
            "docker.io/library/a@sha256:00"
        );
    }

    #[test]
    fn host_port_conflicts() {
        let p = |ip: &str, port| HostPort {
            ip: ip.into(),
            protocol: "TCP".into(),
            port,
        };
        assert!(p("", 80).conflicts(&p("10.0.0.1", 80)));
        assert!(!p("10.0.0.2", 80).conflicts(&p("10.0.0.1", 80)));
        assert!(!p("", 80).conflicts(&p("", 81)));
    }
}
