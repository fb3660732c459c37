//! Ingress (networking.k8s.io): what cairn does that is specific to it.

use crate::kinds::prelude::*;

pub const STRATEGY: Strategy = Strategy {
    validate: Some(crate::validation::networking::validate_ingress),
    columns: Some(columns),
    row: Some(row),
    normalize: roundtrip::<k8s_openapi::api::networking::v1::Ingress>,
    tracks_generation: true,
    ..Strategy::NONE
};

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
