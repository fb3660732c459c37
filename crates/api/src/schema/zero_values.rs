//! What Go's JSON encoding prints that serde's does not: empty non-pointer structs and
//! zero non-`omitempty` fields, per kind, so objects read back as kube-apiserver writes them.

use serde_json::{Map, Value};

/// Values Go's JSON encoding prints for empty non-pointer structs and non-`omitempty` fields,
/// added when absent so `kubectl get -o yaml` shows what Kubernetes shows. Only fields that
/// Kubernetes always prints for the kind are touched.
pub fn go_zero_values(kind: &str, obj: &mut Value) {
    let Some(o) = obj.as_object_mut() else {
        return;
    };
    match kind {
        "Pod" => {
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
                                let Some(st) = cs.get_mut(state).and_then(Value::as_object_mut)
                                else {
                                    continue;
                                };
                                if let Some(r) =
                                    st.get_mut("running").and_then(Value::as_object_mut)
                                {
                                    ensure(r, "startedAt", Value::Null);
                                }
                                if let Some(t) =
                                    st.get_mut("terminated").and_then(Value::as_object_mut)
                                {
                                    ensure(t, "startedAt", Value::Null);
                                    ensure(t, "finishedAt", Value::Null);
                                }
                            }
                        }
                    }
                }
            }
        }
        "Service" => {
            ensure_obj(o, "spec");
            ensure_obj(o, "status");
            if let Some(status) = o.get_mut("status").and_then(Value::as_object_mut) {
                ensure_obj(status, "loadBalancer");
            }
        }
        "Deployment"
        | "ReplicaSet"
        | "DaemonSet"
        | "StatefulSet"
        | "ReplicationController"
        | "Job" => {
            ensure_obj(o, "spec");
            ensure_obj(o, "status");
            match kind {
                "Deployment" => condition_times(o, &["lastUpdateTime", "lastTransitionTime"]),
                "Job" => condition_times(o, &["lastProbeTime", "lastTransitionTime"]),
                _ => condition_times(o, &["lastTransitionTime"]),
            }
            if let Some(spec) = o.get_mut("spec").and_then(Value::as_object_mut) {
                template_zero_values(spec);
                claim_template_zero_values(spec);
            }
            if let Some(status) = o.get_mut("status").and_then(Value::as_object_mut) {
                for key in workload_status_counters(kind) {
                    ensure(status, key, Value::from(0));
                }
            }
        }
        "CronJob" => {
            ensure_obj(o, "spec");
            ensure_obj(o, "status");
            if let Some(job) = o
                .get_mut("spec")
                .and_then(Value::as_object_mut)
                .and_then(|s| s.get_mut("jobTemplate"))
                .and_then(Value::as_object_mut)
            {
                meta_creation_timestamp(job);
                if let Some(spec) = job.get_mut("spec").and_then(Value::as_object_mut) {
                    template_zero_values(spec);
                }
            }
        }
        "Namespace" => {
            ensure_obj(o, "spec");
            ensure_obj(o, "status");
            condition_times(o, &["lastTransitionTime"]);
        }
        "Node" => {
            ensure_obj(o, "spec");
            ensure_obj(o, "status");
            condition_times(o, &["lastHeartbeatTime", "lastTransitionTime"]);
            if let Some(status) = o.get_mut("status").and_then(Value::as_object_mut) {
                ensure_obj(status, "daemonEndpoints");
                if let Some(de) = status
                    .get_mut("daemonEndpoints")
                    .and_then(Value::as_object_mut)
                {
                    ensure_obj(de, "kubeletEndpoint");
                    if let Some(ke) = de.get_mut("kubeletEndpoint").and_then(Value::as_object_mut) {
                        ensure(ke, "Port", Value::from(0));
                    }
                }
                ensure_obj(status, "nodeInfo");
                if let Some(info) = status.get_mut("nodeInfo").and_then(Value::as_object_mut) {
                    for key in [
                        "architecture",
                        "bootID",
                        "containerRuntimeVersion",
                        "kernelVersion",
                        "kubeProxyVersion",
                        "kubeletVersion",
                        "machineID",
                        "operatingSystem",
                        "osImage",
                        "systemUUID",
                    ] {
                        ensure(info, key, Value::from(""));
                    }
                }
            }
        }
        "Event" => {
            ensure_obj(o, "involvedObject");
            ensure_obj(o, "source");
            ensure(o, "firstTimestamp", Value::Null);
            ensure(o, "lastTimestamp", Value::Null);
            ensure(o, "eventTime", Value::Null);
            ensure(o, "reportingComponent", Value::from(""));
            ensure(o, "reportingInstance", Value::from(""));
        }
        "Lease" => ensure_obj(o, "spec"),
        "PersistentVolumeClaim" => {
            ensure_obj(o, "spec");
            ensure_obj(o, "status");
        }
        "EndpointSlice" => {
            if let Some(list) = o.get_mut("endpoints").and_then(Value::as_array_mut) {
                for ep in list.iter_mut().filter_map(Value::as_object_mut) {
                    ensure_obj(ep, "conditions");
                }
            }
        }
        "Scale" => {
            ensure_obj(o, "spec");
            ensure_obj(o, "status");
            if let Some(status) = o.get_mut("status").and_then(Value::as_object_mut) {
                ensure(status, "replicas", Value::from(0));
            }
        }
        _ => {}
    }
}

