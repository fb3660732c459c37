//! The service proxy's core, free of IO: what every Service port of the cluster should do
//! on this node ([`desired::desired_state`]), and which service ports changed between two
//! such states ([`diff::diff`]), so a backend re-programs only those. Endpoint selection
//! follows kube-proxy's `CategorizeEndpoints`: ready endpoints, else serving-terminating
//! ones; node-local ones where a traffic policy is `Local`.

mod conflicts;
pub mod conntrack;
pub mod desired;
pub mod diff;
pub mod ids;
pub mod iptables;
pub mod ipvs;
pub mod model;
pub mod nftables;
pub mod source;

#[cfg(test)]
mod tests;

pub use desired::{desired_state, desired_state_from};
pub use diff::{diff, Diff};
pub use model::{Endpoint, Protocol, ProxyState, ServiceEntry, ServicePort, ServicePortName};
