//! Services: ports, ClusterIPs, IP families, node ports and their updates.

use crate::status::Cause;
use crate::validation::pod::validate_port_num_or_name;
use crate::validation::*;
use serde_json::{Map, Value};
use std::collections::HashSet;

pub(super) fn validate_service(o: &Map<String, Value>, errs: &mut Vec<Cause>) {
    let empty = Map::new();
    let spec = obj(o, "spec").unwrap_or(&empty);
    let svc_type = s(spec, "type");
    validate_service_type(spec, svc_type, errs);
    validate_service_ports(spec, svc_type, errs);
    if svc_type != "ExternalName" {
        validate_cluster_ips(spec, errs);
    }
    validate_external_ips(spec, errs);
    validate_session_affinity(spec, errs);
    validate_labels(spec, "selector", "spec.selector", errs);
    validate_traffic_policies(spec, svc_type, errs);
}

/// The type, and what an ExternalName service must (and a cluster IP service may not) have.
fn validate_service_type(spec: &Map<String, Value>, svc_type: &str, errs: &mut Vec<Cause>) {
    let cluster_ip = s(spec, "clusterIP");
    let headless = cluster_ip == "None";
    match svc_type {
        "ClusterIP" | "NodePort" | "LoadBalancer" | "ExternalName" => {}
        "" => errs.push(Cause::required("spec.type")),
        other => errs.push(Cause::not_supported(
            "spec.type",
            other,
            &["ClusterIP", "ExternalName", "LoadBalancer", "NodePort"],
        )),
    }
    let ports = arr(spec, "ports");
    if svc_type == "ExternalName" {
        if !cluster_ip.is_empty() {
            errs.push(Cause::forbidden(
                "spec.clusterIP",
                "may not be set for ExternalName services",
            ));
        }
        let name = s(spec, "externalName");
        if name.is_empty() {
            errs.push(Cause::required("spec.externalName"));
        } else {
            let trimmed = name.strip_suffix('.').unwrap_or(name);
            let mut msgs = is_dns1123_subdomain(trimmed);
            if msgs.is_empty() && !trimmed.contains('.') {
                msgs.push(
                    "should be a domain with at least two segments separated by dots".to_string(),
                );
            }
            for msg in msgs {
                errs.push(Cause::invalid("spec.externalName", trimmed, &msg));
            }
        }
    } else if ports.is_empty() && !headless {
        errs.push(Cause::required("spec.ports"));
    }
}

/// Port names, numbers, protocols, target ports and node ports.
fn validate_service_ports(spec: &Map<String, Value>, svc_type: &str, errs: &mut Vec<Cause>) {
    let ports = arr(spec, "ports");
    let require_name = ports.len() > 1;
    let mut names = HashSet::new();
    let mut node_ports = HashSet::new();
    for (i, port) in objs(spec, "ports") {
        let pp = format!("spec.ports[{i}]");
        let name = s(port, "name");
        if require_name && name.is_empty() {
            errs.push(Cause::required(format!("{pp}.name")));
        } else if !name.is_empty() {
            for msg in is_dns1123_label(name) {
                errs.push(Cause::invalid(format!("{pp}.name"), name, &msg));
            }
            if !names.insert(name.to_string()) {
                errs.push(Cause::duplicate(format!("{pp}.name"), name));
            }
        }
        validate_port_and_protocol(port, &pp, errs);
        if let Some(tp) = field(port, "targetPort") {
            validate_port_num_or_name(tp, &format!("{pp}.targetPort"), errs);
        }
        if let Some(np) = int(port, "nodePort").filter(|n| *n != 0) {
            if svc_type == "ClusterIP" {
                errs.push(Cause::forbidden(
                    format!("{pp}.nodePort"),
                    "may not be used when `type` is 'ClusterIP'",
                ));
            } else if svc_type == "ExternalName" {
                errs.push(Cause::forbidden(
                    format!("{pp}.nodePort"),
                    "may not be used when `type` is 'ExternalName'",
                ));
            } else if !(30000..=32767).contains(&np) {
                errs.push(Cause::invalid_value(
                    format!("{pp}.nodePort"),
                    &Value::from(np),
                    "provided port is not in the valid range. The range of valid ports is 30000-32767",
                ));
            } else if !node_ports.insert((np, s(port, "protocol").to_string())) {
                errs.push(Cause::duplicate(format!("{pp}.nodePort"), &np.to_string()));
            }
        }
    }
}

