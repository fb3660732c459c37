//! NetworkPolicy in nftables, as pure desired state and the transactions that reach it
//! (no IO: cairn-proxy applies the scripts).
//!
//! One table, `ip cairn-netpol`, on the forward hook at filter priority, so it sees pod
//! traffic after the service proxy's DNAT (policy applies to the backend pod, as upstream
//! requires), and on the output hook for what the node sends from a pod's address (IPVS
//! hands a Service connection to its backend there). Never the node's own traffic
//! (kubelet probes, host-network pods: upstream always allows traffic to and from the
//! pod's node): it does not cross forward, and output lets a local source address by.
//!
//! - established and related connections are accepted first;
//! - `ip saddr vmap @egress_pods` jumps to an isolated local pod's egress chain, which
//!   returns for each allowance that matches and ends in a drop;
//! - `ip daddr vmap @ingress_pods` holds every local pod the last sync programmed: an
//!   isolated pod jumps to its ingress chain, which accepts for each allowance that
//!   matches and ends in a drop; a pod selected by no policy is accepted. Either drop
//!   counts in the named counter of every policy isolating the pod;
//! - last, while any policy exists, traffic to an address in the node's pod ranges that
//!   the map did not hold (a pod newer than the last sync) is dropped: a new pod is never
//!   reachable before its policy is in force, as Calico drops traffic to a workload
//!   endpoint it has not programmed. The guard is ingress only: a new pod's own first
//!   packets (its DNS lookups) are not held up. Folding the open pods into the map keeps
//!   a new connection to one at the lookups it costs without the guard;
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
/// The node's pod ranges, guarded while any policy exists.
pub const GUARDED_SET: &str = "guarded_ranges";
/// Counts what the guard drops.
pub const UNPROGRAMMED_COUNTER: &str = "unprogrammed";
