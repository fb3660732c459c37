//! Node (core): what cairn does that is specific to it.

use crate::kinds::prelude::*;

pub const STRATEGY: Strategy = Strategy {
    default: Some(crate::defaults::default_node),
    validate: Some(crate::validation::validate_node),
    validate_update: Some(crate::validation::validate_node_update),
    columns: Some(columns),
    row: Some(row),
    normalize: roundtrip::<k8s_openapi::api::core::v1::Node>,
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
