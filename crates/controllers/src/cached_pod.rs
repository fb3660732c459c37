//! What the controllers keep of each pod in their cache: metadata (without
//! managedFields), the node, the phase, the Ready condition and the highest restart
//! count. A k8s-openapi `Pod` carries its whole `PodSpec` inline (1.4 KB of its 2.2 KB
//! even when empty), and the cache holds every pod of the cluster; controllers create
//! pods from their owners' templates, never from cached pods.

use std::borrow::Cow;

use cairn_semantics::pod_state::PodView;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::jiff::Timestamp;
use k8s_openapi::NamespaceResourceScope;
use kube::Resource;

#[derive(Clone, Debug, Default, PartialEq)]
pub struct CachedPod {
    pub metadata: ObjectMeta,
    pub node_name: Option<String>,
    pub phase: Option<String>,
    /// The Ready condition: True or not, and its last transition.
    pub ready: Option<(bool, Option<Timestamp>)>,
    pub max_restarts: i32,
    /// The node a not-yet-bound pod is pinned to by a required node-affinity term
    /// `metadata.name In [node]` (how DaemonSet pods are placed).
    pub pinned_node: Option<String>,
    /// Restarts of all its containers (init ones included): a Job with `OnFailure` pods
    /// counts them against its backoff limit.
    pub total_restarts: i32,
    /// Why a failed pod failed, for Jobs' pod failure policies; only kept for pods in
    /// phase Failed.
    pub failure: Option<Box<PodFailure>>,
    /// Addresses, DNS identity and named ports, for the endpoint controllers; `None` until
    /// the pod has an IP.
    pub network: Option<Box<PodNetwork>>,
    /// Tolerations that can apply to NoExecute taints, for taint-based eviction.
    pub no_execute_tolerations: Vec<k8s_openapi::api::core::v1::Toleration>,
    /// What the pod charges ResourceQuotas (requests, limits, scope facts).
    pub quota: Option<Box<cairn_semantics::quota::PodQuota>>,
    /// The claims its volumes name, for claim protection.
    pub claims: Vec<String>,
}

/// What the endpoint controllers read of a pod with an address.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PodNetwork {
    /// `status.podIPs` (or `podIP`).
    pub ips: Vec<String>,
    pub hostname: Option<String>,
    pub subdomain: Option<String>,
    /// Container ports that have a name: `(name, protocol, port)`, for named targetPorts.
    pub named_ports: Vec<(String, String, i32)>,
}

fn network_of(pod: &Pod) -> Option<Box<PodNetwork>> {
    let status = pod.status.as_ref()?;
    let mut ips: Vec<String> = status
        .pod_ips
        .iter()
        .flatten()
        .map(|ip| ip.ip.clone())
        .collect();
    if ips.is_empty() {
        ips.extend(status.pod_ip.clone().filter(|ip| !ip.is_empty()));
    }
    if ips.is_empty() {
        return None;
    }
    let spec = pod.spec.as_ref();
    let named_ports = spec
        .into_iter()
        .flat_map(|s| s.containers.iter())
        .flat_map(|c| c.ports.iter().flatten())
        .filter_map(|p| {
            let name = p.name.clone().filter(|n| !n.is_empty())?;
            let protocol = p.protocol.clone().unwrap_or_else(|| "TCP".into());
            Some((name, protocol, p.container_port))
        })
        .collect();
    Some(Box::new(PodNetwork {
        ips,
        hostname: spec.and_then(|s| s.hostname.clone()),
        subdomain: spec.and_then(|s| s.subdomain.clone()),
        named_ports,
    }))
}

/// Exit codes and conditions of a failed pod.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PodFailure {
    /// `(container, exit code)` of every terminated container, init containers included.
    pub exit_codes: Vec<(String, i32)>,
    /// `(type, status)` of the pod's conditions.
    pub conditions: Vec<(String, String)>,
}

fn failure_of(status: &k8s_openapi::api::core::v1::PodStatus) -> PodFailure {
    let containers = status
        .init_container_statuses
        .iter()
        .flatten()
        .chain(status.container_statuses.iter().flatten());
    PodFailure {
        exit_codes: containers
            .filter_map(|c| {
                let t = c.state.as_ref()?.terminated.as_ref()?;
                Some((c.name.clone(), t.exit_code))
            })
            .collect(),
        conditions: status
            .conditions
            .iter()
            .flatten()
            .map(|c| (c.type_.clone(), c.status.clone()))
            .collect(),
    }
}

