//! networking.k8s.io kinds (upstream pkg/apis/networking/validation): Ingress,
//! IngressClass, NetworkPolicy, IPAddress and ServiceCIDR.

use super::apps::validate_label_selector;
use super::*;

pub(crate) fn validate_ingress(o: &Map<String, Value>, errs: &mut Vec<Cause>) {
    let empty = Map::new();
    let spec = obj(o, "spec").unwrap_or(&empty);
    let rules = arr(spec, "rules");
    match obj(spec, "defaultBackend") {
        Some(backend) => validate_backend(backend, "spec.defaultBackend", errs),
        None if rules.is_empty() => errs.push(Cause::invalid_repr(
            "spec",
            "[]networking.IngressRule(nil)",
            "either `defaultBackend` or `rules` must be specified",
        )),
        None => {}
    }
    for (i, rule) in objs(spec, "rules") {
        let p = format!("spec.rules[{i}]");
        let host = s(rule, "host");
        if !host.is_empty() {
            validate_host(host, &format!("{p}.host"), errs);
        }
        if let Some(http) = obj(rule, "http") {
            validate_http_paths(http, &format!("{p}.http"), errs);
        }
    }
    for (i, tls) in objs(spec, "tls") {
        for (j, host) in arr(tls, "hosts").iter().enumerate() {
            let host = host.as_str().unwrap_or("");
            validate_host(host, &format!("spec.tls[{i}].hosts[{j}]"), errs);
        }
    }
    let class = s(spec, "ingressClassName");
    for msg in is_dns1123_subdomain(class)
        .into_iter()
        .filter(|_| !class.is_empty())
    {
        errs.push(Cause::invalid("spec.ingressClassName", class, &msg));
    }
}

/// A host is a DNS subdomain, with a leading `*.` allowed, and never an IP address.
pub(crate) fn validate_host(host: &str, p: &str, errs: &mut Vec<Cause>) {
    if is_valid_ip(host) {
        errs.push(Cause::invalid(
            p,
            host,
            "must be a DNS name, not an IP address",
        ));
        return;
    }
    let checked = host.strip_prefix("*.").unwrap_or(host);
    for msg in is_dns1123_subdomain(checked) {
        errs.push(Cause::invalid(p, host, &msg));
    }
}

pub(crate) fn validate_http_paths(http: &Map<String, Value>, p: &str, errs: &mut Vec<Cause>) {
    if arr(http, "paths").is_empty() {
        errs.push(Cause::required(format!("{p}.paths")));
    }
    for (i, path) in objs(http, "paths") {
        let pp = format!("{p}.paths[{i}]");
        let value = s(path, "path");
        match s(path, "pathType") {
            "" => errs.push(Cause::required_detail(
                format!("{pp}.pathType"),
                "pathType must be specified",
            )),
            "Exact" | "Prefix" => validate_absolute_path(value, &format!("{pp}.path"), errs),
            "ImplementationSpecific" => {
                if !value.is_empty() && !value.starts_with('/') {
                    errs.push(Cause::invalid(
                        format!("{pp}.path"),
                        value,
                        "must be an absolute path",
                    ));
                }
            }
            other => errs.push(Cause::not_supported(
                format!("{pp}.pathType"),
                other,
                &["Exact", "ImplementationSpecific", "Prefix"],
            )),
        }
        match obj(path, "backend") {
            Some(b) => validate_backend(b, &format!("{pp}.backend"), errs),
            None => errs.push(Cause::required(format!("{pp}.backend"))),
        }
    }
}

pub(crate) fn validate_absolute_path(value: &str, p: &str, errs: &mut Vec<Cause>) {
    if !value.starts_with('/') {
        errs.push(Cause::invalid(p, value, "must be an absolute path"));
        return;
    }
    for bad in ["//", "/./", "/../", "%2f", "%2F"] {
        if value.contains(bad) {
            errs.push(Cause::invalid(
                p,
                value,
                &format!("must not contain '{bad}'"),
            ));
        }
    }
    for bad in ["/..", "/."] {
        if value.ends_with(bad) {
            errs.push(Cause::invalid(
                p,
                value,
                &format!("cannot end with '{bad}'"),
            ));
        }
    }
}

pub(crate) fn validate_backend(backend: &Map<String, Value>, p: &str, errs: &mut Vec<Cause>) {
    match (obj(backend, "service"), obj(backend, "resource")) {
        (Some(_), Some(_)) => errs.push(Cause::invalid(
            p,
            "",
            "cannot set both resource and service backends",
        )),
        (Some(service), None) => validate_service_backend(service, &format!("{p}.service"), errs),
        (None, Some(resource)) => {
            for key in ["kind", "name"] {
                if s(resource, key).is_empty() {
                    errs.push(Cause::required(format!("{p}.resource.{key}")));
                }
            }
        }
        (None, None) => errs.push(Cause::invalid(
            p,
            "",
            "resource or service backend is required",
        )),
    }
}

