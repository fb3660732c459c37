//! Node (core): what cairn does that is specific to it.

use crate::kinds::prelude::*;

pub const STRATEGY: Strategy = Strategy {
    default: Some(crate::defaults::default_node),
    validate: Some(crate::validation::validate_node),
    validate_update: Some(crate::validation::validate_node_update),
    columns: Some(columns),
    row: Some(row),
    normalize: roundtrip::<k8s_openapi::api::core::v1::Node>,
    zero_values: Some(zero_values),
    allow_create_on_update: true,
    ..Strategy::NONE
};

fn columns() -> Vec<Col> {
    vec![
        NAME,
        col("Status", "string", "The status of the node"),
        col("Roles", "string", "The roles of the node"),
        AGE,
        col("Version", "string", "Kubelet Version reported by the node."),
        wide("Internal-IP", "string", DESC_NODE_ADDRESSES),
        wide("External-IP", "string", DESC_NODE_ADDRESSES),
        wide("OS-Image", "string", "OS Image reported by the node from /etc/os-release (e.g. Debian GNU/Linux 7 (wheezy))."),
        wide("Kernel-Version", "string", "Kernel Version reported by the node from 'uname -r' (e.g. 3.16.0-0.bpo.4-amd64)."),
        wide("Container-Runtime", "string", "ContainerRuntime Version reported by the node through runtime remote API (e.g. containerd://1.4.2)."),
    ]
}

fn row(obj: &Value, name: Value, created: &str, _now: DateTime<Utc>) -> Vec<Value> {
    node_row(obj, name, created)
}

/// Go's zero values of the kind (see `Strategy::zero_values`).
fn zero_values(o: &mut Map<String, Value>) {
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
