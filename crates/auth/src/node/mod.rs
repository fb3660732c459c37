//! What a kubelet may do beyond RBAC: upstream's Node authorizer and NodeRestriction
//! admission plugin, as pure code.
//!
//! - [`NodeGraph`]: which Secrets, ConfigMaps, PVCs, PVs, ServiceAccounts and pods each
//!   node's pods reach, kept current from pod and PVC events.
//! - [`authorize`] / [`authorize_with_field_selector`]: the Node authorizer's decision
//!   for `system:node:<name>` users; no opinion for anyone else.
//! - [`decide`]: the whole authorizer, with upstream's static `system:node` rules for
//!   what the graph does not subdivide (events, services, CSRs, reviews).
//! - [`restriction::admit`]: NodeRestriction's checks of a node's writes (its own
//!   Node, mirror pods, pod status, evictions, leases, CSINodes, ResourceSlices, tokens).

pub mod authorizer;
pub mod graph;
pub mod restriction;

pub use authorizer::{authorize, authorize_with_field_selector, decide, node_identity};
pub use graph::{Kind, NodeGraph};
