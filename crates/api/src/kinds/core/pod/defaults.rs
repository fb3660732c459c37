//! A pod's own defaults (`SetDefaults_Pod`, the v1 conversion's IP lists) around the shared
//! pod-spec defaults of `crate::defaults::pod`, which templates use too.

use serde_json::{json, Map, Value};

use crate::defaults::pod::*;
use crate::defaults::*;

/// Upstream's `kubernetes.io/config.mirror`: the API copy of a static pod.
const MIRROR_ANNOTATION: &str = "kubernetes.io/config.mirror";

pub(super) fn default_pod(o: &mut Map<String, Value>) {
    let mirror = o
        .get("metadata")
        .and_then(|m| m.get("annotations"))
        .and_then(|a| a.get(MIRROR_ANNOTATION))
        .is_some();
    if let Some(spec) = child_obj(o, "spec") {
        default_pod_spec(spec);
        default_pod_only_spec(spec);
        admit_pod_spec(spec, mirror);
    }
    if let Some(status) = child_obj(o, "status") {
        // Set by the pod strategy on create; the agent moves it on from there.
        set_default_str(status, "phase", "Pending");
        sync_ip_list(status, "podIP", "podIPs");
        sync_ip_list(status, "hostIP", "hostIPs");
    }
}

/// The v1 conversion keeps `podIP` and `podIPs[0].ip` (and `hostIP`/`hostIPs`) in step.
fn sync_ip_list(status: &mut Map<String, Value>, single: &str, list: &str) {
    let first = status
        .get(list)
        .and_then(Value::as_array)
        .and_then(|a| a.first())
        .and_then(|v| v.get("ip"))
        .and_then(Value::as_str)
        .map(str::to_string);
    let ip = str_of(status, single).to_string();
    let list_empty = status
        .get(list)
        .is_none_or(|v| v.is_null() || v.as_array().is_some_and(|a| a.is_empty()));
    if !ip.is_empty() && list_empty {
        status.insert(list.to_string(), json!([{ "ip": ip }]));
    } else if let Some(first) = first.filter(|_| is_unset_str(status.get(single))) {
        status.insert(single.to_string(), Value::from(first));
    }
}

/// `SetDefaults_Pod`: only pods, not templates.
fn default_pod_only_spec(spec: &mut Map<String, Value>) {
    for key in ["containers", "initContainers"] {
        for container in list_objs(spec, key) {
            requests_from_limits(container);
        }
    }
    set_default(spec, "enableServiceLinks", Value::Bool(true));
    if spec.get("hostNetwork") == Some(&Value::Bool(true)) {
        for key in ["containers", "initContainers"] {
            for container in list_objs(spec, key) {
                for port in list_objs(container, "ports") {
                    if is_unset_int(port.get("hostPort")) {
                        if let Some(cp) = port.get("containerPort").cloned() {
                            port.insert("hostPort".into(), cp);
                        }
                    }
                }
            }
        }
    }
}
