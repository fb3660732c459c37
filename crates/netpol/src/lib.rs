//! NetworkPolicy as upstream defines it, with no IO: from the policies, pods and
//! namespaces, each local pod's effective ingress and egress allowances.
//!
//! - [`model`]: pods and namespaces as policy sees them.
//! - [`compile`]: a `NetworkPolicy` read once, upstream's defaults applied.
//! - [`resolve`]: a pod's effective policy: isolation per direction, peers as addresses
//!   and blocks, named ports as numbers.
//! - [`verdict`]: reachability between two pods, for the truth tables.
//! - [`explain`]: a pod's effective policy as JSON, for people.
//! - [`nft`]: a node's policy as nftables state, and the transactions between states.
//!
//! The rules (`networking.k8s.io/v1`): a pod is isolated for a direction when a policy of
//! its namespace selects it with that type; then it allows the union of every selecting
//! policy's rules of that direction. `policyTypes` defaults to Ingress, plus Egress when
//! the policy has egress rules. An empty or absent `from`/`to` matches every address, an
//! empty or absent `ports` every port. A peer with a pod selector alone means pods of the
//! policy's namespace, with a namespace selector alone every pod of those namespaces, with
//! both those pods of those namespaces; `ipBlock` is the CIDR less its exceptions.

pub mod compile;
pub mod explain;
pub mod model;
pub mod nft;
pub mod resolve;
pub mod verdict;

pub use compile::{CompileError, CompiledPolicy, PolicyKey};
pub use explain::explain;
pub use model::{Cluster, NamedPort, Namespace, Pod, PodKey, Protocol};
pub use resolve::{
    effective, for_node, Allowance, Direction, Isolation, Origin, Peers, PodPolicy, PortRange,
    Ports,
};
pub use verdict::reachable;

#[cfg(test)]
mod tests;