/// `clusterIP`/`clusterIPs`, IP families and the family policy.
fn validate_cluster_ips(spec: &Map<String, Value>, errs: &mut Vec<Cause>) {
    let cluster_ip = s(spec, "clusterIP");
    let mut ips: Vec<String> = arr(spec, "clusterIPs")
        .iter()
        .map(|v| v.as_str().unwrap_or("").to_string())
        .collect();
    if ips.is_empty() && !cluster_ip.is_empty() {
        ips.push(cluster_ip.to_string());
    }
    if !cluster_ip.is_empty() && ips.first().is_some_and(|f| f != cluster_ip) {
        errs.push(Cause::invalid_value(
            "spec.clusterIPs",
            field(spec, "clusterIPs").unwrap_or(&Value::Null),
            "first value must match `clusterIP`",
        ));
    }
    for (i, ip) in ips.iter().enumerate() {
        if i == 0 && ip == "None" {
            if ips.len() > 1 {
                errs.push(Cause::invalid_value(
                    "spec.clusterIPs",
                    field(spec, "clusterIPs").unwrap_or(&Value::Null),
                    "'None' must be the first and only value",
                ));
            }
            continue;
        }
        if !is_valid_ip(ip) {
            errs.push(Cause::invalid(
                format!("spec.clusterIPs[{i}]"),
                ip,
                INVALID_IP,
            ));
        }
    }
    if ips.len() > 2 {
        errs.push(Cause::invalid_value(
            "spec.clusterIPs",
            field(spec, "clusterIPs").unwrap_or(&Value::Null),
            "may only hold up to 2 values",
        ));
    }
    for (i, fam) in arr(spec, "ipFamilies").iter().enumerate() {
        let fam = fam.as_str().unwrap_or("");
        if fam != "IPv4" && fam != "IPv6" {
            errs.push(Cause::not_supported(
                format!("spec.ipFamilies[{i}]"),
                fam,
                &["IPv4", "IPv6"],
            ));
        }
    }
    let policy = s(spec, "ipFamilyPolicy");
    if !policy.is_empty()
        && !matches!(
            policy,
            "SingleStack" | "PreferDualStack" | "RequireDualStack"
        )
    {
        errs.push(Cause::not_supported(
            "spec.ipFamilyPolicy",
            policy,
            &["PreferDualStack", "RequireDualStack", "SingleStack"],
        ));
    }
}

fn validate_external_ips(spec: &Map<String, Value>, errs: &mut Vec<Cause>) {
    for (i, ip) in arr(spec, "externalIPs").iter().enumerate() {
        let ip = ip.as_str().unwrap_or("");
        if !is_valid_ip(ip) {
            errs.push(Cause::invalid(
                format!("spec.externalIPs[{i}]"),
                ip,
                INVALID_IP,
            ));
        }
    }
}

fn validate_session_affinity(spec: &Map<String, Value>, errs: &mut Vec<Cause>) {
    match s(spec, "sessionAffinity") {
        "" => errs.push(Cause::required("spec.sessionAffinity")),
        "None" | "ClientIP" => {}
        other => errs.push(Cause::not_supported(
            "spec.sessionAffinity",
            other,
            &["ClientIP", "None"],
        )),
    }
    if let Some(t) = path(
        spec,
        &["sessionAffinityConfig", "clientIP", "timeoutSeconds"],
    )
    .and_then(Value::as_i64)
    {
        if !(1..=86400).contains(&t) {
            errs.push(Cause::invalid_value(
                "spec.sessionAffinityConfig.clientIP.timeoutSeconds",
                &Value::from(t),
                "must be greater than 0 and less than 86400",
            ));
        }
    }
}

fn validate_traffic_policies(spec: &Map<String, Value>, svc_type: &str, errs: &mut Vec<Cause>) {
    let etp = s(spec, "externalTrafficPolicy");
    let externally_accessible = matches!(svc_type, "NodePort" | "LoadBalancer")
        || (svc_type == "ClusterIP" && !arr(spec, "externalIPs").is_empty());
    if !etp.is_empty() {
        if !externally_accessible {
            errs.push(Cause::invalid(
                "spec.externalTrafficPolicy",
                etp,
                "may only be set for externally-accessible services",
            ));
        } else if etp != "Cluster" && etp != "Local" {
            errs.push(Cause::not_supported(
                "spec.externalTrafficPolicy",
                etp,
                &["Cluster", "Local"],
            ));
        }
    }
    let itp = s(spec, "internalTrafficPolicy");
    if !itp.is_empty() && itp != "Cluster" && itp != "Local" {
        errs.push(Cause::not_supported(
            "spec.internalTrafficPolicy",
            itp,
            &["Cluster", "Local"],
        ));
    }
}

pub(super) fn validate_service_update(
    old: &Map<String, Value>,
    new: &Map<String, Value>,
    errs: &mut Vec<Cause>,
) {
    let empty = Map::new();
    let os = obj(old, "spec").unwrap_or(&empty);
    let ns = obj(new, "spec").unwrap_or(&empty);
    // Changing to or from ExternalName may drop or allocate the cluster IP.
    if s(os, "type") == "ExternalName" || s(ns, "type") == "ExternalName" {
        return;
    }
    let first_ip = |spec: &Map<String, Value>| -> String {
        arr(spec, "clusterIPs")
            .first()
            .and_then(Value::as_str)
            .unwrap_or_else(|| s(spec, "clusterIP"))
            .to_string()
    };
    let (old_ip, new_ip) = (first_ip(os), first_ip(ns));
    if !old_ip.is_empty() && !new_ip.is_empty() && old_ip != new_ip {
        errs.push(Cause::invalid(
            "spec.clusterIPs[0]",
            &new_ip,
            "may not change once set",
        ));
    }
    let first_family = |spec: &Map<String, Value>| {
        arr(spec, "ipFamilies")
            .first()
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string()
    };
    let (old_fam, new_fam) = (first_family(os), first_family(ns));
    if !old_fam.is_empty() && !new_fam.is_empty() && old_fam != new_fam {
        errs.push(Cause::invalid(
            "spec.ipFamilies[0]",
            &new_fam,
            "may not change once set",
        ));
    }
}

// ---------------------------------------------------------------------------------------------
// ConfigMaps, Secrets and the rest
