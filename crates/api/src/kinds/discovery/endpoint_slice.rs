//! EndpointSlice (discovery.k8s.io): what cairn does that is specific to it.

use crate::kinds::prelude::*;

pub const STRATEGY: Strategy = Strategy {
    default: Some(crate::defaults::default_endpoint_slice),
    validate: Some(crate::validation::validate_endpoint_slice),
    columns: Some(columns),
    row: Some(row),
    normalize: roundtrip::<k8s_openapi::api::discovery::v1::EndpointSlice>,
    zero_values: Some(zero_values),
    allow_create_on_update: true,
    ..Strategy::NONE
};

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