pub(crate) fn validate_service_backend(
    service: &Map<String, Value>,
    p: &str,
    errs: &mut Vec<Cause>,
) {
    let name = s(service, "name");
    if name.is_empty() {
        errs.push(Cause::required(format!("{p}.name")));
    } else {
        for msg in is_dns1035_label(name) {
            errs.push(Cause::invalid(format!("{p}.name"), name, &msg));
        }
    }
    let empty = Map::new();
    let port = obj(service, "port").unwrap_or(&empty);
    let port_name = s(port, "name");
    let number = int(port, "number").unwrap_or(0);
    match (port_name.is_empty(), number) {
        (false, n) if n != 0 => errs.push(Cause::invalid(
            p,
            "",
            "cannot set both port name & port number",
        )),
        (false, _) => {
            for msg in is_valid_port_name(port_name) {
                errs.push(Cause::invalid(format!("{p}.port.name"), port_name, &msg));
            }
        }
        (true, 0) => errs.push(Cause::required_detail(p, "port name or number is required")),
        (true, n) if !(1..=65535).contains(&n) => errs.push(Cause::invalid_value(
            format!("{p}.port.number"),
            &Value::from(n),
            &port_range_error(),
        )),
        _ => {}
    }
}

pub(crate) fn validate_ingress_class(o: &Map<String, Value>, errs: &mut Vec<Cause>) {
    let empty = Map::new();
    let spec = obj(o, "spec").unwrap_or(&empty);
    let controller = s(spec, "controller");
    if controller.is_empty() {
        errs.push(Cause::required("spec.controller"));
    } else if controller.len() > 250 {
        errs.push(Cause::too_long("spec.controller", 250));
    } else if let Some(msg) = domain_prefixed_path_error(controller) {
        errs.push(Cause::invalid("spec.controller", controller, &msg));
    }
    if let Some(params) = obj(spec, "parameters") {
        for key in ["kind", "name"] {
            if s(params, key).is_empty() {
                errs.push(Cause::required(format!("spec.parameters.{key}")));
            }
        }
        match s(params, "scope") {
            "" | "Cluster" => {
                if !s(params, "namespace").is_empty() {
                    errs.push(Cause::forbidden(
                        "spec.parameters.namespace",
                        "`parameters.scope` is set to 'Cluster'",
                    ));
                }
            }
            "Namespace" if s(params, "namespace").is_empty() => errs.push(Cause::required_detail(
                "spec.parameters.namespace",
                "`parameters.scope` is set to 'Namespace'",
            )),
            "Namespace" => {}
            other => errs.push(Cause::not_supported(
                "spec.parameters.scope",
                other,
                &["Cluster", "Namespace"],
            )),
        }
    }
}

/// `example.com/path` (upstream `IsDomainPrefixedPath`).
pub(crate) fn domain_prefixed_path_error(value: &str) -> Option<String> {
    let Some((domain, _)) = value.split_once('/') else {
        return Some("must be a domain-prefixed path (such as \"acme.io/foo\")".to_string());
    };
    is_dns1123_subdomain(domain).into_iter().next()
}

pub(crate) fn validate_network_policy(o: &Map<String, Value>, errs: &mut Vec<Cause>) {
    let empty = Map::new();
    let spec = obj(o, "spec").unwrap_or(&empty);
    if let Some(sel) = obj(spec, "podSelector") {
        validate_label_selector(sel, "spec.podSelector", errs);
    }
    for (direction, peers) in [("ingress", "from"), ("egress", "to")] {
        for (i, rule) in objs(spec, direction) {
            let p = format!("spec.{direction}[{i}]");
            for (j, port) in objs(rule, "ports") {
                validate_policy_port(port, &format!("{p}.ports[{j}]"), errs);
            }
            for (j, peer) in objs(rule, peers) {
                validate_peer(peer, &format!("{p}.{peers}[{j}]"), errs);
            }
        }
    }
    let types = arr(spec, "policyTypes");
    if types.len() > 2 {
        errs.push(Cause::invalid_repr(
            "spec.policyTypes",
            "[]networking.PolicyType{...}",
            "may not specify more than two policyTypes",
        ));
    }
    for (i, t) in types.iter().enumerate() {
        let t = t.as_str().unwrap_or("");
        if !matches!(t, "Ingress" | "Egress") {
            errs.push(Cause::not_supported(
                format!("spec.policyTypes[{i}]"),
                t,
                &["Ingress", "Egress"],
            ));
        }
    }
}

pub(crate) fn validate_policy_port(port: &Map<String, Value>, p: &str, errs: &mut Vec<Cause>) {
    let protocol = s(port, "protocol");
    if !matches!(protocol, "" | "TCP" | "UDP" | "SCTP") {
        errs.push(Cause::not_supported(
            format!("{p}.protocol"),
            protocol,
            &["SCTP", "TCP", "UDP"],
        ));
    }
    match field(port, "port") {
        Some(Value::Number(n)) => {
            let n = n.as_i64().unwrap_or(0);
            if !(1..=65535).contains(&n) {
                errs.push(Cause::invalid_value(
                    format!("{p}.port"),
                    &Value::from(n),
                    &port_range_error(),
                ));
            }
            if let Some(end) = int(port, "endPort") {
                if end < n {
                    errs.push(Cause::invalid_value(
                        format!("{p}.endPort"),
                        &Value::from(end),
                        "must be greater than or equal to `port`",
                    ));
                }
            }
        }
        Some(Value::String(name)) => {
            for msg in is_valid_port_name(name) {
                errs.push(Cause::invalid(format!("{p}.port"), name, &msg));
            }
            if field(port, "endPort").is_some() {
                errs.push(Cause::forbidden(
                    format!("{p}.endPort"),
                    "may not be specified when `port` is non-numeric",
                ));
            }
        }
        _ if field(port, "endPort").is_some() => {
            errs.push(Cause::required_detail(
                format!("{p}.port"),
                "must be specified when `endPort` is specified",
            ));
        }
        _ => {}
    }
}

