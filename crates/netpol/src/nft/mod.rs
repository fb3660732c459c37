//! NetworkPolicy in nftables, as pure desired state and the transactions that reach it
//! (no IO: the agent applies the scripts).
//!
//! One table, `ip cairn-netpol`, on the forward hook at filter priority, so it sees pod
//! traffic after the service proxy's DNAT (policy applies to the backend pod, as upstream
//! requires) and never the node's own traffic (kubelet probes, host-network pods: upstream
//! always allows traffic to and from the pod's node):
//!
//! - established and related connections are accepted first;
//! - while any policy exists, traffic to an address in the node's pod ranges that is not
//!   a programmed pod's (a pod newer than the last sync) is dropped: a new pod is never
//!   reachable before its policy is in force, as Calico drops traffic to a workload
//!   endpoint it has not programmed. The guard is ingress only: a new pod's own first
//!   packets (its DNS lookups) are not held up;
//! - `ip saddr vmap @egress_pods` jumps to an isolated local pod's egress chain, then
//!   `ip daddr vmap @ingress_pods` to an isolated local pod's ingress chain; a pod in
//!   neither map (selected by no policy) is untouched;
//! - a pod chain (`in_10_244_1_5`, `eg_…`) returns for each allowance that matches and
//!   ends in a drop that counts in the named counter of every policy isolating the pod;
//! - an allowance's peers live in an interval set named after its policy and rule (not
//!   its contents), shared by every pod the rule applies to: a pod or namespace label
//!   change is an element update of the sets whose peers it changes.
//!
//! [`desired`] computes the state for a node; [`batch`] the changes from one state to the
//! next, in one transaction that adds before it removes (no window where an old rule is
//! gone and its successor not there), or a whole-table replacement for the first sync.

pub mod batch;
pub mod desired;
pub mod ranges;

pub use batch::{full_script, Change};
pub use desired::Desired;
pub use ranges::AddrRange;

/// The table every node's policy lives in.
pub const TABLE: &str = "cairn-netpol";
pub const INGRESS_MAP: &str = "ingress_pods";
pub const EGRESS_MAP: &str = "egress_pods";
/// Local pods with their policy in force, and the node's pod ranges they are guarded in.
pub const PROGRAMMED_SET: &str = "programmed_pods";
pub const GUARDED_SET: &str = "guarded_ranges";
/// Counts what the guard drops.
pub const UNPROGRAMMED_COUNTER: &str = "unprogrammed";