/// Status counters Go prints even when zero (not `omitempty`) for a workload kind.
pub fn workload_status_counters(kind: &str) -> &'static [&'static str] {
    match kind {
        "ReplicaSet" | "ReplicationController" => &["replicas"],
        "StatefulSet" => &["replicas", "availableReplicas"],
        "DaemonSet" => &[
            "currentNumberScheduled",
            "numberMisscheduled",
            "desiredNumberScheduled",
            "numberReady",
        ],
        _ => &[],
    }
}

/// `metadata.creationTimestamp: null` of an embedded object (a zero `metav1.Time`).
fn meta_creation_timestamp(o: &mut Map<String, Value>) {
    ensure_obj(o, "metadata");
    if let Some(meta) = o.get_mut("metadata").and_then(Value::as_object_mut) {
        ensure(meta, "creationTimestamp", Value::Null);
    }
}

/// The pod template's zero values under a workload's `spec.template`.
fn template_zero_values(spec: &mut Map<String, Value>) {
    if let Some(template) = spec.get_mut("template").and_then(Value::as_object_mut) {
        meta_creation_timestamp(template);
    }
}

/// A StatefulSet's `volumeClaimTemplates`: embedded PVCs print metadata and status.
fn claim_template_zero_values(spec: &mut Map<String, Value>) {
    if let Some(list) = spec
        .get_mut("volumeClaimTemplates")
        .and_then(Value::as_array_mut)
    {
        for pvc in list.iter_mut().filter_map(Value::as_object_mut) {
            meta_creation_timestamp(pvc);
            ensure_obj(pvc, "spec");
            ensure_obj(pvc, "status");
        }
    }
}

/// `metav1.Time` fields of `status.conditions[*]`: Go prints a zero time as `null`.
fn condition_times(o: &mut Map<String, Value>, keys: &[&str]) {
    let Some(conditions) = o
        .get_mut("status")
        .and_then(Value::as_object_mut)
        .and_then(|s| s.get_mut("conditions"))
        .and_then(Value::as_array_mut)
    else {
        return;
    };
    for c in conditions.iter_mut().filter_map(Value::as_object_mut) {
        for key in keys {
            ensure(c, key, Value::Null);
        }
    }
}

fn ensure(o: &mut Map<String, Value>, key: &str, value: Value) {
    if !o.contains_key(key) {
        o.insert(key.to_string(), value);
    }
}

fn ensure_obj(o: &mut Map<String, Value>, key: &str) {
    match o.get(key) {
        Some(Value::Object(_)) => {}
        Some(Value::Null) | None => {
            o.insert(key.to_string(), Value::Object(Map::new()));
        }
        Some(_) => {}
    }
}
