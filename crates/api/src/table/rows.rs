//! The rows of the core kinds' tables: Nodes, Services, Events and claims
//! (upstream `printNode`, `printService`, `printEvent`, `printPersistentVolumeClaim`).

use super::*;

pub(crate) fn node_row(node: &Value, name: Value, created: &str) -> Vec<Value> {
    let mut status = Vec::new();
    if let Some(c) = get_arr(node, &["status", "conditions"])
        .iter()
        .rev()
        .find(|c| get_str(c, &["type"]) == "Ready")
    {
        status.push(if get_str(c, &["status"]) == "True" {
            "Ready"
        } else {
            "NotReady"
        });
    }
    if status.is_empty() {
        status.push("Unknown");
    }
    if get(node, &["spec", "unschedulable"]) == Some(&Value::Bool(true)) {
        status.push("SchedulingDisabled");
    }
    let mut roles = BTreeSet::new();
    if let Some(labels) = get(node, &["metadata", "labels"]).and_then(Value::as_object) {
        for (k, v) in labels {
            if let Some(role) = k.strip_prefix("node-role.kubernetes.io/") {
                if !role.is_empty() {
                    roles.insert(role.to_string());
                }
            } else if k == "kubernetes.io/role" {
                if let Some(v) = v.as_str().filter(|v| !v.is_empty()) {
                    roles.insert(v.to_string());
                }
            }
        }
    }
    let roles = roles.into_iter().collect::<Vec<_>>().join(",");
    let address = |ty: &str| {
        get_arr(node, &["status", "addresses"])
            .iter()
            .find(|a| get_str(a, &["type"]) == ty)
            .map_or("<none>".to_string(), |a| {
                get_str(a, &["address"]).to_string()
            })
    };
    let info = |k: &str| {
        let v = get_str(node, &["status", "nodeInfo", k]);
        if v.is_empty() {
            "<unknown>".to_string()
        } else {
            v.to_string()
        }
    };
    vec![
        name,
        json!(status.join(",")),
        json!(or_none(&roles)),
        json!(created),
        json!(get_str(node, &["status", "nodeInfo", "kubeletVersion"])),
        json!(address("InternalIP")),
        json!(address("ExternalIP")),
        json!(info("osImage")),
        json!(info("kernelVersion")),
        json!(info("containerRuntimeVersion")),
    ]
}

pub(crate) fn service_row(svc: &Value, name: Value, created: &str) -> Vec<Value> {
    let svc_type = get_str(svc, &["spec", "type"]);
    let cluster_ip = get_arr(svc, &["spec", "clusterIPs"])
        .first()
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| get_str(svc, &["spec", "clusterIP"]));
    let external_ips: Vec<&str> = get_arr(svc, &["spec", "externalIPs"])
        .iter()
        .filter_map(Value::as_str)
        .collect();
    let external = match svc_type {
        "ClusterIP" | "NodePort" => {
            if external_ips.is_empty() {
                "<none>".to_string()
            } else {
                external_ips.join(",")
            }
        }
        "LoadBalancer" => {
            let lb: BTreeSet<&str> = get_arr(svc, &["status", "loadBalancer", "ingress"])
                .iter()
                .filter_map(|i| {
                    let ip = get_str(i, &["ip"]);
                    let host = get_str(i, &["hostname"]);
                    if !ip.is_empty() {
                        Some(ip)
                    } else if !host.is_empty() {
                        Some(host)
                    } else {
                        None
                    }
                })
                .collect();
            let mut all: Vec<&str> = lb.into_iter().collect();
            if all.is_empty() && external_ips.is_empty() {
                "<pending>".to_string()
            } else {
                all.extend(external_ips);
                all.join(",")
            }
        }
        "ExternalName" => get_str(svc, &["spec", "externalName"]).to_string(),
        _ => "<unknown>".to_string(),
    };
    let ports: Vec<String> = get_arr(svc, &["spec", "ports"])
        .iter()
        .map(|p| {
            let port = get_int(p, &["port"]);
            let proto = get_str(p, &["protocol"]);
            let node_port = get_int(p, &["nodePort"]);
            if node_port > 0 {
                format!("{port}:{node_port}/{proto}")
            } else {
                format!("{port}/{proto}")
            }
        })
        .collect();
    vec![
        name,
        json!(svc_type),
        json!(or_none(cluster_ip)),
        json!(external),
        json!(or_none(&ports.join(","))),
        json!(created),
        json!(format_labels(get(svc, &["spec", "selector"]))),
    ]
}

pub(crate) fn event_row(ev: &Value, name: Value, now: DateTime<Utc>) -> Vec<Value> {
    let first = match parse_time(get(ev, &["firstTimestamp"])) {
        Some(t) => human_duration(now - t),
        None => age(get(ev, &["eventTime"]), now),
    };
    let mut last = match parse_time(get(ev, &["lastTimestamp"])) {
        Some(t) => human_duration(now - t),
        None => first.clone(),
    };
    let mut count = get_int(ev, &["count"]);
    if let Some(series) = get(ev, &["series"]) {
        last = age(get(series, &["lastObservedTime"]), now);
        count = get_int(series, &["count"]);
    } else if count == 0 {
        // Events of the new API leave count unset for singletons.
        count = 1;
    }
    let kind = get_str(ev, &["involvedObject", "kind"]).to_lowercase();
    let involved_name = get_str(ev, &["involvedObject", "name"]);
    let target = if involved_name.is_empty() {
        kind
    } else {
        format!("{kind}/{involved_name}")
    };
    let first_non_empty = |a: &'static [&str], b: &'static [&str]| {
        let x = get_str(ev, a);
        if x.is_empty() {
            get_str(ev, b)
        } else {
            x
        }
    };
    let component = first_non_empty(&["source", "component"], &["reportingComponent"]);
    let instance = first_non_empty(&["source", "host"], &["reportingInstance"]);
    let source = if instance.is_empty() {
        component.to_string()
    } else {
        format!("{component}, {instance}")
    };
    vec![
        json!(last),
        json!(get_str(ev, &["type"])),
        json!(get_str(ev, &["reason"])),
        json!(target),
        json!(get_str(ev, &["involvedObject", "fieldPath"])),
        json!(source),
        json!(get_str(ev, &["message"]).trim()),
        json!(first),
        json!(count),
        name,
    ]
}

/// `printPersistentVolumeClaim`: capacity and modes only once bound.
pub(crate) fn claim_row(pvc: &Value, name: Value, created: &str) -> Vec<Value> {
    let phase = get_str(pvc, &["status", "phase"]);
    let bound = !get_str(pvc, &["spec", "volumeName"]).is_empty();
    let (capacity, modes) = if bound {
        let modes = access_modes(get_arr(pvc, &["status", "accessModes"]));
        (
            get_str(pvc, &["status", "capacity", "storage"]).to_string(),
            modes,
        )
    } else {
        (String::new(), String::new())
    };
    let phase = if get(pvc, &["metadata", "deletionTimestamp"]).is_some() {
        "Terminating"
    } else {
        phase
    };
    vec![
        name,
        json!(phase),
        json!(get_str(pvc, &["spec", "volumeName"])),
        json!(capacity),
        json!(modes),
        json!(get_str(pvc, &["spec", "storageClassName"])),
        json!(or_unset(get_str(
            pvc,
            &["spec", "volumeAttributesClassName"]
        ))),
        json!(created),
        json!(or_unset(get_str(pvc, &["spec", "volumeMode"]))),
    ]
}