fn total_restarts(status: Option<&k8s_openapi::api::core::v1::PodStatus>) -> i32 {
    status.map_or(0, |s| {
        s.init_container_statuses
            .iter()
            .flatten()
            .chain(s.container_statuses.iter().flatten())
            .map(|c| c.restart_count)
            .sum()
    })
}

/// The node of a required `matchFields metadata.name In [one node]` term, if that is the
/// pod's only required node-affinity term.
fn pinned_node(pod: &Pod) -> Option<String> {
    let terms = &pod
        .spec
        .as_ref()?
        .affinity
        .as_ref()?
        .node_affinity
        .as_ref()?
        .required_during_scheduling_ignored_during_execution
        .as_ref()?
        .node_selector_terms;
    let [term] = terms.as_slice() else {
        return None;
    };
    let [field] = term.match_fields.as_deref()? else {
        return None;
    };
    let values = field.values.as_deref()?;
    (field.key == "metadata.name" && field.operator == "In" && values.len() == 1)
        .then(|| values[0].clone())
}

impl From<Pod> for CachedPod {
    fn from(pod: Pod) -> CachedPod {
        let ready = pod.ready_condition();
        let max_restarts = pod.max_restarts();
        let pinned_node = pinned_node(&pod);
        let total_restarts = total_restarts(pod.status.as_ref());
        let network = network_of(&pod);
        let no_execute_tolerations = pod
            .spec
            .iter()
            .flat_map(|s| s.tolerations.iter().flatten())
            .filter(|t| matches!(t.effect.as_deref(), None | Some("") | Some("NoExecute")))
            .cloned()
            .collect();
        let phase = pod.status.as_ref().and_then(|s| s.phase.clone());
        let failure = pod
            .status
            .as_ref()
            .filter(|_| phase.as_deref() == Some("Failed"))
            .map(|s| Box::new(failure_of(s)));
        let quota = Some(Box::new(cairn_semantics::quota::PodQuota::of(&pod)));
        let claims = pod
            .spec
            .iter()
            .flat_map(|s| s.volumes.iter().flatten())
            .filter_map(|v| {
                v.persistent_volume_claim
                    .as_ref()
                    .map(|c| c.claim_name.clone())
            })
            .collect();
        let mut metadata = pod.metadata;
        metadata.managed_fields = None;
        CachedPod {
            metadata,
            node_name: pod.spec.and_then(|s| s.node_name),
            phase,
            ready,
            max_restarts,
            pinned_node,
            total_restarts,
            failure,
            network,
            no_execute_tolerations,
            quota,
            claims,
        }
    }
}

impl Resource for CachedPod {
    type DynamicType = ();
    type Scope = NamespaceResourceScope;

    fn kind(_: &()) -> Cow<'_, str> {
        "Pod".into()
    }
    fn group(_: &()) -> Cow<'_, str> {
        "".into()
    }
    fn version(_: &()) -> Cow<'_, str> {
        "v1".into()
    }
    fn plural(_: &()) -> Cow<'_, str> {
        "pods".into()
    }
    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

impl PodView for CachedPod {
    fn metadata(&self) -> &ObjectMeta {
        &self.metadata
    }
    fn phase(&self) -> &str {
        self.phase.as_deref().unwrap_or("")
    }
    fn ready_condition(&self) -> Option<(bool, Option<Timestamp>)> {
        self.ready
    }
    fn node_name(&self) -> &str {
        self.node_name.as_deref().unwrap_or("")
    }
    fn max_restarts(&self) -> i32 {
        self.max_restarts
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cairn_semantics::pod_state;

    #[test]
    fn keeps_what_the_rules_read() {
        let pod: Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "p", "uid": "u", "labels": {"app": "web"},
                         "managedFields": [{"manager": "kubectl"}]},
            "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "busybox"}]},
            "status": {"phase": "Running",
                       "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": "2026-01-01T00:00:00Z"}],
                       "containerStatuses": [{"name": "c", "image": "", "imageID": "", "ready": true, "restartCount": 3}]}
        }))
        .unwrap();
        let now = Timestamp::now();
        let c = CachedPod::from(pod.clone());
        assert!(c.metadata.managed_fields.is_none());
        assert_eq!(c.node_name(), pod.node_name());
        assert_eq!(c.max_restarts(), 3);
        assert_eq!(
            pod_state::is_available(&c, 5, now),
            pod_state::is_available(&pod, 5, now)
        );
        assert!(pod_state::is_active(&c) && pod_state::is_ready(&c));
        assert!(std::mem::size_of::<CachedPod>() * 3 < std::mem::size_of::<Pod>());
    }
}
