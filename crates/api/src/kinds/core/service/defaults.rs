//! A Service's defaults (upstream's `SetDefaults_Service`).

use serde_json::{json, Map, Value};

use crate::defaults::{child_obj, existing_obj, list_objs, set_default, set_default_str, str_of};

pub(super) fn default_service(o: &mut Map<String, Value>) {
    let Some(spec) = child_obj(o, "spec") else {
        return;
    };
    set_default_str(spec, "sessionAffinity", "None");
    match str_of(spec, "sessionAffinity") {
        "None" => {
            spec.remove("sessionAffinityConfig");
        }
        "ClientIP" => {
            let has_timeout = spec
                .get("sessionAffinityConfig")
                .and_then(|c| c.get("clientIP"))
                .and_then(|c| c.get("timeoutSeconds"))
                .is_some_and(|t| !t.is_null());
            if !has_timeout {
                spec.insert(
                    "sessionAffinityConfig".into(),
                    json!({"clientIP": {"timeoutSeconds": 10800}}),
                );
            }
        }
        _ => {}
    }
    set_default_str(spec, "type", "ClusterIP");
    for port in list_objs(spec, "ports") {
        set_default_str(port, "protocol", "TCP");
        let unset_target = match port.get("targetPort") {
            None | Some(Value::Null) => true,
            Some(Value::Number(n)) => n.as_f64() == Some(0.0),
            Some(Value::String(s)) => s.is_empty(),
            _ => false,
        };
        if unset_target {
            if let Some(p) = port.get("port").filter(|p| p.is_number()).cloned() {
                port.insert("targetPort".into(), p);
            }
        }
    }
    let svc_type = str_of(spec, "type").to_string();
    let has_external_ips = spec
        .get("externalIPs")
        .and_then(Value::as_array)
        .is_some_and(|a| !a.is_empty());
    let externally_accessible = svc_type == "LoadBalancer"
        || svc_type == "NodePort"
        || (svc_type == "ClusterIP" && has_external_ips);
    if externally_accessible {
        set_default_str(spec, "externalTrafficPolicy", "Cluster");
    }
    if matches!(svc_type.as_str(), "ClusterIP" | "NodePort" | "LoadBalancer") {
        set_default(spec, "internalTrafficPolicy", json!("Cluster"));
        default_ip_families(spec);
    }
    if svc_type == "LoadBalancer" {
        set_default(spec, "allocateLoadBalancerNodePorts", json!(true));
        if let Some(ingress) = o
            .get_mut("status")
            .and_then(Value::as_object_mut)
            .and_then(|s| existing_obj(s, "loadBalancer"))
        {
            for ing in list_objs(ingress, "ingress") {
                if !str_of(ing, "ip").is_empty() {
                    set_default(ing, "ipMode", json!("VIP"));
                }
            }
        }
    }
}

/// What the service REST storage settles for IP families on a single-stack cluster, and the
/// `clusterIP`/`clusterIPs` sync of the strategy. The allocation itself is the server's.
fn default_ip_families(spec: &mut Map<String, Value>) {
    let cluster_ip = str_of(spec, "clusterIP").to_string();
    if !cluster_ip.is_empty()
        && spec
            .get("clusterIPs")
            .is_none_or(|v| v.is_null() || v.as_array().is_some_and(|a| a.is_empty()))
    {
        spec.insert("clusterIPs".into(), json!([cluster_ip]));
    }
    let has_selector = spec
        .get("selector")
        .and_then(Value::as_object)
        .is_some_and(|s| !s.is_empty());
    let headless_selectorless = cluster_ip == "None" && !has_selector;
    if headless_selectorless {
        set_default(spec, "ipFamilyPolicy", json!("RequireDualStack"));
    } else {
        set_default(spec, "ipFamilyPolicy", json!("SingleStack"));
    }
    let families_unset = spec
        .get("ipFamilies")
        .is_none_or(|v| v.is_null() || v.as_array().is_some_and(|a| a.is_empty()));
    if families_unset {
        let families = if headless_selectorless {
            json!(["IPv4", "IPv6"])
        } else if cluster_ip.contains(':') {
            json!(["IPv6"])
        } else {
            json!(["IPv4"])
        };
        spec.insert("ipFamilies".into(), families);
    }
}