pub(crate) fn validate_peer(peer: &Map<String, Value>, p: &str, errs: &mut Vec<Cause>) {
    let selectors = ["podSelector", "namespaceSelector"];
    for key in selectors {
        if let Some(sel) = obj(peer, key) {
            validate_label_selector(sel, &format!("{p}.{key}"), errs);
        }
    }
    let has_selector = selectors.iter().any(|k| field(peer, k).is_some());
    match obj(peer, "ipBlock") {
        Some(_) if has_selector => errs.push(Cause::forbidden(
            p,
            "may not specify both ipBlock and another peer",
        )),
        Some(block) => validate_ip_block(block, &format!("{p}.ipBlock"), errs),
        None if !has_selector => errs.push(Cause::required_detail(p, "must specify a peer")),
        None => {}
    }
}

pub(crate) fn validate_ip_block(block: &Map<String, Value>, p: &str, errs: &mut Vec<Cause>) {
    let cidr = s(block, "cidr");
    let Ok(net) = cidr.parse::<ipnetwork::IpNetwork>() else {
        if cidr.is_empty() {
            errs.push(Cause::required(format!("{p}.cidr")));
        } else {
            errs.push(Cause::invalid(
                format!("{p}.cidr"),
                cidr,
                "must be a valid CIDR value, (e.g. 10.9.8.0/24 or 2001:db8::/64)",
            ));
        }
        return;
    };
    for (i, except) in arr(block, "except").iter().enumerate() {
        let except = except.as_str().unwrap_or("");
        let ep = format!("{p}.except[{i}]");
        match except.parse::<ipnetwork::IpNetwork>() {
            Err(_) => errs.push(Cause::invalid(
                &ep,
                except,
                "must be a valid CIDR value, (e.g. 10.9.8.0/24 or 2001:db8::/64)",
            )),
            Ok(e) if !(net.contains(e.network()) && e.prefix() > net.prefix()) => errs.push(
                Cause::invalid(&ep, except, "must be a strict subset of `cidr`"),
            ),
            Ok(_) => {}
        }
    }
}

/// An IPAddress is named by its address, in canonical form, and says what it belongs to.
pub(crate) fn validate_ip_address(o: &Map<String, Value>, errs: &mut Vec<Cause>) {
    let empty = Map::new();
    let name = obj(o, "metadata").map_or("", |m| s(m, "name"));
    match name.parse::<IpAddr>() {
        Ok(ip) if ip.to_string() == name => {}
        _ if name.is_empty() => {}
        _ => errs.push(Cause::invalid(
            "metadata.name",
            name,
            "must be a canonical format IP address",
        )),
    }
    let parent = obj(o, "spec").and_then(|s| obj(s, "parentRef"));
    let Some(parent) = parent else {
        errs.push(Cause::required("spec.parentRef"));
        return;
    };
    let parent = if parent.is_empty() { &empty } else { parent };
    for key in ["resource", "name"] {
        if s(parent, key).is_empty() {
            errs.push(Cause::required(format!("spec.parentRef.{key}")));
        }
    }
}

/// At most one IPv4 and one IPv6 range, each a valid canonical CIDR.
pub(crate) fn validate_service_cidr(o: &Map<String, Value>, errs: &mut Vec<Cause>) {
    let empty = Map::new();
    let spec = obj(o, "spec").unwrap_or(&empty);
    let cidrs = arr(spec, "cidrs");
    if cidrs.is_empty() {
        errs.push(Cause::required("spec.cidrs"));
    }
    if cidrs.len() > 2 {
        errs.push(Cause::too_many("spec.cidrs", cidrs.len(), 2));
    }
    for (i, c) in cidrs.iter().enumerate() {
        let c = c.as_str().unwrap_or("");
        match c.parse::<ipnetwork::IpNetwork>() {
            Ok(net) if net.network() == net.ip() => {}
            Ok(net) => errs.push(Cause::invalid(
                format!("spec.cidrs[{i}]"),
                c,
                &format!(
                    "must be in canonical form (\"{}/{}\")",
                    net.network(),
                    net.prefix()
                ),
            )),
            Err(_) => errs.push(Cause::invalid(
                format!("spec.cidrs[{i}]"),
                c,
                "must be a valid CIDR value, (e.g. 10.9.8.0/24 or 2001:db8::/64)",
            )),
        }
    }
}
