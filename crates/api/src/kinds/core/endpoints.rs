//! Endpoints (core): what cairn does that is specific to it.

use crate::kinds::prelude::*;

pub const STRATEGY: Strategy = Strategy {
    default: Some(default_endpoints),
    validate: Some(validate_endpoints),
    columns: Some(columns),
    row: Some(row),
    normalize: roundtrip::<k8s_openapi::api::core::v1::Endpoints>,
    allow_create_on_update: true,
    ..Strategy::NONE
};

fn default_endpoints(o: &mut Map<String, Value>) {
    for subset in list_objs(o, "subsets") {
        for port in list_objs(subset, "ports") {
            set_default_str(port, "protocol", "TCP");
        }
    }
}

fn validate_endpoints(o: &Map<String, Value>, errs: &mut Vec<Cause>) {
    for (i, subset) in objs(o, "subsets") {
        let sp = format!("subsets[{i}]");
        for key in ["addresses", "notReadyAddresses"] {
            for (j, addr) in objs(subset, key) {
                let ip = s(addr, "ip");
                if !is_valid_ip(ip) {
                    errs.push(Cause::invalid(
                        format!("{sp}.{key}[{j}].ip"),
                        ip,
                        "must be a valid IP address",
                    ));
                }
            }
        }
        for (j, port) in objs(subset, "ports") {
            let pp = format!("{sp}.ports[{j}]");
            let name = s(port, "name");
            if !name.is_empty() {
                for msg in is_dns1123_label(name) {
                    errs.push(Cause::invalid(format!("{pp}.name"), name, &msg));
                }
            }
            validate_port_and_protocol(port, &pp, errs);
        }
    }
}

fn columns() -> Vec<Col> {
    vec![
        NAME,
        col("Endpoints", "string", "The set of all endpoints is the union of all subsets. Addresses are placed into subsets according to the IPs they share. A single address with multiple ports, some of which are ready and some of which are not (because they come from different containers) will result in the address being displayed in different subsets for the different ports. No address will appear in both Addresses and NotReadyAddresses in the same subset. Sets of addresses and ports that comprise a service."),
        AGE,
    ]
}

fn row(obj: &Value, name: Value, created: &str, _now: DateTime<Utc>) -> Vec<Value> {
    vec![name, json!(format_endpoints(obj)), json!(created)]
}
