//! Pod (core): what cairn does that is specific to it.

use crate::kinds::prelude::*;

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
    let spec = pod.get("spec").and_then(|s| {
        serde_json::from_value::<k8s_openapi::api::core::v1::PodSpec>(s.clone()).ok()
    });
    match spec {
        Some(spec) => cairn_semantics::qos::qos_class(&spec).as_str(),
        None => "BestEffort",
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
