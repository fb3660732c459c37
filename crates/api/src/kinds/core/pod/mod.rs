//! Pod (core): what cairn does that is specific to it.

use crate::kinds::prelude::*;
use serde::Deserialize;

mod defaults;
mod table;
mod validation;

pub const STRATEGY: Strategy = Strategy {
    default: Some(defaults::default_pod),
    validate: Some(validation::validate_pod),
    validate_update: Some(validation::validate_pod_update),
    columns: Some(columns),
    row: Some(table::row),
    row_conditions: Some(table::row_conditions),
    normalize: roundtrip::<k8s_openapi::api::core::v1::Pod>,
    prepare_for_create: Some(prepare_for_create),
    admission: &[
        Admission::PodTolerations,
        Admission::PodResources,
        Admission::GracefulDeletion,
        Admission::PodQuota,
    ],
    zero_values: Some(zero_values),
    ..Strategy::NONE
};

fn columns() -> Vec<Col> {
    vec![
        NAME,
        col("Ready", "string", "The aggregate readiness state of this pod for accepting traffic."),
        col("Status", "string", "The aggregate status of the containers in this pod."),
        col("Restarts", "string", "The number of times the containers in this pod have been restarted and when the last container in this pod has restarted."),
        AGE,
        wide("IP", "string", "podIP address allocated to the pod. Routable at least within the cluster. Empty if not yet allocated."),
        wide("Node", "string", "NodeName indicates in which node this pod is scheduled. If empty, this pod is a candidate for scheduling by the scheduler defined in schedulerName. Once this field is set, the kubelet for this node becomes responsible for the lifecycle of this pod. This field should not be used to express a desire for the pod to be scheduled on a specific node. https://kubernetes.io/docs/concepts/scheduling-eviction/assign-pod-node/#nodename"),
        wide("Nominated Node", "string", "nominatedNodeName is set only when this pod preempts other pods on the node, but it cannot be scheduled right away as preemption victims receive their graceful termination periods. This field does not guarantee that the pod will be scheduled on this node. Scheduler may decide to place the pod elsewhere if other nodes become available sooner. Scheduler may also decide to give the resources on this node to a higher priority pod that is created after preemption. As a result, this field may be different than PodSpec.nodeName when the pod is scheduled."),
        wide("Readiness Gates", "string", "If specified, all readiness gates will be evaluated for pod readiness. A pod is ready when all its containers are ready AND all conditions specified in the readiness gates have status equal to \"True\" More info: https://git.k8s.io/enhancements/keps/sig-network/580-pod-readiness-gates"),
    ]
}

/// Clients do not create status: a new pod is Pending (its QoS class is set once admission
/// has settled its resources: `Admission::PodResources`).
fn prepare_for_create(obj: &mut Value) {
    obj["status"] = json!({"phase": "Pending"});
}

/// The pod's QoS class (`cairn-semantics`, Kubernetes' GetPodQOS).
pub fn qos_class(pod: &Value) -> &'static str {
    let spec = pod
        .get("spec")
        .and_then(|s| ResourcesOnly::deserialize(s).ok());
    match spec {
        Some(spec) => cairn_semantics::qos::qos_class(&spec.into_spec()).as_str(),
        None => "BestEffort",
    }
}

/// The containers' resources, all GetPodQOS reads: decoding the whole spec (a clone
/// and every container field) on each create cost more than the rest of admission.
#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct ResourcesOnly {
    #[serde(default)]
    containers: Vec<ContainerResources>,
    init_containers: Option<Vec<ContainerResources>>,
}

#[derive(serde::Deserialize)]
struct ContainerResources {
    resources: Option<k8s_openapi::api::core::v1::ResourceRequirements>,
}

impl ResourcesOnly {
    fn into_spec(self) -> k8s_openapi::api::core::v1::PodSpec {
        let container = |c: ContainerResources| k8s_openapi::api::core::v1::Container {
            resources: c.resources,
            ..Default::default()
        };
        k8s_openapi::api::core::v1::PodSpec {
            containers: self.containers.into_iter().map(container).collect(),
            init_containers: self
                .init_containers
                .map(|list| list.into_iter().map(container).collect()),
            ..Default::default()
        }
    }
}

/// Go's zero values of the kind (see `Strategy::zero_values`).
fn zero_values(o: &mut Map<String, Value>) {
    ensure_obj(o, "status");
    condition_times(o, &["lastProbeTime", "lastTransitionTime"]);
    if let Some(status) = o.get_mut("status").and_then(Value::as_object_mut) {
        for key in [
            "containerStatuses",
            "initContainerStatuses",
            "ephemeralContainerStatuses",
        ] {
            if let Some(list) = status.get_mut(key).and_then(Value::as_array_mut) {
                for cs in list.iter_mut().filter_map(Value::as_object_mut) {
                    ensure_obj(cs, "state");
                    ensure_obj(cs, "lastState");
                    ensure(cs, "ready", Value::Bool(false));
                    ensure(cs, "restartCount", Value::from(0));
                    ensure(cs, "image", Value::from(""));
                    ensure(cs, "imageID", Value::from(""));
                    for state in ["state", "lastState"] {
                        let Some(st) = cs.get_mut(state).and_then(Value::as_object_mut) else {
                            continue;
                        };
                        if let Some(r) = st.get_mut("running").and_then(Value::as_object_mut) {
                            ensure(r, "startedAt", Value::Null);
                        }
                        if let Some(t) = st.get_mut("terminated").and_then(Value::as_object_mut) {
                            ensure(t, "startedAt", Value::Null);
                            ensure(t, "finishedAt", Value::Null);
                        }
                    }
                }
            }
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    /// The slim decode answers as a decode of the whole spec does.
    #[test]
    fn qos_class_reads_only_resources_and_agrees_with_the_full_spec() {
        let guaranteed = json!({"limits": {"cpu": "1", "memory": "1Gi"}});
        let burstable = json!({"requests": {"cpu": "100m"}});
        let cases = [
            (
                json!({"containers": [{"name": "a", "image": "x"}]}),
                "BestEffort",
            ),
            (
                json!({"containers": [{"name": "a", "resources": guaranteed}]}),
                "Guaranteed",
            ),
            (
                json!({"containers": [{"name": "a", "resources": guaranteed}],
                       "initContainers": [{"name": "i", "resources": burstable}]}),
                "Burstable",
            ),
            (
                json!({"containers": [{"name": "a", "env": [{"name": "E"}], "resources": burstable}]}),
                "Burstable",
            ),
            (json!({"containers": "not a list"}), "BestEffort"),
        ];
        for (spec, want) in cases {
            let pod = json!({"spec": spec});
            assert_eq!(qos_class(&pod), want, "{spec}");
            if let Ok(full) = serde_json::from_value::<k8s_openapi::api::core::v1::PodSpec>(spec) {
                assert_eq!(cairn_semantics::qos::qos_class(&full).as_str(), want);
            }
        }
    }
}
