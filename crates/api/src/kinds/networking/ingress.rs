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
