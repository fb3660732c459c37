//! Reachability between two pods as policy decides it: the source's egress and the
//! destination's ingress must both admit the connection. A pod reaching itself never
//! leaves its network namespace (loopback), so policy cannot stop it, as upstream's
//! netpol suite expects (`AllowLoopback`).

use crate::compile::CompiledPolicy;
use crate::model::{Cluster, PodKey, Protocol};
use crate::resolve::effective;

/// Whether `from` may open a connection to `to` on `protocol`/`port`; `None` when a pod
/// is unknown or has no address.
pub fn reachable(
    policies: &[CompiledPolicy],
    cluster: &Cluster,
    (from, to): (&PodKey, &PodKey),
    protocol: Protocol,
    port: u16,
) -> Option<bool> {
    if from == to {
        return Some(true);
    }
    let (src, dst) = (cluster.pods.get(from)?, cluster.pods.get(to)?);
    let (src_ip, dst_ip) = (*src.ips.first()?, *dst.ips.first()?);
    let egress = effective(policies, cluster, src).egress;
    let ingress = effective(policies, cluster, dst).ingress;
    Some(egress.admits(dst_ip, protocol, port) && ingress.admits(src_ip, protocol, port))
}
