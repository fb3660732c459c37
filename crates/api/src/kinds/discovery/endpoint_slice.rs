//! EndpointSlice (discovery.k8s.io): what cairn does that is specific to it.

use crate::kinds::prelude::*;

pub const STRATEGY: Strategy = Strategy {
    default: Some(default_endpoint_slice),
    validate: Some(validate_endpoint_slice),
    columns: Some(columns),
    row: Some(row),
    normalize: roundtrip::<k8s_openapi::api::discovery::v1::EndpointSlice>,
    zero_values: Some(zero_values),
    allow_create_on_update: true,
    ..Strategy::NONE
};

fn default_endpoint_slice(o: &mut Map<String, Value>) {
    for port in list_objs(o, "ports") {
        set_default(port, "name", json!(""));
        set_default(port, "protocol", json!("TCP"));
    }
}

fn validate_endpoint_slice(o: &Map<String, Value>, errs: &mut Vec<Cause>) {
    let address_type = s(o, "addressType");
    match address_type {
        "IPv4" | "IPv6" | "FQDN" => {}
        "" => errs.push(Cause::required("addressType")),
        other => errs.push(Cause::not_supported(
            "addressType",
            other,
            &["FQDN", "IPv4", "IPv6"],
        )),
    }
    for (i, ep) in objs(o, "endpoints") {
        let addrs = arr(ep, "addresses");
        if addrs.is_empty() {
            errs.push(Cause::required(format!("endpoints[{i}].addresses")));
        } else if addrs.len() > 100 {
            errs.push(Cause::invalid(
                format!("endpoints[{i}].addresses"),
                "",
                "must have at most 100 items",
            ));
        }
        for (j, a) in addrs.iter().enumerate() {
            let a = a.as_str().unwrap_or("");
            let ok = match address_type {
                "IPv4" => a.parse::<std::net::Ipv4Addr>().is_ok(),
                "IPv6" => a.parse::<std::net::Ipv6Addr>().is_ok(),
                _ => is_dns1123_subdomain(a).is_empty(),
            };
            if !ok {
                let msg = match address_type {
                    "IPv4" => "must be a valid IPv4 address",
                    "IPv6" => "must be a valid IPv6 address",
                    _ => "must be a valid DNS subdomain",
                };
                errs.push(Cause::invalid(
                    format!("endpoints[{i}].addresses[{j}]"),
                    a,
                    msg,
                ));
            }
        }
    }
    for (i, port) in objs(o, "ports") {
        let pp = format!("ports[{i}]");
        if let Some(num) = int(port, "port") {
            if !(1..=65535).contains(&num) {
                errs.push(Cause::invalid_value(
                    format!("{pp}.port"),
                    &Value::from(num),
                    &port_range_error(),
                ));
            }
        }
        let proto = s(port, "protocol");
        if !proto.is_empty() && !matches!(proto, "TCP" | "UDP" | "SCTP") {
            errs.push(Cause::not_supported(
                format!("{pp}.protocol"),
                proto,
                &["SCTP", "TCP", "UDP"],
            ));
        }
    }
}

fn columns() -> Vec<Col> {
    vec![
        NAME,
        col("AddressType", "string", "addressType specifies the type of address carried by this EndpointSlice. All addresses in this slice must be the same type. This field is immutable after creation. The following address types are currently supported: * IPv4: Represents an IPv4 Address. * IPv6: Represents an IPv6 Address. * FQDN: Represents a Fully Qualified Domain Name."),
        col("Ports", "string", "ports specifies the list of network ports exposed by each endpoint in this slice. Each port must have a unique name. When ports is empty, it indicates that there are no defined ports. When a port is defined with a nil port value, it indicates \"all ports\". Each slice may include a maximum of 100 ports."),
        col("Endpoints", "string", "endpoints is a list of unique endpoints in this slice. Each slice may include a maximum of 1000 endpoints."),
        AGE,
    ]
}

fn row(obj: &Value, name: Value, created: &str, _now: DateTime<Utc>) -> Vec<Value> {
    vec![
        name,
        json!(get_str(obj, &["addressType"])),
        json!(format_discovery_ports(obj)),
        json!(format_discovery_endpoints(obj)),
        json!(created),
    ]
}

/// Go's zero values of the kind (see `Strategy::zero_values`).
fn zero_values(o: &mut Map<String, Value>) {
    if let Some(list) = o.get_mut("endpoints").and_then(Value::as_array_mut) {
        for ep in list.iter_mut().filter_map(Value::as_object_mut) {
            ensure_obj(ep, "conditions");
        }
    }
}
