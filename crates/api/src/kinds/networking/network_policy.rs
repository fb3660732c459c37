//! NetworkPolicy (networking.k8s.io): what cairn does that is specific to it.

use crate::kinds::prelude::*;

pub const STRATEGY: Strategy = Strategy {
    default: Some(crate::defaults::breadth::default_network_policy),
    validate: Some(crate::validation::networking::validate_network_policy),
    columns: Some(columns),
    row: Some(row),
    normalize: roundtrip::<k8s_openapi::api::networking::v1::NetworkPolicy>,
    tracks_generation: true,
    ..Strategy::NONE
};

fn columns() -> Vec<Col> {
    vec![
        NAME,
        col("Pod-Selector", "string", "podSelector selects the pods to which this NetworkPolicy object applies. The array of rules is applied to any pods selected by this field. An empty selector matches all pods in the policy's namespace. Multiple network policies can select the same set of pods. In this case, the ingress rules for each are combined additively. This field is NOT optional and follows standard label selector semantics. An empty podSelector matches all pods in this namespace."),
        AGE,
    ]
}

fn row(obj: &Value, name: Value, created: &str, _now: DateTime<Utc>) -> Vec<Value> {
    vec![
        name,
        json!(format_label_selector(get(obj, &["spec", "podSelector"]))),
        json!(created),
    ]
}
