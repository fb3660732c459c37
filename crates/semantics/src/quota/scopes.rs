//! Quota scopes (upstream `podMatchesScopeFunc`): `spec.scopes` and
//! `spec.scopeSelector` select which pods a quota tracks; a quota with any scope tracks
//! nothing but pods.

use k8s_openapi::api::core::v1::{ResourceQuotaSpec, ScopedResourceSelectorRequirement};

use super::pod::PodScopes;

/// Scope names validation accepts.
pub const STANDARD_SCOPES: [&str; 6] = [
    "Terminating",
    "NotTerminating",
    "BestEffort",
    "NotBestEffort",
    "PriorityClass",
    "CrossNamespacePodAffinity",
];

/// The quota's scope requirements: each of `spec.scopes` as `Exists`, then the
/// `scopeSelector` expressions.
pub fn quota_selectors(spec: &ResourceQuotaSpec) -> Vec<ScopedResourceSelectorRequirement> {
    let listed = spec
        .scopes
        .iter()
        .flatten()
        .map(|s| ScopedResourceSelectorRequirement {
            scope_name: s.clone(),
            operator: "Exists".into(),
            values: None,
        });
    let selected = spec
        .scope_selector
        .iter()
        .flat_map(|s| s.match_expressions.iter().flatten().cloned());
    listed.chain(selected).collect()
}

/// Whether a pod satisfies every requirement.
pub fn pod_matches(reqs: &[ScopedResourceSelectorRequirement], pod: &PodScopes) -> bool {
    reqs.iter().all(|r| requirement_matches(r, pod))
}

fn requirement_matches(r: &ScopedResourceSelectorRequirement, pod: &PodScopes) -> bool {
    match r.scope_name.as_str() {
        "Terminating" => pod.terminating,
        "NotTerminating" => !pod.terminating,
        "BestEffort" => pod.best_effort,
        "NotBestEffort" => !pod.best_effort,
        "CrossNamespacePodAffinity" => pod.cross_namespace_affinity,
        "PriorityClass" => priority_class_matches(r, &pod.priority_class),
        _ => false,
    }
}

/// Upstream matches a label selector against `{PriorityClass: <name>}`, where the key is
/// always present (with "" for a pod without a class): `DoesNotExist` never matches.
fn priority_class_matches(r: &ScopedResourceSelectorRequirement, class: &str) -> bool {
    let values = r.values.as_deref().unwrap_or_default();
    match r.operator.as_str() {
        "Exists" => !class.is_empty(),
        "In" => values.iter().any(|v| v == class),
        "NotIn" => !values.iter().any(|v| v == class),
        _ => false,
    }
}
