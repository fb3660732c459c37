//! Ingress (networking.k8s.io): what cairn does that is specific to it.

use crate::kinds::prelude::*;

pub const STRATEGY: Strategy = Strategy {
    validate: Some(validate_ingress),
    columns: Some(columns),
    row: Some(row),
    normalize: roundtrip::<k8s_openapi::api::networking::v1::Ingress>,
    tracks_generation: true,
    admission: &[Admission::DefaultIngressClass],
    ..Strategy::NONE
};

fn validate_ingress(o: &Map<String, Value>, errs: &mut Vec<Cause>) {
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
fn validate_host(host: &str, p: &str, errs: &mut Vec<Cause>) {
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

fn validate_http_paths(http: &Map<String, Value>, p: &str, errs: &mut Vec<Cause>) {
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

fn validate_absolute_path(value: &str, p: &str, errs: &mut Vec<Cause>) {
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

fn validate_backend(backend: &Map<String, Value>, p: &str, errs: &mut Vec<Cause>) {
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

fn validate_service_backend(service: &Map<String, Value>, p: &str, errs: &mut Vec<Cause>) {
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

fn columns() -> Vec<Col> {
    vec![
        NAME,
        col(
            "Class",
            "string",
            "ingressClassName is the name of an IngressClass cluster resource.",
        ),
        col(
            "Hosts",
            "string",
            "Hosts that incoming requests are matched against before the ingress rule",
        ),
        col(
            "Address",
            "string",
            "Address is a list containing ingress points for the load-balancer",
        ),
        col("Ports", "string", "Ports of TLS configurations that open"),
        AGE,
    ]
}

fn row(obj: &Value, name: Value, created: &str, _now: DateTime<Utc>) -> Vec<Value> {
    ingress_row(obj, name, created)
}

fn ingress_row(obj: &Value, name: Value, created: &str) -> Vec<Value> {
    let class = or_none(get_str(obj, &["spec", "ingressClassName"]));
    // Upstream `formatHosts`: the first three named hosts, `*` when none is named.
    let rules = get_arr(obj, &["spec", "rules"]);
    let named: Vec<String> = rules
        .iter()
        .map(|r| get_str(r, &["host"]))
        .filter(|h| !h.is_empty())
        .map(str::to_string)
        .collect();
    let more = rules.len() > 3 && named.len() >= 3;
    let hosts = if named.is_empty() {
        "*".to_string()
    } else {
        list_with_more(named.into_iter().take(3).collect(), more, rules.len(), 3)
    };
    let addresses: Vec<String> = get_arr(obj, &["status", "loadBalancer", "ingress"])
        .iter()
        .filter_map(|i| {
            [get_str(i, &["ip"]), get_str(i, &["hostname"])]
                .into_iter()
                .find(|s| !s.is_empty())
        })
        .map(str::to_string)
        .collect();
    let ports = if get_arr(obj, &["spec", "tls"]).is_empty() {
        "80"
    } else {
        "80, 443"
    };
    vec![
        name,
        json!(class),
        json!(hosts),
        json!(addresses.join(",")),
        json!(ports),
        json!(created),
    ]
}
