//! ServiceCIDR (networking.k8s.io): what cairn does that is specific to it.

use crate::kinds::prelude::*;

pub const STRATEGY: Strategy = Strategy {
    validate: Some(validate_service_cidr),
    columns: Some(columns),
    row: Some(row),
    normalize: roundtrip::<k8s_openapi::api::networking::v1::ServiceCIDR>,
    ..Strategy::NONE
};

/// At most one IPv4 and one IPv6 range, each a valid canonical CIDR.
fn validate_service_cidr(o: &Map<String, Value>, errs: &mut Vec<Cause>) {
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

fn columns() -> Vec<Col> {
    vec![NAME, col("CIDRs", "string", "list of IP CIDRs"), AGE]
}

fn row(obj: &Value, name: Value, created: &str, _now: DateTime<Utc>) -> Vec<Value> {
    let cidrs: Vec<&str> = get_arr(obj, &["spec", "cidrs"])
        .iter()
        .filter_map(Value::as_str)
        .collect();
    vec![name, json!(cidrs.join(",")), json!(created)]
}
