//! ResourceQuota semantics (upstream `pkg/quota/v1` and its evaluators): what an object
//! charges against a quota, which quotas' scopes select a pod, which quota resource
//! names are standard, and how amounts print. The API server's quota admission and the
//! quota controller both use it, so they agree on every number.

mod objects;
mod pod;
mod scopes;
mod usage;

#[cfg(test)]
mod tests;

pub use objects::{
    claim_usage, count_name, is_integer_resource, is_standard_quota_resource, legacy_count_name,
    object_usage, service_usage,
};
pub use pod::{missing_constraints, PodQuota, PodScopes, COMPUTE_CONSTRAINED};
pub use scopes::{pod_matches, quota_selectors, STANDARD_SCOPES};
pub use usage::{format_amount, Usage};
