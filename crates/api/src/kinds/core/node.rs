//! Node (core): what cairn does that is specific to it.

use crate::kinds::prelude::*;

pub const STRATEGY: Strategy = Strategy {
    default: Some(default_node),
    validate: Some(validate_node),
    validate_update: Some(validate_node_update),
    columns: Some(columns),
    row: Some(row),
    normalize: roundtrip::<k8s_openapi::api::core::v1::Node>,
    zero_values: Some(zero_values),
    allow_create_on_update: true,
    ..Strategy::NONE
};

fn default_node(o: &mut Map<String, Value>) {
    if let Some(status) = existing_obj(o, "status") {
        if is_unset(status.get("allocatable")) {
            if let Some(capacity) = status.get("capacity").filter(|c| c.is_object()).cloned() {
                status.insert("allocatable".into(), capacity);
            }
        }
    }
}

fn validate_node(o: &Map<String, Value>, errs: &mut Vec<Cause>) {
    let empty = Map::new();
    let spec = obj(o, "spec").unwrap_or(&empty);
    for (i, t) in objs(spec, "taints") {
        let tp = format!("spec.taints[{i}]");
        let key = s(t, "key");
        if key.is_empty() {
            errs.push(Cause::required(format!("{tp}.key")));
        }
        for msg in is_qualified_name(key)
            .into_iter()
            .filter(|_| !key.is_empty())
        {
            errs.push(Cause::invalid(format!("{tp}.key"), key, &msg));
        }
        match s(t, "effect") {
            "NoSchedule" | "PreferNoSchedule" | "NoExecute" => {}
            "" => errs.push(Cause::required(format!("{tp}.effect"))),
            other => errs.push(Cause::not_supported(
                format!("{tp}.effect"),
                other,
                &["NoSchedule", "PreferNoSchedule", "NoExecute"],
            )),
        }
    }
    for (i, cidr) in arr(spec, "podCIDRs").iter().enumerate() {
        let c = cidr.as_str().unwrap_or("");
        if c.parse::<ipnetwork::IpNetwork>().is_err() {
            errs.push(Cause::invalid(
                format!("spec.podCIDRs[{i}]"),
                c,
                "must be a valid CIDR value, (e.g. 10.9.8.0/24 or 2001:db8::/64)",
            ));
        }
    }
}

fn validate_node_update(old: &Map<String, Value>, new: &Map<String, Value>, errs: &mut Vec<Cause>) {
    let old_cidrs = path(old, &["spec", "podCIDRs"])
        .and_then(Value::as_array)
        .filter(|a| !a.is_empty());
    let new_cidrs = path(new, &["spec", "podCIDRs"]);
    if let Some(o) = old_cidrs {
        if new_cidrs.and_then(Value::as_array) != Some(o) {
            errs.push(Cause::forbidden(
                "spec.podCIDRs",
                "node updates may not change podCIDR except from \"\" to valid",
            ));
        }
    }
}

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
