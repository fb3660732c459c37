//! Dynamic admission: what ValidatingAdmissionPolicies and admission webhooks share
//! ([`matching`] of rules and selectors, the [`expressions`] cache for CEL), and the
//! [`webhook`] dispatcher that calls MutatingWebhookConfigurations' and
//! ValidatingWebhookConfigurations' webhooks over HTTPS. The write pipeline in
//! [`crate::state`] decides when each runs.

pub mod expressions;
pub mod matching;
pub mod webhook;

/// The group whose own objects no dynamic admission applies to (a broken webhook or
/// policy could otherwise never be fixed), as upstream exempts them.
pub const GROUP: &str = "admissionregistration.k8s.io";
