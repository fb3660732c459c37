//! RBAC: rule and subject matching, the indexed [`RbacAuthorizer`], escalation
//! prevention, ClusterRole aggregation and upstream's bootstrap policy.

pub mod aggregation;
mod authorizer;
pub mod bootstrap;
pub mod escalation;
mod index;
pub mod rule;
pub mod subject;

pub use authorizer::{RbacAuthorizer, RulesReview};

#[cfg(test)]
mod tests;
